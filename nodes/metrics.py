"""Metrics: numbers computed over a whole split, reported per epoch.

Each metric keeps running sums as tensors on the training device (no host sync per batch)
and turns them into numbers once, in `compute`, so a ratio like R² or ECE is that of the
whole split, not an average of per-batch values. Classifier metrics share one reading of
scores and targets: one score per sample is a binary classifier thresholded at
`threshold`, several are classes predicted by argmax; targets may be class indices
(any shape with one per sample), 0/1 floats or one-hot/probability rows.
"""

from __future__ import annotations

import torch

from nodegraph.kinds import classes, footprint
from nodegraph.kinds.declare import metric
from nodegraph.kinds.metric import Metric
from nodegraph.model.errors import PortError
from nodegraph.model.spec import (
    Params,
    Port,
    Search,
    choice_param,
    float_param,
    int_param,
    nodes_param,
)
from nodes._shapes import fmt, need_float
from nodes.losses import elementwise  # the same check: real input and target, same shape

IGNORE = -100  # the target index cross-entropy skips
PAIR = [Port("input", doc="the model's output (scores or predictions)"),
        Port("target", doc="the true values or classes")]
THRESHOLD = float_param("threshold", 0.0, "decision threshold for one score per sample: 0 "
                        "for logits, 0.5 for probabilities")


def _binary(scores: torch.Tensor) -> bool:
    return scores.ndim == 1 or scores.shape[-1] == 1


def _predicted(scores: torch.Tensor, threshold: float) -> torch.Tensor:
    """The predicted class per sample, as a flat long tensor."""
    if _binary(scores):
        return (scores.reshape(-1) > threshold).long()
    return scores.argmax(-1).reshape(-1)


def _true(target: torch.Tensor) -> torch.Tensor:
    """The true class per sample, as a flat long tensor."""
    if target.dtype.is_floating_point and target.ndim > 1 and target.shape[-1] > 1:
        target = target.argmax(-1)  # one-hot or probabilities
    return target.reshape(-1).long()


def _need_one_target_per_sample(x: dict) -> None:
    scores, target = x["input"], x["target"]
    if scores.shape[0] != target.shape[0]:
        raise PortError("target", f"{fmt(target.shape)} targets for {fmt(scores.shape)} scores")


def _add(total: torch.Tensor | None, value: torch.Tensor) -> torch.Tensor:
    return value if total is None else total + value


# -- classification --------------------------------------------------------------------


class Accuracy(Metric):
    """Share of samples whose predicted class equals the target.

    A step only keeps its predicted and true classes; they are compared and counted in bulk
    every `FOLD` batches and at `compute`, so the per-step cost is one argmax, as in a
    hand-written loop."""

    FOLD = 64

    def __init__(self, threshold: float):
        self.threshold = threshold
        self.reset()

    def reset(self) -> None:
        self.correct: torch.Tensor | int = 0
        self.total: torch.Tensor | int = 0
        self._pending: list[tuple[torch.Tensor, torch.Tensor]] = []

    def update(self, input: torch.Tensor, target: torch.Tensor) -> None:
        self._pending.append((_predicted(input, self.threshold), _true(target)))
        if len(self._pending) >= self.FOLD:
            self._fold()

    def _fold(self) -> None:
        if not self._pending:
            return
        predicted = torch.cat([p for p, _ in self._pending])
        true = torch.cat([t for _, t in self._pending])
        self._pending = []
        # a prediction is never -100, so unlabelled samples (cross-entropy's ignore_index)
        # are never correct; they only have to leave the count, without a host sync
        self.correct = self.correct + (predicted == true).sum()
        self.total = self.total + (true != IGNORE).sum()

    def compute(self) -> float:
        self._fold()
        return float(self.correct) / max(float(self.total), 1.0)


