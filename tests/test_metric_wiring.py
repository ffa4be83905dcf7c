"""wire_metrics: metric blocks wired to the loss's prediction and target, validated, trained,
and reported in the history under the metric's name."""

from __future__ import annotations

import pytest
import torch
from sklearn import metrics as skm

import nodegraph
from nodegraph.interop.metric_wiring import wire_metrics
from nodegraph.model.errors import NodegraphError
from nodegraph.runtime import feeding


@pytest.fixture
def moons():
    return nodegraph.load("examples/logistic_binary.json")


NAMES = ["auroc", "f1", "precision", "mcc"]


def test_wired_metrics_validate_train_and_report(moons):
    loss = next(n.id for n in moons if n.type.startswith("losses."))
    wired = wire_metrics(moons, NAMES)
    assert "auroc" not in moons.nodes  # a copy
    for name in NAMES:
        assert wired.source_of(name, "input").source == moons.source_of(loss, "input").source
        assert wired.source_of(name, "target").source == moons.source_of(loss, "target").source
    nodegraph.validate(wired)
    result = nodegraph.fit(wired, epochs=1)
    for split in ("train", "val"):
        stats = result.history[0][split]
        for name in NAMES:
            assert -1.0 <= stats[name] <= 1.0


def test_wired_auroc_equals_sklearn_on_the_split(moons):
    wired = wire_metrics(moons, ["auroc", "accuracy"])
    assert "accuracy_2" in wired.nodes  # the graph's own accuracy keeps its id
    result = nodegraph.fit(wired, epochs=2)
    c = result.compiled
    loss = next(n.id for n in wired if n.type.startswith("losses."))
    prediction = wired.source_of(loss, "input").source
    target = wired.source_of(loss, "target").source
    scores, targets = [], []
    with torch.no_grad():
        c.module.eval()
        for values in feeding.eval_batches(c.datasets, "val", 7, False):
            c.module.run(c.eval_plan, values)
            scores.append(values[prediction].reshape(-1))
            targets.append(values[target].reshape(-1))
    s, t = torch.cat(scores), torch.cat(targets)
    assert len(t) == 80  # the whole val split (a fifth of 400)
    assert result.final["val"]["auroc"] == pytest.approx(skm.roc_auc_score(t, s), abs=1e-6)
    assert result.final["val"]["accuracy_2"] == result.final["val"]["accuracy"]


def test_bad_names_and_graphs_are_said(moons):
    with pytest.raises(NodegraphError, match="unknown metric 'aucroc'.*did you mean"):
        wire_metrics(moons, ["aucroc"])
    bare = nodegraph.Graph()
    with pytest.raises(NodegraphError, match="no optimizer"):
        wire_metrics(bare, ["f1"])


def test_a_taken_id_gets_a_suffix(moons):
    once = wire_metrics(moons, ["f1"])
    twice = wire_metrics(once, ["f1"])
    assert {"f1", "f1_2"} <= set(twice.nodes)
