"""A two-layer graph convolutional network on Zachary's karate club (Kipf & Welling 2017).

Each member is a node with a one-hot identity feature; the friendships are the adjacency.
GCN(16) -> ReLU -> Dropout -> GCN(2) classifies every member's side after the split, but
the loss only sees the training members' labels (data.KarateClub hides the others as -100).
A held-out member has no feature of its own the model was trained on, so it can only be
classified through its friends: what the test accuracy measures is message passing.

    python examples/builders/gcn_karate.py
"""

from __future__ import annotations

from _classic import save_example, wire
from _networks import chain

from nodegraph.model.graph import Graph


def build_graph() -> Graph:
    g = Graph("gcn-karate")
    g.add("data.KarateClub", id="data", val_fraction=0.2, test_fraction=0.2)
    g.add("graph.GCN", id="gcn1", out_features=16)
    g.add("activations.ReLU", id="relu")
    g.add("layers.Dropout", id="dropout", p=0.5)
    g.add("graph.GCN", id="gcn2", out_features=2)
    g.add("losses.CrossEntropy", id="loss")
    g.add("optimizers.Adam", id="opt", lr=0.01, weight_decay=5e-4)
    g.add("metrics.Accuracy", id="accuracy")
    wire(g, "data.x -> gcn1.features", "data.adjacency -> gcn1.adjacency",
         "data.adjacency -> gcn2.adjacency", "gcn2.output -> loss.input",
         "data.y -> loss.target", "loss.loss -> opt.loss", "gcn2.output -> accuracy.input",
         "data.y -> accuracy.target")
    chain(g, "gcn1", "relu", "dropout")
    wire(g, "dropout.output -> gcn2.features")
    g.update_training(epochs=200, seed=0, device="auto")
    return g


def build() -> dict[str, Graph]:
    return {"gcn_karate": build_graph()}


if __name__ == "__main__":
    for file_name, graph in build().items():
        save_example(graph, file_name)
