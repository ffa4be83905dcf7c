"""The graph model: nodes with stable ids, typed port-to-port edges, and change events.

A `Graph` is plain data — which blocks, with which params, wired how — plus training
settings and the editor's UI data, kept aside and round-tripped untouched. It knows nothing
of torch or Qt. Every edit goes through a method here (add, remove, connect, disconnect,
set_param, rename) and emits a `GraphChanged` event, so the editor's canvas, its undo stack
and a script all see the same model. With a registry, edits are checked as they are made
(unknown block, unknown port, type mismatch, cycle); a file loader can use `strict=False`
to keep what it finds and let the validator report it.
"""

from __future__ import annotations

import copy
import heapq
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from nodegraph.model import gcpause, references
from nodegraph.model.errors import GraphError, NodegraphError, ParamError, Problem
from nodegraph.model.events import Emitter
from nodegraph.model.groupdefs import GroupDef, GroupRegistry
from nodegraph.model.ordered import Ordered
from nodegraph.model.spec import BlockSpec, Registry, default_registry
from nodegraph.model.types import why_incompatible
from nodegraph.model.wires import Wires

if TYPE_CHECKING:
    import networkx as nx

NODE_ID = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
PortRef = tuple[str, str]
_MISSING = object()


@dataclass
class Node:
    """One block instance: its id, block type and the params set on it (defaults omitted)."""

    id: str
    type: str
    params: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)  # unknown file keys, round-tripped


