"""deep_*.json: the gradient reaching each of ten hidden layers at the first step, as the
probes report it (the data of the editor's animation). Seed 002 §7.1: through sigmoids
with N(0, 1) weights it shrinks layer by layer towards the input; Xavier's init makes the
sigmoid net far worse (its derivation assumes h′(0) = 1, the sigmoid has 1/4); tanh with
Xavier, ReLU with He, and the N(0, 1) sigmoid net with BatchNorm keep every layer's
gradient within an order of magnitude of the others."""

from __future__ import annotations

import pytest
from classic_support import example

import nodegraph
from nodegraph.model.events import Emitter
from nodegraph.runtime.probes import ProbeFrame

LAYERS = [f"fc{i}" for i in range(1, 11)]


def first_step_gradients(name: str) -> list[float]:
    """‖∂loss/∂(output of fc_i)‖ for fc1 (input side) .. fc10, at the first training step."""
    frames: list[ProbeFrame] = []
    events = Emitter()
    events.subscribe(frames.append, ProbeFrame)
    g = example(name)
    g.set_param("data", "batch_size", 256)  # fewer steps: the first is the one probed
    nodegraph.train(g, epochs=1, events=events)
    first = frames[0]
    assert first.step == 1
    return [first.grads[fc]["output"].norm for fc in LAYERS]


def test_sigmoid_with_unit_normal_weights_vanishes_towards_the_input():
    norms = first_step_gradients("deep_sigmoid")
    assert all(a < b for a, b in zip(norms, norms[1:], strict=False))  # every layer back shrinks
    assert norms[0] < norms[-1] / 10


def test_xavier_does_not_rescue_the_sigmoid():
    norms = first_step_gradients("deep_sigmoid_xavier")
    ratios = [a / b for a, b in zip(norms, norms[1:], strict=False)]
    assert max(ratios) < 0.35  # about 1/4 per layer: Var(w)·n·σ′(0)² = 1/16 in the variance
    assert norms[0] < 1e-4 * norms[-1]


@pytest.mark.parametrize("name", ["deep_tanh_xavier", "deep_relu_he",
                                  "deep_sigmoid_batchnorm"])
def test_the_remedies_keep_every_layer_within_an_order_of_magnitude(name):
    norms = first_step_gradients(name)
    assert max(norms) < 10 * min(norms)
