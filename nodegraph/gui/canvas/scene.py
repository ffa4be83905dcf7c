"""The canvas scene: node cards and wires mirroring the open graph, and wiring by drag.

The scene never edits the graph. It rebuilds itself from graph events (so undo, redo, a
script or a paste all look the same to it) and turns the user's gestures into requests —
wire these ports, these nodes moved, a wire was dropped on empty canvas — that the window
turns into undoable edits. While a wire is dragged, each port under the mouse is asked
whether it would accept it; a refused port turns red and a tooltip says why.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, TypeGuard

from PySide6.QtCore import QPointF, QRectF, Qt, Signal
from PySide6.QtGui import QTransform
from PySide6.QtWidgets import QGraphicsScene, QGraphicsSceneMouseEvent, QToolTip

from nodegraph.gui.canvas.annotation_item import AnnotationItem
from nodegraph.gui.canvas.card_index import CardIndex
from nodegraph.gui.canvas.far_layer import FarLayer
from nodegraph.gui.canvas.label_index import LabelIndex
from nodegraph.gui.canvas.layout import auto_layout, saved_direction
from nodegraph.gui.canvas.node_item import SIMPLE_LOD, NodeItem, PortItem, card_height
from nodegraph.gui.canvas.wire_item import (
    DragWire,
    LabelStyle,
    WireItem,
    label_lod_for,
    label_scale_for,
    set_label_scale,
)
from nodegraph.gui.document import annotations as canvas_notes  # `annotations` is __future__'s
from nodegraph.gui.document.document import Document
from nodegraph.gui.document.wiring import why_refused
from nodegraph.model.errors import Problem
from nodegraph.model.graph import Edge, GraphChanged
from nodegraph.model.spec import Port

if TYPE_CHECKING:
    from nodegraph.check.validate import Report

EXTENT = 100_000.0  # the canvas is effectively unbounded, so panning never hits a wall
_Ports = tuple[list[Port], list[Port]]  # a card's inputs, outputs


class GraphScene(QGraphicsScene):
    """Node and wire items for every node and edge of the document's graph."""

    wire_requested = Signal(tuple, tuple)  # source (node, port), target (node, port)
    wire_rewired = Signal(object, tuple, tuple)  # old Edge, new source, new target
    wire_detached = Signal(object)  # an Edge pulled off its input and dropped on nothing
    wire_dropped = Signal(tuple, bool, QPointF)  # loose end: port ref, is output, scene pos
    nodes_moved = Signal(dict, dict)  # positions before, after
    notes_moved = Signal(dict, dict, dict)  # node positions before, after; changed notes
    note_text_edited = Signal(str, str)  # note id, new text
    open_requested = Signal(str)  # a group instance was double-clicked: open its body
    reroute_requested = Signal(object, QPointF)  # a wire double-clicked: Edge, scene pos

    def __init__(self, doc: Document, parent=None):
        super().__init__(parent)
        self.doc = doc
        self.nodes: dict[str, NodeItem] = {}
        self.wires: dict[Edge, WireItem] = {}
        self.notes: dict[str, AnnotationItem] = {}  # comments and backdrops by id
        self.report: Report | None = None
        self.setSceneRect(QRectF(-EXTENT, -EXTENT, 2 * EXTENT, 2 * EXTENT))
        self.setItemIndexMethod(QGraphicsScene.ItemIndexMethod.BspTreeIndex)
        self._drag: DragWire | None = None
        self._drag_from: PortItem | None = None
        self._detached: Edge | None = None
        self._hover: PortItem | None = None
        self._press_positions: dict[str, tuple] = {}
        self._press_notes: dict[str, list] = {}
        self._ports_shown = True
        self.adding = False  # many cards and wires are being added: wires route after
        self.card_index = CardIndex()  # where the cards are, for routing wires
        self.label_index = LabelIndex()  # where the wires' shape labels are
        self.label_style = LabelStyle()  # this scene's label size (follows its view's zoom)
        self._far = (False, False)  # zoomed out: wires, cards drawn by the far layers
        # made by rebuild (clear() deletes items)
        self.far_wires: FarLayer
        self.far_cards: FarLayer
        self.selectionChanged.connect(self._far_selection)
        doc.graph_replaced.connect(self.rebuild)
        doc.changed.connect(self._on_change)
        doc.positions_changed.connect(self._on_positions)
        doc.notes_changed.connect(self._on_notes)
        self.rebuild()

    # -- mirroring the graph ---------------------------------------------------------------

    def rebuild(self) -> None:
        """Drop every item and draw the graph afresh (a different graph was opened)."""
        self._cancel_drag()
        self.clearSelection()  # now, while the far layers its signal updates still exist
        self.clear()
        self.nodes.clear()
        self.wires.clear()
        self.notes.clear()
        self.label_index = LabelIndex()
        self.far_wires = FarLayer(self.wires, "wires", WireItem)
        self.far_cards = FarLayer(self.nodes, "cards", NodeItem)
        self.addItem(self.far_wires)
        self.addItem(self.far_cards)
        graph = self.doc.graph
        touching: dict[str, list[Edge]] = {}
        for e in graph.edges:
            touching.setdefault(e.src, []).append(e)
            touching.setdefault(e.dst, []).append(e)
        ports = {n: self._ports(n, touching.get(n, [])) for n in graph.nodes}
        positions = self.doc.positions()
        missing = [n for n in graph.nodes if not _valid_pos(positions.get(n))]
        if missing:  # a file written by a script: lay it out, keep positions that exist
            heights = {n: card_height(len(i), len(o)) for n, (i, o) in ports.items()}
            laid = auto_layout(graph, heights, saved_direction(graph.ui))
            self.doc.set_positions({n: laid[n] for n in missing})
        self.card_index.invalidate()
        self.adding = True  # route the wires once all cards are in (one index build)
        try:
            for node_id in graph.nodes:
                self._add_node(node_id, ports[node_id])
            for edge in graph.edges:
                self._add_wire(edge)
        finally:
            self.adding = False
        for wire in self.wires.values():
            wire.update_path()
        for note in self.doc.notes():
            self._add_note(note)
        self.far_wires.set_active(self._far[0])
        self.far_cards.set_active(self._far[1])

    def _ports(self, node_id: str, edges: list[Edge]) -> tuple[list[Port], list[Port]]:
        """The node's inputs and outputs: its block's, plus any a wire names (so it shows)."""
        graph = self.doc.graph
        node = graph.nodes[node_id]
        spec = graph.registry.get(node.type) if node.type in graph.registry else None
        inputs = list(spec.inputs) if spec else []
        outputs = list(spec.outputs) if spec else []
        for e in edges:
            if e.dst == node_id and all(p.name != e.dst_port for p in inputs):
                inputs.append(Port(e.dst_port, doc="not a port of this block"))
            if e.src == node_id and all(p.name != e.src_port for p in outputs):
                outputs.append(Port(e.src_port, doc="not a port of this block"))
        return inputs, outputs

    def _make_node(self, node_id: str, ports: _Ports | None = None) -> NodeItem:
        graph = self.doc.graph
        node = graph.nodes[node_id]
        spec = graph.registry.get(node.type) if node.type in graph.registry else None
        if ports is None:
            ports = self._ports(node_id, [*graph.edges_into(node_id), *graph.edges_from(node_id)])
        category = spec.category if spec else node.type.split(".")[0]
        # no block library at all yet (the window's first look, while it loads): coloured by
        # family, not flagged unknown
        known = spec is not None or len(graph.base_registry) == 0
        return NodeItem(node_id, node.type, category, *ports, spec.summary if spec else "",
                        known)

    def _add_node(self, node_id: str, ports: _Ports | None = None) -> NodeItem:
        item = self._make_node(node_id, ports)
        pos = self.doc.positions().get(node_id)
        if _valid_pos(pos):
            item.setPos(QPointF(*pos))
        else:
            free = self.itemsBoundingRect()
            item.setPos(free.right() + 60 if self.nodes else 0.0, free.top() if self.nodes else 0)
        self.addItem(item)
        self.nodes[node_id] = item
        self.card_index.invalidate()
        self.far_cards.adopt(item)
        if not self._ports_shown:
            for port in item.ports():
                port.setVisible(False)
        if self.report is not None:
            self._paint_node(item)
        return item

    def _remove_node(self, node_id: str) -> None:
        item = self.nodes.pop(node_id, None)
        if item is None:
            return
        for edge in [e for e in self.wires if node_id in (e.src, e.dst)]:
            self._remove_wire(edge)
        self.removeItem(item)
        self.card_index.invalidate()
        self.far_cards.changed()

    def _port_item(self, node: str, port: str, output: bool) -> PortItem | None:
        item = self.nodes.get(node)
        if item is None:
            return None
        found = item.port(port, output)
        if found is None:  # a wire to a port the card lacks: rebuild the card with it
            self._refresh_node(node)
            found = self.nodes[node].port(port, output)
        return found

    def _refresh_node(self, node_id: str) -> None:
        edges = [e for e in self.wires if node_id in (e.src, e.dst)]
        selected = self.nodes[node_id].isSelected()
        self._remove_node(node_id)
        self._add_node(node_id).setSelected(selected)
        for e in edges:
            if e in self.doc.graph.edges:
                self._add_wire(e)

    def _add_wire(self, edge: Edge) -> None:
        if edge in self.wires or edge.src not in self.nodes or edge.dst not in self.nodes:
            return
        src = self._port_item(edge.src, edge.src_port, True)
        dst = self._port_item(edge.dst, edge.dst_port, False)
        if src is None or dst is None:  # not expected: both cards are here (checked above)
            return
        wire = WireItem(edge, src, dst)
        self.addItem(wire)
        self.wires[edge] = wire
        self.far_wires.adopt(wire)
        if self.report is not None:
            self._paint_wire(wire)
        dst.update()

    def _remove_wire(self, edge: Edge) -> None:
        wire = self.wires.pop(edge, None)
        if wire is not None:
            wire.detach()
            self.label_index.put(wire, None)
            self.removeItem(wire)
            self.far_wires.changed()

    def _on_change(self, event: GraphChanged) -> None:
        node, edge = event.node, event.edge
        if event.kind == "node_added" and node is not None:
            self._add_node(node)
        elif event.kind == "node_removed" and node is not None:
            self._remove_node(node)
        elif event.kind == "edge_added" and edge is not None:
            self._add_wire(edge)
        elif event.kind == "edge_removed" and edge is not None:
            self._remove_wire(edge)
        elif event.kind == "node_renamed" and event.name is not None and node is not None:
            self._rename(event.name, node)

    def _rename(self, old: str, new: str) -> None:
        item = self.nodes.pop(old)
        item.set_id(new)
        self.nodes[new] = item
        for edge in [e for e in self.wires if old in (e.src, e.dst)]:
            wire = self.wires.pop(edge)
            wire.edge = Edge(new if edge.src == old else edge.src, edge.src_port,
                             new if edge.dst == old else edge.dst, edge.dst_port)
            self.wires[wire.edge] = wire

    def _on_positions(self, positions: dict) -> None:
        for node_id, (x, y) in positions.items():
            item = self.nodes.get(node_id)
            if item is not None and (item.pos().x(), item.pos().y()) != (x, y):
                item.setPos(x, y)
        if positions:
            self.reroute(positions)

    def reroute(self, nodes) -> None:
        """Route again the wires of these cards and the wires their cards now stand on."""
        wires: set = set()
        for node_id in nodes:
            item = self.nodes.get(node_id)
            if item is None:
                continue
            for port in item.ports():
                wires |= port.wires
            wires.update(i for i in self.items(item.sceneBoundingRect())
                         if isinstance(i, WireItem))
        for wire in wires:
            wire.update_path()

    # -- comments and backdrops -----------------------------------------------------------

    def _add_note(self, note: dict) -> AnnotationItem:
        item = AnnotationItem(note)
        item.on_text_edited = self.note_text_edited.emit
        self.addItem(item)
        self.notes[note["id"]] = item
        return item

    def _on_notes(self, ids: list[str]) -> None:
        current = canvas_notes.by_id(self.doc.graph.ui)
        for note_id in ids:
            note, item = current.get(note_id), self.notes.get(note_id)
            if note is None and item is not None:
                item.finish_edit()
                self.removeItem(self.notes.pop(note_id))
            elif note is not None and item is None:
                self._add_note(note)
            elif note is not None and item is not None:
                item.set_note(note)

    def selected_note_ids(self) -> list[str]:
        return [i.note_id for i in self.selectedItems() if isinstance(i, AnnotationItem)]

    def _carry(self) -> list[str]:
        """Give each selected backdrop the unselected cards and comments inside it to carry
        while it is dragged; returns the ids of the carried nodes."""
        carried_nodes = []
        for backdrop in self.notes.values():
            backdrop.carried = []
            if backdrop.kind != "backdrop" or not backdrop.isSelected():
                continue
            frame = backdrop.scene_rect()
            for node_id, item in self.nodes.items():
                if not item.isSelected() and frame.contains(item.sceneBoundingRect()):
                    backdrop.carried.append(item)
                    carried_nodes.append(node_id)
            backdrop.carried += [n for n in self.notes.values() if n.kind == "comment"
                                 and not n.isSelected() and frame.contains(n.scene_rect())]
        return carried_nodes

    # -- validation results ----------------------------------------------------------------

    def set_report(self, report: Report) -> None:
        """Paint problems, shapes and parameter counts from a validation report."""
        self.report = report
        for item in self.nodes.values():
            self._paint_node(item)
        for wire in self.wires.values():
            self._paint_wire(wire)
        self.far_cards.changed()
        self.far_wires.changed()

    def show_labels(self, labels: dict[tuple[str, str], str]) -> None:
        """Label wires by their source port before a report comes (the shapes remembered
        from the graph's last check); the next `set_report` paints them anew."""
        for wire in self.wires.values():
            text = labels.get(wire.edge.source)
            if text:
                wire.set_label(text)
        self.far_wires.changed()

    def mark_failed(self, node: str, message: str, hint: str = "") -> None:
        """Paint a run-time failure (NaN, a block's error) on its node until the next
        validation report."""
        item = self.nodes.get(node)
        if item is not None:
            item.set_problems([*item.problems, Problem(node, None, "runtime_error", message,
                                                       hint)])
            self.far_cards.changed()

    def _paint_node(self, item: NodeItem) -> None:
        report = self.report
        if report is None:  # callers paint only once a report came
            return
        item.set_problems(report.for_node(item.node_id))
        item.set_badge(report.param_counts.get(item.node_id))

    def _paint_wire(self, wire: WireItem) -> None:
        e, report = wire.edge, self.report
        if report is None:
            return
        wire.set_label(shape_label(report, e.src, e.src_port))
        wire.set_problems([p for p in report.problems if p.node == e.dst
                           and p.port == e.dst_port and p.kind != "missing_input"])

    # -- level of detail -------------------------------------------------------------------

    @property
    def label_lod(self) -> float:
        """The zoom below which wires show no shape labels (lower for a small graph)."""
        return label_lod_for(len(self.wires))

    def set_zoom(self, zoom: float) -> None:
        """Hide the port dots when cards are too small to wire (500 nodes stay fast); size
        the wires' shape labels to stay readable."""
        set_label_scale(self.label_style, label_scale_for(zoom), self.wires.values())
        self._far = (zoom < self.label_lod, zoom < SIMPLE_LOD)
        self.far_wires.set_active(self._far[0])
        self.far_cards.set_active(self._far[1])
        show = zoom >= SIMPLE_LOD
        if show == self._ports_shown:
            return
        self._ports_shown = show
        for item in self.nodes.values():
            for port in item.ports():
                port.setVisible(show)

    def _far_selection(self) -> None:
        if hasattr(self, "far_wires"):  # not before the first rebuild
            self.far_wires.selection_changed()
            self.far_cards.selection_changed()

    def far_suspended(self) -> tuple[bool, bool]:
        """Let every item draw itself (a picture at another scale); returns what to pass
        to `far_resume`."""
        state = self._far
        self._far = (False, False)
        self.far_wires.set_active(False)
        self.far_cards.set_active(False)
        return state

    def far_resume(self, state: tuple[bool, bool]) -> None:
        self._far = state
        self.far_wires.set_active(state[0])
        self.far_cards.set_active(state[1])

    # -- selection helpers -----------------------------------------------------------------

    def selected_node_ids(self) -> list[str]:
        return [i.node_id for i in self.selectedItems() if isinstance(i, NodeItem)]

    def selected_edges(self) -> list[Edge]:
        return [i.edge for i in self.selectedItems() if isinstance(i, WireItem)]

    def select_nodes(self, node_ids) -> None:
        """Select exactly `node_ids`, announcing the change once (as one click does)."""
        self.blockSignals(True)
        try:
            self.clearSelection()
            for n in node_ids:
                if n in self.nodes:
                    self.nodes[n].setSelected(True)
        finally:
            self.blockSignals(False)
        self.selectionChanged.emit()

    def item_positions(self, node_ids=None) -> dict[str, tuple[float, float]]:
        ids = self.nodes if node_ids is None else node_ids
        return {n: (self.nodes[n].pos().x(), self.nodes[n].pos().y()) for n in ids
                if n in self.nodes}

    # -- wiring by drag --------------------------------------------------------------------

    def begin_wire(self, port: PortItem) -> None:
        """Start dragging a wire from `port`; from a wired input, pick that wire up."""
        self._cancel_drag()
        if not port.output:
            old = self.doc.graph.source_of(*port.ref)
            if old is not None and old in self.wires:
                self._detached = old
                self.wires[old].hide()
                self.far_wires.changed()
                port = self.wires[old].source
        self._drag_from = port
        self._drag = DragWire(port)
        self.addItem(self._drag)
        self._drag.follow(port.anchor())

    def drag_wire_to(self, pos: QPointF) -> str | None:
        """Move the loose end to `pos`; returns why the port there refuses it, if it does."""
        target = self._port_at(pos)
        if target is not self._hover and self._hover is not None:
            self._hover.set_highlight(None)
        self._hover = target
        reason = self._refusal(target) if target is not None else None
        if target is not None:
            target.set_highlight("refused" if reason else "ok")
        if self._drag is not None:
            self._drag.follow(target.anchor() if target is not None and not reason else pos,
                              refused=bool(reason))
        return reason

    def end_wire(self, pos: QPointF) -> None:
        """Drop the loose end at `pos`: wire, rewire, detach, or offer blocks."""
        start, detached = self._drag_from, self._detached
        target = self._port_at(pos)
        self._cancel_drag()
        if start is None:
            return
        if target is None:
            if detached is not None:
                self.wire_detached.emit(detached)
            elif self.itemAt(pos, QTransform()) is None:
                self.wire_dropped.emit(start.ref, start.output, pos)
            return
        if target is start or self._refusal(target, start) is not None:
            return
        source, dest = (start.ref, target.ref) if start.output else (target.ref, start.ref)
        if detached is not None:
            if (detached.source, detached.target) != (source, dest):
                self.wire_rewired.emit(detached, source, dest)
        else:
            self.wire_requested.emit(source, dest)

    def _refusal(self, target: PortItem, start: PortItem | None = None) -> str | None:
        start = start or self._drag_from
        if start is None:  # no wire is being dragged
            return None
        if target.output == start.output:
            return "wire an output to an input"
        source, dest = (start.ref, target.ref) if start.output else (target.ref, start.ref)
        if self._detached is not None and (self._detached.source, self._detached.target) == (
                source, dest):
            return None  # dropping a picked-up wire back where it was
        return why_refused(self.doc.graph, source, dest)

    def _port_at(self, pos: QPointF) -> PortItem | None:
        for item in self.items(pos):
            if isinstance(item, PortItem) and item is not self._drag_from:
                return item
        return None

    def _cancel_drag(self) -> None:
        if self._hover is not None:
            self._hover.set_highlight(None)
        if self._drag is not None:
            self.removeItem(self._drag)
        if self._detached is not None and self._detached in self.wires:
            self.wires[self._detached].show()
            self.far_wires.changed()
        self._drag = self._drag_from = self._detached = self._hover = None

    @property
    def dragging_wire(self) -> bool:
        return self._drag is not None

    # -- mouse -----------------------------------------------------------------------------

    def mousePressEvent(self, event: QGraphicsSceneMouseEvent) -> None:
        item = self.itemAt(event.scenePos(), QTransform())
        if isinstance(item, PortItem) and event.button() == Qt.MouseButton.LeftButton:
            self.begin_wire(item)
            event.accept()
            return
        super().mousePressEvent(event)
        carried = self._carry()
        self._press_positions = self.item_positions([*self.selected_node_ids(), *carried])
        self._press_notes = {i: item.rect() for i, item in self.notes.items()}

    def mouseDoubleClickEvent(self, event: QGraphicsSceneMouseEvent) -> None:
        item = self.itemAt(event.scenePos(), QTransform())
        card = item if isinstance(item, NodeItem) else (
            item.node if isinstance(item, PortItem) else None)
        if card is not None and card.block_type.startswith("group."):
            self.open_requested.emit(card.node_id)
            event.accept()
            return
        if isinstance(item, WireItem) and event.button() == Qt.MouseButton.LeftButton:
            self.reroute_requested.emit(item.edge, event.scenePos())
            event.accept()
            return
        super().mouseDoubleClickEvent(event)

    def mouseMoveEvent(self, event: QGraphicsSceneMouseEvent) -> None:
        if self._drag is not None:
            reason = self.drag_wire_to(event.scenePos())
            if reason:
                QToolTip.showText(event.screenPos(), reason)
            else:
                QToolTip.hideText()
            return
        super().mouseMoveEvent(event)

    def mouseReleaseEvent(self, event: QGraphicsSceneMouseEvent) -> None:
        if self._drag is not None:
            QToolTip.hideText()
            self.end_wire(event.scenePos())
            return
        super().mouseReleaseEvent(event)
        for item in self.notes.values():
            item.carried = []
        before, self._press_positions = self._press_positions, {}
        after = self.item_positions(before)
        notes_before, self._press_notes = self._press_notes, {}
        current = canvas_notes.by_id(self.doc.graph.ui)
        notes_after = {i: {**current[i], "rect": item.rect()} for i, item in self.notes.items()
                       if i in current and item.rect() != notes_before.get(i, item.rect())}
        if notes_after:
            self.notes_moved.emit(before, after, notes_after)
        elif before and after != before:
            self.nodes_moved.emit(before, after)


def shape_label(report: Report, node: str, port: str) -> str:
    """The wire label: the inferred shape, 'scalar' for a loss, empty when unknown."""
    if (node, port) not in report.outputs:
        return ""
    return report.shown_shape(node, port)


def _valid_pos(pos) -> TypeGuard[Sequence[float]]:
    return (isinstance(pos, list | tuple) and len(pos) == 2
            and all(isinstance(v, int | float) for v in pos))
