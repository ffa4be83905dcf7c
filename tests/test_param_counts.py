"""Parameter counts (validate's `param_counts`, `nodegraph info`) count a tensor once: a
tied parameter at the tie's source, a shared group's weights at the instance that owns
them — the same total as the compiled module's distinct parameters."""

from __future__ import annotations

import nodegraph
from nodegraph.cli.main import main
from nodegraph.model.graph import Graph, Tie
from nodegraph.model.groups import make_group

VOCAB, D = 20, 16


def tied_lm() -> Graph:
    """Embedding (VOCAB × D) → LM head whose (VOCAB × D) weight is the embedding's."""
    g = Graph("tied-lm")
    g.add("data.TokenText", id="data")
    g.add("layers.Embedding", id="emb", num_embeddings=VOCAB, embedding_dim=D)
    g.add("attention.LMHead", id="head", vocab_size=VOCAB)
    g.connect(("data", "x"), ("emb", "input"))
    g.connect(("emb", "output"), ("head", "input"))
    g.add_tie(Tie("emb", "weight", "head", "weight"))
    return g


def test_a_tied_lm_head_adds_only_its_bias():
    g = tied_lm()
    ties = g.ties
    g.set_ties([])
    untied = nodegraph.validate(g).param_counts["head"]
    g.set_ties(ties)
    # the same tie twice (as a file may hold it: strict=False): still once
    g.add_tie(Tie("emb", "weight", "head", "weight"), strict=False)
    counts = nodegraph.validate(g).param_counts
    assert counts["emb"] == VOCAB * D
    assert counts["head"] == untied - VOCAB * D == VOCAB  # its bias
    total = nodegraph.compile(g, device="cpu", for_training=False).parameter_count()
    assert sum(counts.values()) == total == VOCAB * D + VOCAB


def shared_and_tied() -> Graph:
    """Digits (64 pixels) through two instances of one Linear group sharing weights, and a
    third Linear `proj` whose weight is tied to the group's inner Linear."""
    g = Graph("shared")
    g.add("data.Digits", id="data")
    g.add("layers.Linear", id="fc", out_features=8)
    g.add("layers.Linear", id="proj", out_features=8)
    g.add("layers.Add", id="sum")
    g.add("layers.Add", id="out")
    g.connect(("data", "x"), ("fc", "input"))
    g.connect(("data", "x"), ("proj", "input"))
    make_group(g, ["fc"], "enc", instance="enc_a")
    g.add("group.enc", id="enc_b", share="enc_a")
    g.connect(("data", "x"), ("enc_b", "input"))
    g.connect(("enc_a", "output"), ("sum", "a"))
    g.connect(("enc_b", "output"), ("sum", "b"))
    g.connect(("sum", "output"), ("out", "a"))
    g.connect(("proj", "output"), ("out", "b"))
    g.add_tie(Tie("enc_a__fc", "weight", "proj", "weight"))
    return g


def test_a_shared_group_and_a_tie_into_it_count_each_tensor_once(tmp_path, capsys):
    g = shared_and_tied()
    report = nodegraph.validate(g)
    assert report.ok, report.problems
    counts = report.param_counts
    assert counts["enc_a"] == 64 * 8 + 8 and counts.get("enc_b", 0) == 0
    assert counts["proj"] == 8  # its bias; the weight is enc_a's
    module = nodegraph.compile(g, device="cpu", for_training=False).module
    assert module.module_of("proj").weight is module.module_of("enc_b__fc").weight
    total = sum(p.numel() for p in set(module.parameters()))
    assert sum(counts.values()) == total == 64 * 8 + 8 + 8
    path = tmp_path / "g.json"
    nodegraph.save(g, path)
    assert main(["info", str(path)]) == 0
    assert f"trainable parameters: {total:,}" in capsys.readouterr().out


def test_the_char_transformer_counts_its_tied_head_once():
    """The example ties lm__embed ↔ lm__head inside its group instance."""
    g = nodegraph.load("examples/char_transformer.json")
    counts = nodegraph.validate(g).param_counts
    total = nodegraph.compile(g, device="cpu", for_training=False).parameter_count()
    assert counts["lm"] == total


def test_ties_declared_in_a_group_body_count_once_per_instance():
    """Two instances of a body tying its two 1×1 Linears: one weight each."""
    from tests.test_groups import tied_pairs

    counts = nodegraph.validate(tied_pairs()).param_counts
    assert counts["first"] == counts["second"] == 1
