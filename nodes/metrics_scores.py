"""Metrics computed by torchmetrics: AUROC, average precision, F1, precision, recall, top-k
accuracy, Matthews correlation, Cohen's kappa, MAE and MAPE.

Each block holds one torchmetrics metric object for the split: `update` adds a batch to its
state (counts of true and false positives, or every score for the ranking metrics) and
`compute` gives the value over the whole split, so AUROC or F1 are those of the split, not
a mean of per-batch values. The scores are turned into probabilities here (sigmoid for one
score per sample, softmax over classes) when `scores` says they are logits; targets are
read as by metrics.Accuracy (class indices, 0/1 floats or one-hot rows; -100 is skipped).
torchmetrics is imported when a graph with one of these blocks is checked or run, not
before (it costs a second or more of start-up).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from nodegraph.kinds import classes
from nodegraph.kinds.declare import metric
from nodegraph.kinds.metric import Metric
from nodegraph.model.errors import ParamError
from nodegraph.model.spec import Params, Search, choice_param, float_param, int_param
from nodes._shapes import need_float
from nodes.losses import elementwise
from nodes.metrics import IGNORE, PAIR, _binary, _need_one_target_per_sample, _true

SCORES = choice_param("scores", ("logits", "probabilities"), "logits",
                      "what the input holds: raw scores (sigmoid or softmax applied here) "
                      "or probabilities")
THRESHOLD = float_param("threshold", 0.5, "one score per sample: the probability from which "
                        "a sample is predicted positive", min=0, max=1)
AVERAGE = choice_param("average", ("macro", "micro", "weighted", "none"), "macro",
                       "several classes: the mean over classes (macro), over samples "
                       "(micro), over classes weighted by their support (weighted), or one "
                       "value per class (none, reported as node.0, node.1, ...)")
RANK_AVERAGE = choice_param("average", ("macro", "weighted", "none"), "macro",
                            "several classes: the mean of the one-vs-rest values (macro), "
                            "weighted by class support (weighted), or one per class (none)")


def torchmetrics() -> Any:
    """The torchmetrics package; torchvision first where its compiled ops do not load beside
    this torch (torchmetrics imports it when installed)."""
    try:
        from nodegraph.model.packages import load_torchvision

        load_torchvision()
    except ImportError:
        pass  # no torchvision: torchmetrics does without
    import torchmetrics as tm

    return tm


class Scores(Metric):
    """A torchmetrics classification metric fed probabilities and class indices."""

    def __init__(self, made: Any, binary: bool, logits: bool):
        self.metric, self.binary, self.logits = made, binary, logits
        self.reset()

    def reset(self) -> None:
        self.metric.reset()
        self.seen = False

    def update(self, input: torch.Tensor, target: torch.Tensor) -> None:
        p = input.detach().float()
        if self.binary:
            p = p.reshape(-1)
            p = torch.sigmoid(p) if self.logits else p
        else:
            p = p.reshape(-1, p.shape[-1])
            p = torch.softmax(p, -1) if self.logits else p
        if self.metric.device != p.device:
            self.metric.to(p.device)
        self.metric.update(p, _true(target))
        self.seen = True

    def compute(self) -> float | dict[str, object]:
        if not self.seen:
            return 0.0
        return _numbers(self.metric.compute())


class Errors(Metric):
    """A torchmetrics regression metric over every element of the split."""

    def __init__(self, made: Any):
        self.metric = made.set_dtype(torch.float64)  # sums of a large split in float64
        self.reset()

    def reset(self) -> None:
        self.metric.reset()
        self.seen = False

    def update(self, input: torch.Tensor, target: torch.Tensor) -> None:
        if self.metric.device != input.device:
            self.metric.to(input.device)
        self.metric.update(input.detach().double().reshape(-1),
                           target.detach().double().reshape(-1))
        self.seen = True

    def compute(self) -> float | dict[str, object]:
        return _numbers(self.metric.compute()) if self.seen else 0.0


def _numbers(value: torch.Tensor) -> float | dict[str, object]:
    """A scalar as a float; per-class values as {"0": ..., "1": ...}."""
    if value.ndim == 0:
        return float(value)
    return {str(i): float(v) for i, v in enumerate(value.reshape(-1).tolist())}


class ClassParams(Params):
    scores: str


def _classifier(make: Callable[[Any, Any, bool, int], Any], min_classes: int = 1):
    """A build: `make(tm.classification, p, binary, classes)` the torchmetrics object, once
    the input and target are checked as metrics.Accuracy checks them."""
    def build(p: ClassParams, x):
        _need_one_target_per_sample(x)
        need_float(x, "input")
        scores, target = x["input"], x["target"]
        binary = _binary(scores)
        n = 2 if binary else scores.shape[-1]
        if n < min_classes:
            raise ParamError(f"needs at least {min_classes} classes in the input's last "
                             f"dimension, got {n}")
        if not binary and not target.is_floating_point():
            classes.takes_indices("target", "input", n, IGNORE)
        made = make(torchmetrics().classification, p, binary, n)
        return Scores(made, binary, p.scores == "logits")
    return build


# the inputs are checked by the build; torchmetrics' own checks cost a host sync per batch
KW: dict[str, Any] = {"ignore_index": IGNORE, "validate_args": False}


class CountParams(ClassParams):
    threshold: float
    average: str


class RankParams(ClassParams):
    average: str


class TopKParams(ClassParams):
    k: int


class MatthewsParams(ClassParams):
    threshold: float


class KappaParams(ClassParams):
    threshold: float
    weights: str


def _counted(binary_name: str, multi_name: str):
    """F1, precision or recall: counts of true/false positives per class."""
    def make(tc, p: CountParams, binary: bool, n: int):
        if binary:
            return getattr(tc, binary_name)(threshold=p.threshold, **KW)
        return getattr(tc, multi_name)(num_classes=n, average=p.average, **KW)
    return make


def _ranked(binary_name: str, multi_name: str):
    """AUROC or average precision: every score of the split kept, ranked at `compute`."""
    def make(tc, p: RankParams, binary: bool, n: int):
        if binary:
            return getattr(tc, binary_name)(thresholds=None, **KW)
        return getattr(tc, multi_name)(num_classes=n, average=p.average, thresholds=None,
                                       **KW)
    return make


def _top_k(tc, p: TopKParams, binary: bool, n: int):
    if binary:
        raise ParamError("top-k accuracy needs one score per class (the input's last "
                         "dimension), not one score per sample")
    if p.k > n:
        raise ParamError(f"k = {p.k} is more than the {n} classes of the input")
    return tc.MulticlassAccuracy(num_classes=n, top_k=p.k, average="micro", **KW)


def _matthews(tc, p: MatthewsParams, binary: bool, n: int):
    if binary:
        return tc.BinaryMatthewsCorrCoef(threshold=p.threshold, **KW)
    return tc.MulticlassMatthewsCorrCoef(num_classes=n, **KW)


def _kappa(tc, p: KappaParams, binary: bool, n: int):
    weights = None if p.weights == "none" else p.weights
    if binary:
        return tc.BinaryCohenKappa(threshold=p.threshold, weights=weights, **KW)
    return tc.MulticlassCohenKappa(num_classes=n, weights=weights, **KW)


def _regression(name: str):
    def make(p: Params):
        return Errors(getattr(torchmetrics().regression, name)())
    return elementwise(make)


BINARY_NOTE = ("One score per sample is a binary classifier (its probability compared with "
               "`threshold`); several are classes.")

BLOCKS = [
    metric("metrics.AUROC",
           "Area under the ROC curve over the whole split (torchmetrics' AUROC).\n\n"
           "The probability that a random positive scores above a random negative; 0.5 is "
           "chance. One score per sample: binary; several: one-vs-rest per class, averaged "
           "as `average` says. Every score of the split is kept until the epoch's end "
           "(exact, no binning).",
           _classifier(_ranked("BinaryAUROC", "MulticlassAUROC")), inputs=PAIR,
           params=[SCORES, RANK_AVERAGE],
           keywords=("roc", "auc", "roc auc", "ranking", "classification"),
           search=Search(words=("auc", "roc"), popularity=2.0)),
    metric("metrics.AveragePrecision",
           "Average precision (area under the precision-recall curve) over the split.\n\n"
           "torchmetrics' AveragePrecision, sklearn's average_precision_score: the mean "
           "precision at each recall step. One score per sample: binary; several: "
           "one-vs-rest per class.",
           _classifier(_ranked("BinaryAveragePrecision", "MulticlassAveragePrecision")),
           inputs=PAIR, params=[SCORES, RANK_AVERAGE],
           keywords=("ap", "pr auc", "precision recall curve", "ranking", "classification")),
    metric("metrics.F1",
           "F1 score, the harmonic mean of precision and recall, over the whole split.\n\n"
           + BINARY_NOTE + " Counts are kept per class, so micro, macro, weighted and "
           "per-class values are those of the split.",
           _classifier(_counted("BinaryF1Score", "MulticlassF1Score")), inputs=PAIR,
           params=[SCORES, THRESHOLD, AVERAGE],
           keywords=("f1 score", "f-measure", "dice", "classification"),
           search=Search(words=("f1", "fscore"), popularity=2.0)),
    metric("metrics.Precision",
           "Precision: the share of predicted positives that are positive, over the split.\n\n"
           + BINARY_NOTE,
           _classifier(_counted("BinaryPrecision", "MulticlassPrecision")), inputs=PAIR,
           params=[SCORES, THRESHOLD, AVERAGE],
           keywords=("positive predictive value", "ppv", "classification")),
    metric("metrics.Recall",
           "Recall: the share of positives predicted positive, over the split.\n\n"
           + BINARY_NOTE + " Also called sensitivity or true positive rate.",
           _classifier(_counted("BinaryRecall", "MulticlassRecall")), inputs=PAIR,
           params=[SCORES, THRESHOLD, AVERAGE],
           keywords=("sensitivity", "true positive rate", "tpr", "hit rate",
                     "classification")),
    metric("metrics.TopKAccuracy",
           "Share of samples whose true class is among the k highest scores.\n\n"
           "torchmetrics' multiclass accuracy with top_k; k = 1 is metrics.Accuracy.",
           _classifier(_top_k, min_classes=2), inputs=PAIR,
           params=[SCORES, int_param("k", 5, "how many of the highest scores count", min=1)],
           keywords=("top-5", "top5", "top k", "classification")),
    metric("metrics.Matthews",
           "Matthews correlation coefficient over the split (−1 to 1; 0 is chance).\n\n"
           + BINARY_NOTE + " Stays informative when classes are imbalanced.",
           _classifier(_matthews), inputs=PAIR, params=[SCORES, THRESHOLD],
           keywords=("mcc", "phi coefficient", "correlation", "classification")),
    metric("metrics.CohenKappa",
           "Cohen's kappa: agreement of predictions and targets beyond chance.\n\n"
           + BINARY_NOTE + " `weights` linear or quadratic counts near misses of ordered "
           "classes as partly right.",
           _classifier(_kappa), inputs=PAIR,
           params=[SCORES, THRESHOLD,
                   choice_param("weights", ("none", "linear", "quadratic"), "none",
                                "how disagreements between ordered classes weigh")],
           keywords=("kappa", "agreement", "ordinal", "classification")),
    metric("metrics.MAE",
           "Mean absolute error over every element of the split.",
           _regression("MeanAbsoluteError"), inputs=PAIR,
           keywords=("regression", "l1", "absolute error"),
           search=Search(words=("mae", "l1"))),
    metric("metrics.MAPE",
           "Mean absolute percentage error |y − f|/|y| over every element of the split.\n\n"
           "A share, not a percentage (0.1 is 10%); targets near zero make it huge "
           "(torchmetrics guards |y| below 1.17e-6).",
           _regression("MeanAbsolutePercentageError"), inputs=PAIR,
           keywords=("regression", "percentage error", "relative error"),
           search=Search(words=("mape",))),
]
