"""conv_arithmetic.json and edge_detection.json: hand-set kernels reproduce seed 004 eq 7
([[3, 4], [6, 11]]) and seed 002's vertical-edge map (8.12), corrected from 10 to 30."""

from __future__ import annotations

import pytest
import torch
from classic_support import example

import nodegraph
from nodegraph.runtime.probes import trace_batch


@pytest.mark.parametrize("name, image, expected", [
    ("conv_arithmetic", [[2, 5, 4, 1], [3, 1, 2, 0], [4, 5, 7, 1], [1, 2, 3, 4]],
     [[3, 4], [6, 11]]),
    ("edge_detection", [[10, 10, 10, 0, 0, 0]] * 6, [[0, 30, 30, 0]] * 4),
])
def test_convolution_by_hand(name, image, expected):
    g = example(name)
    out = {r.node: r.outputs.get("output") for r in trace_batch(nodegraph.compile(g))}
    assert torch.equal(out["image"][0, 0], torch.tensor(image, dtype=torch.float32))
    assert torch.equal(out["conv"][0, 0], torch.tensor(expected, dtype=torch.float32))
    assert nodegraph.train(g).final["train"]["loss"] == 0.0
