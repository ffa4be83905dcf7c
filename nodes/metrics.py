"""Metrics: numbers computed over a whole split, reported per epoch."""

from __future__ import annotations

import torch

from nodegraph.errors import PortError
from nodegraph.metric import Metric
from nodegraph.spec import block, float_param
from nodes._shapes import fmt


class Accuracy(Metric):
    """Share of samples whose predicted class equals the target.

    One score per sample is a binary classifier thresholded at `threshold` (0 for logits,
    0.5 for probabilities); several scores per sample are classes, predicted by argmax.
    """

    def __init__(self, threshold: float):
        self.threshold = threshold
        self.reset()

    def reset(self) -> None:
        self.correct: torch.Tensor | int = 0
        self.total = 0

    def update(self, input: torch.Tensor, target: torch.Tensor) -> None:
        if input.ndim == 1 or input.shape[-1] == 1:
            pred = (input.reshape(-1) > self.threshold).long()
        else:
            pred = input.argmax(-1)
        if target.dtype.is_floating_point and target.ndim > 1 and target.shape[-1] > 1:
            target = target.argmax(-1)  # one-hot or probabilities
        target = target.reshape(-1).long()
        self.correct = self.correct + (pred.reshape(-1) == target).sum()
        self.total += target.numel()

    def compute(self) -> float:
        return float(self.correct) / max(self.total, 1)


def _accuracy(p, x):
    scores, target = x["input"], x["target"]
    if scores.shape[0] != target.shape[0]:
        raise PortError("target", f"{fmt(target.shape)} targets for {fmt(scores.shape)} scores")
    return Accuracy(p.threshold)


BLOCKS = [
    block("metrics.Accuracy", "metric",
          "Share of correctly classified samples.\n\nOne score per sample: binary, "
          "thresholded; several: argmax over classes.",
          _accuracy, inputs=["input", "target"],
          params=[float_param("threshold", 0.0, "decision threshold for one score per sample: "
                              "0 for logits, 0.5 for probabilities")],
          keywords=("classification", "correct")),
]
