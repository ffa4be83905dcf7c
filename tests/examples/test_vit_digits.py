"""examples/vit_digits.json: a small Vision Transformer on the 8x8 digits, trained briefly.

The full run (50 epochs, ≥ 95 % test accuracy at seeds 0, 1 and 2) is reported in
examples/README.md; here its first 8 epochs (warm-up, then the start of the annealing)
already classify most held-out digits, far above the 10 % of chance.
The [CLS] token the head reads is the first of the 17 tokens (16 patches of 2x2 after it),
and every encoder block outputs its attention maps per head.
"""

from __future__ import annotations

import pytest
import torch
from classic_support import assert_builder_writes_files, run

from nodegraph.runtime.probes import trace_batch

QUICK = 8


@pytest.fixture(scope="module")
def result():
    torch.set_num_threads(1)
    return run("vit_digits", epochs=QUICK)


@pytest.fixture(scope="module")
def trace(result):
    return {record.node: record for record in trace_batch(result.compiled)}


def test_a_few_epochs_classify_most_held_out_digits(result):
    assert result.final["test"]["accuracy"] >= 0.8
    # label smoothing 0.1 puts the floor of the loss near 0.5, not 0
    assert result.final["train"]["loss"] < 0.9


def test_the_rate_warms_up_for_five_epochs_then_anneals(result):
    rates = [h["lr"]["opt"] for h in result.history]  # after each epoch's step
    assert rates[0] < 0.3 * 0.003
    assert rates[:4] == sorted(rates[:4]) and rates[3] == pytest.approx(0.003)
    assert rates[3:] == sorted(rates[3:], reverse=True) and rates[-1] > 0.9 * 0.003


def test_the_head_reads_the_cls_token(trace):
    tokens = trace["cls"].outputs["output"]
    assert tokens.shape[1:] == (17, 64)
    assert torch.equal(trace["take"].outputs["output"], trace["block2"].outputs["output"][:, 0])


@pytest.mark.parametrize("block", ["block1", "block2"])
def test_attention_maps_are_there_per_head(trace, block):
    weights = trace[block].outputs["weights"]
    assert weights.shape[1:] == (4, 17, 17)
    assert torch.allclose(weights.sum(-1), torch.ones(weights.shape[:-1]), atol=1e-5)
    # the heads differ: each looks at the patches its own way
    assert (weights[:, 0] - weights[:, 1]).abs().max() > 1e-3


def test_the_file_is_what_the_builder_writes():
    assert_builder_writes_files("vit_digits")
