"""Metric blocks: whole-split values against sklearn.metrics or the formula, accumulated over
batches of unequal size."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from sklearn import metrics as skm

from nodegraph.model.errors import PortError
from tests.blockcheck import build
from tests.test_nodes_optimizers import cholesterol

torch.manual_seed(0)


def evaluate(block_id: str, input: torch.Tensor, target: torch.Tensor, sizes=(5, 1, 14),
             **params):
    """The metric over `input`/`target` fed in batches of `sizes` (which sum to N)."""
    _, _, metric = build(block_id, {"input": input[:sizes[0]], "target": target[:sizes[0]]},
                         **params)
    metric.reset()
    start = 0
    for n in sizes:
        metric.update(input[start:start + n], target[start:start + n])
        start += n
    assert start == len(input)
    return metric.compute()


SCORES = torch.randn(20, 3)
CLASSES = torch.randint(0, 3, (20,))
LOGITS = torch.randn(20, 1)
BINARY = torch.randint(0, 2, (20, 1)).float()


def test_accuracy_binary_and_multiclass():
    assert evaluate("metrics.Accuracy", SCORES, CLASSES) == pytest.approx(
        skm.accuracy_score(CLASSES, SCORES.argmax(-1)))
    one_hot = torch.nn.functional.one_hot(CLASSES, 3).float()
    assert evaluate("metrics.Accuracy", SCORES, one_hot) == pytest.approx(
        skm.accuracy_score(CLASSES, SCORES.argmax(-1)))
    probs = torch.sigmoid(LOGITS)
    expected = skm.accuracy_score(BINARY.reshape(-1), (LOGITS.reshape(-1) > 0).long())
    assert evaluate("metrics.Accuracy", LOGITS, BINARY) == pytest.approx(expected)
    assert evaluate("metrics.Accuracy", probs, BINARY, threshold=0.5) == pytest.approx(expected)


def test_confusion_matrix_matches_sklearn():
    got = evaluate("metrics.ConfusionMatrix", SCORES, CLASSES[:, None])
    assert got["matrix"] == skm.confusion_matrix(CLASSES, SCORES.argmax(-1),
                                                 labels=[0, 1, 2]).tolist()
    binary = evaluate("metrics.ConfusionMatrix", LOGITS, BINARY)["matrix"]
    assert binary == skm.confusion_matrix(BINARY.reshape(-1).long(),
                                          (LOGITS.reshape(-1) > 0).long(),
                                          labels=[0, 1]).tolist()


def test_confusion_matrix_skips_targets_outside_the_classes():
    target = torch.tensor([0, 1, 7, 2])
    scores = torch.eye(3)[[0, 2, 1, 2]]
    got = evaluate("metrics.ConfusionMatrix", scores, target, sizes=(4,))["matrix"]
    assert got == [[1, 0, 0], [0, 0, 1], [0, 0, 1]]


def test_mse_matches_sklearn():
    pred, y = torch.randn(20, 2), torch.randn(20, 2)
    assert evaluate("metrics.MSE", pred, y) == pytest.approx(
        skm.mean_squared_error(y.numpy(), pred.numpy()), rel=1e-6)
    with pytest.raises(PortError):
        build("metrics.MSE", {"input": pred, "target": y[:, :1]})


def test_r2_three_definitions_against_sklearn_and_formulas():
    y = torch.randn(20, 2) * 3 + 10
    f = y + torch.randn(20, 2)
    assert evaluate("metrics.R2", f, y) == pytest.approx(
        skm.r2_score(y.numpy(), f.numpy()), rel=1e-6)
    yn, fn = y.double().numpy(), f.double().numpy()
    corr = np.mean([np.corrcoef(fn[:, j], yn[:, j])[0, 1] ** 2 for j in range(2)])
    assert evaluate("metrics.R2", f, y, definition="corr_squared") == pytest.approx(corr)
    ratio = np.mean(((fn - yn.mean(0)) ** 2).sum(0) / ((yn - yn.mean(0)) ** 2).sum(0))
    assert evaluate("metrics.R2", f, y, definition="var_ratio") == pytest.approx(ratio)


def test_r2_of_a_constant_target():
    y = torch.full((4, 1), 2.0)
    assert evaluate("metrics.R2", y.clone(), y, sizes=(4,)) == 1.0
    assert evaluate("metrics.R2", y + 1, y, sizes=(4,)) == 0.0


def test_r2_definitions_on_the_cholesterol_fit_of_seed_000():
    """Train: both of the notes' definitions give 0.99900; test: 0.99031 vs 0.86478."""
    from nodegraph.runtime.train import train

    g = cholesterol("optimizers.LeastSquares", iterations=2)
    for definition in ("sse_sst", "var_ratio", "corr_squared"):
        g.add("metrics.R2", id=definition, definition=definition)
        g.connect(("lin", "output"), (definition, "input"))
        g.connect(("data", "y"), (definition, "target"))
    g.add("metrics.MSE", id="mse")
    g.connect(("lin", "output"), ("mse", "input"))
    g.connect(("data", "y"), ("mse", "target"))
    final = train(g).final
    for definition in ("sse_sst", "var_ratio", "corr_squared"):
        assert final["train"][definition] == pytest.approx(0.99900, abs=1e-5)
    assert final["test"]["sse_sst"] == pytest.approx(0.99031, abs=1e-5)
    assert final["test"]["var_ratio"] == pytest.approx(0.86478, abs=1e-5)
    assert final["test"]["corr_squared"] == pytest.approx(0.99488, abs=1e-5)
    assert final["test"]["mse"] == pytest.approx(12.2438, abs=1e-3)


