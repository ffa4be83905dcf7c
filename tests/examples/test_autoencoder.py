"""examples/autoencoder.json: reconstruction loss against the bottleneck width.

Seed 004 Table 1 (E16): the wider the hidden layer, the lower the reconstruction loss
(16 < 32 < 64 < 128 units in loss order reversed). Quick mode trains each width for a few
epochs; the reported MSE must equal the MSE of the network written out by hand with the
trained weights, σ(W₂ relu(W₁x + b₁) + b₂) against x.
"""

from __future__ import annotations

import pytest
import torch
from classic_support import assert_builder_writes_files, run

WIDTHS = (16, 32, 64, 128)


@pytest.fixture(scope="module")
def results():
    return {w: run("autoencoder", epochs=8, enc__out_features=w) for w in WIDTHS}


def reconstruct(result, x):
    enc, dec = result.module.blocks["enc"], result.module.blocks["dec"]
    with torch.no_grad():
        return torch.sigmoid(dec(torch.relu(enc(x))))


def test_loss_falls_as_the_bottleneck_widens(results):
    losses = [results[w].final["test"]["mse"] for w in WIDTHS]
    assert all(a > b for a, b in zip(losses, losses[1:], strict=False)), losses
    assert losses[0] > 2 * losses[-1]  # 16 units lose clearly more than 128
    for w in WIDTHS:  # train and test agree, as in the notes (no overfitting at this size)
        final = results[w].final
        assert final["train"]["mse"] == pytest.approx(final["test"]["mse"], rel=0.15)


def test_reported_mse_is_the_reconstruction_error_of_the_trained_net(results):
    for w in (16, 128):
        result = results[w]
        x = result.compiled.datasets["data"].tensors("test")["x"]
        assert result.module.blocks["enc"].out_features == w
        mse = ((reconstruct(result, x) - x) ** 2).mean().item()
        assert result.final["test"]["mse"] == pytest.approx(mse, rel=1e-4)


def test_the_file_is_what_the_builder_writes():
    assert_builder_writes_files("autoencoder")
