"""Marks drawn over the canvas while a model is watched: wire strokes, value labels, node badges.

The animation, the step-through and the timeline all paint through these items, so none of
them touches the wires and cards themselves. A `WireOverlay` is a coloured stroke over one
wire (above the wire, below the cards; it leaves a gap wherever a shape label lies on its
way, its own wire's or one of another wire that it crosses, so neither the wave nor the last
wave a finished run leaves painted covers a shape) with an optional pulse dot along it; a
`WireLabel` is a small box of numbers beside the wire's middle, drawn above the cards so a
long label is never hidden; a `NodeMark` is a child of a card (so it moves with it) that
draws a highlight ring and a row of badges under the card.

`CanvasMarks` creates these items on demand and forgets them when the scene is rebuilt or
the graph changes (the scene deletes every item it holds when it rebuilds).
"""

from __future__ import annotations

from typing import Any

import shiboken6
from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import QColor, QFontMetricsF, QPainter, QPainterPath, QPen
from PySide6.QtWidgets import QGraphicsItem

from nodegraph.gui.base import theme
from nodegraph.gui.canvas.badges import Badge
from nodegraph.gui.canvas.node_item import NodeItem, detail
from nodegraph.gui.canvas.wire_item import LABEL_LOD, WireItem
from nodegraph.model.graph import Edge

LABEL_FONT = theme.font(8.5, mono=True)
BADGE_FONT = theme.font(7.5, bold=True)
LABEL_GAP = 11.0  # between a wire's middle and its value label (the shape label sits there)


class WireOverlay(QGraphicsItem):
    """A coloured stroke over one wire, with a pulse dot at `pulse` (0..1 along it)."""

    def __init__(self, wire: WireItem):
        super().__init__()
        self.wire = wire
        self.color: QColor | None = None
        self.width = 2.0
        self.pulse: float | None = None
        self._bounds = QRectF()
        self.setZValue(0.5)  # above the wires (0), below the cards (1)
        self.setAcceptedMouseButtons(Qt.MouseButton.NoButton)
        # the stroke changes once per node of the wave, the dot on every tick: the stroke is
        # painted from a cached pixmap and the dot is its own small item, so a tick repaints
        # two dot-sized spots, not a wide antialiased curve
        self.setCacheMode(QGraphicsItem.CacheMode.DeviceCoordinateCache)
        self.dot = PulseDot(self)
        self.refresh()

    def set_stroke(self, color: QColor | None, width: float = 2.0,
                   pulse: float | None = None) -> None:
        self.color, self.width = color, width
        self.refresh()
        self.set_pulse(pulse)

    def set_pulse(self, pulse: float | None) -> None:
        self.pulse = pulse
        if pulse is None or self.color is None:
            self.dot.hide()
            return
        self.dot.set_look(self.color.lighter(125), self.width / 2 + 3)
        at = self.wire.path().pointAtPercent(min(1.0, max(0.0, pulse)))
        self.dot.setPos(at)
        r = self.dot.radius + 2
        spot = QRectF(at.x() - r, at.y() - r, 2 * r, 2 * r)
        # it passes under a shape label: hidden there, as the stroke is
        self.dot.setVisible(not any(gap.intersects(spot) for gap in self._label_gaps()))

    def _label_gaps(self) -> list[QRectF]:
        """The shape labels the stroke passes over, with a margin: the stroke and the dot stay
        out of them. Its own wire's label, and any other wire's it crosses (a fan-out's
        sibling runs through the label shown once for both; a wire passes over a port's
        tag): those labels are drawn by wires, under this stroke."""
        gaps = []
        own = self.wire.shown_label_rect()
        if not own.isEmpty():
            gaps.append(own)
        labels = getattr(self.wire.scene(), "label_index", None)
        if labels is not None:
            b = self._bounds
            gaps += [QRectF(QPointF(r[0], r[1]), QPointF(r[2], r[3]))
                     for r in labels.near(b.left(), b.top(), b.right(), b.bottom(),
                                          but=self.wire)]
        return [g.adjusted(-2, -2, 2, 2) for g in gaps]

    def refresh(self) -> None:
        """Re-read the wire's path (the cards may have moved) and repaint."""
        self.prepareGeometryChange()
        pad = self.width + 8
        self._bounds = self.wire.path().controlPointRect().adjusted(-pad, -pad, pad, pad)
        self.update()

    def boundingRect(self) -> QRectF:
        return self._bounds

    def paint(self, painter: QPainter, option, widget=None) -> None:
        if self.color is None:
            return
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        scene = self.wire.scene()
        shown_from = scene.label_lod if hasattr(scene, "label_lod") else LABEL_LOD
        gaps = self._label_gaps() if detail(option, painter) >= shown_from else []  # drawn
        clip = bool(gaps)
        if clip:  # the view does not save the painter's state between items: this does
            painter.save()
            keep = QPainterPath()
            keep.addRect(self._bounds)
            holes = QPainterPath()
            holes.setFillRule(Qt.FillRule.WindingFill)  # overlapping labels: one hole
            for gap in gaps:
                holes.addRect(gap)
            painter.setClipPath(keep.subtracted(holes), Qt.ClipOperation.IntersectClip)
        pen = QPen(self.color, self.width)
        pen.setCapStyle(Qt.PenCapStyle.RoundCap)
        painter.setPen(pen)
        painter.setBrush(Qt.BrushStyle.NoBrush)
        painter.drawPath(self.wire.path())
        if clip:
            painter.restore()


