"""The `weight` param of the classification losses against torch's weighted losses, and
`fit(class_weight=...)` setting it (issue #35, item 2)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import nodegraph
from nodegraph.interop.class_weights import balanced
from nodegraph.model.errors import NodegraphError, PortError
from tests.blockcheck import build, run_op

torch.manual_seed(0)


def close(a, b, tol: float = 1e-6) -> None:
    assert torch.allclose(torch.as_tensor(a, dtype=torch.float32),
                          torch.as_tensor(b, dtype=torch.float32), atol=tol, rtol=tol), (a, b)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_weight_is_torchs(reduction):
    scores, idx = torch.randn(9, 3), torch.tensor([0, 2, 1, 1, 2, 0, 0, 2, 1])
    w = [0.5, 2.0, 3.5]
    got = run_op("losses.CrossEntropy", {"input": scores, "target": idx},
                 weight=w, reduction=reduction)
    close(got, F.cross_entropy(scores, idx, weight=torch.tensor(w), reduction=reduction))
    if reduction == "mean":  # torch's mean divides by the targets' total weight
        per = -scores.log_softmax(-1)[torch.arange(9), idx] * torch.tensor(w)[idx]
        close(got, per.sum() / torch.tensor(w)[idx].sum())


def test_cross_entropy_weight_with_smoothing_and_sequences():
    scores, idx = torch.randn(4, 5, 3), torch.randint(0, 3, (4, 5))
    w = torch.tensor([1.0, 0.2, 4.0])
    got = run_op("losses.CrossEntropy", {"input": scores, "target": idx},
                 weight=w.tolist(), label_smoothing=0.1)
    close(got, F.cross_entropy(scores.reshape(-1, 3), idx.reshape(-1), weight=w,
                               label_smoothing=0.1), 1e-5)


def test_cross_entropy_refuses_a_weight_per_wrong_number_of_classes():
    with pytest.raises(PortError, match="3 class weights for scores of 4 classes"):
        build("losses.CrossEntropy", {"input": torch.randn(5, 4),
                                      "target": torch.tensor([0, 1, 2, 3, 0])},
              weight=[1.0, 2.0, 3.0])


def test_bce_weights_are_torchs():
    logits, y = torch.randn(8, 2), torch.randint(0, 2, (8, 2)).float()
    p, w = torch.sigmoid(logits), [0.3, 2.0]
    close(run_op("losses.BCE", {"input": p, "target": y}, weight=w),
          F.binary_cross_entropy(p, y, weight=torch.tensor(w)))
    close(run_op("losses.BCEWithLogits", {"input": logits, "target": y}, weight=w,
                 pos_weight=1.5),
          F.binary_cross_entropy_with_logits(logits, y, weight=torch.tensor(w),
                                             pos_weight=torch.tensor(1.5)), 1e-5)
    # no weight: exactly the module it was (no weight buffer)
    _, _, module = build("losses.BCE", {"input": p, "target": y})
    assert module.weight is None


def test_balanced_weights_are_scikit_learns():
    sklearn = pytest.importorskip("sklearn.utils.class_weight")
    y = np.array([0, 0, 0, 0, 1, 2, 2, 0, 1, 0])
    want = sklearn.compute_class_weight("balanced", classes=np.unique(y), y=y)
    np.testing.assert_allclose(balanced(y, 3), want)
    np.testing.assert_allclose(balanced(np.array([0, 0, 2]), 4), [0.75, 1.0, 1.5, 1.0])


def three_classes():
    """data.Arrays (2 features, class targets) -> Linear(3) -> CrossEntropy, SGD."""
    g = nodegraph.Graph("three")
    g.add("data.Arrays", "data", x_shape=[2], target_kind="class", batch_size=0,
          shuffle=False)
    g.add("layers.Linear", "linear", out_features=3)
    g.add("losses.CrossEntropy", "ce")
    g.add("optimizers.SGD", "opt", lr=0.1)
    g.connect(("data", "x"), ("linear", "input"))
    g.connect(("linear", "output"), ("ce", "input"))
    g.connect(("data", "y"), ("ce", "target"))
    g.connect(("ce", "loss"), ("opt", "loss"))
    return g


def unbalanced():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(40, 2)).astype(np.float32)
    y = np.array([0] * 30 + [1] * 8 + [2] * 2)
    return x, y


def test_fit_class_weight_sets_the_loss_weight_and_trains_with_it():
    x, y = unbalanced()
    m = nodegraph.fit(three_classes(), x=x, y=y, epochs=1, class_weight="balanced")
    want = balanced(y, 3)
    np.testing.assert_allclose(m.graph.nodes["ce"].params["weight"], want)
    m2 = nodegraph.fit(three_classes(), x=x, y=y, epochs=1, class_weight={2: 5.0})
    assert m2.graph.nodes["ce"].params["weight"] == [1.0, 1.0, 5.0]
    plain = nodegraph.fit(three_classes(), x=x, y=y, epochs=1)
    assert m.history[0]["train"]["loss"] != plain.history[0]["train"]["loss"]


def test_fit_class_weight_loss_equals_torchs_on_the_initial_weights():
    x, y = unbalanced()
    m = nodegraph.fit(three_classes(), x=x, y=y, epochs=1, class_weight="balanced")
    # one full-batch step: the epoch's train loss is taken on the initial weights, the
    # seeded ones an untrained fit (0 epochs) holds
    lin = torch.nn.Linear(2, 3)
    state = nodegraph.fit(three_classes(), x=x, y=y, epochs=0).weights()
    lin.weight.data, lin.bias.data = state["linear.weight"], state["linear.bias"]
    with torch.no_grad():
        scores = lin(torch.as_tensor(x))
    want = F.cross_entropy(scores, torch.as_tensor(y), weight=torch.tensor(
        balanced(y, 3), dtype=torch.float32))
    close(m.history[0]["train"]["loss"], want, 1e-5)


def test_binary_class_weight_is_each_samples_loss_times_its_class_weight():
    g = nodegraph.load("examples/logistic_binary.json")
    rng = np.random.default_rng(2)
    x = rng.normal(size=(60, 2)).astype(np.float32)
    y = (x[:, 0] > 0.8).astype(np.float32)
    m = nodegraph.fit(g, x=x, y=y, epochs=1, class_weight={0: 0.5, 1: 4.0},
                      validation_data=(x, y))
    params = m.graph.nodes["bce"].params
    assert params["scale"] == 0.5 and params["pos_weight"] == 8.0
    logits = m.predict(x)  # raw x, scaled as training scaled it
    t = torch.as_tensor(y)[:, None]
    per = F.binary_cross_entropy_with_logits(logits, t, reduction="none")
    want = (per * torch.where(t > 0, 4.0, 0.5)).mean()
    close(m.evaluate(x=x, y=y)["loss"], want, 1e-5)


def test_class_weight_refusals():
    x, y = unbalanced()
    with pytest.raises(NodegraphError, match="not a class"):
        nodegraph.fit(three_classes(), x=x, y=y, epochs=1, class_weight={3: 2.0})
    with pytest.raises(NodegraphError, match="takes {class: weight} or 'balanced'"):
        nodegraph.fit(three_classes(), x=x, y=y, epochs=1, class_weight="equal")
    g = nodegraph.load("examples/line_fit.json")
    with pytest.raises(NodegraphError, match="weighs a classification loss"):
        nodegraph.fit(g, epochs=1, class_weight="balanced")
