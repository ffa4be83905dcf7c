"""The graph model: nodes with stable ids, typed port-to-port edges, and change events.

A `Graph` is plain data — which blocks, with which params, wired how, which parameters they
share (ties), which groups they may use — plus training settings and the editor's UI data,
kept aside and round-tripped untouched. It knows nothing of torch or Qt. Every edit goes
through a method here (add, remove, connect, disconnect, set_param, rename, add_tie,
define_group, set_training, set_ui, ...) and emits a `GraphChanged` event, so the editor's
canvas, its undo stack and a script all see the same model; the state itself is shown
read-only (`nodegraph.model.readonly`), so a write around the methods fails. With a
registry, edits are checked as they are made (unknown block, unknown port, type mismatch,
cycle); a file loader can use `strict=False` to keep what it finds and let the validator
report it.
"""

from __future__ import annotations

import copy
import heapq
import operator
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from nodegraph.model import gcpause, references
from nodegraph.model.errors import GraphError, NodegraphError, ParamError, Problem
from nodegraph.model.events import Emitter
from nodegraph.model.groupdefs import GROUP_NAME, PREFIX, SEP, GroupDef, GroupRegistry
from nodegraph.model.ordered import Ordered
from nodegraph.model.readonly import ReadOnlyDict
from nodegraph.model.spec import BlockSpec, Registry, default_registry
from nodegraph.model.types import why_incompatible
from nodegraph.model.wires import Wires

if TYPE_CHECKING:
    import networkx as nx

NODE_ID = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
PortRef = tuple[str, str]
_MISSING = object()


class Node:
    """One block instance: its id, block type and the params set on it (defaults omitted).

    `params` is read-only (a `ReadOnlyDict` copied from what was given): a param changes
    through `Graph.set_param` / `reset_param`, which check it and tell the listeners.
    """

    __slots__ = ("id", "type", "_params", "extra")

    def __init__(self, id: str, type: str, params: Mapping[str, Any] | None = None,
                 extra: dict[str, Any] | None = None):
        self.id = id
        self.type = type
        self._params = ReadOnlyDict(params or ())
        self.extra: dict[str, Any] = {} if extra is None else extra  # unknown file keys

    # a C-level getter: validation and compile read params of every node, often
    params = property(operator.attrgetter("_params"),
                      doc="The params set on the node, by name (read-only).")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Node):
            return NotImplemented
        return (self.id, self.type, self._params, self.extra) == (
            other.id, other.type, other._params, other.extra)

    __hash__ = None  # type: ignore[assignment]  # mutable, as the dataclass it was

    def __repr__(self) -> str:
        return (f"Node(id={self.id!r}, type={self.type!r}, params={dict(self._params)!r}, "
                f"extra={self.extra!r})")


class Edge:
    """A wire from an output port to an input port; immutable and hashable.

    Written by hand rather than as a frozen dataclass: a build of thousands of wires
    makes each one and hashes it several times (the wire set, the indexes by node); slots
    set through their own setters and a hash kept from construction cost less per wire."""

    __slots__ = ("src", "src_port", "dst", "dst_port", "_hash")
    src: str
    src_port: str
    dst: str
    dst_port: str
    _hash: int

    def __init__(self, src: str, src_port: str, dst: str, dst_port: str) -> None:
        # the slots' own setters, past the __setattr__ that refuses (object.__setattr__
        # looks each name up: it made a wire slower to make than the dataclass was)
        _set_src(self, src)
        _set_src_port(self, src_port)
        _set_dst(self, dst)
        _set_dst_port(self, dst_port)
        _set_hash(self, hash((src, src_port, dst, dst_port)))

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"cannot assign to field '{name}': a wire is immutable")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"cannot delete field '{name}': a wire is immutable")

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not Edge:
            return NotImplemented
        o: Edge = other  # type: ignore[assignment]
        return self._hash == o._hash and self.src == o.src and \
            self.src_port == o.src_port and self.dst == o.dst and self.dst_port == o.dst_port

    def __reduce__(self) -> tuple[type[Edge], tuple[str, str, str, str]]:
        return Edge, (self.src, self.src_port, self.dst, self.dst_port)  # copy and pickle

    def __repr__(self) -> str:
        return (f"Edge(src={self.src!r}, src_port={self.src_port!r}, dst={self.dst!r}, "
                f"dst_port={self.dst_port!r})")

    @property
    def source(self) -> PortRef:
        return (self.src, self.src_port)

    @property
    def target(self) -> PortRef:
        return (self.dst, self.dst_port)

    def __str__(self) -> str:
        return f"{self.src}.{self.src_port} -> {self.dst}.{self.dst_port}"