class PulseDot(QGraphicsItem):
    """The dot running along a wire during the wave (a child of its `WireOverlay`)."""

    def __init__(self, parent: WireOverlay):
        super().__init__(parent)
        self.color = QColor(theme.TEXT)
        self.radius = 4.0
        self.setAcceptedMouseButtons(Qt.MouseButton.NoButton)
        self.hide()

    def set_look(self, color: QColor, radius: float) -> None:
        if color != self.color or radius != self.radius:
            self.prepareGeometryChange()
            self.color, self.radius = color, radius

    def boundingRect(self) -> QRectF:
        r = self.radius + 2  # the outline and antialiasing
        return QRectF(-r, -r, 2 * r, 2 * r)

    def paint(self, painter: QPainter, option, widget=None) -> None:
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        painter.setPen(QPen(QColor(theme.CANVAS), 1.5))
        painter.setBrush(self.color)
        painter.drawEllipse(QPointF(0, 0), self.radius, self.radius)


class WireLabel(QGraphicsItem):
    """Numbers beside one wire's middle: above it (values) or below it (gradients)."""

    def __init__(self, wire: WireItem, below: bool):
        super().__init__()
        self.wire, self.below = wire, below
        self.lines: list[str] = []
        self.color = QColor(theme.TEXT)
        self._rect = QRectF()
        self.setZValue(3)  # above the cards: a label must never hide under one
        self.setAcceptedMouseButtons(Qt.MouseButton.NoButton)

    def set_text(self, text: str, color: QColor | None = None) -> None:
        self.lines = text.splitlines() if text else []
        if color is not None:
            self.color = color
        self.refresh()

    @property
    def text(self) -> str:
        return "\n".join(self.lines)

    def refresh(self) -> None:
        self.prepareGeometryChange()
        self._rect = QRectF()  # out of the way while looking for a free place
        if self.lines:
            metrics = QFontMetricsF(LABEL_FONT)
            w = max(metrics.horizontalAdvance(s) for s in self.lines) + 10
            h = metrics.height() * len(self.lines) + 6
            self._rect = self._free_place(w, h)
        self.update()

    def _free_place(self, w: float, h: float) -> QRectF:
        """Beside the wire's middle, or on its other side or further along it where that
        place is taken by a card or another label (a long wire passes under cards)."""
        path = self.wire.path()
        tried = []
        for t in (0.5, 0.35, 0.65, 0.2, 0.8, 0.1, 0.9):
            at = path.pointAtPercent(t)
            for below in (self.below, not self.below):  # its own side first
                top = at.y() + LABEL_GAP if below else at.y() - LABEL_GAP - h
                rect = QRectF(at.x() - w / 2, top, w, h)
                tried.append(rect)
                if not self._taken(rect):
                    return rect
        # nowhere free: at least leave every card's title readable
        return next((r for r in tried if not self._covers_title(r)), tried[0])

    def _covers_title(self, rect: QRectF) -> bool:
        scene = self.scene()
        if scene is None:
            return False
        for item in scene.items(rect):
            if isinstance(item, NodeItem):
                bar = item.mapRectToScene(QRectF(0, 0, item.rect.width(),
                                                 theme.HEADER_HEIGHT))
                if bar.intersects(rect):
                    return True
        return False

    def _taken(self, rect: QRectF) -> bool:
        scene = self.scene()
        if scene is None:
            return False
        return any(item is not self and (isinstance(item, NodeItem | WireLabel) and
                                         item.isVisible() and (not isinstance(item, WireLabel)
                                                               or item.lines))
                   for item in scene.items(rect.adjusted(-3, -3, 3, 3)))

    def boundingRect(self) -> QRectF:
        return self._rect.adjusted(-2, -2, 2, 2)

    def paint(self, painter: QPainter, option, widget=None) -> None:
        if not self.lines:
            return
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        painter.setPen(QPen(self.color, 1.2))
        painter.setBrush(QColor(theme.LABEL_BG))
        painter.drawRoundedRect(self._rect, 5, 5)
        painter.setFont(LABEL_FONT)
        painter.drawText(self._rect, Qt.AlignmentFlag.AlignCenter, self.text)


