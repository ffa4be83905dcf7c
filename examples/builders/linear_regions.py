"""Linear regions of a small ReLU MLP on 2-D data.

One hidden layer of n = 8 ReLU units on the two moons, trained briefly with Adam. The
procedure `regions` evaluates the hidden pre-activations on grids of 50², 200² and 800²
points covering the data and every crossing of the 8 lines w_i·x + b_i = 0, and counts the
distinct activation patterns — each one a region where the network is a single affine map.
Eight lines in general position cut the plane into ½(n² + n + 2) = 37 regions, the bound of
the bound ½(n² + n + 2); the finest grid finds them all (a coarse grid misses thin ones).

    python examples/builders/linear_regions.py
    nodegraph sample examples/linear_regions.json regions --train
"""

from __future__ import annotations

from _classic import save_all, wire

from nodegraph.model.graph import Graph

UNITS = 8


def build() -> dict[str, Graph]:
    g = Graph("linear-regions")
    g.add("data.Moons", id="data", target="binary", n=400, noise=15.0, val_fraction=0.2)
    g.add("layers.Linear", id="hidden", out_features=UNITS)
    g.add("activations.ReLU", id="relu")
    g.add("layers.Linear", id="out", out_features=1)
    g.add("losses.BCEWithLogits", id="bce")
    g.add("optimizers.Adam", id="opt", lr=0.02)
    g.add("metrics.Accuracy", id="accuracy")
    wire(g, "data.x -> hidden.input", "hidden.output -> relu.input", "relu.output -> out.input",
         "out.output -> bce.input", "data.y -> bce.target", "bce.loss -> opt.loss",
         "out.output -> accuracy.input", "data.y -> accuracy.target")
    g.add("procedures.LinearRegions", id="regions", model="out", units=["hidden"])
    g.update_training(epochs=30, seed=0, device="auto")
    return {"linear_regions": g}


if __name__ == "__main__":
    save_all(build())
