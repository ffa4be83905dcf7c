"""examples/rbm_digits.json and dbm_digits.json: RBMs on the binarised digits (seed 004
E22–E23).

CD-1 raises the pseudo-likelihood epoch after epoch; the trained RBM's Gibbs chain, with
the top four rows clamped to a validation digit and the bottom four started from coin
flips, fills the bottom rows in closer to the truth than random guessing. The DBM's
greedy stages each raise their own RBM's pseudo-likelihood, RBM 1 unchanged while frozen;
its Gibbs chain through both layers inpaints the same way and, from noise, ends near
the digits, and the top layer changes what it draws.
"""

from __future__ import annotations

import pytest
import torch
from classic_support import assert_builder_writes_files, example, run

import nodegraph
from nodegraph.runtime.procedure import run_procedure

QUICK = 6  # epochs: the pseudo-likelihood climbs from −24 to about −15 in these


@pytest.fixture(scope="module")
def rbm():
    return run("rbm_digits", epochs=QUICK)


def test_cd1_raises_the_pseudo_likelihood(rbm):
    pl = [h["val"]["pl_rbm"] for h in rbm.history]
    assert pl[-1] > pl[0] + 5  # −24.3 → −15.0 measured
    assert pl[-1] > max(pl[:3])


def test_the_gibbs_chain_inpaints_the_occluded_rows(rbm):
    assert_inpaints(run_procedure(rbm.compiled, "inpaint", count=64))


def assert_inpaints(frames: list[dict]) -> None:
    truth = torch.tensor(frames[0]["data"]).reshape(64, 8, 8)[:, 4:]
    guess = torch.tensor(frames[0]["image"])[:, 4:]  # the coin flips the chain starts at
    filled = torch.stack([torch.tensor(f["image"])[:, 4:] for f in frames[-10:]]).mean(0)
    # mean absolute error per occluded pixel: coins ≈ 0.5, the chain's probabilities far less
    random_error = (guess - truth).abs().mean().item()
    chain_error = (filled - truth).abs().mean().item()
    assert random_error == pytest.approx(0.5, abs=0.05)
    assert chain_error < 0.6 * random_error
    prior = truth.mean()  # and below guessing each pixel by its mean ink
    assert chain_error < (prior * (1 - prior) * 2).item()


@pytest.fixture(scope="module")
def dbm():
    g = example("dbm_digits")
    for stage in g.training["stages"]:
        stage["epochs"] = 4
    return nodegraph.train(g, device="cpu")


def test_dbm_stages_each_raise_their_rbms_pseudo_likelihood(dbm):
    history = dbm.history
    one = [h for h in history if h["stage"] == "rbm1"]
    two = [h for h in history if h["stage"] == "rbm2"]
    assert len(one) == len(two) == 4
    assert one[-1]["val"]["pl_rbm1"] > one[0]["val"]["pl_rbm1"] + 5  # −25.8 → −17.2
    assert two[-1]["val"]["pl_rbm2"] > two[0]["val"]["pl_rbm2"] + 5  # −32.2 → −23.8
    frozen = {round(h["val"]["pl_rbm1"], 9) for h in two}
    assert frozen == {round(one[-1]["val"]["pl_rbm1"], 9)}  # RBM 1 frozen in stage 2


def test_the_dbm_inpaints_through_both_layers(dbm):
    frames = run_procedure(dbm.compiled, "inpaint", count=64)
    assert_inpaints(frames)
    assert torch.tensor(frames[-1]["top"]).shape == (64, 32)  # the top layer's units


def test_dbm_samples_from_noise_end_near_the_digits_and_the_top_layer_matters(dbm):
    """Chains from coin flips end far closer to a training digit than the coins were; the
    same chains with the top layer's weights zeroed (h1 then hears the pixels and biases
    only) draw something else."""
    data = (dbm.compiled.datasets["data"].tensors("train")["x"] > 0).float()
    frames = run_procedure(dbm.compiled, "sample", count=64)
    samples, noise = torch.tensor(frames[-1]["visible"]), torch.tensor(frames[0]["visible"])

    def nearest(x: torch.Tensor) -> float:
        return torch.cdist(x, data).min(1).values.pow(2).mean().item()

    assert nearest(samples) < 0.5 * nearest(noise)
    top = dbm.compiled.module.module_of("rbm2")
    trained = top.weight.detach().clone()
    with torch.no_grad():
        top.weight.zero_()
    try:
        alone = torch.tensor(run_procedure(dbm.compiled, "sample", count=64)[-1]["visible"])
    finally:
        with torch.no_grad():
            top.weight.copy_(trained)
    assert (alone - samples).abs().mean() > 0.05


def test_builder_writes_the_files():
    assert_builder_writes_files("rbm")
