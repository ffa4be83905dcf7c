"""examples/ddpm_toy.json: a DDPM on the two moons, sampled by the reverse chain.

Training lowers the ε-prediction error below its value for a network that predicts
nothing (E‖ε‖²/2 = 1 per coordinate); the samples of procedures.DDPMSample start as
N(0, I) noise and end on the moons: their mean nearest-neighbour distance to the data and
their kernel MMD² (Gaussian kernel, σ = 0.5) both fall well below those of the noise.
"""

from __future__ import annotations

import pytest
import torch
from classic_support import assert_builder_writes_files, run

from nodegraph.runtime.procedure import run_procedure


@pytest.fixture(scope="module")
def result():
    return run("ddpm_toy", epochs=40)


def nearest(samples, data):
    return torch.cdist(samples, data).min(1).values.mean().item()


def mmd2(a, b, sigma=0.5):
    """Biased MMD² estimate with k(u, v) = exp(−‖u − v‖²/2σ²)."""
    def k(u, v):
        return torch.exp(-torch.cdist(u, v) ** 2 / (2 * sigma**2)).mean()
    return (k(a, a) + k(b, b) - 2 * k(a, b)).item()


def test_the_noise_prediction_error_falls(result):
    losses = [h["train"]["loss"] for h in result.history]
    assert losses[-1] < 0.75 * losses[0] and losses[-1] < 0.55


def test_reverse_chain_samples_land_on_the_data(result):
    frames = run_procedure(result.compiled, "sample", count=500)
    assert [f["t"] for f in frames] == list(range(100, -1, -10))
    noise, samples = (torch.tensor(frames[i]["x"]).float() for i in (0, -1))
    assert samples.shape == (500, 2)
    data = result.compiled.datasets["data"].tensors("val")["x"]
    assert nearest(samples, data) < 0.6 * nearest(noise, data)
    assert mmd2(samples, data) < 0.3 * mmd2(noise, data)
    # the moons are z-scored: the samples keep roughly zero mean and unit spread
    assert samples.mean(0) == pytest.approx(torch.zeros(2), abs=0.2)
    assert samples.std(0) == pytest.approx(torch.ones(2), abs=0.25)


def test_the_file_is_what_the_builder_writes():
    assert_builder_writes_files("ddpm_toy")
