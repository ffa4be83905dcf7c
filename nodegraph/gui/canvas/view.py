"""The canvas view: zoom and pan, a grid, block drops from the palette, search at the cursor.

Wheel zooms about the cursor; the middle or right button, or Space with the left, pans;
the left button on empty canvas draws a selection band, and Shift (like Ctrl) adds to the
selection instead of replacing it. Ctrl with the right button drags a knife: the wires it
crosses are announced, and the window cuts them. Tab, or a double-click on empty canvas,
asks for the block search at the cursor. A block dragged from the palette is announced
with the scene position it was dropped at, a graph file dragged from the desktop with its
path; the window adds or opens it. The view remembers where the mouse last was on the
canvas, so a paste lands under the cursor.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from PySide6.QtCore import QEvent, QLineF, QPoint, QPointF, QRect, QRectF, Qt, QTimer, Signal
from PySide6.QtGui import (
    QColor,
    QKeyEvent,
    QMouseEvent,
    QPainter,
    QPainterPath,
    QPen,
    QWheelEvent,
)
from PySide6.QtWidgets import QGraphicsPathItem, QGraphicsView

from nodegraph.gui.base import theme
from nodegraph.gui.canvas.minimap import Minimap
from nodegraph.gui.canvas.scene import GraphScene

BLOCK_MIME = "application/x-nodegraph-block"
MIN_ZOOM, MAX_ZOOM = 0.1, 3.0
GRID = 24.0


class GraphView(QGraphicsView):
    """The visible part of the canvas."""

    search_requested = Signal(QPointF, QPoint)  # scene position, global screen position
    block_dropped = Signal(str, QPointF)  # block id, scene position
    zoom_changed = Signal(float)
    knife_cut = Signal(list)  # the knife's stroke: scene points
    file_dropped = Signal(str)  # a graph file dropped from outside: its path

    if TYPE_CHECKING:  # Qt's stubs say QGraphicsScene; this view is only given a GraphScene
        def scene(self) -> GraphScene: ...

    def __init__(self, scene: GraphScene, parent=None):
        super().__init__(scene, parent)
        self.setRenderHints(QPainter.RenderHint.Antialiasing
                            | QPainter.RenderHint.TextAntialiasing)
        self.setViewportUpdateMode(QGraphicsView.ViewportUpdateMode.SmartViewportUpdate)
        self.setOptimizationFlags(QGraphicsView.OptimizationFlag.DontSavePainterState)
        self.setTransformationAnchor(QGraphicsView.ViewportAnchor.AnchorUnderMouse)
        self.setResizeAnchor(QGraphicsView.ViewportAnchor.AnchorViewCenter)
        self._origin: QPoint | None = None  # the viewport's top-left in the window
        self._panels_moving = False  # see hold_for_panels
        self.setDragMode(QGraphicsView.DragMode.RubberBandDrag)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setAcceptDrops(True)
        self.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
        self.setBackgroundBrush(QColor(theme.CANVAS))
        self.setCacheMode(QGraphicsView.CacheModeFlag.CacheBackground)  # panning reuses it
        self._pan_from: QPoint | None = None
        self._space = False
        self._knife: QGraphicsPathItem | None = None
        self._knife_points: list[QPointF] = []
        self._mouse: QPoint | None = None  # where the mouse last was on the canvas
        self.viewport().setMouseTracking(True)
        self.minimap = Minimap(self)
        self.zoom_changed.connect(self.minimap.refresh)  # the map's frame follows the zoom

    def hold_for_panels(self) -> None:
        """A panel beside the canvas folds or unfolds now: for the resizes that follow
        (briefly), the cards stay where they are on the screen — a dropped card stays under
        the mouse when the inspector opens for it, and the left panel does not shove the
        graph by half its width. Other resizes (the window's, the first layout's) keep the
        centre, so a fitted graph stays fitted."""
        self._panels_moving = True
        self._origin = self.viewport().mapTo(self.window(), QPoint(0, 0))
        QTimer.singleShot(100, self._panels_settled)

    def _panels_settled(self) -> None:
        self._panels_moving = False

    def resizeEvent(self, event) -> None:
        anchor = QGraphicsView.ViewportAnchor
        self.setResizeAnchor(anchor.NoAnchor if self._panels_moving else anchor.AnchorViewCenter)
        super().resizeEvent(event)
        origin = self.viewport().mapTo(self.window(), QPoint(0, 0))
        if (self._panels_moving and self._origin is not None and origin != self._origin
                and self.isVisible()):
            moved = origin - self._origin  # the edge that moved: the scene stays put on screen
            bar_x, bar_y = self.horizontalScrollBar(), self.verticalScrollBar()
            bar_x.setValue(bar_x.value() + moved.x())
            bar_y.setValue(bar_y.value() + moved.y())
        self._origin = origin
        self.minimap.refresh()

    def toggle_minimap(self) -> None:
        self.minimap.set_enabled(not self.minimap.enabled)

    # -- zoom and pan ----------------------------------------------------------------------

    @property
    def zoom(self) -> float:
        return self.transform().m11()

    def set_zoom(self, zoom: float) -> None:
        zoom = min(MAX_ZOOM, max(MIN_ZOOM, zoom))
        factor = zoom / self.zoom
        if abs(factor - 1) > 1e-9:
            self.scale(factor, factor)
            self.zoom_changed.emit(self.zoom)

    def zoom_by(self, factor: float) -> None:
        self.set_zoom(self.zoom * factor)

    def pan_by(self, dx: float, dy: float) -> None:
        """Move the view by (dx, dy) screen pixels."""
        centre = self.mapToScene(self.viewport().rect().center())
        self.centerOn(centre + QPointF(dx, dy) / self.zoom)

    def frame_selection(self) -> None:
        """Show the selected cards and notes (everything when nothing is selected)."""
        scene = self.scene()
        chosen = [i for i in scene.selectedItems() if i in scene.nodes.values()
                  or i in scene.notes.values()]
        if not chosen:
            self.fit()
            return
        rect = chosen[0].sceneBoundingRect()
        for item in chosen[1:]:
            rect = rect.united(item.sceneBoundingRect())
        self.fit(rect)

    def cursor_scene_pos(self) -> QPointF | None:
        """Where the mouse is on the canvas, or None when it is elsewhere."""
        if self._mouse is None or not self.viewport().rect().contains(self._mouse):
            return None
        return self.mapToScene(self._mouse)

    def fit(self, rect: QRectF | None = None) -> None:
        """Show every node (or `rect`), zoomed no further in than 1:1."""
        items = [i for i in self.scene().nodes.values()]
        if rect is None:
            if not items:
                self.resetTransform()
                self.centerOn(0, 0)
                return
            rect = QRectF()
            for i in items:  # with what a card carries beside it (a group port's tag)
                rect = rect.united(i.sceneBoundingRect()).united(
                    i.mapRectToScene(i.childrenBoundingRect()))
        self.fitInView(rect.adjusted(-60, -60, 60, 60), Qt.AspectRatioMode.KeepAspectRatio)
        if self.zoom > 1.0:
            self.set_zoom(1.0)
        elif self.zoom < MIN_ZOOM:
            self.set_zoom(MIN_ZOOM)
        self.centerOn(rect.center())
        self.zoom_changed.emit(self.zoom)

    def wheelEvent(self, event: QWheelEvent) -> None:
        steps = event.angleDelta().y() / 120.0
        if steps:
            self.zoom_by(math.pow(1.15, steps))

    def mousePressEvent(self, event: QMouseEvent) -> None:
        ctrl = event.modifiers() & Qt.KeyboardModifier.ControlModifier
        if event.button() == Qt.MouseButton.RightButton and ctrl:
            self._start_knife(self.mapToScene(event.position().toPoint()))
            event.accept()
            return
        event = _shift_adds(event)
        pan = event.button() in (Qt.MouseButton.MiddleButton, Qt.MouseButton.RightButton) or (
            event.button() == Qt.MouseButton.LeftButton and self._space)
        if pan:
            self._pan_from = event.position().toPoint()
            self.viewport().setCursor(Qt.CursorShape.ClosedHandCursor)
            event.accept()
            return
        super().mousePressEvent(event)

    def mouseMoveEvent(self, event: QMouseEvent) -> None:
        self._mouse = event.position().toPoint()
        if self._knife is not None:
            self._knife_points.append(self.mapToScene(self._mouse))
            self._knife.setPath(_polyline(self._knife_points))
            return
        event = _shift_adds(event)
        if self._pan_from is not None:
            now = event.position().toPoint()
            delta = now - self._pan_from
            self._pan_from = now
            self.pan_by(-delta.x(), -delta.y())
            return
        super().mouseMoveEvent(event)

    def leaveEvent(self, event) -> None:
        self._mouse = None
        super().leaveEvent(event)

    def mouseReleaseEvent(self, event: QMouseEvent) -> None:
        if self._knife is not None:
            self._knife_points.append(self.mapToScene(event.position().toPoint()))
            points, self._knife_points = self._knife_points, []
            self.scene().removeItem(self._knife)
            self._knife = None
            self.viewport().unsetCursor()
            if len(points) >= 2:
                self.knife_cut.emit(points)
            return
        event = _shift_adds(event)
        if self._pan_from is not None:
            self._pan_from = None
            self.viewport().unsetCursor()
            return
        super().mouseReleaseEvent(event)

    def mouseDoubleClickEvent(self, event: QMouseEvent) -> None:
        pos = self.mapToScene(event.position().toPoint())
        if event.button() == Qt.MouseButton.LeftButton and self.itemAt(
                event.position().toPoint()) is None:
            self.search_requested.emit(pos, event.globalPosition().toPoint())
            return
        super().mouseDoubleClickEvent(event)

    def keyPressEvent(self, event: QKeyEvent) -> None:
        if event.key() == Qt.Key.Key_Space and not event.isAutoRepeat():
            self._space = True
        super().keyPressEvent(event)

    def keyReleaseEvent(self, event: QKeyEvent) -> None:
        if event.key() == Qt.Key.Key_Space and not event.isAutoRepeat():
            self._space = False
        super().keyReleaseEvent(event)

    def event(self, event) -> bool:
        # Tab belongs to the canvas: it opens the block search at the cursor. Only a real Tab
        # key does: Qt also moves focus "to the next child" when a focused child hides (the
        # rename field, a closed group tab), and a search popup opened then took every key.
        if (event.type() == QEvent.Type.KeyPress and event.key() == Qt.Key.Key_Tab
                and not event.modifiers() & ~Qt.KeyboardModifier.KeypadModifier):
            self.request_search_at_cursor()
            return True
        return super().event(event)

    def request_search_at_cursor(self) -> None:
        local = self.mapFromGlobal(self.cursor().pos())
        if not self.viewport().rect().contains(local):
            local = self.viewport().rect().center()
        self.search_requested.emit(self.mapToScene(local), self.viewport().mapToGlobal(local))

    def _start_knife(self, at: QPointF) -> None:
        self._knife_points = [at]
        self._knife = QGraphicsPathItem()
        self._knife.setPen(QPen(QColor(theme.ERROR), 0, Qt.PenStyle.DashLine))
        self._knife.setZValue(1e6)
        self.scene().addItem(self._knife)
        self.viewport().setCursor(Qt.CursorShape.CrossCursor)

    # -- drops from the palette and from the desktop ---------------------------------------

    def dragEnterEvent(self, event) -> None:
        if event.mimeData().hasFormat(BLOCK_MIME) or graph_file(event.mimeData()):
            event.acceptProposedAction()
        else:
            super().dragEnterEvent(event)

    def dragMoveEvent(self, event) -> None:
        if event.mimeData().hasFormat(BLOCK_MIME) or graph_file(event.mimeData()):
            event.acceptProposedAction()
        else:
            super().dragMoveEvent(event)

    def dropEvent(self, event) -> None:
        path = graph_file(event.mimeData())
        if event.mimeData().hasFormat(BLOCK_MIME):
            block_id = bytes(event.mimeData().data(BLOCK_MIME).data()).decode()
            self.block_dropped.emit(block_id, self.mapToScene(event.position().toPoint()))
            event.acceptProposedAction()
        elif path:
            event.acceptProposedAction()
            self.file_dropped.emit(path)
        else:
            super().dropEvent(event)

    # -- background ------------------------------------------------------------------------

    def drawBackground(self, painter: QPainter, rect: QRectF | QRect) -> None:
        painter.fillRect(rect, QColor(theme.CANVAS))
        painter.setRenderHint(QPainter.RenderHint.Antialiasing, False)  # straight lines
        step = GRID
        while step * self.zoom < 10:  # keep minor lines at least 10 pixels apart
            step *= 5
        minor: list[QLineF] = []
        major: list[QLineF] = []
        x = math.floor(rect.left() / step) * step
        while x < rect.right():
            line = QLineF(x, rect.top(), x, rect.bottom())
            (major if round(x / step) % 5 == 0 else minor).append(line)
            x += step
        y = math.floor(rect.top() / step) * step
        while y < rect.bottom():
            line = QLineF(rect.left(), y, rect.right(), y)
            (major if round(y / step) % 5 == 0 else minor).append(line)
            y += step
        # one call per pen: a call per line is slow (and strains the bindings)
        painter.setPen(QPen(QColor(theme.GRID), 0))
        painter.drawLines(minor)
        painter.setPen(QPen(QColor(theme.GRID_MAJOR), 0))
        painter.drawLines(major)


def graph_file(mime) -> str | None:
    """The local .json file a drag carries (the first, when it carries several), or None."""
    if not mime.hasUrls():
        return None
    for url in mime.urls():
        if url.isLocalFile() and url.toLocalFile().lower().endswith(".json"):
            return url.toLocalFile()
    return None


def _shift_adds(event: QMouseEvent) -> QMouseEvent:
    """Shift+click and Shift+drag add to the selection, as in most editors: Qt adds with
    Ctrl, so a left-button event with Shift is passed on with Ctrl as well."""
    mods = event.modifiers()
    if not mods & Qt.KeyboardModifier.ShiftModifier:
        return event
    return QMouseEvent(event.type(), event.position(), event.scenePosition(),
                       event.globalPosition(), event.button(), event.buttons(),
                       mods | Qt.KeyboardModifier.ControlModifier)


def _polyline(points: list[QPointF]) -> QPainterPath:
    path = QPainterPath(points[0])
    for p in points[1:]:
        path.lineTo(p)
    return path
