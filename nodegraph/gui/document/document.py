"""The open graph: its file, its undo stack, and the edits the editor may make to it.

Every edit the user makes goes through a method here, which checks it first (so a command
never fails half way), asks the edit guard (a running training may need stopping) and
pushes an undoable command. Several changes at once become one macro. The document counts
graph events as its `revision`, so the validator and the preview can tell stale results
from fresh ones.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject, Signal
from PySide6.QtGui import QUndoCommand, QUndoStack

from nodegraph.gui.base import _compat  # noqa: F401  (before any Qt call: a PySide6 bug guard)
from nodegraph.gui.document import annotations as canvas_notes  # `annotations` is __future__'s
from nodegraph.gui.document import commands as cmd
from nodegraph.gui.document import reroute_points
from nodegraph.gui.document.clipboard import Paste
from nodegraph.gui.document.wiring import why_refused
from nodegraph.model import fileformat, groups
from nodegraph.model.errors import GraphError, ParamError
from nodegraph.model.graph import NODE_ID, Edge, Graph, Node


class EditRefused(Exception):
    """An edit the document will not make; the message says why, for the user."""


class Document(QObject):
    """One graph being edited."""

    graph_replaced = Signal()  # a different graph is open now (new, open, restore)
    changed = Signal(object)  # a GraphChanged event, after the graph applied it
    positions_changed = Signal(dict)  # node id -> (x, y)
    notes_changed = Signal(list)  # ids of comments / backdrops added, changed or removed
    path_changed = Signal()

    def __init__(self, graph: Graph | None = None, path: str | None = None, parent=None):
        super().__init__(parent)
        self.undo_stack = QUndoStack(self)
        # `is None`, not `or`: an empty graph is falsy, and a second Graph() would load the
        # default block library (torch) where the window gave a registry of its own
        graph = graph if graph is not None else Graph()
        self.graph: Graph = graph
        self.path: str | None = None
        self.revision = 0
        self.edit_guard: Callable[[], bool] = lambda: True  # False cancels the edit
        # a live param's new value for the running run: True when a run took it
        self.live_edit: Callable[[str, str, Any], bool] | None = None
        self._unsubscribe: Callable[[], None] | None = None
        self.set_graph(graph, path)

    # -- the graph and its file -------------------------------------------------------------

    def set_graph(self, graph: Graph, path: str | None = None, *,
                  keep_history: bool = False) -> None:
        """Open `graph` in place of the current one; the undo history starts afresh (unless
        `keep_history`: for putting back a graph whose replacement failed)."""
        if self._unsubscribe:
            self._unsubscribe()
        self.graph = graph
        if not isinstance(graph.ui.get("positions"), dict):  # a file's layout hints, damaged
            graph.set_ui("positions", {})
        self._unsubscribe = graph.events.subscribe(self._on_graph_event)
        if not keep_history:
            self.undo_stack.clear()
        self.revision += 1
        self.graph_replaced.emit()
        self.set_path(path)

    def set_path(self, path: str | None) -> None:
        self.path = str(Path(path).resolve()) if path else None
        if self.path:  # relative data paths start beside the file (a restored autosave too)
            self.graph.folder = Path(self.path).parent
        self.path_changed.emit()

    @property
    def title(self) -> str:
        return Path(self.path).name if self.path else "untitled"

    @property
    def dirty(self) -> bool:
        return not self.undo_stack.isClean()

    def mark_saved(self, path: str) -> None:
        self.undo_stack.setClean()
        self.set_path(path)

    def _on_graph_event(self, event) -> None:
        if event.kind == "ui_changed":  # layout data: its own signals tell the canvas
            return
        self.revision += 1
        self.changed.emit(event)

    def training(self) -> Mapping[str, Any]:
        """The training settings the inspector shows and edits (a group body's document
        shows the graph's)."""
        return self.graph.training

    # -- positions (UI data: the canvas hears of them here, not through `changed`) ---------

    def positions(self) -> Mapping[str, list]:
        positions = self.graph.ui.get("positions")
        return positions if isinstance(positions, dict) else {}

    def set_positions(self, positions: dict[str, tuple]) -> None:
        clean = {n: (round(float(x), 1), round(float(y), 1)) for n, (x, y) in positions.items()}
        self.graph.set_positions(clean)
        self.positions_changed.emit(clean)

    def forget_positions(self, nodes: Iterable[str]) -> None:
        self.graph.forget_positions(nodes)

    def restore_positions(self, saved: dict | None) -> None:
        """Put back a positions table an undo step kept, exactly (the file's numbers and key
        order); tells the canvas of the cards that moved."""
        before = self.positions()
        table = copy.deepcopy(saved) if saved is not None else {}
        self.graph.set_ui("positions", table)
        moved = {n: (float(xy[0]), float(xy[1])) for n, xy in table.items()
                 if before.get(n) != xy and isinstance(xy, list | tuple) and len(xy) == 2
                 and all(isinstance(v, int | float) for v in xy)}
        if moved:
            self.positions_changed.emit(moved)

    # -- comments and backdrops (UI data, no graph events) ---------------------------------

    def notes(self) -> list[dict]:
        return canvas_notes.notes(self.graph.ui)

    def put_notes(self, changes: dict[str, dict | None],
                  index: dict[str, int | None] | None = None) -> None:
        """Set notes by id (None removes one); tells the canvas. Commands call this."""
        notes = self.graph.ui.get(canvas_notes.KEY)
        # a new list, never the stored one edited in place: an undo step may hold that one
        scratch = {canvas_notes.KEY: list(notes) if isinstance(notes, list) else []}
        for note_id, note in changes.items():
            canvas_notes.put(scratch, note_id, note, (index or {}).get(note_id))
        self.graph.set_ui(canvas_notes.KEY, scratch[canvas_notes.KEY])
        self.notes_changed.emit(list(changes))

    def add_note(self, kind: str, rect: tuple, text: str) -> str:
        """Add a comment or a backdrop as one undo step; returns its id."""
        note = canvas_notes.make(kind, rect, text, [n["id"] for n in self.notes()])
        self.undo_stack.push(cmd.SetNotes(self, {note["id"]: note}, f"Add {kind}"))
        return note["id"]

    def edit_note(self, note_id: str, text: str | None = None, **fields) -> bool:
        """Change a note's text, rect or colour as one undo step."""
        note = canvas_notes.by_id(self.graph.ui).get(note_id)
        if note is None:
            return False
        new = {**note, **fields, **({"text": text} if text is not None else {})}
        if new == note:
            return False
        self.undo_stack.push(cmd.SetNotes(self, {note_id: new}, f"Edit {note['kind']}"))
        return True

    def move_with_notes(self, before: dict[str, tuple], after: dict[str, tuple],
                        notes_after: dict[str, dict]) -> bool:
        """Nodes and notes moved or resized together (a backdrop dragged with its nodes):
        one undo step."""
        moved = {n for n in after if tuple(before.get(n, ())) != tuple(after[n])}
        current = canvas_notes.by_id(self.graph.ui)
        changed: dict[str, dict | None] = {i: n for i, n in notes_after.items()
                                           if current.get(i) != n}
        commands: list[QUndoCommand] = []
        if moved:
            commands.append(cmd.MoveNodes(self, {n: before[n] for n in moved if n in before},
                                          {n: after[n] for n in moved}))
        if changed:
            commands.append(cmd.SetNotes(self, changed, "Move notes"))
        if not commands:
            return False
        self.undo_stack.beginMacro("Move")  # no edit guard: nothing a run uses changes
        for c in commands:
            self.undo_stack.push(c)
        self.undo_stack.endMacro()
        return True

    # -- edits ---------------------------------------------------------------------------

    def push(self, command: QUndoCommand) -> bool:
        """Run `command` as one undo step, if the edit guard allows; True when it ran."""
        if not self.edit_guard():
            return False
        self.undo_stack.push(command)
        return True

    def push_macro(self, text: str, commands: Sequence[QUndoCommand]) -> bool:
        if not commands:
            return False
        if len(commands) == 1:
            return self.push(commands[0])
        if not self.edit_guard():
            return False
        self.undo_stack.beginMacro(text)
        for c in commands:
            self.undo_stack.push(c)
        self.undo_stack.endMacro()
        return True

    def add_block(self, block_type: str, pos: tuple[float, float],
                  connect_from: tuple[str, str] | None = None,
                  connect_to: tuple[str, str] | None = None,
                  port: str | None = None) -> str | None:
        """Add a block; optionally wire `connect_from` into its input `port` (or its output
        `port` into `connect_to`) in the same undo step. Returns the new id."""
        spec = self.graph.registry.get(block_type)
        node = Node(self.graph.new_id(spec.id), spec.id, {})
        commands: list[QUndoCommand] = [cmd.AddNode(self, node, pos)]
        if connect_from is not None and port is not None:
            commands.append(cmd.Connect(self, connect_from, (node.id, port)))
        if connect_to is not None and port is not None:
            commands.append(cmd.Connect(self, (node.id, port), connect_to))
        return node.id if self.push_macro(f"Add {node.id}", commands) else None

    # the document's edit API, named as the user says it; QObject.connect / disconnect are
    # never called on a Document (its signals are connected through the signal objects)
    def connect(self, source: tuple[str, str], target: tuple[str, str]) -> bool:  # type: ignore[override]
        reason = why_refused(self.graph, source, target)
        if reason:
            raise EditRefused(reason)
        return self.push(cmd.Connect(self, source, target))

    def disconnect(self, edge: Edge) -> bool:  # type: ignore[override]
        return self.push(cmd.Disconnect(self, edge))

    def delete(self, nodes: Iterable[str], edges: Iterable[Edge] = (),
               notes: Iterable[str] = ()) -> bool:
        """Delete nodes (with their wires), further wires and notes, as one undo step."""
        nodes = [n for n in nodes if n in self.graph.nodes]
        gone = set(nodes)
        commands: list[QUndoCommand] = [cmd.Disconnect(self, e) for e in dict.fromkeys(edges)
                                        if e in self.graph.edges and not {e.src, e.dst} & gone]
        commands += [cmd.RemoveNode(self, n) for n in nodes]
        known = canvas_notes.by_id(self.graph.ui)
        notes = [n for n in notes if n in known]
        if notes:
            commands.append(cmd.SetNotes(self, dict.fromkeys(notes), "Delete notes"))
        count = len(commands) - (1 if notes else 0) + len(notes)
        return self.push_macro(f"Delete {count} item(s)", commands)

    def set_param(self, node_id: str, name: str, value: Any, merge_key: object = None) -> bool:
        """Set a checked param value; raises EditRefused with the reason when it is invalid.
        Edits with the same non-None `merge_key` (one spin interaction) merge into one step."""
        node = self.graph.node(node_id)
        spec = self.graph.registry.get(node.type)
        param = spec.param(name)
        if param is None:
            raise EditRefused(f"{spec.id} has no param '{name}'")
        try:
            value = param.check(value)
        except ParamError as e:
            raise EditRefused(str(e)) from None
        if node.params.get(name, cmd.SetParam.RESET) == value:
            return False
        if param.live and self.live_edit is not None and self.live_edit(node_id, name, value):
            # the running run takes it from its next step: an edit, not a reason to stop
            self.undo_stack.push(cmd.SetParam(self, node_id, name, value, merge_key))
            return True
        return self.push(cmd.SetParam(self, node_id, name, value, merge_key))

    def reset_param(self, node_id: str, name: str) -> bool:
        if name not in self.graph.node(node_id).params:
            return False
        return self.push(cmd.SetParam(self, node_id, name, cmd.SetParam.RESET))

    def rename(self, old: str, new: str) -> bool:
        new = new.strip()
        if new == old:
            return False
        if not NODE_ID.match(new):
            raise EditRefused(f"'{new}' is not a valid id: start with a letter or _, then use "
                              "letters, digits and _")
        if new in self.graph.nodes:
            raise EditRefused(f"a node with id '{new}' already exists")
        return self.push(cmd.Rename(self, old, new))

    def move(self, before: dict[str, tuple], after: dict[str, tuple],
             text: str = "Move") -> bool:
        moved = {n for n in after if tuple(before.get(n, ())) != tuple(after[n])}
        if not moved:
            return False
        # moving changes no results, so it never needs a running training stopped
        self.undo_stack.push(cmd.MoveNodes(self, {n: before[n] for n in moved if n in before},
                                           {n: after[n] for n in moved}, text))
        return True

    def set_training(self, key: str, value: Any) -> bool:
        if self.training().get(key) == value:
            return False
        return self.push(cmd.SetTraining(self, key, value))

    def group(self, node_ids: Iterable[str], name: str) -> str | None:
        """Put nodes into a new group `name` with one instance in their place (one undo
        step); returns the instance's id. Raises EditRefused saying why it cannot."""
        nodes = [n for n in self.graph.nodes if n in set(node_ids)]
        name = name.strip()
        if not nodes:
            raise EditRefused("select the nodes to group first")
        if not NODE_ID.match(name):
            raise EditRefused(f"'{name}' is not a valid group name: start with a letter or _, "
                              "then use letters, digits and _")
        if name in self.graph.groups or f"group.{name}" in self.graph.registry:
            raise EditRefused(f"a group named '{name}' already exists")
        reason = self.why_not_group(nodes)
        if reason:
            raise EditRefused(reason)
        instance = self.graph.new_id(name)
        try:  # on a copy first: the command must never fail half way (or raise from redo)
            groups.make_group(self.graph.copy(), nodes, name, instance)
        except GraphError as e:
            raise EditRefused(str(e)) from None
        return instance if self.push(cmd.MakeGroup(self, nodes, name, instance)) else None

    def why_not_group(self, node_ids: Iterable[str]) -> str | None:
        """Why these nodes cannot become one group (asked before the group's name), or
        None: a path that leaves them and comes back would make the instance feed itself."""
        chosen = [n for n in self.graph.nodes if n in set(node_ids)]
        loop = groups.group_loop(self.graph, chosen)
        if not loop:
            return None
        outside = [n for n in loop if n not in set(chosen)]
        return (f"the group would make a loop: {' → '.join(loop)} leaves the selection and "
                f"comes back into it; select {', '.join(outside)} too, or fewer nodes")

    def paste(self, paste: Paste, text: str = "Paste") -> list[str]:
        """Add pasted nodes and their wires as one step; returns the new ids."""
        commands: list[QUndoCommand] = [cmd.AddNode(self, n, paste.positions.get(n.id))
                                        for n in paste.nodes]
        if paste.groups:  # first: each pasted instance finds its definition
            read = fileformat.read_groups({**paste.kept_groups, **paste.groups},
                                          self.graph.base_registry)
            commands.insert(0, cmd.DefineGroups(self, [read[n] for n in paste.groups
                                                       if n in read]))
        if paste.reroutes:  # before the wires: each wire finds its points when it is drawn
            table = self.graph.ui.get(reroute_points.KEY)
            table = {**(table if isinstance(table, dict) else {}), **paste.reroutes}
            commands.append(cmd.SetUiValue(self, reroute_points.KEY, table, "Paste reroute points"))
        # pasted wires were valid where they were copied; like the loader, keep them as they are
        commands += [cmd.Connect(self, s, t, strict=False) for s, t in paste.edges]
        if paste.notes:
            commands.append(cmd.SetNotes(self, {n["id"]: n for n in paste.notes}, "Paste notes"))
        if not self.push_macro(f"{text} {len(paste.nodes) + len(paste.notes)} item(s)",
                               commands):
            return []
        return [n.id for n in paste.nodes]
