"""The optimizer race : one small regression, five optimizers, three noise levels.

A course exercise trains one network on a noisy 1-D regression with
full-batch GD, mini-batch GD, Nesterov's accelerated gradient, Adam and L-BFGS, with 0, 25
and 100 % noise on the targets, and plain GD with η = 0.002, 0.2 and 2.0. The exercise gives no
data, sizes or rates, so these files pick them: y = sin(2πx) on [0, 1] (200 points, a fifth
held out for validation, x z-scored) fitted by a 1-10-1 tanh MLP under MSE. The graphs
differ only in the optimizer block (and the batch size), so each optimizer has its own file
and everything else is switched with --set:

- optimizer_race.json: full-batch GD, lr 0.2 (also the learning-rate comparison);
- optimizer_race_sgd.json: mini-batch SGD, batches of 16, lr 0.05;
- optimizer_race_nesterov.json: full-batch Nesterov, lr 0.05, momentum 0.9;
- optimizer_race_adam.json: Adam, batches of 16, lr 0.01;
- optimizer_race_lbfgs.json: full-batch L-BFGS with a strong-Wolfe line search.

    nodegraph run examples/optimizer_race_adam.json --set data.noise=25
    nodegraph run examples/optimizer_race.json --set opt.lr=0.002

Noise is the data block's: Gaussian with a standard deviation of that % of the clean
signal's, so 100 % is a signal-to-noise ratio of 1 (the exercise's 100 % is pure noise).

    python examples/builders/optimizer_race.py
"""

from __future__ import annotations

from _classic import save_all, wire

from nodegraph.model.graph import Graph

HIDDEN = 10
EPOCHS = 100
RACE = {  # file: (optimizer block, batch size (0 = full batch), its params)
    "optimizer_race": ("optimizers.GD", 0, {"lr": 0.2}),
    "optimizer_race_sgd": ("optimizers.SGD", 16, {"lr": 0.05}),
    "optimizer_race_nesterov": ("optimizers.Nesterov", 0, {"lr": 0.05, "momentum": 0.9}),
    "optimizer_race_adam": ("optimizers.Adam", 16, {"lr": 0.01}),
    "optimizer_race_lbfgs": ("optimizers.LBFGS", 0, {"line_search_fn": "strong_wolfe"}),
}


def race_graph(name: str, optimizer: str, batch_size: int, params: dict) -> Graph:
    """Sinusoid -> Linear(1 -> 10) -> tanh -> Linear(10 -> 1) -> MSE <- `optimizer`."""
    g = Graph(name.replace("_", "-"))
    g.add("data.Sinusoid", id="data", noise=0.0, batch_size=batch_size, normalize="zscore")
    g.add("layers.Linear", id="hidden", out_features=HIDDEN)
    g.add("activations.Tanh", id="tanh")
    g.add("layers.Linear", id="out", out_features=1)
    g.add("losses.MSE", id="mse")
    g.add(optimizer, id="opt", **params)
    wire(g, "data.x -> hidden.input", "hidden.output -> tanh.input", "tanh.output -> out.input",
         "out.output -> mse.input", "data.y -> mse.target", "mse.loss -> opt.loss")
    g.update_training(epochs=EPOCHS, seed=0, device="auto")
    return g


def build() -> dict[str, Graph]:
    return {name: race_graph(name, *entry) for name, entry in RACE.items()}


if __name__ == "__main__":
    save_all(build())
