"""A classic worked backpropagation exercise: 2 → 2 sigmoid → 1 linear, one GD step.

Two inputs → two sigmoid units → one output, three patterns, one full-batch gradient step
with η = 1 on E = (1/P) Σ_p ½(y_p − t_p)². The exercise writes the bias as a constant input
x₁ = 1; here it is each Linear's bias: W¹ = [[0.2, −1.2], [−0.7, −0.7]], b¹ = (0.4, 0.7),
W² = (−0.5, 2.3), b² = 0.4. The loss is the mean squared error halved
(a WeightedSum with w_a = 0.5), so its value is the exercise's E = 0.924 and GD with lr 1 takes
the exercise's step.

The exercise's forward values come out exactly. Its printed deltas mix conventions:
the output is linear in the forward pass but δ² multiplies by σ′(ξ²) as if it were a
sigmoid. Autograd on this (linear-output) graph gives the consistent values of a linear output
instead, e.g. new W² = (−0.8554; −1.1137, 1.6113) after the step.

    python examples/builders/backprop_appendix.py
"""

from __future__ import annotations

from _classic import save_all, wire
from _networks import chain

from nodegraph.model.graph import Graph

# the exercise's inputs without the bias row: (x₂, x₃) per pattern; then the targets
PATTERNS = [[1.0, 1.0, -1.0], [0.0, -2.0, 1.0], [-1.0, 1.0, 1.0]]


def build() -> dict[str, Graph]:
    g = Graph("backprop-appendix-b")
    g.add("data.Table", id="data", columns=["x2", "x3", "target"], rows=PATTERNS,
          inputs=["x2", "x3"], targets=["target"])  # batch_size 0: the full batch
    g.add("layers.Linear", id="hidden", out_features=2,
          weight=[[0.2, -1.2], [-0.7, -0.7]], bias_init=[0.4, 0.7])
    g.add("activations.Sigmoid", id="sigmoid")
    g.add("layers.Linear", id="out", out_features=1, weight=[-0.5, 2.3], bias_init=[0.4])
    g.add("losses.MSE", id="mse")
    g.add("losses.WeightedSum", id="loss", w_a=0.5)  # E = ½ · mean (y − t)²
    g.add("optimizers.GD", id="opt", lr=1.0)
    wire(g, "data.x -> hidden.input", "out.output -> mse.input", "data.y -> mse.target",
         "mse.loss -> loss.a", "loss.loss -> opt.loss")
    chain(g, "hidden", "sigmoid", "out")
    g.update_training(epochs=1, seed=0, device="auto")
    return {"backprop_appendix": g}


if __name__ == "__main__":
    save_all(build())