def ece_by_hand(conf: np.ndarray, correct: np.ndarray, n_bins: int) -> float:
    total = 0.0
    for m in range(n_bins):
        lo, hi = m / n_bins, (m + 1) / n_bins
        in_bin = (conf > lo) & (conf <= hi)
        if in_bin.any():
            total += in_bin.mean() * abs(correct[in_bin].mean() - conf[in_bin].mean())
    return total


def test_ece_multiclass_from_logits():
    probs = torch.softmax(SCORES * 2, -1).numpy()
    conf, pred = probs.max(-1), probs.argmax(-1)
    got = evaluate("metrics.ECE", SCORES * 2, CLASSES, n_bins=5)
    assert got["ece"] == pytest.approx(ece_by_hand(conf, pred == CLASSES.numpy(), 5))
    assert sum(got["count"]) == 20 and len(got["accuracy"]) == 5
    assert got["accuracy"][0] is None  # softmax of 3 classes is never below 1/3


def test_ece_binary_probabilities_and_reliability_bins():
    p = torch.tensor([[0.9], [0.9], [0.9], [0.9], [0.9], [0.3], [0.3], [0.55]])
    y = torch.tensor([[1.0], [1.0], [1.0], [1.0], [0.0], [0.0], [1.0], [0.0]])
    got = evaluate("metrics.ECE", p, y, sizes=(3, 5), n_bins=5, scores="probabilities")
    # bins (0.4, 0.6] ← 0.55 (wrong); (0.6, 0.8] ← two 0.7 (one right); (0.8, 1] ← 0.9 ×5
    assert got["count"] == [0, 0, 1, 2, 5]
    assert got["confidence"][2:] == pytest.approx([0.55, 0.7, 0.9])
    assert got["accuracy"][2:] == pytest.approx([0.0, 0.5, 0.8])
    assert got["ece"] == pytest.approx((0.55 + 2 * 0.2 + 5 * 0.1) / 8)
    logits = torch.logit(p)
    assert evaluate("metrics.ECE", logits, y, sizes=(8,), n_bins=5)["ece"] == pytest.approx(
        got["ece"], rel=1e-5)


def test_parameter_count_counts_bound_blocks_once():
    import nodegraph

    g = nodegraph.load("examples/xor.json")
    g.add("metrics.ParameterCount", id="size")
    g.add("metrics.ParameterCount", id="hidden_size", nodes=["hidden"])
    result = nodegraph.train(g, epochs=1)
    assert result.final["train"]["size"] == 2 * 4 + 4 + 4 + 1
    assert result.final["train"]["hidden_size"] == 12


def test_accuracy_skips_unlabelled_samples():
    from nodes.metrics import Accuracy

    m = Accuracy(0.0)
    m.update(torch.tensor([[2.0, 1.0], [0.0, 3.0], [5.0, 0.0]]), torch.tensor([0, -100, 1]))
    assert m.compute() == 0.5


def test_mean_averages_every_value_of_the_split():
    from nodes.metrics import Mean

    m = Mean()
    m.reset()
    m.update(torch.tensor([1.0, 2.0, 3.0]))
    m.update(torch.tensor([[10.0]]))
    assert m.compute() == pytest.approx(16 / 4)


def test_a_param_named_like_a_dict_method_reads_as_the_param():
    from nodegraph.model.spec import Params

    p = Params(update="sync", out_features=3)
    assert p.update == "sync" and p.out_features == 3 and p.get("missing", 1) == 1