BADGE_COLORS = {"nonfinite": theme.ERROR, "vanishing": "#7f9cff", "exploding": "#ff8f5a",
                "dead": "#9aa3ad", "saturated": theme.WARNING}


class NodeMark(QGraphicsItem):
    """A card's highlight ring and badge row; a child of the card, so it moves with it."""

    def __init__(self, node: NodeItem):
        super().__init__(node)
        self.node = node
        self.ring: QColor | None = None
        self.badges: list[Badge] = []
        self._bounds = QRectF()
        self.setAcceptedMouseButtons(Qt.MouseButton.NoButton)
        self._layout()

    def set_ring(self, color: QColor | None) -> None:
        if color != self.ring:
            self.ring = color
            self.update()

    def set_badges(self, badges: list[Badge]) -> None:
        if badges != self.badges:
            self.badges = list(badges)
            self._layout()
            tips = [f"{b.text}: {b.detail}" for b in badges]
            self.node.setToolTip(self.node.toolTip().split("<hr>")[0]
                                 + ("<hr>" + "<br>".join(tips) if tips else ""))

    def _layout(self) -> None:
        self.prepareGeometryChange()
        r = self.node.rect
        self._bounds = r.adjusted(-8, -8, 8, 8)
        if self.badges:
            self._bounds = self._bounds.united(QRectF(r.left(), r.bottom(), r.width(), 24))
        self.update()

    def boundingRect(self) -> QRectF:
        return self._bounds

    def paint(self, painter: QPainter, option, widget=None) -> None:
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        if self.ring is not None:
            painter.setPen(QPen(self.ring, 3.0))
            painter.setBrush(Qt.BrushStyle.NoBrush)
            painter.drawRoundedRect(self.node.rect.adjusted(-4, -4, 4, 4), 9, 9)
        x = 2.0
        metrics = QFontMetricsF(BADGE_FONT)
        painter.setFont(BADGE_FONT)
        for badge in self.badges:
            w = metrics.horizontalAdvance(badge.text) + 12
            rect = QRectF(x, self.node.rect.bottom() + 5, w, 16)
            color = QColor(BADGE_COLORS.get(badge.kind, theme.WARNING))
            painter.setPen(Qt.PenStyle.NoPen)
            painter.setBrush(color)
            painter.drawRoundedRect(rect, 8, 8)
            painter.setPen(QColor(theme.CANVAS))
            painter.drawText(rect, Qt.AlignmentFlag.AlignCenter, badge.text)
            x += w + 4