_set_src, _set_src_port, _set_dst, _set_dst_port, _set_hash = (
    vars(Edge)[name].__set__ for name in Edge.__slots__)


@dataclass(frozen=True)
class Tie:
    """One parameter used by two blocks: `dst`'s `dst_param` is `src`'s `src_param`
    (an LM head reusing the embedding matrix)."""

    src: str
    src_param: str
    dst: str
    dst_param: str


@dataclass(frozen=True)
class GraphChanged:
    """What changed: kind is node_added, node_removed, node_renamed, edge_added,
    edge_removed, param_changed, training_changed, tie_added, tie_removed, group_defined,
    group_removed or ui_changed.

    The ties of a node that is removed or renamed go with it inside that node's event.
    ui_changed is UI data only (positions, comments, ...): nothing that trains changes."""

    kind: str
    node: str | None = None
    edge: Edge | None = None
    name: str | None = None  # the param, training or ui key, the group, or the old id
    value: Any = None  # the new value (a param, a training setting, a Tie)


class Graph:
    """Blocks and wires, with training settings and UI data kept aside.

    The graph owns its storage: `nodes`, `groups`, `training`, `ui` and each node's `params`
    are read-only mappings, `edges` and `ties` tuples, and every change goes through a method
    here, which checks it, emits its `GraphChanged` event and keeps the wire indexes
    (`nodegraph.model.wires`) current — so traversals cost what they visit, never a scan of
    every wire.
    """

    def __init__(self, name: str = "untitled", registry: Registry | None = None):
        self.name = name
        self.base_registry = registry if registry is not None else default_registry()
        # the block library is loaded: a process that opted in (the CLI, the editor) has
        # collections skip it from now; any other process's collector is left alone
        gcpause.freeze_imports()
        # subgraphs by name, used as `group.NAME`: one mapping shared with every group body,
        # so nested groups resolve against the same set
        self._groups: ReadOnlyDict = ReadOnlyDict()
        self._ties: tuple[Tie, ...] = ()  # parameters shared between two different blocks
        # nodes by id (every look-up), their order as a position key per node in an
        # `Ordered` sequence (renames and moves touch one block), and the ordered dict that
        # `nodes` shows, brought up to date on the first read after a rename or a move
        # (appends and removals keep it current as they go)
        self._store: dict[str, Node] = {}
        self._node_key: dict[str, float] = {}
        self._order: Ordered[str] = Ordered()
        self._nodes: dict[str, Node] = {}
        self._stale = False
        # the nodes whose params may name other nodes (a node or nodes param, or a type not
        # known when added), in graph order: what a rename rewrites, without a scan
        self._referrers: dict[str, None] = {}
        self._wires = Wires()  # the edges, in order, indexed by node
        self._training: ReadOnlyDict = ReadOnlyDict()
        self._ui: ReadOnlyDict = ReadOnlyDict()
        self.extra: dict[str, Any] = {}  # unknown top-level file keys, round-tripped
        self.load_problems: list[Problem] = []  # what the file loader could not place
        self.folder: Path | None = None  # the file's folder: relative data paths start there
        # modules outside nodegraph.model.allowlist this graph may import: the user's choice
        # (--trust, the editor's prompt), never read from the file
        self.trusted: frozenset[str] = frozenset()
        # folders beyond `folder` its data and weights may come from (or "s3://bucket/prefix"
        # URLs, nodegraph.kinds.remote), or "anywhere" (nodegraph.kinds.confine): the user's
        # choice too, never the file's
        self.data_roots: tuple[Path | str, ...] | str = ()
        # the training section as the file gave it (None: not read from a file): a setting
        # that still holds the file's value is the file's, not the user's
        # (nodegraph.kinds.write_confine fences where such a value may write)
        self.file_training: Mapping[str, Any] | None = None
        self.events = Emitter()

    @property
    def registry(self) -> Registry | GroupRegistry:
        """The block types this graph may use: the registry plus its own groups."""
        if not self._groups:
            return self.base_registry
        return GroupRegistry(self.base_registry, self._groups)

    # -- queries -------------------------------------------------------------------------

    @property
    def groups(self) -> Mapping[str, GroupDef]:
        """The group definitions by name (read-only: `define_group`, `remove_group`)."""
        return self._groups

    @property
    def ties(self) -> tuple[Tie, ...]:
        """The parameters shared between blocks, in order (`add_tie`, `remove_tie`)."""
        return self._ties

    @property
    def training(self) -> Mapping[str, Any]:
        """The training settings (read-only: `set_training`, `update_training`)."""
        return self._training

    @property
    def ui(self) -> Mapping[str, Any]:
        """The editor's data, round-tripped (read-only: `set_ui`, `set_positions`, ...)."""
        return self._ui

    @property
    def nodes(self) -> MappingProxyType[str, Node]:
        """The nodes by id, in the graph's order (read-only: edit through the methods)."""
        return MappingProxyType(self._ordered())

    @property
    def edges(self) -> tuple[Edge, ...]:
        """The wires in the graph's order, which a saved file keeps (read-only)."""
        return self._wires.all()

    def __contains__(self, node_id: str) -> bool:
        return node_id in self._store

    def __iter__(self) -> Iterator[Node]:
        return iter(self._ordered().values())

    def __len__(self) -> int:
        return len(self._store)

    def node(self, node_id: str) -> Node:
        try:
            return self._store[node_id]
        except KeyError:
            raise GraphError(f"no node '{node_id}' in the graph") from None

    def edges_into(self, node_id: str) -> list[Edge]:
        """The wires into `node_id`, in the graph's order."""
        return self._wires.into(node_id)

    def edges_from(self, node_id: str) -> list[Edge]:
        """The wires out of `node_id`, in the graph's order."""
        return self._wires.out_of(node_id)

    def source_of(self, node_id: str, port: str) -> Edge | None:
        """The wire feeding input `port` of `node_id`, if any."""
        return self._wires.feeding(node_id, port)

    def upstream(self, node_ids: Iterable[str]) -> set[str]:
        """The given nodes and every node that feeds them, directly or not (each wire read
        once)."""
        return self._wires.upstream(node_ids)

    def to_networkx(self) -> nx.MultiDiGraph:
        """A networkx view: one node per block (attribute `type`), one edge per wire between
        two of them (a wire naming a missing node, left by a lenient edit, is the
        validator's to report, not a node to invent)."""
        import networkx  # 0.25 s: only for callers who ask for networkx

        g = networkx.MultiDiGraph()
        for n in self._ordered().values():
            g.add_node(n.id, type=n.type)
        for e in self.edges:
            if e.src not in self._store or e.dst not in self._store:
                continue
            g.add_edge(e.src, e.dst, src_port=e.src_port, dst_port=e.dst_port)
        return g

    def topological_order(self) -> list[str]:
        """Node ids, every node after its inputs; ties broken by insertion order.

        Kahn's algorithm with a heap of insertion ranks: the order networkx's
        lexicographical sort gives, in linear time without building a networkx graph (which
        cost seconds on a 10,000-node expansion). Raises GraphError naming the nodes of a
        cycle when there is one.
        """
        ids = list(self._ordered())
        rank = {nid: i for i, nid in enumerate(ids)}
        succ = self._successors()
        waiting = dict.fromkeys(ids, 0)
        for targets in succ.values():
            for m in targets:
                waiting[m] += 1
        ready = [rank[n] for n, count in waiting.items() if count == 0]
        heapq.heapify(ready)
        order = []
        while ready:
            n = ids[heapq.heappop(ready)]
            order.append(n)
            for m in succ[n]:
                waiting[m] -= 1
                if waiting[m] == 0:
                    heapq.heappush(ready, rank[m])
        if len(order) < len(ids):
            cycle = self.find_cycle() or []
            raise GraphError("the graph has a cycle: " + " -> ".join([*cycle, cycle[0]])
                             if cycle else "the graph has a cycle")
        return order

    def find_cycle(self) -> list[str] | None:
        """The node ids of one cycle, in order, or None (an iterative depth-first search:
        no recursion limit, linear time)."""
        succ = self._successors()
        state: dict[str, int] = {}  # 1: on the current path, 2: done
        for root in self._ordered():
            if root in state:
                continue
            path, todo = [root], [iter(succ[root])]
            state[root] = 1
            while todo:
                nxt = next(todo[-1], None)
                if nxt is None:
                    state[path.pop()] = 2
                    todo.pop()
                elif state.get(nxt) == 1:
                    return path[path.index(nxt):]
                elif nxt not in state:
                    state[nxt] = 1
                    path.append(nxt)
                    todo.append(iter(succ[nxt]))
        return None

    def _successors(self) -> dict[str, list[str]]:
        """The nodes each node's wires lead to (wires naming missing nodes left out)."""
        return self._wires.successors(self._ordered(), self._store)

    # -- edits ---------------------------------------------------------------------------

    def add(self, type: str, id: str | None = None, **params: Any) -> str:
        """Add a block of `type`; returns its id (derived from the type when not given)."""
        return self.add_node(Node(id or self.new_id(type), type, params))

    def add_node(self, node: Node, strict: bool = True) -> str:
        """Add `node` (last in the graph's order); `strict` checks its type and params."""
        if not NODE_ID.match(node.id):
            raise GraphError(f"node id '{node.id}' must start with a letter or _ and hold only "
                             "letters, digits and _")
        if node.id in self._store:
            raise GraphError(f"a node with id '{node.id}' already exists")
        spec = None
        if strict:
            spec = self._spec(node.type)
            node.type = spec.id
            for name, value in node.params.items():
                dict.__setitem__(node.params, name,
                                 self._checked_param(node.id, spec, name, value))
        self._append(node)
        self._note_referrer(node, spec)
        if self.events.wants(GraphChanged):  # as connect: no event made for nobody
            self.events.emit(GraphChanged("node_added", node=node.id))
        return node.id

    def remove(self, node_id: str) -> None:
        """Remove a node and every wire and tie touching it."""
        self.node(node_id)
        for e in dict.fromkeys([*self._wires.into(node_id), *self._wires.out_of(node_id)]):
            self.disconnect(e)  # wires in, then wires out (a loop to itself once)
        if self._ties:
            self._ties = tuple(t for t in self._ties if node_id not in (t.src, t.dst))
        del self._store[node_id]
        self._order.remove(self._node_key.pop(node_id))
        if not self._stale:
            del self._nodes[node_id]
        self._referrers.pop(node_id, None)
        self.events.emit(GraphChanged("node_removed", node=node_id))

    def move_node(self, node_id: str, index: int) -> None:
        """Put a node at position `index` of the graph's order (the order breaks ties in
        the topological order, so undo puts a node back where it was). No event: nothing
        a listener shows changes."""
        self.node(node_id)
        self._order.remove(self._node_key[node_id])
        n = len(self._order)
        index = min(max(index + n + 1 if index < 0 else index, 0), n)  # as list.insert
        key = self._order.key_for(index)
        if key is None:  # no room left between the two neighbours' keys: renumber
            ids = self._order.items()
            self._order = Ordered((float(i), k) for i, k in enumerate(ids))
            self._node_key.update((k, float(i)) for i, k in enumerate(ids))
            key = self._order.key_for(index)
            assert key is not None  # whole numbers apart now
        self._node_key[node_id] = key
        self._order.insert(index, key, node_id)
        self._stale = True

    def move_edge(self, edge: Edge, index: int) -> None:
        """Put a wire at position `index` of the graph's order (as a file saves it)."""
        try:
            self._wires.move(edge, index)
        except KeyError:
            raise GraphError(f"no wire {edge}") from None

    def connect(self, source: PortRef, target: PortRef, strict: bool = True,
                replace: bool = False) -> Edge:
        """Wire output `source` = (node, port) to input `target` = (node, port).

        An input takes one wire: with `replace` the old wire goes, otherwise it is an error.
        """
        edge = Edge(source[0], source[1], target[0], target[1])
        if edge in self._wires:
            raise GraphError(f"{edge} already exists")
        if strict:
            self._check_edge(edge)
            old = self.source_of(edge.dst, edge.dst_port)
            if old is not None:
                if not replace:
                    raise GraphError(f"input {edge.dst}.{edge.dst_port} is already fed by "
                                     f"{old.src}.{old.src_port}; disconnect it first")
                self.disconnect(old)
            if self._reaches(edge.dst, edge.src):
                raise GraphError(f"wiring {edge} would make a cycle")
        self._wires.add(edge)
        if self.events.wants(GraphChanged):  # a build of thousands of wires nobody watches
            self.events.emit(GraphChanged("edge_added", edge=edge))  # makes no events
        return edge

    def disconnect(self, edge: Edge) -> None:
        try:
            self._wires.remove(edge)
        except KeyError:
            raise GraphError(f"no wire {edge}") from None
        self.events.emit(GraphChanged("edge_removed", edge=edge))

    def set_param(self, node_id: str, name: str, value: Any, strict: bool = True) -> None:
        """Set a param, checked against the block's declaration; `strict=False` keeps the
        value as given (as a file's: the validator reports it)."""
        node = self.node(node_id)
        if strict:
            value = self._checked_param(node_id, self._spec(node.type), name, value)
        dict.__setitem__(node.params, name, value)
        self.events.emit(GraphChanged("param_changed", node_id, name=name, value=value))

    def reset_param(self, node_id: str, name: str) -> None:
        """Forget a param's value so the block's default applies."""
        if dict.pop(self.node(node_id).params, name, _MISSING) is not _MISSING:
            self.events.emit(GraphChanged("param_changed", node_id, name=name))

    def rename(self, old: str, new: str) -> None:
        """Give a node a new id, rewiring its edges; ids elsewhere (params that name nodes,
        ties, training stages) follow."""
        if old == new:
            return
        if not NODE_ID.match(new):
            raise GraphError(f"node id '{new}' must start with a letter or _ and hold only "
                             "letters, digits and _")
        if new in self._store:
            raise GraphError(f"a node with id '{new}' already exists")
        node = self.node(old)
        node.id = new
        self._store[new] = self._store.pop(old)
        key = self._node_key[new] = self._node_key.pop(old)
        self._order.replace(key, new)  # in its place in the order
        self._stale = True
        if old in self._referrers:
            self._referrers[new] = self._referrers.pop(old)
        self._wires.rename(old, new, Edge)
        self._rename_references(old, new)
        self._ties = tuple(Tie(references.renamed_id(t.src, old, new), t.src_param,
                               references.renamed_id(t.dst, old, new), t.dst_param)
                           for t in self._ties)
        positions = self._ui.get("positions")
        if isinstance(positions, dict) and old in positions:
            positions[new] = positions.pop(old)
        self.events.emit(GraphChanged("node_renamed", node=new, name=old))

    def _rename_references(self, old: str, new: str) -> None:
        """Params declared as naming nodes (kinds node and nodes), the training stages and
        the monitor follow a renamed node."""
        for n in (self._store[k] for k in self._referrers):
            if n.type in self.registry:
                dict.update(n.params, references.rename_params(self.registry.get(n.type),
                                                               n.params, old, new))
        dict.update(self._training, references.rename_training(self._training, old, new))

    def _append(self, node: Node) -> None:
        """`node` stored and placed last in the order."""
        self._store[node.id] = node
        key = self._node_key[node.id] = self._order.next_key()
        self._order.append(key, node.id)
        if not self._stale:
            self._nodes[node.id] = node

    def _ordered(self) -> dict[str, Node]:
        """The nodes by id in the graph's order (rebuilt in place, once, after a rename or
        a move, so a `nodes` view handed out earlier stays live)."""
        if self._stale:
            self._nodes.clear()
            store = self._store
            self._nodes.update((k, store[k]) for k in self._order.items())
            self._stale = False
        return self._nodes

    def _note_referrer(self, node: Node, spec: BlockSpec | None = None) -> None:
        if spec is None:
            try:
                spec = self.registry.get(node.type)
            except NodegraphError:  # a type not known yet (a group defined later): check it
                self._referrers[node.id] = None
                return
        if spec.names_nodes:
            self._referrers[node.id] = None

    # -- training settings, UI data, ties and groups --------------------------------------

    def set_training(self, key: str | None = None, value: Any = _MISSING,
                     **settings: Any) -> None:
        """Set training settings: `set_training(epochs=50, patience=5)`, or one pair
        `set_training("epochs", 50)`; None removes one. Values are kept as given:
        `nodegraph.check` reports a bad one, as it does a file's (one event each)."""
        if key is not None:
            if value is _MISSING:
                raise TypeError(f"set_training({key!r}) needs its value: "
                                f"set_training({key!r}, value) or set_training({key}=value)")
            if key in settings:
                raise TypeError(f"set_training: '{key}' is given twice")
            settings = {key: value, **settings}
        elif value is not _MISSING:
            raise TypeError("set_training(value=...) needs its key: set_training(name=value)")
        for name, v in settings.items():
            _put(self._training, _key(name, "training setting"), v)
            self.events.emit(GraphChanged("training_changed", name=name, value=v))

    def update_training(self, settings: Mapping[str, Any] = MappingProxyType({}),
                        **more: Any) -> None:
        """Set several training settings (as `set_training`, one event each)."""
        for key, value in {**settings, **more}.items():
            self.set_training(key, value)

    def replace_training(self, settings: Mapping[str, Any]) -> None:
        """Make the training settings exactly `settings` (a file's, kept verbatim for the
        validator to judge); one training_changed event, with no name."""
        self._training = ReadOnlyDict({_key(k, "training setting"): v
                                       for k, v in settings.items()})
        self.events.emit(GraphChanged("training_changed"))

    def set_ui(self, key: str, value: Any) -> None:
        """Set one entry of the editor's data (`layout_direction`, `comments`, ...); None
        removes it. Replace a value rather than edit it in place: the event tells who
        shows it, and an undo step may hold the old one."""
        _put(self._ui, _key(key, "ui key"), value)
        self.events.emit(GraphChanged("ui_changed", name=key, value=value))

    def update_ui(self, entries: Mapping[str, Any]) -> None:
        """Set several UI entries (as `set_ui`, one event each)."""
        for key, value in entries.items():
            self.set_ui(key, value)

    def replace_ui(self, ui: Mapping[str, Any]) -> None:
        """Make the editor's data exactly `ui` (a file's, kept verbatim); one event."""
        self._ui = ReadOnlyDict({_key(k, "ui key"): v for k, v in ui.items()})
        self.events.emit(GraphChanged("ui_changed"))

    def set_positions(self, positions: Mapping[str, Any]) -> None:
        """Place nodes on the canvas: node id -> (x, y), stored as [x, y]; one event."""
        clean = {}
        for node_id, xy in positions.items():
            try:
                x, y = (float(v) for v in xy)
            except (TypeError, ValueError):
                raise GraphError(f"position of '{node_id}' must be two numbers, not "
                                 f"{xy!r:.60}") from None
            clean[node_id] = [x, y]
        store = self._ui.get("positions")
        if not isinstance(store, dict):  # none yet, or a file's damaged layout hints
            store = {}
            dict.__setitem__(self._ui, "positions", store)
        store.update(clean)
        self.events.emit(GraphChanged("ui_changed", name="positions"))

    def forget_positions(self, node_ids: Iterable[str]) -> None:
        """Drop the canvas positions of nodes (gone, or moved into a group); one event."""
        store = self._ui.get("positions")
        if isinstance(store, dict):
            for node_id in node_ids:
                store.pop(node_id, None)
        self.events.emit(GraphChanged("ui_changed", name="positions"))

    def add_tie(self, tie: Tie, strict: bool = True) -> None:
        """Share a parameter: `tie.dst`'s `dst_param` becomes `tie.src`'s `src_param`.
        `strict` checks both nodes exist (a node inside a group instance as
        `instance__inner`) and the tie is new; a file loader passes False and leaves the
        rest (parameters the blocks do not have, ...) to the validator."""
        if not isinstance(tie, Tie):
            raise GraphError(f"a tie must be a Tie, not {type(tie).__name__}")
        if strict:
            for node_id in (tie.src, tie.dst):
                outer = self._store.get(node_id.partition(SEP)[0])
                if node_id not in self._store and (outer is None or not outer.type.startswith(
                        PREFIX)):
                    raise GraphError(f"no node '{node_id}' for the tie {tie}")
            if tie in self._ties:
                raise GraphError(f"{tie.dst}.{tie.dst_param} is already tied to "
                                 f"{tie.src}.{tie.src_param}")
        self._ties = (*self._ties, tie)
        self.events.emit(GraphChanged("tie_added", node=tie.dst, name=tie.dst_param,
                                      value=tie))

    def remove_tie(self, tie: Tie) -> None:
        """Stop sharing: the first tie equal to `tie` goes."""
        ties = list(self._ties)
        try:
            ties.remove(tie)
        except ValueError:
            raise GraphError(f"no tie {tie}") from None
        self._ties = tuple(ties)
        self.events.emit(GraphChanged("tie_removed", node=tie.dst, name=tie.dst_param,
                                      value=tie))

    def set_ties(self, ties: Iterable[Tie]) -> None:
        """Make the ties exactly `ties`, in that order (an undo putting back what was): a
        tie_removed event for each that goes, a tie_added for each that comes."""
        new = tuple(ties)
        if not all(isinstance(t, Tie) for t in new):
            raise GraphError("ties must be Tie objects")
        old, self._ties = self._ties, new
        was, now = set(old), set(new)
        for t in old:
            if t not in now:
                self.events.emit(GraphChanged("tie_removed", node=t.dst, name=t.dst_param,
                                              value=t))
        for t in new:
            if t not in was:
                self.events.emit(GraphChanged("tie_added", node=t.dst, name=t.dst_param,
                                              value=t))

    def define_group(self, defn: GroupDef, replace: bool = False) -> None:
        """Add group `defn` (used as `group.<name>`); with `replace`, in place of the one of
        that name. Its body resolves nested groups against this graph's groups."""
        if not GROUP_NAME.match(defn.name):
            raise GraphError(f"'{defn.name}' is not a valid group name (a letter, then "
                             "letters, digits and _)")
        if defn.name in self._groups and not replace:
            raise GraphError(f"a group named '{defn.name}' already exists")
        defn.body._groups = self._groups
        dict.__setitem__(self._groups, defn.name, defn)
        self.events.emit(GraphChanged("group_defined", name=defn.name))

    def remove_group(self, name: str) -> None:
        """Forget group `name`; refused while a node of this graph is an instance of it."""
        if name not in self._groups:
            raise GraphError(f"no group '{name}' in the graph")
        users = [n.id for n in self._store.values() if n.type == PREFIX + name]
        if users:
            raise GraphError(f"group '{name}' is used by {', '.join(users[:5])}"
                             f"{' ...' if len(users) > 5 else ''}; remove them first")
        dict.__delitem__(self._groups, name)
        self.events.emit(GraphChanged("group_removed", name=name))

    def new_id(self, type: str) -> str:
        """A fresh id from the block name: `linear`, then `linear_2`, ..."""
        base = re.sub(r"(?<!^)(?=[A-Z][a-z])", "_", type.split(".")[-1]).lower()
        base = re.sub(r"[^a-z0-9_]", "_", base) or "node"
        if base[0].isdigit():
            base = "n_" + base
        candidate, i = base, 2
        while candidate in self._store:
            candidate, i = f"{base}_{i}", i + 1
        return candidate

    def __repr__(self) -> str:
        return (f"<nodegraph.Graph '{self.name}': {len(self._nodes)} nodes, "
                f"{len(self.edges)} wires>")

    def _repr_html_(self) -> str:
        """A line naming the graph, then its drawing (small graphs) for Jupyter."""
        from html import escape

        head = f"<div><code>{escape(repr(self))}</code></div>"
        return head + (self._repr_svg_() if len(self._nodes) <= 200 else "")

    def _repr_svg_(self) -> str:
        """The graph drawn as cards and wires, for Jupyter (`nodegraph.model.svg`)."""
        from nodegraph.model.svg import graph_svg  # for notebooks only: not at start-up

        return graph_svg(self, max_width=960)

    def copy(self) -> Graph:
        """An independent copy with no listeners."""
        g = self._copy_body()
        for k, v in self._groups.items():  # the body's copy brings its ui along
            dict.__setitem__(g._groups, k, GroupDef(v.name, v.body._copy_body(),
                                                    copy.deepcopy(v.inputs),
                                                    copy.deepcopy(v.outputs)))
        for defn in g._groups.values():
            defn.body._groups = g._groups  # nested groups resolve against the same set
        g.load_problems = list(self.load_problems)
        return g

    def _copy_body(self) -> Graph:
        """Nodes, wires, settings and UI data, without the group definitions."""
        g = Graph(self.name, self.base_registry)
        g._ties = self._ties
        for v in self._ordered().values():
            g._append(copy.deepcopy(v))
        g._referrers = dict(self._referrers)
        g._wires = self._wires.copy()
        g._training = copy.deepcopy(self._training)
        g._ui = copy.deepcopy(self._ui)
        g.extra = copy.deepcopy(self.extra)
        g.folder = self.folder
        g.trusted = self.trusted
        g.data_roots = self.data_roots
        g.file_training = self.file_training
        return g

    # -- checks used by strict edits -----------------------------------------------------

    def _spec(self, type: str, registry: Registry | GroupRegistry | None = None):
        try:
            return (self.registry if registry is None else registry).get(type)
        except Exception as e:
            raise GraphError(str(e)) from None

    def _checked_param(self, node_id: str, spec: BlockSpec, name: str, value: Any) -> Any:
        param = spec.param(name)
        if param is None:
            known = ", ".join(p.name for p in spec.params) or "none"
            raise GraphError(f"node '{node_id}': {spec.id} has no param '{name}' "
                             f"(its params: {known})")
        try:
            return param.check(value)
        except ParamError as e:
            raise GraphError(f"node '{node_id}': {e}") from None

    def _check_edge(self, edge: Edge) -> None:
        registry = self.registry  # one look-up for both ends (a property)
        src_spec = self._spec(self.node(edge.src).type, registry)
        dst_spec = self._spec(self.node(edge.dst).type, registry)
        out = src_spec.output(edge.src_port)
        inp = dst_spec.input(edge.dst_port)
        if out is None:
            names = ", ".join(p.name for p in src_spec.outputs) or "none"
            raise GraphError(f"{src_spec.id} '{edge.src}' has no output '{edge.src_port}' "
                             f"(outputs: {names})")
        if inp is None:
            names = ", ".join(p.name for p in dst_spec.inputs) or "none"
            raise GraphError(f"{dst_spec.id} '{edge.dst}' has no input '{edge.dst_port}' "
                             f"(inputs: {names})")
        if out.type is inp.type:  # the common case, decided without a call
            return
        reason = why_incompatible(out.type, inp.type)
        if reason:
            raise GraphError(f"cannot wire {edge}: {reason}")

    def _reaches(self, start: str, goal: str) -> bool:
        """True when `goal` is downstream of `start` (or is `start`)."""
        return self._wires.reaches(start, goal)


def _key(key: Any, what: str) -> str:
    if not isinstance(key, str):
        raise GraphError(f"a {what} must be a string, not {key!r:.60}")
    return key


def _put(store: ReadOnlyDict, key: str, value: Any) -> None:
    """The owner's write: set `key`, or remove it for None."""
    if value is None:
        dict.pop(store, key, None)
    else:
        dict.__setitem__(store, key, value)
