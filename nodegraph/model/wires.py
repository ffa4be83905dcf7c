"""The wires of a graph, in order, with the indexes every traversal reads.

`Graph` keeps its edges here and nowhere else, so the indexes cannot fall behind: each
insert, removal, move or rename updates the order (what a file saves, what breaks ties in
the topological order) and the wires into and out of each node together. A per-node
index is an insertion-ordered dict used as a set: removal is constant time, and its order
is the wires' order in the graph. Queries cost what they return, never a scan of every
wire; `visits` counts the wires the traversals read, so a test can prove them linear.

The order is a position key per wire (a float, increasing along the order) in an
`Ordered` sequence of small blocks: a removal finds its place by bisection, a move takes a
key between its new neighbours' keys, a rename keeps the renamed wires' keys. So every
edit touches the wires of the nodes it changes and one block, not every wire (`reindexed`
counts the rare renumbering when two keys leave no room between them).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from nodegraph.model.ordered import Ordered

Edge = Any  # nodegraph.model.graph.Edge (a frozen dataclass with src/src_port/dst/dst_port)


class Wires:
    """Edges in graph order, indexed by target node and by source node."""

    def __init__(self, edges: Iterable[Edge] = ()) -> None:
        self._key: dict[Edge, float] = {}  # position key of each wire
        self._order: Ordered[Edge] = Ordered()  # the wires by ascending key
        self._into: dict[str, dict[Edge, None]] = {}
        self._out: dict[str, dict[Edge, None]] = {}
        self._frozen: tuple[Edge, ...] | None = ()
        self.visits = 0  # wires read by traversals (upstream, downstream, successors)
        self.reindexed = 0  # renumberings of the position keys (no room left between two)
        for e in edges:
            self.add(e)

    # -- queries -------------------------------------------------------------------------

    def __contains__(self, edge: object) -> bool:
        return edge in self._key

    def __len__(self) -> int:
        return len(self._key)

    def __iter__(self) -> Iterator[Edge]:
        return iter(self.all())

    def all(self) -> tuple[Edge, ...]:
        """Every wire in order, as a tuple (built once per change, then shared)."""
        if self._frozen is None:
            self._frozen = tuple(self._order.items())
        return self._frozen

    def index(self, edge: Edge) -> int:
        return self._order.position(self._key[edge])
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
        for e in self._into.get(node, ()):  # a loop, not next(generator): once per connect
            if e.dst_port == port:
                return e
        return None

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
        key = self._key[edge] = self._order.next_key()
        self._order.append(key, edge)
        self._into.setdefault(edge.dst, {})[edge] = None
        self._out.setdefault(edge.src, {})[edge] = None
        self._frozen = None

    def remove(self, edge: Edge) -> None:
        """Remove `edge`; KeyError when it is not there."""
        self._order.remove(self._key.pop(edge))
        self._drop(self._into, edge.dst, edge)
        self._drop(self._out, edge.src, edge)
        self._frozen = None

    def move(self, edge: Edge, index: int) -> None:
        """Put `edge` at position `index` of the order (undo restores wires where they
        were); its two nodes' indexes are re-sorted so each keeps the graph's order."""
        self._order.remove(self._key.pop(edge))  # KeyError when it is not there
        index = max(0, min(index, len(self._order)))
        key = self._between(index)
        self._key[edge] = key
        self._order.insert(index, key, edge)
        for index_of, node in ((self._into, edge.dst), (self._out, edge.src)):
            index_of[node] = dict.fromkeys(sorted(index_of[node], key=self._key.__getitem__))
        self._frozen = None

    def rename(self, old: str, new: str, make: Any) -> None:
        """Wires naming node `old` name `new` instead, each in its place in the order;
        `make(src, src_port, dst, dst_port)` builds an edge. Touches only those wires and
        the indexes of the nodes at their other ends."""
        touched = {**self._into.get(old, {}), **self._out.get(old, {})}
        if not touched:
            return
        renamed = {e: make(new if e.src == old else e.src, e.src_port,
                           new if e.dst == old else e.dst, e.dst_port) for e in touched}
        for e, r in renamed.items():
            key = self._key.pop(e)
            self._key[r] = key
            self._order.replace(key, r)
        for index_of in (self._into, self._out):
            for node in {old, *(e.src for e in touched), *(e.dst for e in touched)}:
                wires = index_of.pop(node, None)
                if wires is not None:
                    index_of[new if node == old else node] = {
                        renamed.get(e, e): None for e in wires}
        self._frozen = None

    def copy(self) -> Wires:
        return Wires(self._order.items())

    @staticmethod
    def _drop(index: dict[str, dict[Edge, None]], node: str, edge: Edge) -> None:
        wires = index[node]
        del wires[edge]
        if not wires:
            del index[node]

    def _between(self, index: int) -> float:
        """A key for a wire inserted at `index` of the order: between its neighbours' keys
        (every key renumbered first when they leave no room)."""
        key = self._order.key_for(index)
        if key is not None:
            return key
        wires = self._order.items()
        self._order = Ordered((float(i), e) for i, e in enumerate(wires))
        self._key.update((e, float(i)) for i, e in enumerate(wires))
        self.reindexed += 1
        return self._between(index)
