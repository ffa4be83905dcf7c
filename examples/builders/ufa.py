"""Universal approximation by hand: a steep-sigmoid staircase and threshold-unit bins
(TLU bumps).

ufa_staircase.json: a function f on S = {1..5} is one hidden layer of 2·|S| steep sigmoid
units and a linear output. Unit s has weight w = 10^|S| and bias −w(⌈(s+1)/2⌉ − 0.5), so
units 2k−1 and 2k step up at k − 0.5 and k + 0.5; output weights (f(1), −f(1), …, f(|S|),
−f(|S|)) turn each pair into a bump of height f(k) on (k − 0.5, k + 0.5), and the network
outputs f exactly on S. The offset 10⁻⁹ of one textbook derivation, instead of 0.5, puts every
integer on a step's midpoint, σ = 0.5, and gives (1.5, 1.0, 0.5, 1.25, 2.25) for f = (3, −1, 2, 0.5,
4); the corrected offset 0.5 is used here.

ufa_tlu_bins_<N>.json: sin(2πx) on [0, 1) approximated by N bins of threshold units
: bin j is the pair Θ(x − s_j), Θ(x − s_{j+1}) with output weights
±f(midpoint_j). Nothing is trained (epochs 0); the MSE against the true sine on 400
random points falls as N grows, about as 1/N².

    python examples/builders/ufa.py
"""

from __future__ import annotations

import math

from _classic import save_all, wire
from _networks import chain, check_against_notes

from nodegraph.model.graph import Graph

F = [3.0, -1.0, 2.0, 0.5, 4.0]
BINS = (4, 16, 64)


def staircase_biases(n: int, offset: float = 0.5) -> list[float]:
    """b_s = −10^n (⌈(s+1)/2⌉ − offset) for s = 1..2n (with the corrected offset)."""
    return [-(10.0 ** n) * (math.ceil((s + 1) / 2) - offset) for s in range(1, 2 * n + 1)]


def staircase() -> Graph:
    n = len(F)
    g = Graph("ufa-staircase")
    g.add("data.Table", id="data", columns=["x", "f"],
          rows=[[float(k), f] for k, f in enumerate(F, 1)], inputs=["x"], targets=["f"])
    g.add("layers.Linear", id="steps", out_features=2 * n, weight=[[10.0 ** n]] * (2 * n),
          bias_init=staircase_biases(n))
    g.add("activations.Sigmoid", id="sigmoid")
    g.add("layers.Linear", id="out", out_features=1,
          weight=[[v for f in F for v in (f, -f)]], bias_init=[0.0])
    chain(g, "steps", "sigmoid", "out")
    wire(g, "data.x -> steps.input")
    check_against_notes(g, "out")
    return g


def tlu_bins(bins: int) -> Graph:
    edges = [j / bins for j in range(bins + 1)]
    heights = [math.sin(2 * math.pi * (j + 0.5) / bins) for j in range(bins)]
    g = Graph(f"ufa-tlu-bins-{bins}")
    g.add("data.Sinusoid", id="data", noise=0.0, n=400, val_fraction=0.0, batch_size=0)
    g.add("layers.Linear", id="edges", out_features=2 * bins, weight=[[1.0]] * (2 * bins),
          bias_init=[-e for j in range(bins) for e in (edges[j], edges[j + 1])])
    g.add("activations.Step", id="tlu")
    g.add("layers.Linear", id="out", out_features=1,
          weight=[[v for h in heights for v in (h, -h)]], bias_init=[0.0])
    chain(g, "edges", "tlu", "out")
    wire(g, "data.x -> edges.input")
    check_against_notes(g, "out")
    return g


def build() -> dict[str, Graph]:
    return {"ufa_staircase": staircase(), **{f"ufa_tlu_bins_{n}": tlu_bins(n) for n in BINS}}


if __name__ == "__main__":
    save_all(build())
