"""Graph blocks: the GCN layer against its formula on a graph small enough to do by hand,
the karate club as a whole-graph dataset with labels hidden outside each split, and a
two-layer GCN trained through validate and train."""

from __future__ import annotations

import math

import networkx as nx
import numpy as np
import pytest
import torch
from blockcheck import build

import nodegraph
from nodegraph.model.errors import PortError
from nodes.data.graphs import IGNORE, karate_club

# the path 0 - 1 - 2
PATH = torch.tensor([[0.0, 1, 0], [1, 0, 1], [0, 1, 0]])
X = torch.tensor([[1.0, 0], [0, 1], [2, 2]])


def gcn(features=X, adjacency=PATH, **params):
    return build("graph.GCN", {"features": features, "adjacency": adjacency},
                 **{"out_features": 2, **params})[2]


def test_gcn_is_the_symmetrically_normalised_propagation_by_hand():
    m = gcn(weight=[[1.0, 0], [0, 1]], bias_init=[0.5, -0.5])  # W = I shows the mixing
    # A + I has degrees 2, 3, 2: entry (i, j) becomes 1 / sqrt(d_i d_j)
    s6 = 1 / math.sqrt(6)
    a_hat = torch.tensor([[1 / 2, s6, 0], [s6, 1 / 3, s6], [0, s6, 1 / 2]])
    assert torch.allclose(m(X, PATH), a_hat @ X + torch.tensor([0.5, -0.5]), atol=1e-6)
    m = gcn(out_features=4)
    assert torch.allclose(m(X, PATH), a_hat @ X @ m.weight.T + m.bias, atol=1e-6)


def test_mean_and_sum_aggregation_and_a_lonely_node():
    mean = gcn(normalize="mean", weight=[[1.0, 0], [0, 1]], bias=False)
    assert torch.allclose(mean(X, PATH)[1], X.mean(0))  # node 1 averages all three
    total = gcn(normalize="none", add_self_loops=False, weight=[[1.0, 0], [0, 1]], bias=False)
    assert torch.allclose(total(X, PATH)[1], X[0] + X[2])
    alone = PATH.clone()
    alone[1, 2] = alone[2, 1] = 0  # node 2 has no neighbours and, here, no self loop
    out = gcn(add_self_loops=False, bias=False)(X, alone)
    assert torch.isfinite(out).all() and (out[2] == 0).all()


def test_gcn_shape_errors_name_the_port():
    with pytest.raises(PortError) as e:
        gcn(adjacency=torch.zeros(3, 4))
    assert e.value.port == "adjacency" and "(3, 3)" in str(e.value)
    with pytest.raises(PortError) as e:
        gcn(features=torch.zeros(3, dtype=torch.long))
    assert e.value.port == "features"


# -- the karate club ---------------------------------------------------------------------------

def karate(**params):
    spec = nodegraph.default_registry().get("data.KarateClub")
    values, problems = spec.resolve_params(params)
    assert not problems, problems
    return spec.build(values)


def test_karate_club_is_networkxs_graph_with_the_club_labels():
    adjacency, labels = karate_club()
    g = nx.karate_club_graph()
    assert adjacency.shape == (34, 34) and adjacency.sum() == 2 * g.number_of_edges() == 156
    assert np.array_equal(adjacency, adjacency.T) and set(np.unique(adjacency)) == {0, 1}
    assert labels[0] == 0 and labels[33] == 1 and labels.sum() == 17  # Mr. Hi, the Officer


def test_every_split_is_the_whole_graph_with_only_its_own_labels():
    ds = karate(val_fraction=0.2, test_fraction=0.2)
    adjacency, labels = karate_club()
    seen = []
    for split in ("train", "val", "test"):
        t = ds.tensors(split)
        assert ds.num_batches(split) == 1 and ds.step_batch(split) == 34
        assert torch.equal(t["x"], torch.eye(34))
        assert torch.equal(t["adjacency"], torch.from_numpy(adjacency).float())
        labelled = (t["y"] != IGNORE).nonzero().flatten().numpy()
        assert np.array_equal(t["y"][labelled].numpy(), labels[labelled])
        seen.append(labelled)
    assert sorted(np.concatenate(seen)) == list(range(34))  # each node labelled once
    assert [len(s) for s in seen] == [22, 6, 6]  # stratified: 3 of each 17-member club
    assert not ds.shuffle
    degree = karate(features="degree").tensors("train")["x"]
    assert torch.equal(degree[:, 0], torch.from_numpy(adjacency.sum(1)).float())


def test_a_two_layer_gcn_learns_the_clubs():
    g = nodegraph.Graph()
    g.add("data.KarateClub", id="data", val_fraction=0.0, test_fraction=0.3)
    g.add("graph.GCN", id="gcn1", out_features=8)
    g.add("activations.ReLU", id="relu")
    g.add("graph.GCN", id="gcn2", out_features=2)
    g.add("losses.CrossEntropy", id="loss")
    g.add("optimizers.Adam", id="opt", lr=0.05)
    g.connect(("data", "x"), ("gcn1", "features"))
    g.connect(("gcn1", "output"), ("relu", "input"))
    g.connect(("relu", "output"), ("gcn2", "features"))
    for layer in ("gcn1", "gcn2"):
        g.connect(("data", "adjacency"), (layer, "adjacency"))
    g.connect(("gcn2", "output"), ("loss", "input"))
    g.connect(("data", "y"), ("loss", "target"))
    g.connect(("loss", "loss"), ("opt", "loss"))
    report = nodegraph.validate(g)
    assert report.ok, report.problems
    assert report.shape_text("gcn2", "output") == "(N, 2)"
    result = nodegraph.train(g, epochs=60, device="cpu")
    assert result.final["train"]["loss"] < 0.1
    test = result.compiled.datasets["data"].tensors("test")
    with torch.no_grad():
        scores = result.module({("data", k): v for k, v in test.items()})[("gcn2", "output")]
    labelled = test["y"] != IGNORE
    accuracy = (scores.argmax(1)[labelled] == test["y"][labelled]).float().mean()
    assert accuracy >= 0.9  # held-out members, classified from their friendships alone
