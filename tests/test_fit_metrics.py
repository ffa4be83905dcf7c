"""`fit(..., metrics=[...])` (issue #35, items 1 and 4 together): the named metric blocks are
wired to the model's prediction and target, and what the run reports for a split is the
metric over that whole split, equal to scikit-learn's on the model's own predictions."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import nodegraph
from nodegraph.model.errors import NodegraphError


def data(n=200, seed=1):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 2)).astype(np.float32)
    y = ((x[:, 0] + 0.5 * x[:, 1] + 0.7 * rng.normal(size=n)) > 0).astype(np.float32)[:, None]
    return x, y


def test_metrics_on_fit_equal_scikit_learn_on_the_validation_arrays():
    from sklearn.metrics import f1_score, roc_auc_score

    x, y = data()
    xv, yv = data(80, seed=2)
    g = nodegraph.load("examples/logistic_binary.json")
    m = nodegraph.fit(g, x=x, y=y, validation_data=(xv, yv), epochs=3,
                      metrics=["auroc", "f1"])
    last = m.history[-1]["val"]
    assert {"auroc", "f1"} <= set(last)
    probability = torch.sigmoid(torch.as_tensor(np.asarray(m.predict(xv)))).numpy().ravel()
    assert last["auroc"] == pytest.approx(roc_auc_score(yv.ravel(), probability), abs=1e-5)
    assert last["f1"] == pytest.approx(f1_score(yv.ravel(), probability > 0.5), abs=1e-5)


def test_an_unknown_metric_name_is_refused_with_a_close_match():
    x, y = data(40)
    with pytest.raises(NodegraphError, match="auroc"):
        nodegraph.fit(nodegraph.load("examples/logistic_binary.json"), x=x, y=y, epochs=1,
                      metrics=["aurco"])
