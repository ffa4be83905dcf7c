"""The monitored number (`training.monitor`, by default val.loss) and early stopping on it.

`Monitor` watches the number after each validation and says whether the epoch set a new
best (the `improved` of EpochEnded); best weights and checkpoints read it. `EarlyStopping`
ends the stage under way — the run, in its last stage — once the number has not improved
for `patience` epochs. Each stage starts a fresh watch.
"""

from __future__ import annotations

import math
from typing import Any

from nodegraph.model.events import Message
from nodegraph.runtime.callbacks.base import Callback


class Monitor(Callback):
    """The best value of one number so far, when it came, and how long ago."""

    def __init__(self, key: str, rises: bool, min_delta: float = 0.0):
        self.key, self.rises, self.min_delta = key, rises, min_delta
        self.reset()

    def reset(self) -> None:
        self.best: float | None = None
        self.best_epoch: int | None = None
        self.since_best = 0

    def update(self, value: float | None, epoch: int) -> bool:
        """Record `value`; True when it is a new best (a missing or non-finite value never
        is, and counts as an epoch without improvement)."""
        if value is None or not math.isfinite(value):
            self.since_best += 1
            return False
        better = self.best is None or (value > self.best + self.min_delta if self.rises
                                       else value < self.best - self.min_delta)
        if better:
            self.best, self.best_epoch, self.since_best = value, epoch, 0
        else:
            self.since_best += 1
        return better

    def state_dict(self) -> dict[str, Any]:
        return {"best": self.best, "best_epoch": self.best_epoch, "since_best": self.since_best}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.best, self.best_epoch = state.get("best"), state.get("best_epoch")
        self.since_best = state.get("since_best", 0)

    def on_stage_start(self, trainer, fresh: bool) -> None:
        if fresh:
            self.reset()

    def on_validation_end(self, trainer) -> None:
        s = trainer.state
        s.improved = self.update(lookup(self.key, s.train, s.val), s.epoch)


class EarlyStopping(Callback):
    """Ends the stage (the run, in the last stage) after `patience` epochs without a new
    best of the monitored number."""

    def __init__(self, monitor: Monitor, patience: int):
        self.monitor, self.patience = monitor, patience

    def on_epoch_end(self, trainer) -> None:
        m = self.monitor
        if m.since_best < self.patience:
            return
        best = ("no finite value yet" if m.best is None
                else f"best {m.best:.6g} at epoch {m.best_epoch}")
        trainer.events.emit(Message(f"early stop after epoch {trainer.state.epoch}: {m.key} "
                                    f"has not improved for {self.patience} epochs ({best})"))
        trainer.state.end_stage()


def lookup(key: str, train: dict, val: dict) -> float | None:
    """The number `key` ("split.name") names among an epoch's numbers; None when absent or
    not a number."""
    split, _, name = key.partition(".")
    source = {"train": train, "val": val}.get(split)
    if source is None or name not in source:
        return None
    value = source[name]
    return float(value) if isinstance(value, int | float) else None
