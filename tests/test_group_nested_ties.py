"""Grouping keeps ties into nodes nested at any depth (issue #34's known gap (c)).

An LM head tied to an embedding, the head grouped, that group grouped again, and again:
every level must still name the head where it now is, and the compiled graph must use one
tensor for both (the head's output equals `x @ emb.weight.T + bias`)."""

from __future__ import annotations

import nodegraph
from nodegraph.model.graph import Graph, Tie
from nodegraph.model.groups import flatten, make_group

VOCAB, D = 12, 8


def tied_lm() -> Graph:
    g = Graph("tied-lm")
    g.add("data.TokenText", id="data")
    g.add("layers.Embedding", id="emb", num_embeddings=VOCAB, embedding_dim=D)
    g.add("layers.Linear", id="pre", out_features=D)
    g.add("attention.LMHead", id="head", vocab_size=VOCAB)
    g.connect(("data", "x"), ("emb", "input"))
    g.connect(("emb", "output"), ("pre", "input"))
    g.connect(("pre", "output"), ("head", "input"))
    g.add_tie(Tie("emb", "weight", "head", "weight"))
    return g


def _tied_tensors_are_one(g: Graph) -> None:
    model = nodegraph.compile(g, device="cpu", for_training=False)
    assert model.parameter_count() == VOCAB * D + (D * D + D) + VOCAB  # the head: its bias
    weights = {id(p) for p in model.module.parameters()}
    assert len(weights) == 4  # emb.weight, pre.weight, pre.bias, head.bias: head.weight
    # is emb.weight (one tensor)


def test_a_tie_into_a_group_three_levels_deep_names_the_node_where_it_is():
    g = tied_lm()
    make_group(g, ["head"], "Head", instance="h1")
    assert g.ties == (Tie("emb", "weight", "h1__head", "weight"),)
    make_group(g, ["pre", "h1"], "Block", instance="b1")
    assert g.ties == (Tie("emb", "weight", "b1__h1__head", "weight"),)
    make_group(g, ["b1"], "Stack", instance="s1")
    assert g.ties == (Tie("emb", "weight", "s1__b1__h1__head", "weight"),)
    report = nodegraph.validate(g)
    assert report.ok, report.problems
    flat = flatten(g).graph
    assert "s1__b1__h1__head" in flat.nodes
    assert flat.ties == (Tie("emb", "weight", "s1__b1__h1__head", "weight"),)
    _tied_tensors_are_one(g)


def test_a_tie_whose_both_ends_end_up_in_one_group_names_both_inside_it():
    g = tied_lm()
    make_group(g, ["head"], "Head", instance="h1")
    make_group(g, ["emb", "pre", "h1"], "Model", instance="m1")
    assert g.ties == (Tie("m1__emb", "weight", "m1__h1__head", "weight"),)
    assert g.groups["Model"].body.ties == ()  # a body's ties name its own nodes only
    report = nodegraph.validate(g)
    assert report.ok, report.problems
    assert flatten(g).graph.ties == (Tie("m1__emb", "weight", "m1__h1__head", "weight"),)
    _tied_tensors_are_one(g)
