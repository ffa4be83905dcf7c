"""The learning-rate range test: train briefly while the rate grows, and read the loss curve.

Compile the graph afresh (its file and weights on disk are not touched), then take `steps`
training steps of one optimizer, multiplying its learning rate by a constant factor each
step so it sweeps from `start` to `end` on a log scale, restarting the training batches
as often as needed. The loss of each step is recorded with an exponential moving average
(bias-corrected, as in Adam) to tame batch noise; the test stops once the smoothed loss
exceeds `diverge` times its best value or stops being finite. Schedules attached to the
optimizer are ignored (the test sets the rate itself); other optimizers do not step.

The suggestion (`suggested_lr`) is by default the rate where the smoothed loss falls
fastest per unit of log(lr), looking only at the falling part of the curve before its
minimum: large enough to learn quickly, still below the unstable region. The slope is a
difference quotient over one decade of rates (less where the falling part is shorter),
so batch noise cannot fake a steep spot, and the suggestion is the geometric middle of the
steepest such window. The other rules are returned too: `min_loss_lr / 10` (fastai's
"minimum") and `divergence_lr / 10` (a tenth of the rate at which the loss diverges).
The default smoothing β = 0.9 averages over about the last 10 steps; fastai's 0.98
averages over about 50, which with 100 steps over six decades makes the curve lag three
decades behind the rate. Plotting is the caller's job; `rows()` gives the
table. Nothing here imports Qt.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field, replace

import numpy as np

from nodegraph.model import settings
from nodegraph.model.errors import NodegraphError, ValidationError
from nodegraph.model.events import Emitter
from nodegraph.model.graph import Graph
from nodegraph.runtime.compile import OptimizerRun, compile_graph
from nodegraph.runtime.train import RunControl, Trainer

SUGGESTIONS = ("steepest", "min_loss", "divergence")


@dataclass
class LRRangeResult:
    """The curve of a range test and the rates read from it."""

    optimizer: str
    lrs: list[float] = field(default_factory=list)
    losses: list[float] = field(default_factory=list)  # the loss of each step, as measured
    smoothed: list[float] = field(default_factory=list)  # its bias-corrected moving average
    diverged: bool = False  # stopped because the loss blew up (else: ran all steps)
    divergence_lr: float | None = None  # the rate at which it blew up
    steepest_lr: float | None = None
    min_loss_lr: float | None = None
    suggested_lr: float | None = None

    def rows(self) -> list[tuple[float, float, float]]:
        """(lr, loss, smoothed loss) per step, for a table or a CSV."""
        return list(zip(self.lrs, self.losses, self.smoothed, strict=True))

    def to_dict(self) -> dict:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


def lr_range_test(graph: Graph, optimizer_node: str | None = None, start: float = 1e-6,
                  end: float = 1.0, steps: int = 100, *, smoothing: float = 0.9,
                  diverge: float = 4.0, suggest: str = "steepest", seed: int | None = None,
                  device: str | None = None) -> LRRangeResult:
    """Run the range test on `graph` for one optimizer block (the only one when not named).

    `smoothing` is the moving average's β (0 records the raw loss); `suggest` picks which
    rule fills `suggested_lr`: steepest, min_loss (its rate / 10) or divergence (its rate
    / 10, when the loss diverged). Raises ValidationError for a graph that cannot train and
    NodegraphError for bad arguments.
    """
    _check_arguments(start, end, steps, smoothing, diverge, suggest)
    overrides = {k: v for k, v in (("seed", seed), ("device", device)) if v is not None}
    opts, problems = settings.resolve({**graph.training, **overrides})
    if problems:
        raise ValidationError(problems)
    compiled = compile_graph(graph, device=opts.device, seed=opts.seed)
    run = replace(_pick(compiled.optimizers, optimizer_node), scheduler=None, per_step=False)
    trainer = Trainer(compiled, opts, Emitter(), RunControl(), None)
    compiled.module.train()

    result = LRRangeResult(run.node)
    factor = (end / start) ** (1.0 / (steps - 1))
    average, best = 0.0, math.inf
    for i, values in zip(range(steps), _endless(trainer), strict=False):
        lr = start * factor ** i
        for group in run.optimizer.param_groups:
            group["lr"] = lr
        trainer.step(run, values)
        loss = float(values[run.loss_key].detach())
        if not math.isfinite(loss):
            result.diverged, result.divergence_lr = True, lr
            break
        average = smoothing * average + (1 - smoothing) * loss
        smoothed = average / (1 - smoothing ** (i + 1))
        result.lrs.append(lr)
        result.losses.append(loss)
        result.smoothed.append(smoothed)
        best = min(best, smoothed)
        if smoothed - best > (diverge - 1) * abs(best):  # diverge × best, for any sign
            result.diverged, result.divergence_lr = True, lr
            break
    _suggest(result, suggest)
    return result


def _check_arguments(start, end, steps, smoothing, diverge, suggest) -> None:
    if not 0 < start < end:
        raise NodegraphError(f"the range test needs 0 < start < end, got start={start}, "
                             f"end={end}")
    if steps < 2:
        raise NodegraphError(f"the range test needs at least 2 steps, got {steps}")
    if not 0 <= smoothing < 1:
        raise NodegraphError(f"smoothing must be in [0, 1), got {smoothing}")
    if diverge <= 1:
        raise NodegraphError(f"diverge must be above 1, got {diverge}")
    if suggest not in SUGGESTIONS:
        raise NodegraphError(f"suggest must be one of {', '.join(SUGGESTIONS)}, not "
                             f"{suggest!r}")


def _pick(optimizers: list[OptimizerRun], node: str | None) -> OptimizerRun:
    names = [o.node for o in optimizers]
    if node is None:
        if len(optimizers) != 1:
            raise NodegraphError(f"the graph has {len(names)} optimizers ({', '.join(names)}); "
                                 "name the one to test")
        return optimizers[0]
    for o in optimizers:
        if o.node == node:
            return o
    raise NodegraphError(f"'{node}' is not an optimizer of this graph (optimizers: "
                         f"{', '.join(names) or 'none'})")


def _endless(trainer: Trainer) -> Iterator[dict]:
    """Training batches, starting over (reshuffled) whenever the split runs out."""
    while True:
        empty = True
        shuffle = trainer.primary is not None and trainer.primary.shuffle
        for values in trainer.batches("train", shuffle):
            empty = False
            yield values
        if empty:
            raise NodegraphError("the training split is empty")


def _suggest(result: LRRangeResult, rule: str) -> None:
    """Fill in the rates the curve suggests (None where the curve is too short)."""
    if not result.smoothed:
        return
    lowest = int(np.argmin(result.smoothed))
    result.min_loss_lr = result.lrs[lowest]
    log_lr, loss = np.log(result.lrs[:lowest + 1]), np.array(result.smoothed[:lowest + 1])
    if lowest >= 1:
        per_step = log_lr[1] - log_lr[0]
        window = max(1, min(lowest, round(math.log(10) / per_step)))  # one decade
        slopes = (loss[window:] - loss[:-window]) / (log_lr[window:] - log_lr[:-window])
        i = int(np.argmin(slopes))
        result.steepest_lr = float(np.exp((log_lr[i] + log_lr[i + window]) / 2))
    result.suggested_lr = {
        "steepest": result.steepest_lr,
        "min_loss": result.min_loss_lr / 10,
        "divergence": None if result.divergence_lr is None else result.divergence_lr / 10,
    }[rule]