class CanvasMarks:
    """The overlay items of one scene, made on first use and dropped when the scene changes."""

    def __init__(self, scene):
        self.scene = scene
        self._strokes: dict[Edge, WireOverlay] = {}
        self._labels: dict[tuple[Edge, bool], WireLabel] = {}
        self._nodes: dict[str, NodeMark] = {}
        scene.doc.graph_replaced.connect(self.forget)
        scene.doc.changed.connect(self._on_change)

    def _on_change(self, *_) -> None:
        """The graph was edited: what was shown is out of date, and a removed wire's marks
        go with it."""
        self.clear()
        # wire marks by Edge, labels by (Edge, below)
        every: tuple[dict[Any, Any], ...] = (self._strokes, self._labels)
        for marks in every:
            for key, item in list(marks.items()):
                edge = key if isinstance(key, Edge) else key[0]
                if self.scene.wires.get(edge) is not item.wire:
                    if shiboken6.isValid(item) and item.scene() is self.scene:
                        self.scene.removeItem(item)
                    del marks[key]

    def forget(self) -> None:
        """The scene was rebuilt and deleted our items with its own: drop the references."""
        self._strokes.clear()
        self._labels.clear()
        self._nodes.clear()

    def _alive(self, item, wire_or_node) -> bool:
        return (shiboken6.isValid(item) and shiboken6.isValid(wire_or_node)
                and item.scene() is self.scene)

    def stroke(self, edge: Edge) -> WireOverlay | None:
        wire = self.scene.wires.get(edge)
        if wire is None:
            return None
        item = self._strokes.get(edge)
        if item is None or not self._alive(item, wire) or item.wire is not wire:
            item = WireOverlay(wire)
            self.scene.addItem(item)
            self._strokes[edge] = item
        return item

    def label(self, edge: Edge, below: bool = False) -> WireLabel | None:
        wire = self.scene.wires.get(edge)
        if wire is None:
            return None
        item = self._labels.get((edge, below))
        if item is None or not self._alive(item, wire) or item.wire is not wire:
            item = WireLabel(wire, below)
            self.scene.addItem(item)
            self._labels[(edge, below)] = item
        return item

    def node(self, node_id: str) -> NodeMark | None:
        card = self.scene.nodes.get(node_id)
        if card is None:
            return None
        item = self._nodes.get(node_id)
        if item is None or not shiboken6.isValid(item) or item.node is not card:
            item = NodeMark(card)
            self._nodes[node_id] = item
        return item

    def edges_from(self, node: str, port: str | None = None) -> list[Edge]:
        return [e for e in self.scene.wires if e.src == node and port in (None, e.src_port)]

    def edges_into(self, node: str) -> list[Edge]:
        return [e for e in self.scene.wires if e.dst == node]

    def canvas_node(self, node: str | None) -> str | None:
        """The card a run-time node id belongs to (a group's inner node: its instance)."""
        if node in self.scene.nodes:
            return node
        instance = (node or "").split("__", 1)[0]
        return instance if instance in self.scene.nodes else None

    def clear_strokes(self) -> None:
        for item in self._strokes.values():
            if shiboken6.isValid(item):
                item.set_stroke(None)

    def clear_labels(self) -> None:
        for item in self._labels.values():
            if shiboken6.isValid(item):
                item.set_text("")

    def clear_rings(self) -> None:
        for item in self._nodes.values():
            if shiboken6.isValid(item):
                item.set_ring(None)

    def set_badges(self, badges: dict[str, list[Badge]]) -> None:
        """Badges per canvas node; every other card loses its badges."""
        for node_id in set(self._nodes) | set(badges):
            item = self.node(node_id)
            if item is not None:
                item.set_badges(badges.get(node_id, []))

    def badges(self, node_id: str) -> list[Badge]:
        item = self._nodes.get(node_id)
        return list(item.badges) if item is not None and shiboken6.isValid(item) else []

    def clear(self) -> None:
        self.clear_strokes()
        self.clear_labels()
        self.clear_rings()

    def label_text(self, edge: Edge, below: bool = False) -> str:
        item = self._labels.get((edge, below))
        return item.text if item is not None and shiboken6.isValid(item) else ""

    def point(self, edge: Edge) -> QPointF | None:
        wire = self.scene.wires.get(edge)
        return wire.path().pointAtPercent(0.5) if wire is not None else None
