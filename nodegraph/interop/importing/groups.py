"""An imported graph's module hierarchy as nested groups, so a ResNet opens as its stages.

`nodegraph import` plans one node per call of the traced module, each knowing the module
whose forward made it (`layer1.0` for `layer1.0.conv1` and for the addition in that
block's forward). `group_by_scope` moves every module's nodes into a group of their own,
the deepest modules first, so `layer1` becomes a group whose body holds the instances of
`layer1.0` and `layer1.1`, each holding its convolutions: the editor shows the stages
collapsed and opens one with Ctrl+E. A group is made only where it holds two nodes or
more and its nodes run one after the other (a module whose calls interleave with others
stays flat: grouping it could make a cycle); the graph's inputs, guards and outputs stay at
the top. Execution flattens groups to ``INSTANCE__INNER`` ids, so the mapping returned
(node id -> flat id) re-keys the weights and the outputs.
"""

from __future__ import annotations

from nodegraph.model.graph import Tie
from nodegraph.model.groupdefs import MAX_DEPTH, SEP
from nodegraph.model.groups import make_group

MIN_NODES = 2  # a module of one call stays that node


def group_by_scope(graph, scopes: dict[str, str], keep: set[str]) -> dict[str, str]:
    """Group `graph`'s nodes by their module path (`scopes`: node id -> dotted path, ''
    for the root's own), never moving those in `keep` (the inputs, their guards, the
    outputs); returns node id -> flat id (the id execution gives a node inside groups)."""
    ties = list(graph.ties)  # set again after, between flat ids (see below)
    graph.set_ties([])
    flat = {n: n for n in graph.nodes}
    top = {n: n for n in graph.nodes}  # node id -> the top-level node holding it now
    order = list(graph.nodes)  # top-level ids in run order (the import adds in order)
    paths = sorted({p for n, s in scopes.items() if n not in keep for p in _prefixes(s)},
                   key=lambda p: (-p.count("."), p))
    taken = set(graph.nodes) | set(graph.groups)
    for path in paths:
        if path.count(".") + 1 > MAX_DEPTH - 1:
            continue
        members = [n for n, s in scopes.items() if n not in keep and n in top and
                   (s == path or s.startswith(path + "."))]
        chosen = list(dict.fromkeys(top[n] for n in members))
        if len(chosen) < MIN_NODES or set(order) - set(chosen) <= keep:
            continue  # (a group that would be all but the inputs and outputs says nothing)
        at = sorted(order.index(c) for c in chosen)
        if at[-1] - at[0] + 1 != len(at):  # interleaved with other nodes: left flat
            continue
        name = _name(path, taken)
        taken.add(name)
        instance = make_group(graph, [order[i] for i in at], name, instance=name)
        for node, holder in top.items():
            if holder in chosen:
                flat[node] = instance + SEP + flat[node]
                top[node] = instance
        order[at[0]:at[-1] + 1] = [instance]
    # a tie (BERT's masked-LM decoder reusing the word embeddings) names its two nodes by
    # their flat ids at the top, all in one place (`make_group` would keep them right at
    # any depth too, but put a tie inside one module into that module's body)
    graph.set_ties(Tie(flat[t.src], t.src_param, flat[t.dst], t.dst_param) for t in ties)
    return flat


def _prefixes(path: str) -> list[str]:
    """'layer1.0' -> ['layer1', 'layer1.0'] (the root's own '' has none)."""
    parts = path.split(".") if path else []
    return [".".join(parts[:i]) for i in range(1, len(parts) + 1)]


def _name(path: str, taken: set[str]) -> str:
    """A group name from a module path: letters, digits and _, starting with a letter."""
    base = "".join(c if c.isalnum() else "_" for c in path.replace(".", "_"))
    base = base if base[:1].isalpha() else f"m_{base}"
    name, i = base, 2
    while name in taken:
        name, i = f"{base}_{i}", i + 1
    return name
