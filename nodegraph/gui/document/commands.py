"""Every edit as an undoable command that calls the Graph API (and nothing else).

Commands capture what they need to undo when they first run, so a command built for a
node still holds after earlier commands renamed or rewired things. Undo puts nodes and
wires back at their old place in the graph's order, because that order breaks ties in the
topological order, which decides the order weights are initialised in: an undone delete
must train exactly like the graph before it. Multi-node edits are macros (one undo step).
Position changes set through the document, which tells the canvas (the graph's ui_changed
events are not the canvas's signal).
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from PySide6.QtGui import QUndoCommand

from nodegraph.gui.document import annotations as canvas_notes  # `annotations` is __future__'s
from nodegraph.model import groups
from nodegraph.model.graph import Edge, Graph, Node

if TYPE_CHECKING:
    from nodegraph.model.groupdefs import GroupDef


class Document(Protocol):
    """What a command needs of the document it edits (`document.Document` is one): a
    Protocol, because the document imports this module to build its commands."""

    graph: Graph

    def set_positions(self, positions: dict[str, tuple]) -> None: ...

    def forget_positions(self, nodes: Iterable[str]) -> None: ...

    def restore_positions(self, saved: dict | None) -> None: ...

    def put_notes(self, changes: dict[str, dict | None],
                  index: dict[str, int | None] | None = None) -> None: ...

    def training(self) -> Mapping[str, Any]: ...

_UNSET = object()
MERGE_PARAM = 1


def _positions(graph: Graph) -> dict | None:
    """The positions table as it is now (a copy): an undo puts it back verbatim, so an
    undone move or delete gives back the file byte for byte (`[286, 10]` stays ints, the
    keys keep their order)."""
    table = graph.ui.get("positions")
    return copy.deepcopy(table) if isinstance(table, dict) else None


def _reorder(current: Mapping[str, Any], order: list[str], put: Any) -> None:
    """Put the keys of `current` back in `order` (keys it lacks go last): `put(key, None)`
    removes a key and `put(key, value)` appends it, as the graph's setters do. An undone
    reset (the key removed, then set again) must not move the key to the end of the file."""
    want = [k for k in order if k in current] + [k for k in current if k not in order]
    have = list(current)
    if have == want:
        return
    first = next(i for i, (a, b) in enumerate(zip(have, want, strict=True)) if a != b)
    values = {k: current[k] for k in want[first:]}
    for key in want[first:]:
        put(key, None)
    for key in want[first:]:
        put(key, values[key])


def _move_last_node_to(graph: Graph, index: int) -> None:
    """Put the most recently added node back at `index` in the graph's node order."""
    graph.move_node(next(reversed(graph.nodes)), index)


def _move_last_edge_to(graph: Graph, index: int) -> None:
    """Put the most recently added wire back at `index` in the graph's wire order."""
    graph.move_edge(graph.edges[-1], index)


class AddNode(QUndoCommand):
    """Add a node (new, pasted, or restored) at a position."""

    def __init__(self, doc: Document, node: Node, pos: tuple[float, float] | None):
        super().__init__(f"Add {node.id}")
        self.doc, self.node, self.pos = doc, copy.deepcopy(node), pos

    def redo(self) -> None:
        # strict=False: like the loader, keep what the user pasted and let validation speak
        self.doc.graph.add_node(copy.deepcopy(self.node), strict=False)
        if self.pos is not None:
            self.doc.set_positions({self.node.id: self.pos})

    def undo(self) -> None:
        self.doc.graph.remove(self.node.id)
        self.doc.forget_positions([self.node.id])


class RemoveNode(QUndoCommand):
    """Remove a node with its wires and ties; undo restores them where they were."""

    def __init__(self, doc: Document, node_id: str):
        super().__init__(f"Delete {node_id}")
        self.doc, self.node_id = doc, node_id
        self.saved: tuple | None = None

    def redo(self) -> None:
        g = self.doc.graph
        index = list(g.nodes).index(self.node_id)
        edges = [(i, e) for i, e in enumerate(g.edges) if self.node_id in (e.src, e.dst)]
        pos = _positions(g)
        self.saved = (copy.deepcopy(g.node(self.node_id)), index, edges, pos, list(g.ties))
        g.remove(self.node_id)
        self.doc.forget_positions([self.node_id])

    def undo(self) -> None:
        g = self.doc.graph
        if self.saved is None:  # not expected: the undo stack redoes a command first
            return
        node, index, edges, pos, ties = self.saved
        g.add_node(copy.deepcopy(node), strict=False)
        _move_last_node_to(g, index)
        for i, e in edges:  # ascending indices: each insert lands where it was
            g.connect(e.source, e.target, strict=False)
            _move_last_edge_to(g, i)
        g.set_ties(ties)
        self.doc.restore_positions(pos)