@dataclass(frozen=True)
class Edge:
    """A wire from an output port to an input port."""

    src: str
    src_port: str
    dst: str
    dst_port: str

    @property
    def source(self) -> PortRef:
        return (self.src, self.src_port)

    @property
    def target(self) -> PortRef:
        return (self.dst, self.dst_port)

    def __str__(self) -> str:
        return f"{self.src}.{self.src_port} -> {self.dst}.{self.dst_port}"


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
    edge_removed, param_changed, training_changed or name_changed."""

    kind: str
    node: str | None = None
    edge: Edge | None = None
    name: str | None = None  # the param or training key, or the old id on rename
    value: Any = None


class Graph:
    """Blocks and wires, with training settings and UI data kept aside.

    The graph owns its storage: `nodes` is a read-only view and `edges` a tuple, and every
    change goes through a method here, which keeps the wire indexes (`nodegraph.model.wires`)
    current — so traversals cost what they visit, never a scan of every wire.
    """

    def __init__(self, name: str = "untitled", registry: Registry | None = None):
        self.name = name
        self.base_registry = registry if registry is not None else default_registry()
        # the block library is loaded: a process that opted in (the CLI, the editor) has
        # collections skip it from now; any other process's collector is left alone
        gcpause.freeze_imports()
        self.groups: dict[str, GroupDef] = {}  # subgraphs by name, used as `group.NAME`
        self.ties: list[Tie] = []  # parameters shared between two different blocks
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
        self.training: dict[str, Any] = {}
        self.ui: dict[str, Any] = {}
        self.extra: dict[str, Any] = {}  # unknown top-level file keys, round-tripped
        self.load_problems: list[Problem] = []  # what the file loader could not place
        self.folder: Path | None = None  # the file's folder: relative data paths start there
        # modules outside nodegraph.model.allowlist this graph may import: the user's choice
        # (--trust, the editor's prompt), never read from the file
        self.trusted: frozenset[str] = frozenset()
        # folders beyond `folder` its data and weights may come from, or "anywhere"
        # (nodegraph.kinds.confine): the user's choice too, never the file's
        self.data_roots: tuple[Path, ...] | str = ()
        self.events = Emitter()

    @property
    def registry(self) -> Registry | GroupRegistry:
        """The block types this graph may use: the registry plus its own groups."""
        if not self.groups:
            return self.base_registry
        return GroupRegistry(self.base_registry, self.groups)

    # -- queries -------------------------------------------------------------------------

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
        return self.add_node(Node(id or self.new_id(type), type, dict(params)))

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
                node.params[name] = self._checked_param(node.id, spec, name, value)
        self._append(node)
        self._note_referrer(node, spec)
        self.events.emit(GraphChanged("node_added", node=node.id))
        return node.id

    def remove(self, node_id: str) -> None:
        """Remove a node and every wire and tie touching it."""
        self.node(node_id)
        for e in dict.fromkeys([*self._wires.into(node_id), *self._wires.out_of(node_id)]):
            self.disconnect(e)  # wires in, then wires out (a loop to itself once)
        self.ties = [t for t in self.ties if node_id not in (t.src, t.dst)]
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
        self.events.emit(GraphChanged("edge_added", edge=edge))
        return edge

    def disconnect(self, edge: Edge) -> None:
        try:
            self._wires.remove(edge)
        except KeyError:
            raise GraphError(f"no wire {edge}") from None
        self.events.emit(GraphChanged("edge_removed", edge=edge))

    def set_param(self, node_id: str, name: str, value: Any) -> None:
        """Set a param, checked against the block's declaration."""
        node = self.node(node_id)
        node.params[name] = self._checked_param(node_id, self._spec(node.type), name, value)
        self.events.emit(GraphChanged("param_changed", node_id, name=name, value=value))

    def reset_param(self, node_id: str, name: str) -> None:
        """Forget a param's value so the block's default applies."""
        if self.node(node_id).params.pop(name, _MISSING) is not _MISSING:
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
        self.ties = [Tie(references.renamed_id(t.src, old, new), t.src_param,
                         references.renamed_id(t.dst, old, new), t.dst_param)
                     for t in self.ties]
        positions = self.ui.get("positions")
        if isinstance(positions, dict) and old in positions:
            positions[new] = positions.pop(old)
        self.events.emit(GraphChanged("node_renamed", node=new, name=old))

    def _rename_references(self, old: str, new: str) -> None:
        """Params declared as naming nodes (kinds node and nodes), the training stages and
        the monitor follow a renamed node."""
        for n in (self._store[k] for k in self._referrers):
            if n.type in self.registry:
                n.params.update(references.rename_params(self.registry.get(n.type), n.params,
                                                         old, new))
        self.training.update(references.rename_training(self.training, old, new))

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

    def set_training(self, key: str, value: Any) -> None:
        """Set a training setting (epochs, seed, device, ...); None removes it."""
        if value is None:
            self.training.pop(key, None)
        else:
            self.training[key] = value
        self.events.emit(GraphChanged("training_changed", name=key, value=value))

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
        g.groups = {k: GroupDef(v.name, v.body._copy_body(), copy.deepcopy(v.inputs),
                                copy.deepcopy(v.outputs), copy.deepcopy(v.ui))
                    for k, v in self.groups.items()}
        for defn in g.groups.values():
            defn.body.groups = g.groups  # nested groups resolve against the same set
        g.load_problems = list(self.load_problems)
        return g

    def _copy_body(self) -> Graph:
        """Nodes, wires, settings and UI data, without the group definitions."""
        g = Graph(self.name, self.base_registry)
        g.ties = list(self.ties)
        for v in self._ordered().values():
            g._append(copy.deepcopy(v))
        g._referrers = dict(self._referrers)
        g._wires = self._wires.copy()
        g.training = copy.deepcopy(self.training)
        g.ui = copy.deepcopy(self.ui)
        g.extra = copy.deepcopy(self.extra)
        g.folder = self.folder
        g.trusted = self.trusted
        g.data_roots = self.data_roots
        return g

    # -- checks used by strict edits -----------------------------------------------------

    def _spec(self, type: str):
        try:
            return self.registry.get(type)
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
        src_spec = self._spec(self.node(edge.src).type)
        dst_spec = self._spec(self.node(edge.dst).type)
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
        reason = why_incompatible(out.type, inp.type)
        if reason:
            raise GraphError(f"cannot wire {edge}: {reason}")

    def _reaches(self, start: str, goal: str) -> bool:
        """True when `goal` is downstream of `start` (or is `start`)."""
        return self._wires.reaches(start, goal)

