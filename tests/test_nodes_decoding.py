"""procedures.Decode on a bigram model set by hand: an Embedding whose row for token a holds
the scores of the token after a, so the next-token distribution is known exactly."""

from __future__ import annotations

import math

import pytest
import torch

import nodegraph
from nodegraph.model.errors import NodegraphError
from nodegraph.model.graph import Graph
from nodegraph.runtime.procedure import run_procedure

# next-token probabilities after a, b, c: greedy a -> b (0.6) -> a (0.4) has probability
# 0.24, but a -> c (0.4) -> c (0.9) has 0.36, which only a search over two paths finds
BIGRAM = [[0.0, 0.6, 0.4],
          [0.4, 0.3, 0.3],
          [0.05, 0.05, 0.9]]


def bigram_lm(table=BIGRAM):
    g = Graph("bigram")
    g.add("data.TokenText", id="data", text="abcabccba", seq_len=3, stride=1)
    g.add("layers.Embedding", id="lm", num_embeddings=3, embedding_dim=3)
    g.add("procedures.Decode", id="decode", model="lm", prompt="a", max_new_tokens=2)
    g.connect(("data", "x"), ("lm", "input"))
    compiled = nodegraph.compile(g, for_training=False)
    with torch.no_grad():  # log-probabilities as scores (log 0 -> a very low score)
        compiled.module.blocks["lm"].weight.copy_(torch.tensor(table).clamp_min(1e-9).log())
    return compiled


def texts(frames):
    return [f["text"] for f in frames]


def test_greedy_follows_the_argmax_chain():
    compiled = bigram_lm()
    frames = run_procedure(compiled, "decode", max_new_tokens=5)
    # a -> b -> a -> b ... : each token the row maximum after the previous one
    assert texts(frames) == ["ab", "aba", "abab", "ababa", "ababab"]
    assert [f["token"] for f in frames] == [1, 0, 1, 0, 1]
    assert frames[1]["logprob"] == pytest.approx(math.log(0.6 * 0.4), rel=1e-5)


def test_beam_search_finds_the_more_probable_sequence_greedy_misses():
    compiled = bigram_lm()
    greedy = run_procedure(compiled, "decode")
    beam = run_procedure(compiled, "decode", method="beam", beam_width=2)
    assert greedy[-1]["text"] == "aba" and beam[-1]["text"] == "acc"
    assert beam[-1]["logprob"] == pytest.approx(math.log(0.36), rel=1e-5)
    assert beam[-1]["logprob"] > greedy[-1]["logprob"]
    assert [f["text"] for f in beam] == ["ac", "acc"]
    # a beam of one is greedy search
    one = run_procedure(compiled, "decode", method="beam", beam_width=1)
    assert texts(one) == texts(greedy)


def test_top_k_samples_only_among_the_k_best():
    # the same row after every token: a 0.5, b 0.3, c 0.2; the top 2 are a and b
    table = [[0.5, 0.3, 0.2], [0.5, 0.3, 0.2], [0.5, 0.3, 0.2]]
    compiled = bigram_lm(table)
    counts = torch.zeros(3)
    for seed in range(20):
        frames = run_procedure(compiled, "decode", method="top_k", top_k=2,
                               max_new_tokens=20, seed=seed)
        for f in frames:
            counts[f["token"]] += 1
    assert counts[2] == 0  # c is third best everywhere
    # renormalised over the two best: a with 0.5/0.8 = 0.625
    assert counts[0] / counts.sum() == pytest.approx(0.625, abs=0.04)


def test_temperature_sampling_matches_the_tempered_distribution():
    table = [[0.5, 0.3, 0.2]] * 3
    compiled = bigram_lm(table)
    tokens = []
    for seed in range(10):
        tokens += [f["token"] for f in run_procedure(compiled, "decode", method="temperature",
                                                     temperature=0.5, max_new_tokens=50,
                                                     seed=seed)]
    tempered = torch.tensor(table[0]) ** 2  # p^(1/T), T = 0.5
    tempered /= tempered.sum()
    observed = torch.bincount(torch.tensor(tokens), minlength=3) / len(tokens)
    assert observed == pytest.approx(tempered.tolist(), abs=0.04)
    # the seed makes a run repeatable
    again = run_procedure(compiled, "decode", method="temperature", max_new_tokens=10, seed=3)
    assert texts(again) == texts(run_procedure(compiled, "decode", method="temperature",
                                               max_new_tokens=10, seed=3))


def test_a_prompt_outside_the_vocabulary_is_refused():
    compiled = bigram_lm()
    with pytest.raises(NodegraphError, match=r"\['z'\] that are not in the vocabulary"):
        run_procedure(compiled, "decode", prompt="az")
