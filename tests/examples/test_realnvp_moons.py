"""examples/realnvp_moons.json: a RealNVP flow learns the two moons by maximum likelihood.

The log-likelihood rises (FlowNLL falls) and ends well above that of the best Gaussian
for the same points, ½·log det(2πe·Σ) nats, which a flow starting near the identity
begins close to. The reported NLL is −log N(z; 0, I) − Σ log|det| recomputed layer by
layer, and the couplings' inverses map z back onto x exactly.
"""

from __future__ import annotations

import math

import pytest
import torch
from classic_support import assert_builder_writes_files, run

LAYERS = 6


@pytest.fixture(scope="module")
def result():
    return run("realnvp_moons", epochs=20)


def val_points(result):
    return result.compiled.datasets["data"].tensors("val")["x"]


def test_log_likelihood_rises_beyond_the_best_gaussian(result):
    val = [h["val"]["nll"] for h in result.history]
    assert val[-1] < val[0] - 0.5
    x = val_points(result).double()
    gaussian = 0.5 * torch.logdet(2 * math.pi * math.e * torch.cov(x.T)).item()
    assert result.final["val"]["nll"] < gaussian - 0.8, (result.final["val"]["nll"], gaussian)


def test_nll_is_the_change_of_variables_formula_and_the_flow_inverts(result):
    x = val_points(result)
    layers = [result.module.blocks[f"c{i}"] for i in range(1, LAYERS + 1)]
    with torch.no_grad():
        z, log_det = x, torch.zeros(len(x))
        for layer in layers:
            kept = z * layer.mask
            s = torch.tanh(layer.scale_net(kept)) * (1 - layer.mask)
            t = layer.shift_net(kept) * (1 - layer.mask)
            z, log_det = kept + (1 - layer.mask) * z * torch.exp(s) + t, log_det + s.sum(1)
        nll = 0.5 * (z**2).sum(1) + math.log(2 * math.pi) - log_det
        back = z
        for layer in reversed(layers):
            back = layer.inverse(back)
    assert result.final["val"]["nll"] == pytest.approx(nll.mean().item(), rel=1e-4)
    assert back == pytest.approx(x, abs=1e-4)
    # the masks alternate: each layer keeps the coordinate the one before transformed
    assert [layer.mask.tolist() for layer in layers[:2]] == [[1.0, 0.0], [0.0, 1.0]]


def test_the_file_is_what_the_builder_writes():
    assert_builder_writes_files("realnvp_moons")
