"""examples/vit_digits.json: a small Vision Transformer on the 8x8 digits, trained briefly.

The full run (up to 60 epochs, early stopping) is reported in examples/README.md; a few
epochs already classify most held-out digits, well above the 10 % of chance, and the [CLS]
token the head reads is the first of the 17 tokens (16 patches of 2x2 after it).
"""

from __future__ import annotations

import pytest
import torch
from classic_support import assert_builder_writes_files, run

from nodegraph.probes import trace_batch


@pytest.fixture(scope="module")
def result():
    torch.set_num_threads(1)
    return run("vit_digits", epochs=8)


def test_a_few_epochs_classify_most_held_out_digits(result):
    assert result.final["test"]["accuracy"] >= 0.8
    assert result.final["train"]["loss"] < 0.6


def test_the_head_reads_the_cls_token(result):
    trace = {record.node: record for record in trace_batch(result.compiled)}
    tokens = trace["cls"].outputs["output"]
    assert tokens.shape[1:] == (17, 64)
    assert torch.equal(trace["take"].outputs["output"], trace["block2"].outputs["output"][:, 0])


def test_the_file_is_what_the_builder_writes():
    assert_builder_writes_files("vit_digits")
