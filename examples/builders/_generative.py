"""Helpers shared by the builders of the generative examples (autoencoders, VAE, GAN,
diffusion, flow): a chain of layers in one call, and the training settings they share.

Graphs are laid out and saved by `_classic.save_example`, like every other example.
"""

from __future__ import annotations

from _classic import wire
from _networks import chain

from nodegraph.graph import Graph
from nodegraph.groups import GroupDef
from nodegraph.gui.layout import auto_layout


def layers(g: Graph, source: str, *steps: tuple[str, str, dict]) -> str:
    """Add `(id, type, params)` steps wired output → input after `source` ("node.port");
    returns the last step's id."""
    for node, block, params in steps:
        g.add(block, id=node, **params)
    wire(g, f"{source} -> {steps[0][0]}.input")
    chain(g, *(node for node, _, _ in steps))
    return steps[-1][0]


def mlp(prefix: str, sizes: list[int], activation: str = "activations.ReLU",
        last: str | None = None) -> list[tuple[str, str, dict]]:
    """Steps of an MLP: Linear `prefix`1 → activation → ... → Linear `prefix`K, then the
    `last` activation if given (a Sigmoid for pixels in [0, 1])."""
    steps: list[tuple[str, str, dict]] = []
    for i, width in enumerate(sizes, 1):
        if i > 1:
            steps.append((f"{prefix}_act{i - 1}", activation, {}))
        steps.append((f"{prefix}{i}", "layers.Linear", {"out_features": width}))
    if last is not None:
        steps.append((f"{prefix}_out", last, {}))
    return steps


def training(g: Graph, epochs: int, **extra) -> None:
    """The training section every generative example uses: seed 0, any device."""
    g.training.update(epochs=epochs, seed=0, device="auto", **extra)


def define_group(g: Graph, name: str, body: Graph, inputs: dict[str, list[str]],
                 outputs: dict[str, str]) -> None:
    """Add group `name` to `g` with `body` as its inside; ports map to "node.port" refs
    (an input may feed several inner ports). The body is laid out for the editor."""
    def ref(text: str) -> tuple[str, str]:
        node, port = text.split(".")
        return node, port

    body.ui = {"positions": {n: [round(x), round(y)] for n, (x, y) in auto_layout(body).items()}}
    g.groups[name] = GroupDef(name, body, {port: [ref(t) for t in targets]
                                           for port, targets in inputs.items()},
                              {port: ref(src) for port, src in outputs.items()})


def body(name: str, *steps: tuple[str, str, dict]) -> Graph:
    """A group body holding `steps` (id, type, params) chained output → input."""
    inside = Graph(name)
    for node, block, params in steps:
        inside.add(block, id=node, **params)
    chain(inside, *(node for node, _, _ in steps))
    return inside
