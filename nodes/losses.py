"""Losses: blocks whose output is a scalar for an optimizer to minimise.

Regression losses compare a prediction with a target of the same shape; classification
losses take raw scores (logits) unless their doc says probabilities; the divergences
(`KLDivergence`, `GaussianKL`) are the pieces a VAE's ELBO is built from, and `WeightedSum`
adds several losses into the one an optimizer minimises. Where torch has the loss, the
block builds torch's module, so the numbers are torch's.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from nodegraph.kinds import classes, shapes
from nodegraph.kinds.declare import op
from nodegraph.model.errors import PortError
from nodegraph.model.spec import (
    LOSS_OUT,
    Param,
    Params,
    Port,
    Search,
    bool_param,
    choice_param,
    float_param,
)
from nodegraph.model.types import LOSS
from nodes._shapes import fmt, need_float, need_same_shape

REDUCTION = choice_param("reduction", ("mean", "sum"), "mean",
                         "average the per-element losses, or add them up")
BATCH_REDUCTION = choice_param("reduction", ("batchmean", "sum"), "batchmean",
                               "sum over everything but the batch, then average over the "
                               "batch (the true divergence per sample), or add it all up")
# the loss blocks' own, with `none`: blocks elsewhere import the two above
REDUCTIONS = choice_param("reduction", ("mean", "sum", "none"), "mean",
                          "average the per-element losses, add them up, or output them "
                          "unreduced (shaped like the input; no optimizer takes that)")
BATCH_REDUCTIONS = choice_param("reduction", ("batchmean", "sum", "none"), "batchmean",
                                "sum over everything but the batch, then average over the "
                                "batch (the true divergence per sample), add it all up, or "
                                "output one divergence per sample (N,)")
SCALE = float_param("scale", 1.0, "multiply the loss by this factor (0.5 for ½·MSE)")
PAIR = ["input", "target"]
IGNORE_INDEX = -100  # the class index cross-entropy skips (torch's default ignore_index)


class _Scaled(nn.Module):
    """A loss times a constant factor: ½·MSE without a WeightedSum. It makes the loss from
    its class and arguments, so an export can write the call back as code."""

    def __init__(self, scale: float, loss: type, args: dict):
        super().__init__()
        self.scale, self.loss = scale, loss(**args)

    def forward(self, *args):
        return self.scale * self.loss(*args)


def scaled(build: Callable) -> Callable:
    """A block build from `build`, which gives the loss's class and arguments, multiplied by
    the `scale` param; a scale of 1 (the default, and files written before the param) makes
    exactly the module it made before."""
    def wrapped(p, x):
        cls, args = build(p, x)
        scale = p.get("scale", 1.0)
        return cls(**args) if scale == 1.0 else _Scaled(scale, cls, args)

    return wrapped


def _reduce(loss: torch.Tensor, reduction: str) -> torch.Tensor:
    if reduction == "none":
        return loss
    return loss.mean() if reduction == "mean" else loss.sum()


def elementwise(make: Callable[[Any], Any]) -> Callable:
    """A build for losses of real `input` and `target` that match element for element."""
    def build(p, x):
        need_float(x, "input")
        need_float(x, "target")
        need_same_shape(x)
        return make(p)

    return build


def _loss_out(p, unreduced: tuple, dtype: torch.dtype, made: int,
              reduction: str) -> shapes.Inferred:
    """A loss of `dtype`, shaped `unreduced` or a scalar, after a forward that made `made`
    bytes before it; a `scale` other than 1 makes one more."""
    shape = unreduced if reduction == "none" else ()
    out = shapes.nbytes(shape, dtype)
    return shapes.Inferred(((shape, dtype),),
                           work=made + out * (1 + (p.get("scale", 1.0) != 1.0)))


def elementwise_shape(fused: bool = True, reduction: str | None = None) -> shapes.Rule:
    """The shape rule of an `elementwise` loss: a `fused` kernel makes only the loss; an
    unfused one (L1: difference, then its absolute value) makes the difference and the
    unreduced loss before reducing. `reduction` fixed, or the block's param."""
    def rule(p: Params, x):
        need_float(x, "input")
        need_float(x, "target")
        need_same_shape(x)
        if shapes.same_dtype(x) is None or p.get("pos_weight") is not None or \
                p.get("weight"):
            return None  # mixed dtypes promote; a weight tensor adds its own work
        t, how = x["input"], reduction or p.typed(REDUCTIONS)
        made = 0 if fused else t.nbytes * (1 + (how != "none"))
        return _loss_out(p, t.shape, t.dtype, made, how)
    return rule


