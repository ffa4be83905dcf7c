"""Threshold logic units with hand-set weights.

nand_tlu.json is one TLU, y = Θ(1.5 − x1 − x2): the NAND truth table.
xor_tlu.json needs a hidden unit and is not layered: the inputs feed the hidden TLU and
also, past it, the output TLU: h = Θ(x1 + x2 − 1.5), y = Θ(x1 + x2 − 2h − 0.5).
These weights reproduce the XOR truth table. Nothing is
learned (the step's gradient is zero), so both files evaluate with 0 epochs; the
loss is the squared error of the 0/1 outputs, i.e. the share of wrong rows.

    python examples/builders/tlu.py
"""

from __future__ import annotations

from _classic import save_all, score, wire
from _networks import chain, check_against_notes

from nodegraph.model.graph import Graph


def tlu(g: Graph, name: str, weight: list[float], bias: float) -> str:
    """A threshold unit Θ(w·x + b): a Linear with hand-set weights, then a step."""
    g.add("layers.Linear", id=name, out_features=1, weight=weight, bias_init=[bias])
    g.add("activations.Step", id=f"{name}_step")
    chain(g, name, f"{name}_step")
    return f"{name}_step"


def nand() -> Graph:
    g = Graph("nand-tlu")
    g.add("data.NAND", id="data")
    out = tlu(g, "tlu", [-1.0, -1.0], 1.5)
    wire(g, "data.x -> tlu.input")
    check_against_notes(g, out)
    score(g, out, accuracy="metrics.Accuracy")
    g.set_param("accuracy", "threshold", 0.5)  # the step outputs 0 or 1
    return g


def xor() -> Graph:
    g = Graph("xor-tlu")
    g.add("data.XOR", id="data")
    hidden = tlu(g, "hidden", [1.0, 1.0], -1.5)
    g.add("layers.Concat", id="skip")  # the inputs again, next to h: the skip edges
    out = tlu(g, "out", [1.0, 1.0, -2.0], -0.5)
    wire(g, "data.x -> hidden.input", "data.x -> skip.a", f"{hidden}.output -> skip.b",
         "skip.output -> out.input")
    check_against_notes(g, out)
    score(g, out, accuracy="metrics.Accuracy")
    g.set_param("accuracy", "threshold", 0.5)
    return g


def build() -> dict[str, Graph]:
    return {"nand_tlu": nand(), "xor_tlu": xor()}


if __name__ == "__main__":
    save_all(build())
