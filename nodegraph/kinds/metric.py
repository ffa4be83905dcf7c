"""The base of metric blocks: values accumulated over a whole split, not averaged per batch.

Accuracy, R² or a confusion matrix must be computed over every sample of a split; averaging
per-batch values is wrong when batches differ in size and for ratios like R². A metric keeps
running sums as tensors on the training device (no host sync per step) and turns them into
numbers once, in `compute`.
"""

from __future__ import annotations

from typing import Any


class Metric:
    """Accumulates over the batches of one split; `compute` returns named numbers.

    Subclasses implement `reset`, `update` (called with the block's inputs in port order,
    without gradients) and `compute`. `compute` returns a float, or a dict of named values
    (reported as ``node.name``); values that are lists (a confusion matrix) are kept as is.
    """

    def reset(self) -> None:
        raise NotImplementedError

    def update(self, *inputs: Any, **named: Any) -> None:
        # (*Any, **Any): each metric declares the inputs of its block, in port order
        raise NotImplementedError

    def compute(self) -> float | dict[str, object]:
        raise NotImplementedError