class ConfusionMatrix(Metric):
    """Counts of (true class, predicted class) pairs; rows are true classes."""

    def __init__(self, num_classes: int, threshold: float):
        self.num_classes, self.threshold = num_classes, threshold
        self.reset()

    def reset(self) -> None:
        self.counts: torch.Tensor | None = None

    def update(self, input: torch.Tensor, target: torch.Tensor) -> None:
        c = self.num_classes
        true, pred = _true(target), _predicted(input, self.threshold)
        if self.counts is None:
            self.counts = torch.zeros(c * c + 1, dtype=torch.long, device=input.device)
        # pairs with a class outside [0, c) go to one spare bin, without a host sync
        valid = (true >= 0) & (true < c)
        self.counts.index_add_(0, torch.where(valid, true * c + pred, c * c),
                               torch.ones_like(true))

    def compute(self) -> dict[str, object]:
        c = self.num_classes
        if self.counts is None:
            return {"matrix": [[0] * c for _ in range(c)]}
        return {"matrix": self.counts[:c * c].reshape(c, c).tolist()}


class AccuracyParams(Params):
    threshold: float


def _accuracy(p: AccuracyParams, x):
    _need_one_target_per_sample(x)
    scores, target = x["input"], x["target"]
    if not _binary(scores) and not target.is_floating_point():
        classes.takes_indices("target", "input", scores.shape[-1], IGNORE)
    return Accuracy(p.threshold)


class ConfusionMatrixParams(Params):
    threshold: float


def _confusion_matrix(p: ConfusionMatrixParams, x):
    _need_one_target_per_sample(x)
    c = 2 if _binary(x["input"]) else x["input"].shape[-1]
    # the counts, then the matrix as nested lists of Python ints
    footprint.need(c * c * 48, "input", None, f"a {c:,} x {c:,} confusion matrix",
                   "use it on fewer classes")
    return ConfusionMatrix(c, p.threshold)


