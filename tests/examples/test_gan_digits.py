"""examples/gan_digits.json: an MLP GAN on the digits with a shared discriminator.

Seed 004 E24: D and G play the minimax game with the non-saturating generator loss; near
the equilibrium D's loss approaches 2·log 2 and G's log 2. The three discriminator
instances share one set of weights (counted once), each optimizer changes only the
weights of its own network, and the generator's samples move towards the data (their
mean intensity and per-pixel spread approach the digits').
"""

from __future__ import annotations

import math

import pytest
import torch
from classic_support import assert_builder_writes_files, example, run

import nodegraph
from nodegraph.runtime.procedure import run_procedure

G_PARAMS = (16 * 128 + 128) + (128 * 64 + 64)
D_PARAMS = (64 * 128 + 128) + (128 + 1)


@pytest.fixture(scope="module")
def result():
    return run("gan_digits", epochs=12)


def images(compiled, count=200):
    return torch.tensor([f["image"] for f in run_procedure(compiled, "samples", count=count)])


def weights(module, prefix):
    return {k: v.detach().clone() for k, v in module.block_state().items()
            if k.startswith(prefix)}


def test_losses_head_for_the_equilibrium(result):
    for h in result.history:
        assert math.isfinite(h["train"]["d_loss"]) and math.isfinite(h["train"]["g_loss"])
    last = result.history[-1]["train"]
    assert last["d_loss"] == pytest.approx(2 * math.log(2), abs=0.35)
    assert last["g_loss"] == pytest.approx(math.log(2), abs=0.35)


def test_the_discriminator_is_counted_once(result):
    assert result.compiled.parameter_count() == G_PARAMS + D_PARAMS
    shared = result.module.module_of("d_fake__hidden")
    assert shared is result.module.module_of("d_real__hidden")
    assert shared is result.module.module_of("d_gen__hidden")


@pytest.mark.parametrize("opt, mine, other", [("opt_d", "d_real__", "generator__"),
                                              ("opt_g", "generator__", "d_real__")])
def test_each_optimizer_changes_only_its_network(opt, mine, other):
    g = example("gan_digits")
    g.set_training("stages", [{"name": opt, "epochs": 1, "optimizers": [opt]}])
    before = nodegraph.compile(g, device="cpu", seed=0).module
    after = nodegraph.train(g, device="cpu").module
    for key, value in weights(before, other).items():
        assert torch.equal(weights(after, other)[key], value), key
    assert all(not torch.equal(weights(after, mine)[k], v)
               for k, v in weights(before, mine).items())


def test_samples_move_towards_the_data(result):
    data = result.compiled.datasets["data"].tensors("train")["x"]
    untrained = images(nodegraph.compile(example("gan_digits"), device="cpu", seed=0))
    trained = images(result.compiled)
    assert trained.shape == (200, 8, 8)
    gap_before = abs(untrained.mean() - data.mean())
    gap_after = abs(trained.mean() - data.mean())
    assert gap_before > 0.15 and gap_after < 0.05, (gap_before, gap_after)
    # no collapse onto one image: the samples vary per pixel about as much as the digits
    assert trained.reshape(200, 64).std(0).mean() > 0.6 * data.std(0).mean()


def test_the_file_is_what_the_builder_writes():
    assert_builder_writes_files("gan_digits")
