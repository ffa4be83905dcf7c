"""Pruning a search trial from its per-epoch numbers (`nodegraph sweep --search`).

After each validation the watched number (`val.loss`, `train.accuracy` …) goes to the search
trial as that epoch's intermediate value; when the trial's pruner says the run is hopeless
the run ends after this epoch, and `pruned` tells the search to mark the trial pruned. A
number that is not finite (a diverged run) ends the run at once: nothing good can follow it,
and Optuna's pruners treat NaN as the worst value anyway. A number the run does not compute
at all is the user's mistake, reported with the numbers it does compute.

The trial is duck-typed (`report(value, step)`, `should_prune()`), so this module imports no
Optuna; the search (`nodegraph.runtime.search`) hands in an `optuna.Trial`.
"""

from __future__ import annotations

import math

from nodegraph.model.errors import NodegraphError
from nodegraph.model.events import Message
from nodegraph.runtime.callbacks.base import Callback
from nodegraph.runtime.callbacks.monitor import lookup


class MissingNumber(NodegraphError):
    """The watched number is not among the run's numbers: every trial would fail alike."""


class TrialPruning(Callback):
    """Reports `key` to `trial` each epoch and ends the run once the trial is pruned."""

    def __init__(self, trial, key: str):
        self.trial, self.key = trial, key
        self.pruned = False
        self.last: float | None = None  # the last value reported
        self.epochs = 0  # epochs reported

    def on_validation_end(self, trainer) -> None:
        s = trainer.state
        value = lookup(self.key, s.train, s.val)
        self.epochs = s.epoch
        self.last = value
        if value is None:
            have = [f"{split}.{k}" for split, stats in (("train", s.train), ("val", s.val))
                    for k, v in stats.items() if isinstance(v, int | float)]
            raise MissingNumber(f"the run has no {self.key} to watch; choose --metric among "
                                 f"{', '.join(have) or 'its numbers (it computes none)'}")
        if not math.isfinite(value):
            self.trial.report(float("nan"), s.epoch)
            self.pruned = True
            return
        self.trial.report(value, s.epoch)
        self.pruned = bool(self.trial.should_prune())

    def on_epoch_end(self, trainer) -> None:
        if not self.pruned:
            return
        s = trainer.state
        trainer.events.emit(Message(f"trial pruned after epoch {s.epoch}: {self.key} "
                                    f"{self.last if self.last is not None else 'missing'}"))
        s.index, s.stopped_early = len(s.schedule), True