# -- regression ------------------------------------------------------------------------


class _GaussianNLL(nn.Module):
    """Gaussian negative log-likelihood with a variance or a log-variance input."""

    def __init__(self, log_var: bool, full: bool, eps: float, reduction: str):
        super().__init__()
        self.log_var, self.full, self.eps, self.reduction = log_var, full, eps, reduction

    def forward(self, input, target, var):
        if self.log_var:  # log σ² needs no clamping: exp(-log σ²) is finite
            log_var, inv_var = var, torch.exp(-var)
        else:
            # torch's F.gaussian_nll_loss checks var < 0 with a host sync (and fails on the
            # meta tensors of validation); clamp the value like it, letting the gradient through
            var = var.clone()
            with torch.no_grad():
                var.clamp_(min=self.eps)
            log_var, inv_var = torch.log(var), 1.0 / var
        loss = 0.5 * (log_var + (input - target) ** 2 * inv_var)
        if self.full:
            loss = loss + 0.5 * math.log(2 * math.pi)
        return _reduce(loss, self.reduction)


class GaussianNLLParams(Params):
    var_input: str
    reduction: str
    scale: float
    eps: float
    full: bool


def _gaussian_nll(p: GaussianNLLParams, x):
    for port in ("input", "target", "var"):
        need_float(x, port)
    need_same_shape(x)
    mean, var = x["input"].shape, x["var"].shape
    if var != mean and var != (*mean[:-1], 1):
        raise PortError("var", f"the variance {fmt(var)} must match the mean {fmt(mean)}, or "
                        f"have size 1 in the last dimension {fmt((*mean[:-1], 1))} for one "
                        "variance per sample", "give the variance head as many outputs as the "
                        "mean head, or one")
    return _GaussianNLL, {"log_var": p.var_input == "log_variance", "full": p.full,
                          "eps": p.eps, "reduction": p.reduction}


# -- classification --------------------------------------------------------------------


class BCEWithLogitsParams(Params):
    reduction: str
    scale: float
    pos_weight: float | None
    weight: list[float]


@elementwise
def _bce_logits(p: BCEWithLogitsParams):
    pos_weight = None if p.pos_weight is None else torch.tensor(p.pos_weight)
    args = {"reduction": p.reduction, "pos_weight": pos_weight}
    weight = p.get("weight") or []
    if weight:  # only when given: a graph without it makes exactly the module it made
        args["weight"] = torch.tensor(weight, dtype=torch.float32)
    return nn.BCEWithLogitsLoss, args


class BCEParams(Params):
    reduction: str
    scale: float
    weight: list[float]


@elementwise
def _bce(p: BCEParams):
    args: dict[str, Any] = {"reduction": p.reduction}
    weight = p.get("weight") or []
    if weight:
        args["weight"] = torch.tensor(weight, dtype=torch.float32)
    return nn.BCELoss, args


def _column_weights(shape: shapes.Rule) -> shapes.Rule:
    """`shape` with the `weight` param checked: one weight per column of the input (its
    last dimension), or one for every element, as torch broadcasts it."""
    def rule(p: Params, x):
        weight = p.get("weight") or []
        width = x["input"].shape[-1] if x["input"].ndim else 1
        if weight and len(weight) not in (1, width):
            raise PortError("input", f"weight gives {len(weight)} weights for inputs whose "
                            f"last dimension is {width}",
                            f"give {width} weights (one per column) or one")
        return shape(p, x)
    return rule


