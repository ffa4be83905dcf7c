"""Helpers shared by the builders of the network examples: threshold units, the worked
MLP and backprop numbers, convolution arithmetic, the CNN and the gradient-size nets.

Several of these graphs only evaluate weights set by hand. `nodegraph run` trains, and a
graph that trains needs a loss and an optimizer, so `check_against_notes` adds them: the
data's targets hold what the notes print, the loss is the squared difference to them (0
when the graph reproduces the notes) and `training.epochs` is 0, so a run evaluates once.
"""

from __future__ import annotations

from _classic import wire

from nodegraph.model.graph import Graph


def chain(g: Graph, *nodes: str) -> None:
    """Wire each node's `output` into the next node's `input`."""
    wire(g, *(f"{a}.output -> {b}.input" for a, b in zip(nodes, nodes[1:], strict=False)))


def check_against_notes(g: Graph, output: str, data: str = "data",
                        loss: str = "losses.MSE") -> None:
    """A loss from `output` to the data's y (the notes' values), an optimizer so the file
    runs with `nodegraph run`, and 0 epochs: the run evaluates the hand-set weights once."""
    g.add(loss, id="loss")
    g.add("optimizers.GD", id="opt", lr=0.1)
    wire(g, f"{output}.output -> loss.input", f"{data}.y -> loss.target",
         "loss.loss -> opt.loss")
    g.update_training(epochs=0, seed=0, device="auto")


def image_table(image: list[list[float]], expected: list[list[float]]) -> dict:
    """data.Table params for one image as a row of pixels (columns p<row>_<col>) whose
    targets are the `expected` output map (columns y<row>_<col>), both row by row."""
    pixels = [f"p{i + 1}_{j + 1}" for i in range(len(image)) for j in range(len(image[0]))]
    outputs = [f"y{i + 1}_{j + 1}" for i in range(len(expected))
               for j in range(len(expected[0]))]
    row = [v for r in image for v in r] + [v for r in expected for v in r]
    return {"columns": pixels + outputs, "rows": [row], "inputs": pixels, "targets": outputs}
