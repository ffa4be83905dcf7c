"""Binary logistic regression on two moons, with its calibration.

One Linear unit gives the logit f = θᵀx + θ0; BCEWithLogits is the negative Bernoulli
log-likelihood with the sigmoid built in,
minimised by full-batch gradient descent . The
loss is convex, so GD lands on the same θ as scikit-learn's solver. Accuracy thresholds the
logit at 0 (p = 0.5); ECE bins the predicted probabilities and reports the
reliability-diagram data (confidence, accuracy and count per bin). The moons are not
linearly separable, so the line misclassifies about one point in eight.

    python examples/builders/logistic_binary.py
"""

from __future__ import annotations

from _classic import classifier_metrics, save_all, wire

from nodegraph.model.graph import Graph


def build() -> dict[str, Graph]:
    g = Graph("logistic-binary")
    g.add("data.Moons", id="data", target="binary", n=400, noise=25.0, val_fraction=0.2,
          test_fraction=0.2, batch_size=0, normalize="zscore")
    g.add("layers.Linear", id="linear", out_features=1)
    g.add("losses.BCEWithLogits", id="bce")
    g.add("optimizers.GD", id="opt", lr=1.0)
    wire(g, "data.x -> linear.input", "linear.output -> bce.input", "data.y -> bce.target",
         "bce.loss -> opt.loss")
    classifier_metrics(g, "linear")
    g.update_training(epochs=200, seed=0, device="auto")
    return {"logistic_binary": g}


if __name__ == "__main__":
    save_all(build())