class _CrossEntropy(nn.CrossEntropyLoss):
    """Cross-entropy with the classes on the last dimension: scores (N, C) or (N, L, C) for
    a sequence, targets one index per row ((N,), (N, 1), (N, L)) or probabilities shaped
    like the scores. Index targets of -100 are ignored (unlabelled nodes, padding)."""

    # (port, its argument, the scores' argument): a label torch refuses is named by the
    # runtime (`nodegraph.kinds.classes.name_label`), so this class stays plain torch
    class_indices = ("target", 1, 0)

    def forward(self, input: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        if input.ndim == 2 and target.ndim == 1:  # the common case needs no reshaping
            return super().forward(input, target)
        width = input.shape[-1]
        rows = input.reshape(-1, width)
        if target.dtype.is_floating_point:
            loss = super().forward(rows, target.reshape(-1, width))
        else:
            loss = super().forward(rows, target.reshape(-1))
        # unreduced: one loss per row of scores, (N,) or (N, L)
        return loss.reshape(input.shape[:-1]) if self.reduction == "none" else loss


def _need_class_indices(scores: torch.Tensor, target: torch.Tensor) -> None:
    rows = scores.numel() // max(scores.shape[-1], 1)
    if target.shape[0] != scores.shape[0] or target.numel() != rows:
        raise PortError("target", f"class indices {fmt(target.shape)} do not fit scores "
                        f"{fmt(scores.shape)}", "targets must be one class index per row of "
                        "scores (classes on the last dimension)")


def _cross_entropy_check(p, x):
    need_float(x, "input")
    scores, target = x["input"], x["target"]
    if scores.ndim < 2:
        raise PortError("input",
                        f"cross-entropy needs scores (N, classes), got {fmt(scores.shape)}")
    if target.dtype.is_floating_point:
        if target.shape != scores.shape:
            raise PortError("target", f"class probabilities {fmt(target.shape)} must match the "
                            f"scores {fmt(scores.shape)}",
                            "use class indices (integers) or one probability per class")
    else:
        _need_class_indices(scores, target)
        classes.takes_indices("target", "input", scores.shape[-1], IGNORE_INDEX)
    weight = p.get("weight") or []
    if weight and len(weight) != scores.shape[-1]:
        raise PortError("input", f"weight gives {len(weight)} class weights for scores of "
                        f"{scores.shape[-1]} classes",
                        f"give {scores.shape[-1]} weights, one per class")


def _cross_entropy(p: CrossEntropyParams, x):
    _cross_entropy_check(p, x)
    args: dict[str, Any] = {"reduction": p.reduction, "label_smoothing": p.label_smoothing}
    weight = p.get("weight") or []
    if weight:
        args["weight"] = torch.tensor(weight, dtype=torch.float32)
    return _CrossEntropy, args


class CrossEntropyParams(Params):
    reduction: str
    scale: float
    label_smoothing: float
    weight: list[float]


def _cross_entropy_shape(p: CrossEntropyParams, x):
    _cross_entropy_check(p, x)
    scores, target = x["input"], x["target"]
    if target.dtype != torch.int64 or p.get("weight"):
        return None  # probabilities, a weight, other index types: the meta path counts them
    # rows of scores (views), their log-softmax, then nll_loss's total weight (a scalar)
    # beside the loss; unreduced, one loss per row shaped like the scores less the classes
    s, rows = scores.dtype.itemsize, math.prod(scores.shape[:-1])
    made = scores.nbytes + s
    if p.label_smoothing != 0:  # torch's smoothing term beside the nll loss
        made += _smoothing_bytes(rows, s, p.reduction)
    return _loss_out(p, scores.shape[:-1], scores.dtype, made, p.reduction)


def _smoothing_bytes(rows: int, s: int, reduction: str) -> int:
    """What torch's label smoothing makes besides the log-softmax and the nll loss, its
    last sum excluded: the nll loss itself (a scalar, or one per row unreduced), each row's
    negated sum of log-probabilities, the mask of ignored targets with which they are
    zeroed, and the weighted sum of the two terms; a mean also counts the rows kept."""
    if reduction == "none":
        return rows * s + 2 * rows * s + rows + 2 * rows * s
    if reduction == "sum":
        return s + 2 * rows * s + rows + 3 * s
    return s + 2 * rows * s + 2 * rows + torch.int64.itemsize + 4 * s


class _Hinge(nn.Module):
    """max(0, margin − t·s) for one score per sample; torch's multi-margin loss for several."""

    class_indices = ("target", 1, 0)  # as _CrossEntropy's (used with several scores)

    def __init__(self, margin: float, reduction: str):
        super().__init__()
        self.margin, self.reduction = margin, reduction

    def forward(self, input, target):
        if input.ndim > 1 and input.shape[-1] > 1:
            return F.multi_margin_loss(input, target.reshape(-1).long(),
                                       margin=self.margin, reduction=self.reduction)
        t = target.reshape(input.shape).to(input.dtype)
        t = torch.where(t == 0, -torch.ones_like(t), t)  # {0, 1} labels read as {-1, +1}
        loss = torch.clamp(self.margin - t * input, min=0)
        return _reduce(loss, self.reduction)


def _hinge_check(p, x):
    need_float(x, "input")
    scores, target = x["input"], x["target"]
    if scores.ndim > 1 and scores.shape[-1] > 1:
        if target.dtype.is_floating_point:
            raise PortError("target", f"{scores.shape[-1]} scores per sample need class "
                            f"indices (integers), got {target.dtype}",
                            "use target_kind 'class' on the data block", kind="dtype_mismatch")
        _need_class_indices(scores, target)
        classes.takes_indices("target", "input", scores.shape[-1])
    elif target.shape[:1] != scores.shape[:1] or target.numel() != scores.numel():
        raise PortError("target", f"'input' is {fmt(scores.shape)} but 'target' is "
                        f"{fmt(target.shape)}; one label per score",
                        "targets are -1/+1 (or 0/1) shaped like the scores")


def _hinge(p: HingeParams, x):
    _hinge_check(p, x)
    return _Hinge, {"margin": p.margin, "reduction": p.reduction}


class HingeParams(Params):
    reduction: str
    scale: float
    margin: float


def _hinge_shape(p: HingeParams, x):
    _hinge_check(p, x)
    scores, target = x["input"], x["target"]
    size = scores.nbytes
    if scores.ndim > 1 and scores.shape[-1] > 1:  # torch's multi-margin loss, one kernel
        if scores.ndim != 2 or target.dtype != torch.int64:
            return None  # torch refuses more dims; other index types are converted
        return _loss_out(p, scores.shape[:1], scores.dtype, 0, p.reduction)
    # the labels in the scores' dtype (a copy unless already), t == 0, ones, -ones, the
    # ±1 labels, t·s, margin − t·s and the clamp (the loss when unreduced), then the
    # reduction
    made = size * (5 + (target.dtype != scores.dtype) + (p.reduction != "none")) \
        + scores.numel()
    return _loss_out(p, scores.shape, scores.dtype, made, p.reduction)


# -- divergences -----------------------------------------------------------------------


class _KLDivergence(nn.Module):
    """KL(target ‖ softmax(input)) from logits, or from log-probabilities as torch's kl_div."""

    def __init__(self, logits: bool, reduction: str):
        super().__init__()
        self.logits, self.reduction = logits, reduction

    def forward(self, input, target):
        log_q = F.log_softmax(input, dim=-1) if self.logits else input
        if self.reduction == "none":  # one divergence per distribution (row)
            return F.kl_div(log_q, target, reduction="none").sum(-1)
        return F.kl_div(log_q, target, reduction=self.reduction)


def _kl_divergence(p: KLDivergenceParams, x):
    need_float(x, "input")
    need_float(x, "target")
    need_same_shape(x)
    if x["input"].ndim < 2:
        raise PortError("input", f"needs one score per class (N, classes), got "
                        f"{fmt(x['input'].shape)}")
    return _KLDivergence, {"logits": p.input_kind == "logits", "reduction": p.reduction}


class _GaussianKL(nn.Module):
    """KL(N(mu, exp(logvar)) ‖ N(0, 1)) in closed form, summed over the latent dimensions."""

    def __init__(self, reduction: str):
        super().__init__()
        self.reduction = reduction

    def forward(self, mu, logvar):
        per_dim = 0.5 * (torch.exp(logvar) + mu ** 2 - 1.0 - logvar)
        if self.reduction == "none":  # one divergence per sample: sum all but the batch
            return per_dim.reshape(mu.shape[0], -1).sum(1)
        total = per_dim.sum()
        return total / mu.shape[0] if self.reduction == "batchmean" else total


def _gaussian_kl(p: GaussianKLParams, x):
    need_float(x, "mu")
    need_float(x, "logvar")
    need_same_shape(x, "mu", "logvar")
    return _GaussianKL, {"reduction": p.reduction}


def _batch_reduced(p: GaussianKLParams | KLDivergenceParams, unreduced_rows: tuple,
                   dtype: torch.dtype, made: int) -> shapes.Inferred:
    """A divergence after `made` bytes of element-wise work: summed per row (none), summed,
    or summed and divided by the batch (batchmean)."""
    s = dtype.itemsize
    return _loss_out(p, unreduced_rows, dtype, made + s * (p.reduction == "batchmean"),
                     p.reduction)


class GaussianKLParams(Params):
    reduction: str
    scale: float


def _gaussian_kl_shape(p: GaussianKLParams, x):
    """exp(log σ²), μ², their sum, − 1, − log σ², ½·: six tensors like μ, then reduced."""
    _gaussian_kl(p, x)
    dtype, mu = shapes.same_dtype(x), x["mu"]
    if dtype is None:
        return None
    return _batch_reduced(p, mu.shape[:1], dtype, 6 * mu.nbytes)


class KLDivergenceParams(Params):
    input_kind: str
    reduction: str
    scale: float


def _kl_divergence_shape(p: KLDivergenceParams, x):
    """The log-softmax of logits, then torch's kl_div: t·log q, xlogy(t, t), their
    difference; reduced, or summed over the classes (none)."""
    _kl_divergence(p, x)
    dtype, t = shapes.same_dtype(x), x["input"]
    if dtype is None:
        return None
    made = t.nbytes * (3 + (p.input_kind == "logits"))
    return _batch_reduced(p, t.shape[:-1], dtype, made)


# -- combining -------------------------------------------------------------------------

TERMS = ("a", "b", "c", "d")


class _WeightedSum(nn.Module):
    """w_a·a + w_b·b + w_c·c + w_d·d over the connected inputs."""

    def __init__(self, weights: tuple[float, ...]):
        super().__init__()
        self.weights = weights

    def forward(self, *losses):
        terms = [w * v for w, v in zip(self.weights, losses, strict=True) if v is not None]
        return sum(terms[1:], terms[0])


class WeightedSumParams(Params):
    w_a: float
    w_b: float
    w_c: float
    w_d: float


def _weighted_sum(p: WeightedSumParams, x):
    if not x:
        raise PortError("a", "no loss is connected", "wire at least one loss into a, b, c or d")
    for port, value in x.items():
        if value.ndim != 0:
            raise PortError(port, f"'{port}' must be a scalar loss, got {fmt(value.shape)}")
    return _WeightedSum(tuple(p[f"w_{t}"] for t in TERMS))


def _weighted_sum_shape(p: WeightedSumParams, x):
    _weighted_sum(p, x)  # the checks; the module holds only the weights
    dtype = shapes.same_dtype(x)
    if dtype is None:
        return None
    # one product per term, then one sum per term after the first
    return shapes.Inferred((((), dtype),), work=(2 * len(x) - 1) * dtype.itemsize)


class ReducedParams(Params):
    """MSE's, MAE's and BCE's."""

    reduction: str
    scale: float


def _reduced(cls: type[nn.Module]) -> Callable[[ReducedParams], tuple]:
    """What `elementwise` makes of a torch loss taking only `reduction`."""
    def make(p: ReducedParams) -> tuple:
        return cls, {"reduction": p.reduction}
    return make


class HuberParams(Params):
    reduction: str
    scale: float
    delta: float


def _huber(p: HuberParams) -> tuple:
    return nn.HuberLoss, {"reduction": p.reduction, "delta": p.delta}


BCE_WEIGHT: Param[list[float]] = Param(
    "weight", "floats", [], "a weight per column of the input (torch's weight, broadcast "
    "over the rows): that column's errors count that much; empty: every column 1")

BLOCKS = [
    op("losses.MSE", "Mean squared error between prediction and target.",
       scaled(elementwise(_reduced(nn.MSELoss))), inputs=PAIR,
       outputs=[LOSS_OUT], params=[REDUCTIONS, SCALE], keywords=("l2", "regression", "squared"),
       shape=elementwise_shape(),
       search=Search(words=("l2", "mse"), popularity=3.5)),
    op("losses.SSE",
       "Sum of squared errors ‖y − ŷ‖² (MSE without the 1/n).\n\n"
       "The least-squares objective as the notes write it; it grows with the batch size, "
       "so a gradient step needs a smaller learning rate than with MSE.",
       scaled(elementwise(lambda p: (nn.MSELoss, {"reduction": "sum"}))), inputs=PAIR,
       outputs=[LOSS_OUT], params=[SCALE], keywords=("least squares", "regression", "squared"),
       shape=elementwise_shape(reduction="sum")),
    op("losses.MAE",
       "Mean absolute error |y − ŷ| (L1 loss).\n\n"
       "Less sensitive to outliers than MSE; its minimiser is the median, not the mean.",
       scaled(elementwise(_reduced(nn.L1Loss))), inputs=PAIR,
       outputs=[LOSS_OUT], params=[REDUCTIONS, SCALE],
       keywords=("l1", "regression", "absolute"), shape=elementwise_shape(fused=False),
       search=Search(words=("l1",))),
    op("losses.Huber",
       "Huber loss: squared for errors below `delta`, linear above.\n\n"
       "0.5·e² when |e| < delta, else delta·(|e| − 0.5·delta): MSE's smooth minimum "
       "with MAE's robustness to outliers.",
       scaled(elementwise(_huber)),
       inputs=PAIR, outputs=[LOSS_OUT],
       params=[REDUCTIONS, SCALE,
               float_param("delta", 1.0, "error size where the loss turns from "
                           "quadratic to linear", min=1e-12)],
       keywords=("smooth l1", "robust", "regression"), shape=elementwise_shape()),
    op("losses.GaussianNLL",
       "Negative log-likelihood of the target under N(input, var).\n\n"
       "0.5·(log σ² + (y − μ)²/σ²) per element: regression that also learns its own "
       "uncertainty. `var` carries σ² (raised to eps where smaller, as torch's "
       "GaussianNLLLoss does) or, with "
       "var_input = log_variance, log σ² — an unconstrained network output needs no "
       "softplus then. With a fixed σ² = 1 it is MSE/2 plus a constant.",
       scaled(_gaussian_nll),
       inputs=[Port("input", doc="the predicted mean μ"),
               Port("target", doc="the observed value y"),
               Port("var", doc="the predicted variance σ² (or log σ², see var_input), "
                    "shaped like the mean or with last dimension 1")],
       outputs=[LOSS_OUT],
       params=[choice_param("var_input", ("variance", "log_variance"), "variance",
                            "what the var port carries: σ² (must be positive) or log σ²"),
               REDUCTIONS, SCALE,
               float_param("eps", 1e-6, "smallest variance (variance input only)", min=0),
               bool_param("full", False, "add the constant 0.5·log 2π, so the value is "
                          "the exact negative log-density")],
       keywords=("likelihood", "heteroscedastic", "uncertainty", "regression"),
       search=Search(words=(("nll", 1),))),
    op("losses.BCE",
       "Binary cross-entropy on probabilities: −[y log p + (1 − y) log(1 − p)].\n\n"
       "Feed probabilities (after a Sigmoid); for raw scores use BCEWithLogits, which "
       "is the same loss computed stably.",
       scaled(_bce), inputs=PAIR,
       outputs=[LOSS_OUT], params=[REDUCTIONS, SCALE, BCE_WEIGHT],
       keywords=("binary", "logistic", "classification", "log loss"),
       shape=_column_weights(elementwise_shape()),
       search=Search(words=(("bce", 1), ("logloss", 1)))),
    op("losses.BCEWithLogits",
       "Binary cross-entropy on logits (sigmoid built in, numerically stable).\n\n"
       "Targets are 0/1 floats shaped like the logits. `pos_weight` > 1 counts each "
       "positive sample that many times, for rare positive classes.",
       scaled(_bce_logits), inputs=PAIR, outputs=[LOSS_OUT],
       params=[REDUCTIONS, SCALE,
               float_param("pos_weight", None, "weight of the positive class's "
                           "term; empty means 1", min=0, nullable=True), BCE_WEIGHT],
       keywords=("binary", "logistic", "classification"),
       shape=_column_weights(elementwise_shape()),
       search=Search(words=("bce", "logloss"), popularity=3.5)),
    op("losses.CrossEntropy",
       "Cross-entropy of class scores (logits) against class indices or probabilities.\n\n"
       "Softmax is built in: feed raw scores, not probabilities. Classes are the last "
       "dimension, so (N, L, C) scores of a sequence model take (N, L) targets; index "
       "targets of -100 are ignored.",
       scaled(_cross_entropy), inputs=PAIR, outputs=[LOSS_OUT],
       params=[REDUCTIONS, SCALE, float_param("label_smoothing", 0.0,
                                      "move this much probability mass to the other "
                                      "classes evenly", min=0, max=1),
               Param("weight", "floats", [], "a weight per class (torch's weight): a "
                     "class's errors count that much, and a mean divides by the total "
                     "weight of the targets; empty: every class 1")],
       keywords=("softmax", "classification", "nll", "categorical"),
       shape=_cross_entropy_shape,
       search=Search(words=("xent", "ce", "crossent", "nll", "softmaxloss"), popularity=4.0)),
    op("losses.Hinge",
       "Hinge loss max(0, margin − t·s) of a linear classifier (the soft-margin SVM).\n\n"
       "One score s per sample: targets t are −1/+1; 0/1 labels work too, 0 being read "
       "as −1. Several scores per sample: targets are class indices and the loss is "
       "torch's multi-class margin loss. Add an L2 penalty on the weights for the SVM.",
       scaled(_hinge), inputs=PAIR, outputs=[LOSS_OUT],
       params=[REDUCTIONS, SCALE, float_param("margin", 1.0, "the margin scores must clear",
                                      min=0)], shape=_hinge_shape,
       keywords=("svm", "margin", "classification", "max margin"),
       search=Search(words=("svm",))),
    op("losses.KLDivergence",
       "KL(target ‖ model) between categorical distributions, over the last dimension.\n\n"
       "Σ p·(log p − log q) with p = target probabilities and q = the model's "
       "distribution, given as logits (softmax built in) or as log-probabilities "
       "(input_kind). The target must be probabilities. Used for distillation and "
       "label distributions; with one-hot targets it equals cross-entropy.",
       scaled(_kl_divergence),
       inputs=[Port("input", doc="the model's scores: logits or log-probabilities"),
               Port("target", doc="the target probabilities p (rows sum to 1)")],
       outputs=[LOSS_OUT],
       params=[choice_param("input_kind", ("logits", "log_probs"), "logits",
                            "logits: raw scores, softmax built in; log_probs: after "
                            "LogSoftmax (torch's kl_div convention)"),
               BATCH_REDUCTIONS, SCALE],
       keywords=("kl", "relative entropy", "distillation", "divergence"),
       shape=_kl_divergence_shape,
       search=Search(words=("kl",))),
    op("losses.GaussianKL",
       "KL(N(μ, σ²) ‖ N(0, 1)) in closed form, from μ and log σ²: the VAE's prior term.\n\n"
       "0.5·Σ(σ² + μ² − 1 − log σ²), summed over the latent dimensions and averaged "
       "over the batch (reduction batchmean) or summed (sum). Pair it with a "
       "reconstruction loss in a WeightedSum to minimise the negative ELBO.",
       scaled(_gaussian_kl),
       inputs=[Port("mu", doc="means of the approximate posterior"),
               Port("logvar", doc="log-variances log σ², shaped like mu")],
       outputs=[LOSS_OUT], params=[BATCH_REDUCTIONS, SCALE],
       keywords=("vae", "elbo", "kl", "prior", "latent"), shape=_gaussian_kl_shape,
       search=Search(words=(("kl", 1),))),
    op("losses.WeightedSum",
       "A weighted sum of up to four losses, w_a·a + w_b·b + w_c·c + w_d·d.\n\n"
       "For objectives with several terms (reconstruction + β·KL, a loss plus a "
       "penalty): wire it into the optimizer instead of the parts. Unconnected inputs "
       "count as 0.",
       _weighted_sum,
       inputs=[Port(t, LOSS, f"loss term {t}", optional=True) for t in TERMS],
       outputs=[LOSS_OUT],
       params=[float_param(f"w_{t}", 1.0, f"weight of loss {t}") for t in TERMS],
       shape=_weighted_sum_shape,
       keywords=("combine", "elbo", "beta", "multi-task", "total")),
]
