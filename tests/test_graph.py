"""The graph model: edits, checks, events, order."""

from __future__ import annotations

import pytest

from nodegraph.model.errors import GraphError
from nodegraph.model.graph import Edge, Graph


def mlp() -> Graph:
    g = Graph("t")
    g.add("data.XOR", id="data")
    g.add("layers.Linear", id="fc", out_features=3)
    g.add("losses.MSE", id="loss")
    g.connect(("data", "x"), ("fc", "input"))
    return g


def test_ids_are_derived_from_the_block_name_and_stay_unique():
    g = Graph()
    assert g.add("layers.Linear", out_features=2) == "linear"
    assert g.add("layers.Linear", out_features=2) == "linear_2"
    assert g.add("losses.BCEWithLogits") == "bce_with_logits"


def test_events_report_every_edit():
    g = mlp()
    seen = []
    g.events.subscribe(lambda e: seen.append((e.kind, e.node or e.edge, e.name)))
    g.set_param("fc", "out_features", 5)
    edge = g.connect(("fc", "output"), ("loss", "input"))
    g.disconnect(edge)
    g.rename("fc", "hidden")
    g.remove("hidden")
    kinds = [k for k, *_ in seen]
    assert kinds == ["param_changed", "edge_added", "edge_removed", "node_renamed",
                     "edge_removed", "node_removed"]


def test_rename_rewires_edges_and_positions():
    g = mlp()
    g.set_ui("positions", {"fc": [1, 2]})
    g.rename("fc", "hidden")
    assert Edge("data", "x", "hidden", "input") in g.edges
    assert g.ui["positions"] == {"hidden": [1, 2]}
    with pytest.raises(GraphError, match="already exists"):
        g.rename("hidden", "data")


@pytest.mark.parametrize("edit, message", [
    (lambda g: g.add("layers.Nope"), "unknown block type 'layers.Nope'"),
    (lambda g: g.add("layers.Linear", id="x", out_features="wide"), "'out_features' must be"),
    (lambda g: g.add("layers.Linear", id="x", width=3), "has no param 'width'"),
    (lambda g: g.add("layers.Linear", id="bad id", out_features=1), "node id 'bad id'"),
    (lambda g: g.connect(("data", "z"), ("loss", "input")), "has no output 'z'"),
    (lambda g: g.connect(("data", "y"), ("fc", "input")), "already fed by data.x"),
    (lambda g: g.connect(("fc", "output"), ("fc", "input"), replace=True), "cycle"),
    (lambda g: g.set_param("fc", "out_features", 0), "must be >= 1"),
    (lambda g: g.node("ghost"), "no node 'ghost'"),
])
def test_bad_edits_are_refused_with_a_reason(edit, message):
    g = mlp()
    with pytest.raises(GraphError, match=message):
        edit(g)


def test_type_mismatch_is_refused():
    g = mlp()
    g.add("optimizers.SGD", id="opt")
    with pytest.raises(GraphError, match="a tensor output .* cannot feed a loss input"):
        g.connect(("fc", "output"), ("opt", "loss"))


def test_replace_swaps_the_wire_into_an_occupied_input():
    g = mlp()
    g.connect(("data", "y"), ("fc", "input"), replace=True)
    assert g.source_of("fc", "input").source == ("data", "y")
    assert len(g.edges_into("fc")) == 1


def test_topological_order_is_deterministic_and_follows_insertion_order():
    g = Graph()
    for name in ["c", "a", "b"]:
        g.add("activations.ReLU", id=name)
    g.add("data.XOR", id="data")
    for name in ["c", "a", "b"]:
        g.connect(("data", "x"), (name, "input"))
    assert g.topological_order() == ["data", "c", "a", "b"]
    nxg = g.to_networkx()
    assert set(nxg.successors("data")) == {"a", "b", "c"}


def test_cycle_is_named_node_by_node():
    g = Graph()
    for name in ["a", "b", "c"]:
        g.add("activations.ReLU", id=name)
    g.connect(("a", "output"), ("b", "input"))
    g.connect(("b", "output"), ("c", "input"))
    g.connect(("c", "output"), ("a", "input"), strict=False)  # as a file could hold it
    assert set(g.find_cycle()) == {"a", "b", "c"}
    with pytest.raises(GraphError, match="cycle: .*a.*b.*c"):
        g.topological_order()


def test_reset_param_returns_to_the_default():
    g = mlp()
    g.set_param("fc", "bias", False)
    g.reset_param("fc", "bias")
    assert "bias" not in g.node("fc").params


def test_copy_is_independent():
    g = mlp()
    h = g.copy()
    h.set_param("fc", "out_features", 9)
    h.remove("loss")
    assert g.node("fc").params["out_features"] == 3 and "loss" in g


def test_duplicate_wires_are_refused_and_storage_is_read_only():
    """connect refuses a wire that exists, also after it was removed and put back and
    after undo moved it; nodes and edges cannot be changed behind the graph's back."""
    g = Graph()
    g.add("data.XOR", "data")
    g.add("layers.Linear", "a", out_features=2)
    g.add("layers.Linear", "b", out_features=2)
    g.connect(("data", "x"), ("a", "input"))
    with pytest.raises(GraphError, match="already exists"):
        g.connect(("data", "x"), ("a", "input"), strict=False)
    g.disconnect(Edge("data", "x", "a", "input"))
    g.connect(("data", "x"), ("a", "input"), strict=False)  # gone, so allowed again
    g.connect(("data", "x"), ("b", "input"), strict=False)
    g.move_edge(Edge("data", "x", "b", "input"), 0)
    with pytest.raises(GraphError, match="already exists"):
        g.connect(("data", "x"), ("b", "input"), strict=False)
    assert g.edges == (Edge("data", "x", "b", "input"), Edge("data", "x", "a", "input"))
    with pytest.raises(AttributeError):
        g.edges.append(Edge("a", "output", "b", "input"))  # a tuple
    with pytest.raises(TypeError):
        g.nodes["c"] = g.node("a")  # a read-only view
    with pytest.raises(AttributeError):
        g.edges = []  # no setter