class Connect(QUndoCommand):
    """Wire an output to an input, replacing the wire the input had."""

    def __init__(self, doc: Document, source: tuple[str, str], target: tuple[str, str],
                 strict: bool = True):
        super().__init__(f"Connect {source[0]}.{source[1]} → {target[0]}.{target[1]}")
        self.doc, self.source, self.target, self.strict = doc, source, target, strict
        self.replaced: tuple[int, Edge] | None = None

    def redo(self) -> None:
        g = self.doc.graph
        old = g.source_of(*self.target)
        self.replaced = (g.edges.index(old), old) if old is not None else None
        if old is not None and not self.strict:
            g.disconnect(old)
        g.connect(self.source, self.target, strict=self.strict, replace=True)

    def undo(self) -> None:
        g = self.doc.graph
        g.disconnect(Edge(*self.source, *self.target))
        if self.replaced is not None:
            i, old = self.replaced
            g.connect(old.source, old.target, strict=False)
            _move_last_edge_to(g, i)


class Disconnect(QUndoCommand):
    def __init__(self, doc: Document, edge: Edge):
        super().__init__(f"Disconnect {edge}")
        self.doc, self.edge, self.index = doc, edge, 0

    def redo(self) -> None:
        self.index = self.doc.graph.edges.index(self.edge)
        self.doc.graph.disconnect(self.edge)

    def undo(self) -> None:
        self.doc.graph.connect(self.edge.source, self.edge.target, strict=False)
        _move_last_edge_to(self.doc.graph, self.index)


class SetParam(QUndoCommand):
    """Set a param (or, with value=RESET, go back to the block's default).

    Changes merge into one step only when they come from one spin interaction (arrows,
    wheel or Up/Down in one spin box without typing in between): both carry the same
    `merge_key`. A typed value confirmed with Enter has none, so two typed edits are two
    steps and the earlier value can always be brought back.
    """

    RESET = _UNSET

    def __init__(self, doc: Document, node_id: str, name: str, value: Any,
                 merge_key: object = None):
        text = f"Reset {node_id}.{name}" if value is _UNSET else f"Set {node_id}.{name}"
        super().__init__(text)
        self.doc, self.node_id, self.name, self.value = doc, node_id, name, value
        self.merge_key = merge_key
        old = doc.graph.node(node_id).params.get(name, _UNSET)
        self.old = old if old is _UNSET else copy.deepcopy(old)  # deepcopy would clone _UNSET
        self.order = list(doc.graph.node(node_id).params)

    def _apply(self, value: Any, strict: bool = True) -> None:
        if value is _UNSET:
            self.doc.graph.reset_param(self.node_id, self.name)
        else:  # the old value goes back as it was (a file's int stays an int)
            self.doc.graph.set_param(self.node_id, self.name, copy.deepcopy(value), strict)

    def redo(self) -> None:
        self._apply(self.value)

    def undo(self) -> None:
        g = self.doc.graph
        self._apply(self.old, strict=False)

        def put(key: str, value: Any) -> None:
            if value is None:
                g.reset_param(self.node_id, key)
            else:
                g.set_param(self.node_id, key, value, strict=False)
        _reorder(g.node(self.node_id).params, self.order, put)

    def id(self) -> int:
        return MERGE_PARAM

    def mergeWith(self, other: QUndoCommand) -> bool:
        if not isinstance(other, SetParam) or (other.node_id, other.name) != (
                self.node_id, self.name):
            return False
        if self.merge_key is None or other.merge_key != self.merge_key:
            return False
        self.value = other.value
        return True


class Rename(QUndoCommand):
    def __init__(self, doc: Document, old: str, new: str):
        super().__init__(f"Rename {old} → {new}")
        self.doc, self.old, self.new = doc, old, new
        self.positions: dict | None = None

    def redo(self) -> None:
        self.positions = _positions(self.doc.graph)
        self.doc.graph.rename(self.old, self.new)

    def undo(self) -> None:
        self.doc.graph.rename(self.new, self.old)
        self.doc.restore_positions(self.positions)  # the renamed key back in its place


class MoveNodes(QUndoCommand):
    """Positions before and after a drag (or an auto-layout): one undo step."""

    def __init__(self, doc: Document, before: dict[str, tuple], after: dict[str, tuple],
                 text: str = "Move"):
        super().__init__(text)
        self.doc, self.before, self.after = doc, dict(before), dict(after)
        self.saved: dict | None = None

    def redo(self) -> None:
        self.saved = _positions(self.doc.graph)
        self.doc.set_positions(self.after)

    def undo(self) -> None:
        if self.saved is None:  # not expected: the undo stack redoes a command first
            self.doc.set_positions(self.before)
            return
        self.doc.restore_positions(self.saved)  # the file's own numbers, not the canvas's


