"""Softmax (multinomial logistic) regression on scikit-learn's 8x8 digits.

Ten linear scores a_k = w_k·x + b_k go into cross-entropy with the softmax built in
(5.22, averaged over the batch). Eight-by-eight digits are linearly separable on the
training set, where the unpenalised optimum lies at infinity, so a small ridge penalty
λ·Σw² on the weights (λ = 1e-4, the usual suggested size; biases spared)
is added by WeightedSum: the objective then has one minimiser, which L-BFGS on the full
training split reaches in a few epochs — the same one scikit-learn's LogisticRegression
finds with C = 1/(2λn). Accuracy takes the argmax; ECE bins the top-class probability.

    python examples/builders/softmax_regression.py
"""

from __future__ import annotations

from _classic import classifier_metrics, save_all, wire

from nodegraph.model.graph import Graph

RIDGE = 1e-4


def build() -> dict[str, Graph]:
    g = Graph("softmax-regression")
    g.add("data.Digits", id="data", val_fraction=0.2, test_fraction=0.2, batch_size=0)
    g.add("layers.Linear", id="linear", out_features=10)
    g.add("losses.CrossEntropy", id="ce")
    g.add("norm.L2Penalty", id="ridge", weight=RIDGE, nodes=["linear"])
    g.add("losses.WeightedSum", id="objective")
    g.add("optimizers.LBFGS", id="opt", line_search_fn="strong_wolfe")
    wire(g, "data.x -> linear.input", "linear.output -> ce.input", "data.y -> ce.target",
         "ce.loss -> objective.a", "ridge.loss -> objective.b", "objective.loss -> opt.loss")
    classifier_metrics(g, "linear")
    g.update_training(epochs=20, seed=0, device="auto")
    return {"softmax_regression": g}


if __name__ == "__main__":
    save_all(build())
