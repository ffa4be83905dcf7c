"""Single edits cost what they touch: rename, move, delete and reorder keep the graph's
order exactly as a rebuild would, without rebuilding the wire index or visiting every node.

The checks compare the graph's node and wire order after a random run of edits with a
plain list model of the same edits, and count the work: no renumbering of the wire order,
and a rename rewrites only the params of nodes that can name other nodes.
"""

from __future__ import annotations

import random

import pytest

from nodegraph.model import references
from nodegraph.model.graph import Edge, Graph
from nodegraph.model.wires import Wires


def chain(n: int) -> Graph:
    g = Graph("chain")
    g.add("data.XOR", id="data")
    prev = ("data", "x")
    for i in range(n):
        g.add("layers.Linear", id=f"fc{i}", out_features=4)
        g.connect(prev, (f"fc{i}", "input"))
        prev = (f"fc{i}", "output")
    g.add("losses.MSE", id="loss")
    g.connect(prev, ("loss", "input"))
    g.connect(("data", "y"), ("loss", "target"))
    g.add("metrics.ParameterCount", id="count", nodes=["fc0", "fc1"])
    return g


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_random_edits_keep_the_order_a_rebuild_would_give(seed):
    rng = random.Random(seed)
    g = chain(30)
    nodes, edges = list(g.nodes), list(g.edges)
    for step in range(200):
        what = rng.choice(("rename", "move_node", "move_edge", "remove_edge"))
        if what == "rename":
            old = rng.choice(nodes)
            new = f"n{step}"
            g.rename(old, new)
            nodes[nodes.index(old)] = new
            edges = [Edge(new if e.src == old else e.src, e.src_port,
                          new if e.dst == old else e.dst, e.dst_port) for e in edges]
        elif what == "move_node":
            node, index = rng.choice(nodes), rng.randrange(len(nodes))
            g.move_node(node, index)
            nodes.remove(node)
            nodes.insert(index, node)
        elif what == "move_edge" and edges:
            edge, index = rng.choice(edges), rng.randrange(len(edges))
            g.move_edge(edge, index)
            edges.remove(edge)
            edges.insert(index, edge)
        elif edges:
            edge = rng.choice(edges)
            g.disconnect(edge)
            edges.remove(edge)
        assert list(g.nodes) == nodes
        assert list(g.edges) == edges
    for n in nodes:  # each node's own index in the graph's order
        assert g.edges_into(n) == [e for e in edges if e.dst == n]
        assert g.edges_from(n) == [e for e in edges if e.src == n]
    assert [g._wires.index(e) for e in edges] == list(range(len(edges)))


def test_a_rename_rewrites_only_the_nodes_that_can_name_others(monkeypatch):
    g = chain(50)
    seen = []
    real = references.rename_params
    monkeypatch.setattr(references, "rename_params",
                        lambda spec, params, old, new: seen.append(spec.id) or
                        real(spec, params, old, new))
    g.rename("fc0", "first")
    assert seen == ["metrics.ParameterCount"]  # not the 50 Linears, the data or the loss
    assert g.nodes["count"].params["nodes"] == ["first", "fc1"]


def test_moves_between_the_same_two_wires_renumber_rarely():
    edges = [Edge(f"a{i}", "out", f"b{i}", "in") for i in range(10)]
    wires = Wires(edges)
    order = list(edges)
    for _ in range(1200):  # always just after the first: halves the gap each time
        wires.move(order[-1], 1)
        order.insert(1, order.pop())
        assert list(wires.all()) == order
    assert 1 <= wires.reindexed <= 2  # a float halves ~1,075 times from 1 before 0


@pytest.mark.parametrize("seed", [0, 1])
def test_the_blocked_order_matches_a_list_through_splits_and_empty_blocks(monkeypatch, seed):
    from nodegraph.model import ordered

    monkeypatch.setattr(ordered, "LOAD", 4)  # blocks split and empty out within 300 edits
    rng = random.Random(seed)
    seq = ordered.Ordered((float(i), f"w{i}") for i in range(20))
    model = [(float(i), f"w{i}") for i in range(20)]
    for step in range(300):
        what = rng.choice(("insert", "remove", "replace", "append"))
        if what == "remove" and model:
            key, _ = model.pop(rng.randrange(len(model)))
            seq.remove(key)
        elif what == "insert" and model:
            index = rng.randrange(len(model) + 1)
            lo = model[index - 1][0] if index else model[0][0] - 2
            hi = model[index][0] if index < len(model) else model[-1][0] + 2
            key = (lo + hi) / 2
            model.insert(index, (key, f"i{step}"))
            seq.insert(index, key, f"i{step}")
        elif what == "replace" and model:
            index = rng.randrange(len(model))
            model[index] = (model[index][0], f"r{step}")
            seq.replace(model[index][0], f"r{step}")
        else:
            key = (model[-1][0] + 1) if model else 0.0
            model.append((key, f"a{step}"))
            seq.append(key, f"a{step}")
        assert seq.items() == [item for _, item in model]
        assert len(seq) == len(model)
    assert [seq.position(k) for k, _ in model] == list(range(len(model)))
    assert [seq.key_at(i) for i in range(len(model))] == [k for k, _ in model]
    with pytest.raises(KeyError):
        seq.remove(-1000.0)
