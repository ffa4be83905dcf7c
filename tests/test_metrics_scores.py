"""The torchmetrics metric blocks: per-epoch values over the whole split, fed in batches of
unequal size, equal to torchmetrics' functional metrics on all the predictions at once and to
scikit-learn's on the full split (a mean of per-batch values would differ: checked)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from sklearn import metrics as skm

from nodegraph.model.errors import ParamError
from nodes.metrics_scores import torchmetrics
from tests.blockcheck import build

torchmetrics()
import torchmetrics.functional.classification as FC  # noqa: E402

F = torchmetrics().functional
SIZES = (7, 1, 30, 22)  # sums to N
N, C = 60, 4
gen = torch.Generator().manual_seed(3)
TARGET = torch.randint(0, C, (N,), generator=gen)
LOGITS = torch.randn(N, C, generator=gen) + 1.5 * torch.nn.functional.one_hot(TARGET, C)
PROBS = torch.softmax(LOGITS, -1)
Y2 = torch.randint(0, 2, (N,), generator=gen)
L2 = torch.randn(N, 1, generator=gen) + Y2[:, None] * 0.8  # one logit per sample
P2 = torch.sigmoid(L2).reshape(-1)


def evaluate(block_id, input, target, sizes=SIZES, **params):
    _, _, metric = build(block_id, {"input": input[:sizes[0]], "target": target[:sizes[0]]},
                         **params)
    metric.reset()
    start = 0
    for n in sizes:
        metric.update(input[start:start + n], target[start:start + n])
        start += n
    assert start == len(input)
    return metric.compute()


def batch_mean(block_id, input, target, **params):
    """The mean of per-batch values: what the blocks must not report."""
    values, start = [], 0
    for n in SIZES:
        if n > 1:
            values.append(evaluate(block_id, input[start:start + n], target[start:start + n],
                                   sizes=(n,), **params))
        start += n
    return float(np.mean(values))


def per_class(value):
    return [value[str(i)] for i in range(len(value))]


@pytest.mark.parametrize("average", ["macro", "micro", "weighted"])
@pytest.mark.parametrize(("block", "fn", "sk"), [
    ("metrics.F1", "multiclass_f1_score", skm.f1_score),
    ("metrics.Precision", "multiclass_precision", skm.precision_score),
    ("metrics.Recall", "multiclass_recall", skm.recall_score)])
def test_counted_multiclass(block, fn, sk, average):
    got = evaluate(block, LOGITS, TARGET, average=average)
    ref = getattr(FC, fn)(PROBS, TARGET, num_classes=C, average=average)
    assert got == pytest.approx(float(ref), abs=1e-6)
    assert got == pytest.approx(sk(TARGET, LOGITS.argmax(-1), average=average,
                                   zero_division=0), abs=1e-6)
    if average != "micro":
        assert got != pytest.approx(batch_mean(block, LOGITS, TARGET, average=average),
                                    abs=1e-4)


@pytest.mark.parametrize(("block", "sk"), [("metrics.F1", skm.f1_score),
                                           ("metrics.Precision", skm.precision_score),
                                           ("metrics.Recall", skm.recall_score)])
def test_counted_per_class_and_binary(block, sk):
    got = per_class(evaluate(block, LOGITS, TARGET, average="none"))
    assert got == pytest.approx(list(sk(TARGET, LOGITS.argmax(-1), average=None,
                                        zero_division=0)), abs=1e-6)
    got2 = evaluate(block, L2, Y2[:, None].float(), threshold=0.6)
    assert got2 == pytest.approx(sk(Y2, (P2 > 0.6).long(), zero_division=0), abs=1e-6)
    # probabilities given as such: the same numbers
    assert evaluate(block, P2[:, None], Y2, threshold=0.6, scores="probabilities") == \
        pytest.approx(got2, abs=1e-6)


def test_auroc_binary_and_multiclass():
    got = evaluate("metrics.AUROC", L2, Y2)
    assert got == pytest.approx(float(F.auroc(P2, Y2, task="binary")), abs=1e-6)
    assert got == pytest.approx(skm.roc_auc_score(Y2, P2), abs=1e-6)
    assert got != pytest.approx(batch_mean("metrics.AUROC", L2, Y2), abs=1e-4)
    multi = evaluate("metrics.AUROC", LOGITS, TARGET)
    assert multi == pytest.approx(float(F.auroc(PROBS, TARGET, task="multiclass",
                                                num_classes=C)), abs=1e-6)
    assert multi == pytest.approx(skm.roc_auc_score(TARGET, PROBS, multi_class="ovr",
                                                    average="macro"), abs=1e-6)
    weighted = evaluate("metrics.AUROC", LOGITS, TARGET, average="weighted")
    assert weighted == pytest.approx(skm.roc_auc_score(TARGET, PROBS, multi_class="ovr",
                                                       average="weighted"), abs=1e-6)
    each = per_class(evaluate("metrics.AUROC", LOGITS, TARGET, average="none"))
    assert each == pytest.approx([skm.roc_auc_score(TARGET == c, PROBS[:, c])
                                  for c in range(C)], abs=1e-6)


def test_average_precision():
    got = evaluate("metrics.AveragePrecision", L2, Y2)
    assert got == pytest.approx(skm.average_precision_score(Y2, P2), abs=1e-6)
    assert got == pytest.approx(float(F.average_precision(P2, Y2, task="binary")), abs=1e-6)
    multi = evaluate("metrics.AveragePrecision", LOGITS, TARGET)
    onehot = torch.nn.functional.one_hot(TARGET, C)
    assert multi == pytest.approx(skm.average_precision_score(onehot, PROBS, average="macro"),
                                  abs=1e-6)


def test_top_k_accuracy():
    for k in (1, 2, 3):
        got = evaluate("metrics.TopKAccuracy", LOGITS, TARGET, k=k)
        assert got == pytest.approx(skm.top_k_accuracy_score(TARGET, PROBS, k=k), abs=1e-6)
    with pytest.raises(ParamError, match="k = 5 is more than the 4 classes"):
        build("metrics.TopKAccuracy", {"input": LOGITS, "target": TARGET}, k=5)


def test_matthews_and_kappa():
    pred = LOGITS.argmax(-1)
    assert evaluate("metrics.Matthews", LOGITS, TARGET) == pytest.approx(
        skm.matthews_corrcoef(TARGET, pred), abs=1e-6)
    assert evaluate("metrics.Matthews", L2, Y2) == pytest.approx(
        skm.matthews_corrcoef(Y2, (P2 > 0.5).long()), abs=1e-6)
    for weights in ("none", "linear", "quadratic"):
        sk = skm.cohen_kappa_score(TARGET, pred, weights=None if weights == "none" else weights)
        assert evaluate("metrics.CohenKappa", LOGITS, TARGET, weights=weights) == \
            pytest.approx(sk, abs=1e-6)
    assert evaluate("metrics.CohenKappa", L2, Y2) == pytest.approx(
        skm.cohen_kappa_score(Y2, (P2 > 0.5).long()), abs=1e-6)


def test_mae_and_mape():
    y = torch.randn(N, 2, generator=gen) + 3
    f = y + 0.3 * torch.randn(N, 2, generator=gen)
    assert evaluate("metrics.MAE", f, y) == pytest.approx(
        skm.mean_absolute_error(y.double(), f.double()), rel=1e-9)
    assert evaluate("metrics.MAE", f, y) == pytest.approx(
        float(F.mean_absolute_error(f.double(), y.double())), rel=1e-9)
    assert evaluate("metrics.MAPE", f, y) == pytest.approx(
        skm.mean_absolute_percentage_error(y.double().reshape(-1), f.double().reshape(-1)),
        rel=1e-9)


def test_ignored_targets_are_skipped():
    target = TARGET.clone()
    target[::5] = -100
    keep = target != -100
    got = evaluate("metrics.F1", LOGITS, target, average="macro")
    assert got == pytest.approx(skm.f1_score(TARGET[keep], LOGITS.argmax(-1)[keep],
                                             average="macro"), abs=1e-6)


def test_reset_starts_a_fresh_split():
    _, _, metric = build("metrics.AUROC", {"input": L2, "target": Y2})
    metric.update(L2, 1 - Y2)
    metric.reset()
    metric.update(L2, Y2)
    assert metric.compute() == pytest.approx(skm.roc_auc_score(Y2, P2), abs=1e-6)
