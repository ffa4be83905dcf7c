"""Zoomed far out, every wire (and below SIMPLE_LOD every card) drawn by one item.

At 10 % a thousand wires are one-pixel lines and a thousand cards plain boxes, yet Qt calls
each item's Python `paint` every frame, which made panning a fitted 1,000-node network
miss 30 fps. Below the zoom where wires can be told apart (LABEL_LOD) the wire items get
`ItemHasNoContents` (Qt skips them; they stay hit-testable and selectable) and one
`FarLayer` draws them all: one cached QPainterPath per colour, rebuilt only after a wire
changed. Below SIMPLE_LOD the cards get the same treatment: one `drawRects` per header
colour. Selected and failing items are outlined on top each frame, as the items would.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QRectF, Qt
from PySide6.QtGui import QColor, QPainter, QPainterPath, QPen
from PySide6.QtWidgets import QGraphicsItem, QStyleOptionGraphicsItem

from nodegraph.gui.base import theme

_NO_CONTENTS = QGraphicsItem.GraphicsItemFlag.ItemHasNoContents


class FarLayer(QGraphicsItem):
    """All wires (`part` "wires", under the cards) or all cards (`part` "cards") of a
    scene, drawn at once while the view is zoomed out far enough to need no detail."""

    def __init__(self, items: dict, part: str, kind: type[Any]):
        super().__init__()
        self._items = items  # the scene's wires or nodes by key, read when rebuilding
        self.part, self.kind = part, kind  # kind: the class of the items drawn here
        self.active = False
        # (colour, path or rects) groups; None: rebuild
        self._cache: list[tuple[QColor, Any]] | None = None
        self._failing: list = []  # the cards with an error, outlined red
        self._bounds = QRectF()
        self.setZValue(0.0 if part == "wires" else 1.0)
        self.setAcceptedMouseButtons(Qt.MouseButton.NoButton)
        self.setAcceptHoverEvents(False)

    def set_active(self, active: bool) -> None:
        """Draw the items here (and not themselves), or let them draw themselves."""
        if active == self.active:
            return
        self.active = active
        for item in self._items.values():
            item.setFlag(_NO_CONTENTS, active)
        self.prepareGeometryChange()
        self._cache = None
        self._bounds = QRectF()
        self.update()

    def adopt(self, item: QGraphicsItem) -> None:
        """A new item joined the scene: drawn here while the layer is active."""
        if self.active:
            item.setFlag(_NO_CONTENTS, True)
        self.changed()

    def changed(self) -> None:
        """An item moved, changed shape or colour, came or went: rebuild before the next
        paint (cheap to call many times in one frame)."""
        if self.active and self._cache is not None:
            self.prepareGeometryChange()
            self._cache = None
            self.update()

    def selection_changed(self) -> None:
        if self.active:
            self.update()

    # -- drawing ---------------------------------------------------------------------------

    def _build(self) -> list[tuple[QColor, Any]]:
        groups: dict[int, tuple[QColor, Any]] = {}  # a path (wires) or a list of rects
        bounds = QRectF()
        self._failing = []
        for item in self._items.values():
            if self.part == "wires" and not item.isVisible():  # picked up by a drag
                continue
            if self.part == "wires":
                color = QColor(theme.ERROR) if item.has_error else item.color
                entry = groups.setdefault(color.rgba(), (color, QPainterPath()))
                entry[1].addPath(item.path())
            else:
                color = item.header
                rect = item.mapRectToScene(item.rect)
                groups.setdefault(color.rgba(), (color, []))[1].append(rect)
                if item.problems and item.has_error:
                    self._failing.append(item)
                bounds = bounds.united(rect)
        if self.part == "wires":
            for _, path in groups.values():
                bounds = bounds.united(path.controlPointRect())
        self._bounds = bounds.adjusted(-4, -4, 4, 4) if not bounds.isNull() else QRectF()
        return list(groups.values())

    def boundingRect(self) -> QRectF:
        if self.active and self._cache is None:
            self._cache = self._build()
        return self._bounds

    def shape(self) -> QPainterPath:
        return QPainterPath()  # never under the mouse: clicks reach the items themselves

    def paint(self, painter: QPainter, option: QStyleOptionGraphicsItem, widget=None) -> None:
        if not self.active:
            return
        if self._cache is None:
            self._cache = self._build()
        painter.setRenderHint(QPainter.RenderHint.Antialiasing, False)
        scene = self.scene()
        selected = scene.selectedItems() if scene is not None else []
        if self.part == "wires":
            self._paint_wires(painter, selected, self._cache)
        else:
            self._paint_cards(painter, selected, self._cache)

    def _paint_wires(self, painter: QPainter, selected: list, groups: list) -> None:
        painter.setBrush(Qt.BrushStyle.NoBrush)
        for color, path in groups:
            painter.setPen(QPen(color, 0))
            painter.drawPath(path)
        picked = [w for w in selected if isinstance(w, self.kind) and w.isVisible()]
        if picked:
            painter.setPen(QPen(QColor(theme.SELECTION), 0))
            for wire in picked:
                painter.drawPath(wire.path())

    def _paint_cards(self, painter: QPainter, selected: list, groups: list) -> None:
        painter.setPen(Qt.PenStyle.NoPen)
        for color, rects in groups:
            painter.setBrush(color)
            painter.drawRects(rects)
        painter.setBrush(Qt.BrushStyle.NoBrush)
        picked = [c for c in selected if isinstance(c, self.kind)]
        failing = [c for c in self._failing if not c.isSelected()]
        for group, color in ((failing, theme.ERROR), (picked, theme.SELECTION)):
            if group:
                painter.setPen(QPen(QColor(color), 2.0))
                painter.drawRects([c.mapRectToScene(c.rect) for c in group])