class CalibrationError(Metric):
    """Expected calibration error over equal-width confidence bins, with the diagram data.

    Confidence is the probability of the predicted class (max(p, 1 − p) for one score);
    bin m holds confidences in ((m−1)/M, m/M]. ECE = Σ_m (n_m/N)·|accuracy_m − confidence_m|.
    """

    def __init__(self, n_bins: int, logits: bool):
        self.n_bins, self.logits = n_bins, logits
        self.reset()

    def reset(self) -> None:
        self.sums: torch.Tensor | None = None  # rows: count, Σ confidence, Σ correct

    def _confidence(self, scores: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if _binary(scores):
            p = scores.reshape(-1).float()
            p = torch.sigmoid(p) if self.logits else p
            return torch.maximum(p, 1 - p), (p > 0.5).long()
        probs = torch.softmax(scores.float(), -1) if self.logits else scores.float()
        conf, pred = probs.max(-1)
        return conf.reshape(-1), pred.reshape(-1)

    def update(self, input: torch.Tensor, target: torch.Tensor) -> None:
        conf, pred = self._confidence(input)
        correct = (pred == _true(target)).to(conf.dtype)
        idx = (torch.ceil(conf * self.n_bins).long() - 1).clamp(0, self.n_bins - 1)
        if self.sums is None:
            self.sums = torch.zeros(3, self.n_bins, dtype=torch.float64, device=input.device)
        values = torch.stack([torch.ones_like(conf), conf, correct]).double()
        self.sums.index_add_(1, idx, values)

    def compute(self) -> dict[str, object]:
        if self.sums is None:
            return {"ece": 0.0, "confidence": [None] * self.n_bins,
                    "accuracy": [None] * self.n_bins, "count": [0] * self.n_bins}
        count, conf_sum, correct_sum = self.sums.cpu().tolist()
        total = sum(count) or 1.0
        ece = sum(abs(a - c) for a, c in zip(correct_sum, conf_sum, strict=True)) / total
        return {"ece": ece,
                "confidence": [s / n if n else None for s, n in zip(conf_sum, count,
                                                                    strict=True)],
                "accuracy": [s / n if n else None for s, n in zip(correct_sum, count,
                                                                  strict=True)],
                "count": [int(n) for n in count]}


class ECEParams(Params):
    n_bins: int
    scores: str


def _ece(p: ECEParams, x):
    _need_one_target_per_sample(x)
    need_float(x, "input")
    # float64 sums on the device, then three lists of Python numbers per bin
    footprint.need(p.n_bins * 160, "n_bins", p.n_bins, "its bins")
    return CalibrationError(p.n_bins, p.scores == "logits")


# -- regression ------------------------------------------------------------------------


class MeanSquaredError(Metric):
    """Mean of the squared differences over every element of the split."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.sse: torch.Tensor | None = None
        self.count = 0

    def update(self, input: torch.Tensor, target: torch.Tensor) -> None:
        self.sse = _add(self.sse, ((input.double() - target.double()) ** 2).sum())
        self.count += target.numel()

    def compute(self) -> float:
        return float(self.sse) / self.count if self.count and self.sse is not None else 0.0


class RSquared(Metric):
    """R² per output column from running sums (in float64), averaged over the columns.

    ``sse_sst``: 1 − Σ(y − f)²/Σ(y − ȳ)², the usual definition (sklearn's r2_score).
    ``var_ratio``: Σ(f − ȳ)²/Σ(y − ȳ)², the explained share of the variance.
    ``corr_squared``: the squared Pearson correlation of f and y.
    The three agree on the training data of a least-squares fit with an intercept and
    differ elsewhere. A constant target gives 1 for a perfect fit and 0 otherwise.
    """

    KEYS = ("n", "y", "yy", "f", "ff", "fy", "sse")

    def __init__(self, definition: str):
        self.definition = definition
        self.reset()

    def reset(self) -> None:
        self.sums: torch.Tensor | None = None

    def update(self, input: torch.Tensor, target: torch.Tensor) -> None:
        f = input.double().reshape(input.shape[0], -1)
        y = target.double().reshape(target.shape[0], -1)
        batch = torch.stack([torch.ones_like(y), y, y * y, f, f * f, f * y, (y - f) ** 2])
        self.sums = _add(self.sums, batch.sum(1))

    def compute(self) -> float:
        if self.sums is None:
            return 0.0
        columns = zip(*self.sums.cpu().tolist(), strict=True)
        values = [self._r2(**dict(zip(self.KEYS, col, strict=True))) for col in columns]
        return sum(values) / len(values)

    def _r2(self, n, y, yy, f, ff, fy, sse) -> float:
        mean_y, mean_f = y / n, f / n
        sst = yy - n * mean_y ** 2
        if self.definition == "sse_sst":
            explained = sst - sse
        elif self.definition == "var_ratio":
            explained = ff - 2 * mean_y * f + n * mean_y ** 2
        else:
            sff, sfy = ff - n * mean_f ** 2, fy - n * mean_f * mean_y
            explained = sfy ** 2 / sff if sff > 0 else 0.0
        if sst <= 0:
            return 1.0 if sse == 0 else 0.0
        return explained / sst


def _fresh(metric: Metric) -> Metric:
    metric.reset()
    return metric


class Mean(Metric):
    """The mean of every value fed in over a split (a loss's parts, a gate's activity)."""

    def reset(self) -> None:
        self.total: torch.Tensor | float = 0.0
        self.count = 0

    def update(self, input: torch.Tensor) -> None:
        self.total = self.total + input.detach().float().sum()
        self.count += input.numel()

    def compute(self) -> float:
        return float(self.total) / max(self.count, 1)


class ParameterCount(Metric):
    """Trainable parameters of the bound blocks; a shared weight counts once."""

    def __init__(self) -> None:
        self.modules: tuple = ()

    def bind(self, modules: dict) -> None:
        self.modules = tuple(modules.values())

    def reset(self) -> None:
        pass

    def update(self) -> None:
        pass

    def compute(self) -> float:
        seen = {id(p): p.numel() for m in self.modules for p in m.parameters()
                if p.requires_grad}
        return float(sum(seen.values()))


class R2Params(Params):
    definition: str


def _r2(p: R2Params) -> RSquared:
    return RSquared(p.definition)


BLOCKS = [
    metric("metrics.Mean",
           "The mean of a tensor over a whole split, reported with the other metrics.\n\n"
           "For watching a number that is not a loss: the reconstruction and KL parts of an "
           "ELBO, an attention entropy, the fraction of active units.",
           lambda p, x: _fresh(Mean()), inputs=[Port("input", doc="any tensor")],
           keywords=("average", "monitor", "report")),
    metric("metrics.ParameterCount",
           "The number of trainable parameters, reported with the other metrics.\n\n"
           "Counts the blocks named in `nodes` (empty: every block with weights); a weight "
           "shared by two blocks counts once, a frozen one not at all.",
           lambda p, x: ParameterCount(),
           params=[nodes_param("nodes", [], "node ids to count; empty means every "
                               "block with weights", of=("op",))],
           binds="nodes", keywords=("size", "weights", "capacity")),
    metric("metrics.Accuracy",
           "Share of correctly classified samples.\n\nOne score per sample: binary, "
           "thresholded; several: argmax over classes.",
           _accuracy, inputs=["input", "target"], params=[THRESHOLD],
           keywords=("classification", "correct"),
           search=Search(words=("acc",), popularity=3.8)),
    metric("metrics.ConfusionMatrix",
           "Counts of samples by true class (rows) and predicted class (columns).\n\n"
           "Shows which classes are confused with which; the diagonal holds the correct "
           "ones. One score per sample gives a 2×2 matrix (class 0, class 1). Reported as "
           "`matrix`, a list of rows; targets outside the classes are not counted.",
           _confusion_matrix, inputs=PAIR, params=[THRESHOLD],
           keywords=("classification", "errors", "table")),
    metric("metrics.MSE",
           "Mean squared error over the whole split.\n\n"
           "The same number as losses.MSE, as a metric: for reporting a model trained with "
           "another loss, or the test MSE of the notes.",
           elementwise(lambda p: MeanSquaredError()), inputs=PAIR,
           keywords=("regression", "squared error"),
           search=Search(words=("l2", "mse"))),
    metric("metrics.R2",
           "Coefficient of determination R², in the definition you choose.\n\n"
           "sse_sst: 1 − SSE/SST (sklearn's r2_score; negative for a model worse than the "
           "mean). var_ratio: explained variance Σ(f − ȳ)²/Σ(y − ȳ)², the notes' "
           "definition. corr_squared: the squared correlation of prediction and target. They "
           "agree on the training data of a least-squares fit, not on test data. Several "
           "outputs: the mean of the per-column values.",
           elementwise(_r2), inputs=PAIR,
           params=[choice_param("definition", ("sse_sst", "var_ratio", "corr_squared"),
                                "sse_sst", "which R² (see the block's description)")],
           keywords=("regression", "goodness of fit", "coefficient of determination",
                     "explained variance", "correlation"),
           search=Search(popularity=2.0)),
    metric("metrics.ECE",
           "Expected calibration error, with the reliability-diagram data.\n\n"
           "Samples are binned by confidence (the probability of the predicted class); a "
           "calibrated model is right in 80% of the samples it is 80% sure of. Reports `ece` "
           "and per bin `confidence`, `accuracy` (empty bins: null) and `count`.",
           _ece, inputs=PAIR,
           params=[int_param("n_bins", 15, "number of equal-width confidence bins", min=1),
                   choice_param("scores", ("logits", "probabilities"), "logits",
                                "what the input holds: raw scores (sigmoid/softmax applied "
                                "here) or probabilities")],
           keywords=("calibration", "reliability diagram", "confidence")),
]
