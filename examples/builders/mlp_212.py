"""A 2-1-2 ReLU network worked by hand, with hand-set weights and input.

w⁽¹⁾ = (0.5, −0.5), b⁽¹⁾ = 0.1; w⁽²⁾ = (0.7, 0.3) (a worked version labels 0.3 as w⁽²⁾₁,₂; it is
w⁽²⁾₂,₁, the weight into the second output), b⁽²⁾ = (0.2, −0.2); input a⁽⁰⁾ = (5, 2), ReLU
on both layers. Forward: hidden max(0, 2.5 − 1 + 0.1) = 1.6, outputs max(0, 0.7·1.6 + 0.2)
= 1.32 and max(0, 0.3·1.6 − 0.2) = 0.28. The table's targets are those printed outputs,
so the loss a run prints is 0 exactly when the graph computes what the hand calculation does.

    python examples/builders/mlp_212.py
"""

from __future__ import annotations

from _classic import save_all, wire
from _networks import chain, check_against_notes

from nodegraph.model.graph import Graph


def build() -> dict[str, Graph]:
    g = Graph("mlp-2-1-2")
    g.add("data.Table", id="data", columns=["a1", "a2", "out1", "out2"],
          rows=[[5, 2, 1.32, 0.28]], inputs=["a1", "a2"], targets=["out1", "out2"])
    g.add("layers.Linear", id="hidden", out_features=1, weight=[0.5, -0.5], bias_init=[0.1])
    g.add("activations.ReLU", id="relu1")
    g.add("layers.Linear", id="out", out_features=2, weight=[[0.7], [0.3]],
          bias_init=[0.2, -0.2])
    g.add("activations.ReLU", id="relu2")
    wire(g, "data.x -> hidden.input")
    chain(g, "hidden", "relu1", "out", "relu2")
    check_against_notes(g, "relu2")
    return {"mlp_212": g}


if __name__ == "__main__":
    save_all(build())