class SetUiValue(QUndoCommand):
    """Set one entry of the file's `ui` section (None removes it): saved, undoable."""

    def __init__(self, doc: Document, key: str, value: Any, text: str):
        super().__init__(text)
        self.doc, self.key, self.value = doc, key, copy.deepcopy(value)
        self.old = copy.deepcopy(doc.graph.ui.get(key))  # a copy of its own for undo
        self.order = list(doc.graph.ui)

    def _write(self, value: Any) -> None:
        self.doc.graph.set_ui(self.key, copy.deepcopy(value))

    def redo(self) -> None:
        self._write(self.value)

    def undo(self) -> None:
        self._write(self.old)
        _reorder(self.doc.graph.ui, self.order, self.doc.graph.set_ui)


class SetTraining(QUndoCommand):
    """Change a training setting (epochs, device, ...); None removes it."""

    def __init__(self, doc: Document, key: str, value: Any):
        super().__init__(f"Set training {key}")
        self.doc, self.key, self.value = doc, key, value
        self.old = doc.training().get(key)
        self.order = list(doc.training())

    def redo(self) -> None:
        self.doc.graph.set_training(self.key, self.value)

    def undo(self) -> None:
        self.doc.graph.set_training(self.key, self.old)
        _reorder(self.doc.graph.training, self.order, self.doc.graph.set_training)


class SetNotes(QUndoCommand):
    """Add, change or remove comments and backdrops (UI data: no graph event, no results
    change). `after` maps note ids to their new note, or None to remove it; undo puts each
    note back at its place in the list, so the paint order comes back too."""

    def __init__(self, doc: Document, after: dict[str, dict | None], text: str):
        super().__init__(text)
        self.doc, self.after = doc, copy.deepcopy(after)
        current = canvas_notes.by_id(doc.graph.ui)
        self.before = {i: copy.deepcopy(current.get(i)) for i in after}
        self.index = {i: canvas_notes.index_of(doc.graph.ui, i) for i in after}

    def redo(self) -> None:
        self.doc.put_notes(self.after)

    def undo(self) -> None:
        self.doc.put_notes(self.before, self.index)


class DefineGroups(QUndoCommand):
    """Add group definitions (a paste brings those its cards are instances of); undo
    forgets them again, after the macro's later steps took their instances away."""

    def __init__(self, doc: Document, defns: list[GroupDef]):
        super().__init__(f"Add group(s) {', '.join(d.name for d in defns)}")
        self.doc, self.defns = doc, list(defns)

    def redo(self) -> None:
        for defn in self.defns:  # nested ones first
            self.doc.graph.define_group(defn)

    def undo(self) -> None:
        for defn in reversed(self.defns):
            self.doc.graph.remove_group(defn.name)


class MakeGroup(QUndoCommand):
    """Move nodes into a new group and put one instance in their place (`make_group`);
    undo removes the instance and the definition and puts the nodes, wires and ties back
    where they were, in the graph's order."""

    def __init__(self, doc: Document, node_ids: list[str], name: str, instance: str):
        super().__init__(f"Group {len(node_ids)} node(s) as {name}")
        self.doc, self.node_ids, self.name, self.instance = doc, list(node_ids), name, instance
        self.saved: tuple | None = None
        # the definition made first: a redo brings back this very one
        self.defn: GroupDef | None = None

    def redo(self) -> None:
        g = self.doc.graph
        chosen = set(self.node_ids)
        order = list(g.nodes)
        positions = g.ui.get("positions", {})
        self.saved = ([(order.index(n), copy.deepcopy(g.nodes[n])) for n in sorted(
                          chosen, key=order.index)],
                      [(i, e) for i, e in enumerate(g.edges) if {e.src, e.dst} & chosen],
                      _positions(g), list(g.ties))
        groups.make_group(g, self.node_ids, self.name, self.instance)
        if self.defn is not None:  # an open tab and later commands edit this body object
            g.define_group(self.defn, replace=True)
        self.defn = g.groups[self.name]
        self.doc.forget_positions(self.node_ids)
        self.doc.set_positions({self.instance: tuple(positions.get(self.instance, (0, 0)))})

    def undo(self) -> None:
        g = self.doc.graph
        if self.saved is None:  # not expected: the undo stack redoes a command first
            return
        nodes, edges, positions, ties = self.saved
        g.remove(self.instance)
        self.doc.forget_positions([self.instance])
        g.remove_group(self.name)
        for index, node in nodes:  # ascending: each lands where it was
            g.add_node(copy.deepcopy(node), strict=False)
            _move_last_node_to(g, index)
        for i, e in edges:
            g.connect(e.source, e.target, strict=False)
            _move_last_edge_to(g, i)
        g.set_ties(ties)  # those the grouping moved into the body or renamed
        self.doc.restore_positions(positions)
