"""Convolution by hand: a 2x2 kernel with stride 2, and a vertical-edge detector.

conv_arithmetic.json: the 4x4 image X = [[2,5,4,1],[3,1,2,0],[4,5,7,1],[1,2,3,4]], the
kernel K = [[1,0],[0,1]], stride 2, no padding, no bias → [[3,4],[6,11]] (cross-
correlation: no flip). edge_detection.json: a 6x6 image, bright (10) in the
left three columns, through the vertical-edge filter [[1,0,−1]]×3 → every row
[0, 30, 30, 0]; a well-known textbook version prints 10, but each of the three filter rows adds 10.

Each image is one table row of pixels, reshaped to (N, 1, H, W); the targets are the
expected output map, so the loss a run prints is 0 when the convolution reproduces it.

    python examples/builders/conv_arithmetic.py
"""

from __future__ import annotations

from _classic import save_all, wire
from _networks import chain, check_against_notes, image_table

from nodegraph.model.graph import Graph

X = [[2, 5, 4, 1], [3, 1, 2, 0], [4, 5, 7, 1], [1, 2, 3, 4]]
EDGE_IMAGE = [[10, 10, 10, 0, 0, 0]] * 6
VERTICAL_EDGE = [[1, 0, -1]] * 3


def convolution(name: str, image: list, expected: list, kernel: list, stride: int) -> Graph:
    """Table row → Reshape (1, H, W) → Conv2d with a hand-set kernel → Flatten → loss."""
    g = Graph(name)
    g.add("data.Table", id="data", **image_table(image, expected))
    g.add("layers.Reshape", id="image", shape=[1, len(image), len(image[0])])
    g.add("layers.Conv2d", id="conv", out_channels=1, kernel_size=len(kernel), stride=stride,
          bias=False, weight=kernel)
    g.add("layers.Flatten", id="flat")
    wire(g, "data.x -> image.input")
    chain(g, "image", "conv", "flat")
    check_against_notes(g, "flat")
    return g


def build() -> dict[str, Graph]:
    return {
        "conv_arithmetic": convolution("conv-arithmetic", X, [[3, 4], [6, 11]],
                                       [[1, 0], [0, 1]], stride=2),
        "edge_detection": convolution("edge-detection", EDGE_IMAGE, [[0, 30, 30, 0]] * 4,
                                      VERTICAL_EDGE, stride=1),
    }


if __name__ == "__main__":
    save_all(build())
