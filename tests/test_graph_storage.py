"""The graph owns its storage: after every kind of edit — the API's, the editor's undo and
redo, making and expanding groups — the wire indexes agree with the wires themselves."""

from __future__ import annotations

import pytest

import nodegraph
from nodegraph.model import groups
from nodegraph.model.errors import GraphError
from nodegraph.model.graph import Edge, Graph, Node


def assert_indexed(g: Graph) -> None:
    """Every index answer equals what a scan of `g.edges` gives."""
    edges = list(g.edges)
    assert len(set(edges)) == len(edges)
    ids = set(g.nodes) | {e.src for e in edges} | {e.dst for e in edges}
    for n in ids:
        assert g.edges_into(n) == [e for e in edges if e.dst == n], n
        assert g.edges_from(n) == [e for e in edges if e.src == n], n
        for e in g.edges_into(n):
            assert g.source_of(n, e.dst_port) == next(
                x for x in edges if x.dst == n and x.dst_port == e.dst_port)
        seen, todo = set(), [n]
        while todo:  # upstream by brute force
            m = todo.pop()
            if m not in seen:
                seen.add(m)
                todo += [e.src for e in edges if e.dst == m]
        assert g.upstream([n]) == seen, n
    succ = {n: [e.dst for e in edges if e.src == n and e.dst in g.nodes] for n in g.nodes}
    assert g._successors() == succ
    assert g.topological_order() == list(__import__("networkx").lexicographical_topological_sort(
        g.to_networkx(), key=list(g.nodes).index))


def mlp() -> Graph:
    g = Graph("t")
    g.add("data.XOR", id="data")
    g.add("layers.Linear", id="hidden", out_features=4)
    g.add("activations.Tanh", id="act")
    g.add("layers.Linear", id="out", out_features=1)
    g.add("losses.MSE", id="loss")
    g.add("optimizers.SGD", id="opt")
    for src, dst in [(("data", "x"), ("hidden", "input")), (("hidden", "output"), ("act", "input")),
                     (("act", "output"), ("out", "input")), (("out", "output"), ("loss", "input")),
                     (("data", "y"), ("loss", "target")), (("loss", "loss"), ("opt", "loss"))]:
        g.connect(src, dst)
    return g


def test_every_api_edit_keeps_the_indexes():
    g = mlp()
    assert_indexed(g)
    g.connect(("data", "x"), ("out", "input"), replace=True)  # replaces act -> out
    assert_indexed(g)
    g.disconnect(Edge("data", "x", "out", "input"))
    assert_indexed(g)
    g.connect(("act", "output"), ("out", "input"))
    g.rename("act", "nonlin")
    assert_indexed(g)
    assert Edge("hidden", "output", "nonlin", "input") in g.edges
    assert g.edges_into("act") == [] and g.edges_from("act") == []
    g.move_edge(Edge("nonlin", "output", "out", "input"), 0)
    assert g.edges[0] == Edge("nonlin", "output", "out", "input")
    assert_indexed(g)
    g.move_node("opt", 0)
    assert list(g.nodes)[0] == "opt"
    assert_indexed(g)
    g.remove("nonlin")
    assert_indexed(g)
    g.add("layers.Linear", id="ghost_fed", out_features=2)
    g.connect(("nowhere", "output"), ("ghost_fed", "input"), strict=False)  # lenient: dangling
    assert_indexed(g)
    copy = g.copy()
    g.remove("hidden")
    assert_indexed(g)
    assert_indexed(copy)
    assert "hidden" in copy and copy.edges_into("hidden")  # the copy has indexes of its own


def test_moves_and_renames_keep_each_nodes_wires_in_graph_order():
    g = mlp()
    g.add("metrics.Accuracy", id="acc")
    g.connect(("data", "y"), ("acc", "target"))
    g.connect(("out", "output"), ("acc", "input"))
    g.move_edge(Edge("data", "y", "acc", "target"), len(g.edges) - 1)
    assert g.edges_from("data") == [e for e in g.edges if e.src == "data"]
    g.rename("data", "source")
    assert [e.src for e in g.edges].count("source") == 3
    assert_indexed(g)
    with pytest.raises(GraphError, match="no wire"):
        g.move_edge(Edge("data", "x", "hidden", "input"), 0)


def test_storage_cannot_be_edited_behind_the_graphs_back():
    g = mlp()
    with pytest.raises(TypeError):
        g.nodes["x"] = Node("x", "layers.Linear")
    with pytest.raises(TypeError):
        del g.nodes["act"]
    with pytest.raises(AttributeError):
        g.nodes = {}
    with pytest.raises(AttributeError):
        g.edges.append(Edge("act", "output", "loss", "input"))
    with pytest.raises(AttributeError):
        g.edges = ()
    g.edges_into("act").clear()  # a copy: the graph's own index is untouched
    assert len(g.edges_into("act")) == 1


def test_file_round_trip_keeps_the_wire_order(tmp_path):
    g = nodegraph.load("examples/cnn_digits.json")
    first = g.edges[0]
    g.move_edge(first, len(g.edges) - 1)
    path = tmp_path / "moved.json"
    nodegraph.save(g, path)
    again = nodegraph.load(path)
    assert again.edges == g.edges and again.edges[-1] == first
    nodegraph.save(again, tmp_path / "twice.json")
    assert (tmp_path / "twice.json").read_bytes() == path.read_bytes()
    assert_indexed(again)


def test_make_group_and_flatten_keep_the_indexes():
    g = mlp()
    instance = groups.make_group(g, ["hidden", "act"], "Block")
    assert_indexed(g)
    assert_indexed(g.groups["Block"].body)
    assert g.groups["Block"].body.edges == (Edge("hidden", "output", "act", "input"),)
    flat = groups.flatten(g)
    assert_indexed(flat.graph)
    assert flat.graph.source_of(instance + groups.SEP + "hidden", "input").source == ("data", "x")
    assert nodegraph.validate(g, for_training=True).ok


# -- the editor's undo and redo ------------------------------------------------------------

@pytest.fixture
def doc(qapp):
    from nodegraph.gui.document.document import Document

    return Document(mlp())


def _state(g: Graph):
    return list(g.nodes), list(g.edges), list(g.ties)


def test_undo_and_redo_of_every_command_keep_the_indexes(doc):
    pytest.importorskip("PySide6")
    from nodegraph.gui.document import commands

    g = doc.graph
    before = _state(g)
    steps = [
        commands.RemoveNode(doc, "act"),
        commands.AddNode(doc, Node("extra", "layers.Linear", {"out_features": 3}), (1.0, 2.0)),
        commands.Connect(doc, ("data", "x"), ("extra", "input")),
        commands.Connect(doc, ("extra", "output"), ("out", "input")),
        commands.Disconnect(doc, Edge("data", "y", "loss", "target")),
        commands.Rename(doc, "hidden", "first"),
        commands.MakeGroup(doc, ["extra"], "Wrap", "wrap"),
    ]
    states = [before]
    for command in steps:
        doc.undo_stack.push(command)
        assert_indexed(g)
        states.append(_state(g))
    for state in reversed(states[:-1]):
        doc.undo_stack.undo()
        assert_indexed(g)
        assert _state(g) == state  # nodes and wires back where they were, in order
    for state in states[1:]:
        doc.undo_stack.redo()
        assert_indexed(g)
        assert _state(g) == state
