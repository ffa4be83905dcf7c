"""Losses: blocks whose output is a scalar for an optimizer to minimise."""

from __future__ import annotations

import torch
from torch import nn

from nodegraph.errors import PortError
from nodegraph.spec import LOSS_OUT, block, choice_param, float_param
from nodes._shapes import fmt, need_float, need_same_shape

REDUCTION = choice_param("reduction", ("mean", "sum"), "mean",
                         "average the per-element losses, or add them up")
PAIR = ["input", "target"]


def _mse(p, x):
    need_float(x, "input")
    need_same_shape(x)
    return nn.MSELoss(reduction=p.reduction)


def _bce_logits(p, x):
    need_float(x, "input")
    need_float(x, "target")
    need_same_shape(x)
    return nn.BCEWithLogitsLoss(reduction=p.reduction)


class _CrossEntropy(nn.CrossEntropyLoss):
    """Cross-entropy that also takes class indices shaped (N, 1), as tables produce them."""

    def forward(self, input: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        if target.ndim == input.ndim and target.shape[-1] == 1 and input.shape[-1] != 1:
            target = target.squeeze(-1)
        return super().forward(input, target)


def _cross_entropy(p, x):
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
    elif target.shape[0] != scores.shape[0] or target.numel() != scores.shape[0]:
        raise PortError("target", f"class indices {fmt(target.shape)} do not fit scores "
                        f"{fmt(scores.shape)}", "targets must be one class index per sample")
    return _CrossEntropy(reduction=p.reduction, label_smoothing=p.label_smoothing)


BLOCKS = [
    block("losses.MSE", "op", "Mean squared error between prediction and target.",
          _mse, inputs=PAIR, outputs=[LOSS_OUT], params=[REDUCTION],
          keywords=("l2", "regression", "squared")),
    block("losses.BCEWithLogits", "op",
          "Binary cross-entropy on logits (sigmoid built in, numerically stable).\n\n"
          "Targets are 0/1 floats shaped like the logits.",
          _bce_logits, inputs=PAIR, outputs=[LOSS_OUT], params=[REDUCTION],
          keywords=("binary", "logistic", "classification")),
    block("losses.CrossEntropy", "op",
          "Cross-entropy of class scores (logits) against class indices or probabilities.\n\n"
          "Softmax is built in: feed raw scores, not probabilities.",
          _cross_entropy, inputs=PAIR, outputs=[LOSS_OUT],
          params=[REDUCTION, float_param("label_smoothing", 0.0,
                                         "move this much probability mass to the other "
                                         "classes evenly", min=0, max=1)],
          keywords=("softmax", "classification", "nll", "categorical")),
]
