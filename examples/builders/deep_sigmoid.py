"""Vanishing gradients in a deep MLP, and what cures them.

Ten hidden layers of 32 units on the 8x8 digits (z-scored), trained by plain
SGD so the size of each layer's gradient is the size of its step. The textbook estimate
δ^(L−p) ~ (h′)^(p+1) says the gradient reaching layer ℓ shrinks with every sigmoid
it passes back through; the probes (`nodegraph run --probe-out`, the editor's animation)
show it as the gradient norm at each layer's output. The files differ in structure or in
every layer's init, so each is its own file:

- deep_sigmoid.json: sigmoid, weights N(0, 1) (the "old practice").
- deep_sigmoid_xavier.json: sigmoid, Xavier N(0, 2/(n_in + n_out)) . Xavier's
  derivation assumes h′(0) = 1; the sigmoid's h′(0) is 1/4, so the
  gradient falls about fourfold per layer: far worse than with N(0, 1).
- deep_tanh_xavier.json: tanh with Xavier, the pairing the derivation is for.
- deep_relu_he.json: ReLU with He's N(0, 2/n_in).
- deep_sigmoid_batchnorm.json: the N(0, 1) sigmoid net with BatchNorm before each
  activation: every layer's input is standardised again.

    python examples/builders/deep_sigmoid.py
"""

from __future__ import annotations

from _classic import save_all, score, wire
from _networks import chain

from nodegraph.model.graph import Graph

DEPTH, WIDTH = 10, 32
VARIANTS = {  # file: (activation, init, batch norm)
    "deep_sigmoid": ("activations.Sigmoid", "normal", False),
    "deep_sigmoid_xavier": ("activations.Sigmoid", "xavier_normal", False),
    "deep_tanh_xavier": ("activations.Tanh", "xavier_normal", False),
    "deep_relu_he": ("activations.ReLU", "kaiming_normal", False),
    "deep_sigmoid_batchnorm": ("activations.Sigmoid", "normal", True),
}


def hidden_layers() -> list[str]:
    """The ids of the hidden Linear layers, input side first."""
    return [f"fc{i}" for i in range(1, DEPTH + 1)]


def deep_mlp(name: str, activation: str, init: str, batch_norm: bool) -> Graph:
    g = Graph(name.replace("_", "-"))
    g.add("data.Digits", id="data", normalize="zscore")
    source = "data.x"
    for i, fc in enumerate(hidden_layers(), 1):
        g.add("layers.Linear", id=fc, out_features=WIDTH, init=init)
        steps = [fc]
        if batch_norm:
            g.add("norm.BatchNorm1d", id=f"bn{i}")
            steps.append(f"bn{i}")
        g.add(activation, id=f"act{i}")
        steps.append(f"act{i}")
        wire(g, f"{source} -> {fc}.input")
        chain(g, *steps)
        source = f"{steps[-1]}.output"
    g.add("layers.Linear", id="out", out_features=10, init=init)
    g.add("losses.CrossEntropy", id="loss")
    g.add("optimizers.SGD", id="opt", lr=0.1)
    wire(g, f"{source} -> out.input", "out.output -> loss.input", "data.y -> loss.target",
         "loss.loss -> opt.loss")
    score(g, "out", accuracy="metrics.Accuracy")
    g.update_training(epochs=30, seed=0, device="auto")
    return g


def build() -> dict[str, Graph]:
    return {name: deep_mlp(name, *spec) for name, spec in VARIANTS.items()}


if __name__ == "__main__":
    save_all(build())
