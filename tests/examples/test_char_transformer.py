"""examples/char_transformer.json: a causal character transformer trained briefly.

A model that knows nothing pays log(V) nats per character; a few epochs must bring the
training loss well below that. The LM head uses the Embedding's matrix (a tie), every
decoding method writes text of the vocabulary after the prompt, and the attention weights
the group exposes are per head, causal (nothing above the diagonal) and sum to one.
"""

from __future__ import annotations

import math

import pytest
import torch
from classic_support import assert_builder_writes_files, run

from nodegraph.runtime.procedure import ProcedureContext, run_procedure
from nodes.data.sequences import BUNDLED_TEXT, vocabulary

VOCAB = vocabulary(BUNDLED_TEXT)


@pytest.fixture(scope="module")
def result():
    torch.set_num_threads(1)
    return run("char_transformer", epochs=6)


def test_the_loss_falls_well_below_chance(result):
    assert result.final["train"]["loss"] < 0.75 * math.log(len(VOCAB))
    assert result.final["val"]["loss"] < 0.8 * math.log(len(VOCAB))


def test_the_head_scores_with_the_embedding_matrix(result):
    module = result.module
    assert module.module_of("lm__head").weight is module.module_of("lm__embed").weight


@pytest.mark.parametrize("method", ["greedy", "temperature", "top_k", "beam"])
def test_every_decoding_method_writes_text(result, method):
    frames = run_procedure(result.compiled, "decode", method=method, max_new_tokens=20)
    assert len(frames) == 20
    text = frames[-1]["text"]
    assert text.startswith("The river ") and len(text) == len("The river ") + 20
    assert set(text) <= set(VOCAB)
    assert frames[-1]["logprob"] < 0


def test_attention_weights_are_causal_per_head(result):
    lm = ProcedureContext(result.compiled).model("lm")
    x = result.compiled.datasets["data"].tensors("val")["x"][:2]
    out = lm(input=x)
    assert out["output"].shape == (2, x.shape[1], len(VOCAB))
    for port in ("weights1", "weights2"):
        w = out[port]
        assert w.shape == (2, 4, x.shape[1], x.shape[1])
        assert torch.allclose(w.sum(-1), torch.ones(()), atol=1e-5)
        assert (w.triu(1) == 0).all()


def test_the_file_is_what_the_builder_writes():
    assert_builder_writes_files("char_transformer")
