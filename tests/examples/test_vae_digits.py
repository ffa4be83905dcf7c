"""examples/vae_digits.json: a VAE on the digits, its prior samples and an interpolation.

Seed 004 E25: training maximises the ELBO (the loss −ELBO falls); the reported loss is
BCE(decoder(μ), x) summed over pixels + KL(N(μ, σ²) ‖ N(0, I)) summed over codes, averaged
over samples (at evaluation Reparameterize returns μ); decoding z ~ N(0, I) gives images,
and decoding (1 − α)z_a + αz_b walks from one digit's reconstruction to the other's.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from classic_support import assert_builder_writes_files, run

from nodegraph.runtime.procedure import run_procedure


@pytest.fixture(scope="module")
def result():
    return run("vae_digits", epochs=12)


def part(result, node):
    return result.module.module_of(node)


def encode(result, x):
    h = torch.relu(part(result, "encoder__hidden")(x))
    return part(result, "encoder__mu")(h), part(result, "encoder__logvar")(h)


def decode(result, z):
    h = torch.relu(part(result, "decoder__hidden")(z))
    return torch.sigmoid(part(result, "decoder__out")(h))


def test_the_negative_elbo_falls_and_is_what_its_formula_gives(result):
    val = [h["val"]["elbo"] for h in result.history]
    assert val[-1] < 0.8 * val[0]
    x = result.compiled.datasets["data"].tensors("test")["x"]
    with torch.no_grad():
        mu, logvar = encode(result, x)
        nll = F.binary_cross_entropy(decode(result, mu), x, reduction="none").sum(1)
        kl = 0.5 * (logvar.exp() + mu**2 - 1 - logvar).sum(1)
    final = result.final["test"]
    assert final["elbo"] == pytest.approx((nll + kl).mean().item(), rel=1e-4)
    assert final["nll"] == pytest.approx(nll.mean().item(), rel=1e-4)
    assert final["kl"] == pytest.approx(kl.mean().item(), rel=1e-4)
    assert kl.mean() > 1.0  # the codes carry information: the posterior is not the prior


def test_prior_samples_are_decoded_codes(result):
    frames = run_procedure(result.compiled, "prior")
    assert [f["index"] for f in frames] == list(range(16))
    z = torch.tensor([f["z"] for f in frames])
    images = torch.tensor([f["image"] for f in frames])
    assert images.shape == (16, 8, 8)
    with torch.no_grad():
        assert images.reshape(16, 64) == pytest.approx(decode(result, z), abs=1e-6)
    # z comes from the seeded N(0, I): the same draw as a generator seeded 0
    expected = torch.randn(16, 8, generator=torch.Generator().manual_seed(0))
    assert z == pytest.approx(expected, abs=1e-6)
    data = result.compiled.datasets["data"].tensors("train")["x"]
    assert images.mean().item() == pytest.approx(data.mean().item(), abs=0.06)


def test_interpolation_walks_between_two_encodings(result):
    frames = run_procedure(result.compiled, "interpolate", index_a=3, index_b=7, steps=5)
    assert [f["alpha"] for f in frames] == pytest.approx([0, 0.25, 0.5, 0.75, 1])
    x = result.compiled.datasets["data"].tensors("test")["x"][[3, 7]]
    with torch.no_grad():
        mu, _ = encode(result, x)
        ends = decode(result, mu).reshape(2, 8, 8)
    images = torch.tensor([f["image"] for f in frames])
    assert images.shape == (5, 8, 8)
    assert images[0] == pytest.approx(ends[0], abs=1e-6)
    assert images[-1] == pytest.approx(ends[1], abs=1e-6)
    assert torch.tensor(frames[2]["z"]) == pytest.approx(mu.mean(0), abs=1e-6)
    # each step moves the image a little: no frame jumps more than half the whole way
    steps = (images[1:] - images[:-1]).abs().sum((1, 2))
    assert steps.max() < 0.5 * (images[-1] - images[0]).abs().sum()


def test_the_file_is_what_the_builder_writes():
    assert_builder_writes_files("vae_digits")
