"""Reroute points: dots a wire passes through, to lead it around cards by hand.

Double-click a wire to put a point there; drag a point to bend the wire; double-click a
point (or select it and press Delete) to take it out. Each change is one undo step. The
points are layout, not model: they live in the file's `ui` section under "reroutes",
keyed by the wire ("src.port->dst.port"), so they round-trip with the file and never
change what the graph computes. A renamed node takes its wires' points along.
"""

from __future__ import annotations

import copy

from PySide6.QtCore import QObject, QPointF, QRectF, Qt
from PySide6.QtGui import QBrush, QColor, QPainter, QPen, QUndoCommand
from PySide6.QtWidgets import QGraphicsItem

from nodegraph.gui.base import theme
from nodegraph.gui.document.reroute_points import KEY, edge_key, stored
from nodegraph.model.graph import Edge

RADIUS = 6.0
SAMPLES = 64  # steps along a wire to find where a new point goes


class SetReroutes(QUndoCommand):
    """Replace the points of one wire (UI data only: no graph event, results unchanged)."""

    def __init__(self, manager: Reroutes, key: str, after: list, text: str):
        super().__init__(text)
        self.manager, self.key = manager, key
        table = manager.doc.graph.ui.get(KEY, {})
        self.before = copy.deepcopy(table.get(self.key)) if isinstance(table, dict) else None
        self.after = [list(p) for p in after] if after else None

    def redo(self) -> None:
        self.manager.put(self.key, self.after)

    def undo(self) -> None:
        self.manager.put(self.key, self.before)


class RerouteItem(QGraphicsItem):
    """One draggable dot on a wire."""

    def __init__(self, manager: Reroutes, key: str, index: int):
        super().__init__()
        self.manager, self.key, self.index = manager, key, index
        self.setFlags(QGraphicsItem.GraphicsItemFlag.ItemIsMovable
                      | QGraphicsItem.GraphicsItemFlag.ItemIsSelectable
                      | QGraphicsItem.GraphicsItemFlag.ItemSendsGeometryChanges)
        self.setZValue(2)  # above wires and cards
        self.setCursor(Qt.CursorShape.SizeAllCursor)
        self.setToolTip("reroute point: drag to bend the wire, double-click to remove")
        self.color = QColor(theme.TEXT_DIM)

    def boundingRect(self) -> QRectF:
        r = RADIUS + 2
        return QRectF(-r, -r, 2 * r, 2 * r)

    def paint(self, painter: QPainter, option, widget=None) -> None:
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        painter.setPen(QPen(QColor(theme.SELECTION) if self.isSelected()
                            else QColor(theme.CANVAS), 2.0))
        painter.setBrush(QBrush(self.color))
        painter.drawEllipse(QPointF(0, 0), RADIUS, RADIUS)

    def itemChange(self, change, value):
        if change == QGraphicsItem.GraphicsItemChange.ItemPositionHasChanged:
            self.manager.follow(self)
        return super().itemChange(change, value)

    def mouseReleaseEvent(self, event) -> None:
        super().mouseReleaseEvent(event)
        self.manager.dropped(self.key)

    def mouseDoubleClickEvent(self, event) -> None:
        self.manager.remove(self.key, self.index)
        event.accept()


