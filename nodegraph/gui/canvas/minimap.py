"""The minimap: an overview of the whole graph in a corner of the canvas, to find your way
in a large graph; of the four corners, the one that covers no card (or the least).

It shows every card as a small block in its family's colour, the notes as outlines, and
the part of the canvas in view as a bright frame; a click or a drag on it moves the view
there. It appears only when the graph does not fit in the view (a small graph needs no
map) and can be switched off (View > Minimap). Painting stays cheap with 500 nodes: the
cards are drawn once into a picture after the graph changes, and a pan or zoom repaints
only that picture and the frame.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from PySide6.QtCore import QPointF, QRect, QRectF, Qt
from PySide6.QtGui import QColor, QMouseEvent, QPainter, QPen, QPicture
from PySide6.QtWidgets import QGraphicsView, QWidget

from nodegraph.gui.base import theme

if TYPE_CHECKING:
    from nodegraph.gui.canvas.scene import GraphScene

SIZE = (220, 150)
MARGIN = 12  # from the canvas corner
PAD = 6.0  # inside the map, around the graph


class Minimap(QWidget):
    """A small overview widget in a corner of a canvas view (the one hiding no card)."""

    def __init__(self, view: QGraphicsView):
        super().__init__(view)
        self.view = view
        self.enabled = True
        self._picture: QPicture | None = None  # the cards, in map coordinates
        self._world = QRectF()  # the scene rectangle the picture maps
        self.resize(*SIZE)
        self.setCursor(Qt.CursorShape.PointingHandCursor)
        self.setToolTip("The whole graph; the frame is what the canvas shows. Click or drag "
                        "to move there.")
        scene = self._scene()
        doc = scene.doc
        for signal in (doc.changed, doc.positions_changed, doc.graph_replaced,
                       doc.notes_changed):
            signal.connect(self.invalidate)
        view.horizontalScrollBar().valueChanged.connect(self.refresh)
        view.verticalScrollBar().valueChanged.connect(self.refresh)
        self.hide()

    def _scene(self) -> GraphScene:
        """The graph's scene, which the canvas's view shows (None while the view goes)."""
        return cast("GraphScene", self.view.scene())

    # -- geometry ---------------------------------------------------------------------------

    def place(self) -> None:
        """Sit in the corner of the visible canvas that hides the least of the cards: the
        lower right when it is free, else the first free one of the other three (a map
        over a card hid the very thing one came to see)."""
        area = self.view.viewport().geometry()
        w, h = self.width(), self.height()
        left, top = area.left() + MARGIN, area.top() + MARGIN
        right, bottom = area.right() - w - MARGIN, area.bottom() - h - MARGIN
        corners = [(right, bottom), (left, bottom), (right, top), (left, top)]
        best = min(corners, key=lambda c: (self._covered(QRect(c[0], c[1], w, h)),
                                           corners.index(c)))
        self.move(*best)

    def _covered(self, rect: QRect) -> float:
        """How much card area (in scene units) the map would hide at `rect` (view pixels)."""
        scene = self._scene()
        if scene is None:
            return 0.0
        shown = self.view.mapToScene(rect.translated(-self.view.viewport().pos())
                                     ).boundingRect()
        index = getattr(scene, "card_index", None)
        if index is None:
            return 0.0
        total = 0.0
        for entry in index.query(scene.nodes.values(), shown.left(), shown.top(),
                                 shown.right(), shown.bottom()):
            hit = QRectF(entry[0], entry[1], entry[2] - entry[0], entry[3] - entry[1]) \
                .intersected(shown)
            total += hit.width() * hit.height()
        return total

    def graph_rect(self) -> QRectF:
        scene = self._scene()
        rect = QRectF()
        if scene is None:  # the window is closing
            return rect
        for item in [*scene.nodes.values(), *scene.notes.values()]:
            rect = rect.united(item.sceneBoundingRect())
        return rect

    def visible_rect(self) -> QRectF:
        return self.view.mapToScene(self.view.viewport().rect()).boundingRect()

    def _transform(self) -> tuple[float, QPointF]:
        """Scale and offset from scene to map coordinates (the graph fits; the frame of the
        view is clipped, so the map keeps its scale while the view moves)."""
        world = self._world
        scale = min((self.width() - 2 * PAD) / max(world.width(), 1.0),
                    (self.height() - 2 * PAD) / max(world.height(), 1.0))
        offset = QPointF(PAD + (self.width() - 2 * PAD - world.width() * scale) / 2,
                         PAD + (self.height() - 2 * PAD - world.height() * scale) / 2)
        return scale, offset - world.topLeft() * scale

    def to_scene(self, point: QPointF) -> QPointF:
        scale, offset = self._transform()
        return (point - offset) / scale

    # -- keeping up --------------------------------------------------------------------------

    def set_enabled(self, on: bool) -> None:
        self.enabled = on
        self.refresh()

    def invalidate(self, *_) -> None:
        """The graph changed: draw the cards again (on the next paint)."""
        self._picture = None
        self.refresh()

    def refresh(self, *_) -> None:
        """Show the map when the graph does not fit in the view; repaint it."""
        if self._scene() is None:
            return
        if self._picture is None:
            self._world = self.graph_rect()
        needed = (self.enabled and not self._world.isEmpty()
                  and not self.visible_rect().contains(self._world))
        if needed != self.isVisible():
            self.setVisible(needed)
        if needed:
            self.place()
            self.raise_()
            self.update()

    def _cards(self) -> QPicture:
        picture = QPicture()
        painter = QPainter(picture)
        painter.setPen(Qt.PenStyle.NoPen)
        scene = self._scene()
        by_colour: dict[str, list[QRectF]] = {}
        for item in scene.nodes.values():
            by_colour.setdefault(item.header.name(), []).append(item.sceneBoundingRect())
        for colour, rects in by_colour.items():  # one brush change per family
            painter.setBrush(QColor(colour))
            painter.drawRects(rects)
        painter.setBrush(Qt.BrushStyle.NoBrush)
        for note in scene.notes.values():
            painter.setPen(QPen(note.color, 0))
            painter.drawRect(note.scene_rect())
        painter.end()
        return picture

    # -- painting and input -------------------------------------------------------------------

    def paintEvent(self, event) -> None:
        if self._picture is None:
            self._world = self.graph_rect()
            self._picture = self._cards()
        painter = QPainter(self)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing, False)
        background = QColor(theme.LABEL_BG)
        background.setAlpha(225)
        painter.fillRect(self.rect(), background)
        painter.setPen(QPen(QColor(theme.NODE_BORDER), 1))
        painter.drawRect(self.rect().adjusted(0, 0, -1, -1))
        scale, offset = self._transform()
        painter.save()
        painter.translate(offset)
        painter.scale(scale, scale)
        painter.drawPicture(0, 0, self._picture)
        painter.restore()
        seen = self.visible_rect()
        frame = QRectF(seen.topLeft() * scale + offset, seen.size() * scale)
        painter.setPen(QPen(QColor(theme.SELECTION), 1.5))
        fill = QColor(theme.SELECTION)
        fill.setAlpha(28)
        painter.setBrush(fill)
        painter.drawRect(frame.intersected(QRectF(self.rect()).adjusted(1, 1, -2, -2)))

    def mousePressEvent(self, event: QMouseEvent) -> None:
        if event.button() == Qt.MouseButton.LeftButton:
            self.view.centerOn(self.to_scene(event.position()))
            event.accept()

    def mouseMoveEvent(self, event: QMouseEvent) -> None:
        if event.buttons() & Qt.MouseButton.LeftButton:
            self.view.centerOn(self.to_scene(event.position()))
            event.accept()
