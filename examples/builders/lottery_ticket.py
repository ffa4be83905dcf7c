"""Lottery tickets on the 8x8 digits: iterative magnitude pruning with rewinding.

An MLP 64-128-64-10 (a group instance `mlp`, ReLU, Adam) classifies the digits; the
procedure `lottery` (procedures.LotteryTicket, Frankle & Carbin 2019) trains it, prunes
half of each layer's surviving weights per round, and retrains the survivors twice: from
their initial values (the rewound ticket) and from a new random initialisation with the
same mask (the control). Each round is one frame: sparsity and test accuracy of both.

    python examples/builders/lottery_ticket.py
    nodegraph sample examples/lottery_ticket.json lottery --out lottery.json
"""

from __future__ import annotations

from _classic import save_example, wire
from _networks import chain

from nodegraph.model.graph import Graph
from nodegraph.model.groups import make_group

EPOCHS = 15


def build_graph() -> Graph:
    g = Graph("lottery-ticket")
    g.add("data.Digits", id="data", batch_size=32, val_fraction=0.2, test_fraction=0.2,
          split="stratified")
    g.add("layers.Linear", id="fc1", out_features=128)
    g.add("activations.ReLU", id="relu1")
    g.add("layers.Linear", id="fc2", out_features=64)
    g.add("activations.ReLU", id="relu2")
    g.add("layers.Linear", id="fc3", out_features=10)
    g.add("losses.CrossEntropy", id="loss")
    g.add("optimizers.Adam", id="opt", lr=0.002)
    g.add("metrics.Accuracy", id="accuracy")
    chain(g, "fc1", "relu1", "fc2", "relu2", "fc3")
    wire(g, "data.x -> fc1.input", "fc3.output -> loss.input", "data.y -> loss.target",
         "loss.loss -> opt.loss", "fc3.output -> accuracy.input",
         "data.y -> accuracy.target")
    make_group(g, ["fc1", "relu1", "fc2", "relu2", "fc3"], "mlp", instance="mlp")
    g.add("procedures.LotteryTicket", id="lottery", model="mlp", rounds=6, rate=0.5,
          control="reinit")
    g.update_training(epochs=EPOCHS, seed=0, device="auto")
    return g


def build() -> dict[str, Graph]:
    return {"lottery_ticket": build_graph()}


if __name__ == "__main__":
    for file_name, graph in build().items():
        save_example(graph, file_name)
