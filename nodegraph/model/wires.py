"""The wires of a graph, in order, with the indexes every traversal reads.

`Graph` keeps its edges here and nowhere else, so the indexes cannot fall behind: each
insert, removal, move or rename updates the order (what a file saves, what breaks ties in
the topological order) and the wires into and out of each node together. A per-node
index is an insertion-ordered dict used as a set: removal is constant time, and its order
is the wires' order in the graph. Queries cost what they return, never a scan of every
wire; `visits` counts the wires the traversals read, so a test can prove them linear.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

Edge = Any  # nodegraph.model.graph.Edge (a frozen dataclass with src/src_port/dst/dst_port)


class Wires:
    """Edges in graph order, indexed by target node and by source node."""

    def __init__(self, edges: Iterable[Edge] = ()) -> None:
        self._order: dict[Edge, None] = {}
        self._into: dict[str, dict[Edge, None]] = {}
        self._out: dict[str, dict[Edge, None]] = {}
        self._frozen: tuple[Edge, ...] | None = ()
        self.visits = 0  # wires read by traversals (upstream, downstream, successors)
        self.reindexed = 0  # full rebuilds of the indexes: only moves and renames do one
        for e in edges:
            self.add(e)

    # -- queries -------------------------------------------------------------------------

    def __contains__(self, edge: object) -> bool:
        return edge in self._order

    def __len__(self) -> int:
        return len(self._order)

    def __iter__(self) -> Iterator[Edge]:
        return iter(self.all())

    def all(self) -> tuple[Edge, ...]:
        """Every wire in order, as a tuple (built once per change, then shared)."""
        if self._frozen is None:
            self._frozen = tuple(self._order)
        return self._frozen

    def index(self, edge: Edge) -> int:
        return self.all().index(edge)

    def into(self, node: str) -> list[Edge]:
        """The wires into `node`, in graph order."""
        found = self._into.get(node)
        return list(found) if found else []

    def out_of(self, node: str) -> list[Edge]:
        """The wires out of `node`, in graph order."""
        found = self._out.get(node)
        return list(found) if found else []

    def feeding(self, node: str, port: str) -> Edge | None:
        """The first wire into input `port` of `node`, if any."""
        return next((e for e in self._into.get(node, ()) if e.dst_port == port), None)

    def upstream(self, starts: Iterable[str]) -> set[str]:
        """The given nodes and every node that feeds them, directly or not."""
        seen: set[str] = set()
        todo = list(starts)
        into = self._into
        while todo:
            n = todo.pop()
            if n not in seen:
                seen.add(n)
                wires = into.get(n)
                if wires:
                    self.visits += len(wires)
                    todo.extend(e.src for e in wires)
        return seen

    def reaches(self, start: str, goal: str) -> bool:
        """True when `goal` is downstream of `start` (or is `start`)."""
        seen, todo, out = set(), [start], self._out
        while todo:
            n = todo.pop()
            if n == goal:
                return True
            if n not in seen:
                seen.add(n)
                wires = out.get(n)
                if wires:
                    self.visits += len(wires)
                    todo.extend(e.dst for e in wires)
        return False

    def successors(self, nodes: Iterable[str], known: Any) -> dict[str, list[str]]:
        """For each of `nodes`, the nodes its wires lead to, among `known` (wires naming
        missing nodes left out)."""
        out = self._out
        succ: dict[str, list[str]] = {}
        for n in nodes:
            wires = out.get(n)
            if wires:
                self.visits += len(wires)
                succ[n] = [e.dst for e in wires if e.dst in known]
            else:
                succ[n] = []
        return succ

    # -- edits ---------------------------------------------------------------------------

    def add(self, edge: Edge) -> None:
        """Append `edge` (the caller has refused duplicates)."""
        self._order[edge] = None
        self._into.setdefault(edge.dst, {})[edge] = None
        self._out.setdefault(edge.src, {})[edge] = None
        self._frozen = None

    def remove(self, edge: Edge) -> None:
        """Remove `edge`; KeyError when it is not there."""
        del self._order[edge]
        self._drop(self._into, edge.dst, edge)
        self._drop(self._out, edge.src, edge)
        self._frozen = None

    def move(self, edge: Edge, index: int) -> None:
        """Put `edge` at position `index` of the order (undo restores wires where they
        were); the indexes are rebuilt so each node's wires keep the graph's order."""
        order = [e for e in self._order if e != edge]
        if len(order) == len(self._order):
            raise KeyError(edge)
        order.insert(index, edge)
        self._rebuild(order)

    def rename(self, old: str, new: str, make: Any) -> None:
        """Wires naming node `old` name `new` instead, each in its place in the order;
        `make(src, src_port, dst, dst_port)` builds an edge."""
        touched = set(self._into.get(old, ())) | set(self._out.get(old, ()))
        if not touched:
            return
        self._rebuild([make(new if e.src == old else e.src, e.src_port,
                            new if e.dst == old else e.dst, e.dst_port)
                       if e in touched else e for e in self._order])

    def copy(self) -> Wires:
        return Wires(self._order)

    @staticmethod
    def _drop(index: dict[str, dict[Edge, None]], node: str, edge: Edge) -> None:
        wires = index[node]
        del wires[edge]
        if not wires:
            del index[node]

    def _rebuild(self, order: list[Edge]) -> None:
        self._order.clear()
        self._into.clear()
        self._out.clear()
        for e in order:
            self._order[e] = None
            self._into.setdefault(e.dst, {})[e] = None
            self._out.setdefault(e.src, {})[e] = None
        self._frozen = None
        self.reindexed += 1
