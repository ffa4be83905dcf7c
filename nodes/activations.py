"""Element-wise activation functions."""

from __future__ import annotations

from torch import nn

from nodegraph.spec import block


def _simple(name: str, module: type[nn.Module], doc: str, keywords: tuple[str, ...] = ()):
    return block(f"activations.{name}", "op", doc, lambda p, x: module(),
                 inputs=["input"], outputs=["output"], keywords=keywords)


BLOCKS = [
    _simple("ReLU", nn.ReLU, "Rectified linear unit max(0, x).", ("rectifier",)),
    _simple("Tanh", nn.Tanh, "Hyperbolic tangent, squashing to (-1, 1).", ("squash",)),
    _simple("Sigmoid", nn.Sigmoid, "Logistic sigmoid 1 / (1 + exp(-x)), squashing to (0, 1).",
            ("logistic",)),
]