class Reroutes(QObject):
    """The reroute points of one canvas: dots in the scene, points in the graph's ui."""

    def __init__(self, doc, scene):
        super().__init__(scene)
        self.doc, self.scene = doc, scene
        self.dots: dict[str, list[RerouteItem]] = {}
        # connected after the scene's own handlers: wires exist when these run
        doc.graph_replaced.connect(self.rebuild)
        doc.changed.connect(self._on_change)
        scene.reroute_requested.connect(self.add)
        self.rebuild()

    # -- mirroring ---------------------------------------------------------------------------

    def rebuild(self) -> None:
        self.dots = {}  # the scene dropped every item
        for edge in self.scene.wires:
            self._show(edge)

    def _on_change(self, event) -> None:
        if event.kind == "edge_added":
            self._show(event.edge)
        elif event.kind == "edge_removed":
            for dot in self.dots.pop(edge_key(event.edge), []):
                self.scene.removeItem(dot)  # the points stay in ui: undo brings them back
        elif event.kind == "node_renamed":
            self._rename(event.name, event.node)

    def _rename(self, old: str, new: str) -> None:
        table = self.doc.graph.ui.get(KEY)
        if not isinstance(table, dict):
            return
        table, before = dict(table), table  # a new one, set through the graph
        for key in list(table):
            src, _, dst = key.partition("->")
            s_node, _, s_port = src.rpartition(".")
            d_node, _, d_port = dst.rpartition(".")
            if old in (s_node, d_node):
                new_key = (f"{new if s_node == old else s_node}.{s_port}->"
                           f"{new if d_node == old else d_node}.{d_port}")
                table[new_key] = table.pop(key)
                self.dots[new_key] = self.dots.pop(key, [])
                for dot in self.dots[new_key]:
                    dot.key = new_key
        if table != before:
            self.doc.graph.set_ui(KEY, table)

    def _wire(self, key: str):
        for edge, wire in self.scene.wires.items():
            if edge_key(edge) == key:
                return wire
        return None

    def _show(self, edge: Edge) -> None:
        wire = self.scene.wires.get(edge)
        if wire is None:
            return
        key = edge_key(edge)
        points = stored(self.doc.graph.ui, edge)
        for dot in self.dots.pop(key, []):
            self.scene.removeItem(dot)
        dots = []
        for i, (x, y) in enumerate(points):
            dot = RerouteItem(self, key, i)
            dot.color = QColor(wire.color)
            dot.setPos(x, y)
            self.scene.addItem(dot)
            dots.append(dot)
        self.dots[key] = dots
        wire.via = [QPointF(x, y) for x, y in points]
        wire.update_path()

    def put(self, key: str, points: list | None) -> None:
        """Store `points` for the wire `key` (None: none) and redraw it."""
        old = self.doc.graph.ui.get(KEY)
        table = dict(old) if isinstance(old, dict) else {}  # a new table: undo holds the old
        if points:
            table[key] = [list(p) for p in points]
        else:
            table.pop(key, None)
        self.doc.graph.set_ui(KEY, table or None)
        wire = self._wire(key)
        if wire is not None:
            self._show(wire.edge)

    # -- gestures ----------------------------------------------------------------------------

    def add(self, edge: Edge, at: QPointF) -> None:
        """A point on `edge` at `at`, between the points it lies between along the wire."""
        wire = self.scene.wires.get(edge)
        if wire is None:
            return
        points = stored(self.doc.graph.ui, edge)
        path = wire.path()
        along = [path.pointAtPercent(i / SAMPLES) for i in range(SAMPLES + 1)]

        def position(p: QPointF) -> int:
            return min(range(len(along)), key=lambda i: (along[i] - p).manhattanLength())

        where = position(at)
        index = sum(1 for x, y in points if position(QPointF(x, y)) < where)
        points.insert(index, (at.x(), at.y()))
        self.doc.push(SetReroutes(self, edge_key(edge), points, "Add reroute point"))

    def follow(self, dot: RerouteItem) -> None:
        """A dot is being dragged: bend its wire live (stored on release)."""
        wire = self._wire(dot.key)
        if wire is not None and dot.index < len(wire.via):
            wire.via[dot.index] = dot.pos()
            wire.update_path()

    def dropped(self, key: str) -> None:
        wire = self._wire(key)
        if wire is None:
            return
        now = [(d.pos().x(), d.pos().y()) for d in self.dots.get(key, [])]
        if now != stored(self.doc.graph.ui, wire.edge):
            self.doc.push(SetReroutes(self, key, now, "Move reroute point"))

    def remove(self, key: str, index: int) -> None:
        wire = self._wire(key)
        if wire is None:
            return
        points = stored(self.doc.graph.ui, wire.edge)
        if 0 <= index < len(points):
            del points[index]
            self.doc.push(SetReroutes(self, key, points, "Remove reroute point"))

    def delete_selected(self) -> bool:
        """Remove the selected dots (Delete): one undo step per wire."""
        chosen = [d for dots in self.dots.values() for d in dots if d.isSelected()]
        by_key: dict[str, set[int]] = {}
        for d in chosen:
            by_key.setdefault(d.key, set()).add(d.index)
        for key, gone in by_key.items():
            wire = self._wire(key)
            if wire is not None:
                points = [p for i, p in enumerate(stored(self.doc.graph.ui, wire.edge))
                          if i not in gone]
                self.doc.push(SetReroutes(self, key, points, "Remove reroute points"))
        return bool(chosen)
