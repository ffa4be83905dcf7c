"""examples/gcn_karate.json: held-out members classified through their friendships.

With one-hot identity features a held-out member's own feature never meets a label, so
without the graph its prediction would rest on nothing; the GCN must classify the held-out
members (test split) well, and its accuracy must be the share of argmax scores that equal
the labels on exactly the labelled nodes of the split.
"""

from __future__ import annotations

import torch
from classic_support import assert_builder_writes_files, run

from nodes.data.graphs import IGNORE


def test_a_two_layer_gcn_classifies_held_out_members():
    torch.set_num_threads(1)
    result = run("gcn_karate", epochs=100)
    test = result.compiled.datasets["data"].tensors("test")
    with torch.no_grad():
        result.module.eval()
        scores = result.module({("data", k): v for k, v in test.items()})[("gcn2", "output")]
    labelled = test["y"] != IGNORE
    assert labelled.sum() == 6  # 20 % of 34, stratified: 3 of each club
    accuracy = (scores.argmax(1)[labelled] == test["y"][labelled]).float().mean().item()
    assert accuracy == result.final["test"]["accuracy"]
    assert accuracy >= 5 / 6
    assert result.final["train"]["accuracy"] >= 0.95


def test_the_file_is_what_the_builder_writes():
    assert_builder_writes_files("gcn_karate")
