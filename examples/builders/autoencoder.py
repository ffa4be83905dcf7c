"""An autoencoder width sweep on the 8x8 digits, after a course exercise on MNIST.

64 pixels → Linear(hidden) → ReLU → Linear(64) → Sigmoid, trained to reproduce its input
with the mean squared error per pixel. The exercise trains 784-pixel MNIST with 16, 32, 64
and 128 hidden units and find the reconstruction loss falls as the bottleneck widens;
here the width is the `enc.out_features` param, so one file runs all four:

    nodegraph run examples/autoencoder.json --set enc.out_features=16

    python examples/builders/autoencoder.py
"""

from __future__ import annotations

from _classic import save_example, wire
from _generative import layers, training

from nodegraph.model.graph import Graph


def autoencoder() -> Graph:
    g = Graph("autoencoder")
    g.add("data.Digits", id="data", test_fraction=0.2, batch_size=32)
    layers(g, "data.x", ("enc", "layers.Linear", {"out_features": 32}),
           ("code", "activations.ReLU", {}), ("dec", "layers.Linear", {"out_features": 64}),
           ("recon", "activations.Sigmoid", {}))
    g.add("losses.MSE", id="loss")
    g.add("metrics.MSE", id="mse")
    g.add("optimizers.Adam", id="opt", lr=0.005)
    wire(g, "recon.output -> loss.input", "data.x -> loss.target", "loss.loss -> opt.loss",
         "recon.output -> mse.input", "data.x -> mse.target")
    training(g, 40)
    return g


def build() -> dict[str, Graph]:
    return {"autoencoder": autoencoder()}


if __name__ == "__main__":
    for file_name, graph in build().items():
        save_example(graph, file_name)
