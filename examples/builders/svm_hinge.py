"""A soft-margin linear SVM trained by gradient descent.

The hinge form argmin ‖θ₊‖² + λ'·Σ max(0, 1 − z_i(θ₊ᵀx_i + θ0)) , divided by
λ'n, is the mean hinge loss plus λ·‖θ₊‖² with λ = 1/(λ'n): Linear(2 -> 1) scores, Hinge
reads the 0/1 labels as z = ∓1, L2Penalty adds λ·Σw² over the weights only (θ0 is not
penalised), WeightedSum adds the two and full-batch (sub)gradient descent minimises the
sum. Its minimiser is the one a QP solver finds (scikit-learn's SVC with C = 1/(2λn)).
Two Gaussian blobs (centres (±1, 0), standard deviation 0.5) overlap a little, so a few
points sit inside the margin or on the wrong side: the slack the soft margin allows. A
larger `svm_l2.weight` widens the margin 1/‖θ₊‖ and lets more points violate it (some texts
state the direction of their λ' the wrong way round).

    python examples/builders/svm_hinge.py
"""

from __future__ import annotations

from _classic import save_all, score, wire

from nodegraph.model.graph import Graph


def build() -> dict[str, Graph]:
    g = Graph("svm-hinge")
    g.add("data.Blobs", id="data", centers=2, n=200, noise=50.0, val_fraction=0.0,
          test_fraction=0.25, batch_size=0)
    g.add("layers.Linear", id="linear", out_features=1)
    g.add("losses.Hinge", id="hinge")
    g.add("norm.L2Penalty", id="svm_l2", weight=0.01, nodes=["linear"])
    g.add("losses.WeightedSum", id="objective")
    g.add("optimizers.GD", id="opt", lr=0.1)
    wire(g, "data.x -> linear.input", "linear.output -> hinge.input", "data.y -> hinge.target",
         "hinge.loss -> objective.a", "svm_l2.loss -> objective.b",
         "objective.loss -> opt.loss")
    score(g, "linear", accuracy="metrics.Accuracy")
    g.update_training(epochs=1000, seed=0, device="auto")
    return {"svm_hinge": g}


if __name__ == "__main__":
    save_all(build())
