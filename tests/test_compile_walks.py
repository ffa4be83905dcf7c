"""What the per-node savings of a build and a compile must not change: compile walks the
model's parameters once and shares the walk (device check, each optimizer's parameters and
names), and `Graph.add_node`/`connect` make their `GraphChanged` only for a listener."""

from __future__ import annotations

import nodegraph
from nodegraph.model import graph as graph_module
from nodegraph.model.graph import Graph, GraphChanged, Tie


def tied() -> Graph:
    """Two Linear layers whose biases are one parameter (a tie), then a loss and Adam."""
    g = Graph("tied")
    g.add("data.XOR", "data")
    g.add("layers.Linear", "a", out_features=2)
    g.add("layers.Linear", "b", out_features=2)
    g.add("layers.Linear", "out", out_features=1)
    g.add("losses.BCEWithLogits", "loss")
    g.add("optimizers.Adam", "opt", lr=0.05)
    for source, target in [(("data", "x"), ("a", "input")), (("a", "output"), ("b", "input")),
                           (("b", "output"), ("out", "input")),
                           (("out", "output"), ("loss", "input")),
                           (("data", "y"), ("loss", "target")),
                           (("loss", "loss"), ("opt", "loss"))]:
        g.connect(source, target)
    g.add_tie(Tie("a", "bias", "b", "bias"))
    g.update_training({"device": "cpu"})
    return g


def test_a_tied_parameter_is_stepped_once_in_torchs_order():
    compiled = nodegraph.compile(tied())
    module = compiled.module
    assert module.blocks["a"].bias is module.blocks["b"].bias
    expected = list(module.parameters())  # torch's walk: each parameter once, first place
    assert len(expected) == 5  # a.weight, a.bias (= b.bias), b.weight, out.weight, out.bias
    run = compiled.optimizers[0]
    assert [id(p) for p in run.optimizer.param_groups[0]["params"]] == [id(p) for p in expected]
    assert sorted(id(p) for p in run.params) == sorted(id(p) for p in expected)


def test_edits_make_their_events_only_for_a_listener(monkeypatch):
    made: list[str] = []

    class Counted(GraphChanged):
        def __init__(self, kind: str, *args, **kwargs) -> None:
            made.append(kind)
            super().__init__(kind, *args, **kwargs)

    monkeypatch.setattr(graph_module, "GraphChanged", Counted)
    g = Graph("quiet")
    g.add("data.XOR", "data")
    g.add("layers.Linear", "fc", out_features=1)
    g.connect(("data", "x"), ("fc", "input"))
    assert made == []  # nobody listens: nothing made
    seen: list[GraphChanged] = []
    g.events.subscribe(seen.append)
    g.add("losses.MSE", "loss")
    edge = g.connect(("fc", "output"), ("loss", "input"))
    assert [(e.kind, e.node, e.edge) for e in seen] == [("node_added", "loss", None),
                                                       ("edge_added", None, edge)]
    assert made == ["node_added", "edge_added"]
