"""The callbacks people reach for, from Python: `fit(g, callbacks=[EarlyStopping(...)])`.

Each is the trainer's own unit, given the arguments Keras and Lightning users know:

    EarlyStopping        the trainer's Monitor and EarlyStopping (training.patience), with
                         best weights put back (training.restore_best) when asked
    ModelCheckpoint      the best weights (best.safetensors, as `--checkpoint-dir` writes
                         them) and the whole resumable checkpoint every `every` epochs
    CSVLogger            one row per epoch: epoch, the train and val numbers, the rates
    LearningRateMonitor  each optimizer's learning rate per epoch or per step

They watch their own number, so several can watch different ones beside the run's own
`training.monitor`. `nodegraph.Callback` is the base of any other.
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

from nodegraph.model import settings
from nodegraph.model.errors import NodegraphError
from nodegraph.runtime import checkpoint, normalization
from nodegraph.runtime.callbacks.base import Callback, TrainerView
from nodegraph.runtime.callbacks.best import BestWeights
from nodegraph.runtime.callbacks.checkpointing import Checkpointing
from nodegraph.runtime.callbacks.monitor import EarlyStopping as _EarlyStop
from nodegraph.runtime.callbacks.monitor import Monitor, lookup

__all__ = ["CSVLogger", "Callback", "EarlyStopping", "LearningRateMonitor", "ModelCheckpoint"]

MODES = ("auto", "min", "max")


def _monitor(key: str, mode: str, min_delta: float, who: str) -> Monitor:
    split = key.partition(".")[0]
    if split not in ("train", "val") or "." not in key:
        raise NodegraphError(f"{who}: monitor names a number as split.name (val.loss, "
                             f"train.accuracy), got {key!r}")
    if mode not in MODES:
        raise NodegraphError(f"{who}: mode must be one of {', '.join(MODES)}, got {mode!r}")
    return Monitor(key, settings.monitor_rises(key, mode), min_delta)


class _Watch(Callback):
    """A number of its own watched after each validation (not the run's `improved`)."""

    monitor: Monitor
    improved = False

    def on_stage_start(self, trainer: TrainerView, fresh: bool) -> None:
        if fresh:
            self.monitor.reset()

    def on_validation_end(self, trainer: TrainerView) -> None:
        s = trainer.state
        self.improved = self.monitor.update(lookup(self.monitor.key, s.train, s.val), s.epoch)

    def state_dict(self) -> dict[str, Any]:
        return self.monitor.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.monitor.load_state_dict(state)


class EarlyStopping(_Watch):
    """Stop once `monitor` has not improved by more than `min_delta` for `patience` epochs
    (in a staged run: end the stage); `restore_best_weights` puts the best epoch's weights
    back at the end."""

    def __init__(self, monitor: str = "val.loss", patience: int = 5, mode: str = "auto",
                 min_delta: float = 0.0, restore_best_weights: bool = False):
        if patience < 0:
            raise NodegraphError(f"EarlyStopping: patience must be 0 or more, got {patience}")
        self.monitor = _monitor(monitor, mode, min_delta, "EarlyStopping")
        self.stop = _EarlyStop(self.monitor, patience)
        self.best = _BestOf(self) if restore_best_weights else None

    @property
    def best_epoch(self) -> int | None:
        return self.monitor.best_epoch

    def on_stage_start(self, trainer: TrainerView, fresh: bool) -> None:
        super().on_stage_start(trainer, fresh)
        if self.best is not None:
            self.best.on_stage_start(trainer, fresh)

    def on_validation_end(self, trainer: TrainerView) -> None:
        super().on_validation_end(trainer)
        if self.best is not None:
            self.best.on_validation_end(trainer)

    def on_epoch_end(self, trainer: TrainerView) -> None:
        self.stop.on_epoch_end(trainer)

    def on_run_end(self, trainer: TrainerView) -> None:
        if self.best is not None:
            self.best.on_run_end(trainer)


class _BestOf(BestWeights):
    """Best weights by a watch's own number, not the run's."""

    def __init__(self, watch: _Watch):
        super().__init__(watch.monitor, restore=True)
        self.watch = watch

    def on_validation_end(self, trainer: TrainerView) -> None:
        if self.watch.improved:
            self.weights = {k: v.detach().clone()
                            for k, v in trainer.c.module.block_state().items()}


class ModelCheckpoint(_Watch):
    """Writes into `dirpath` the weights of the best epoch by `monitor` (best.safetensors,
    keyed node.param with the data blocks' normalisation: `nodegraph forward GRAPH
    --weights` loads them) and, every `every` epochs (0: never), the whole resumable
    checkpoint the trainer writes (`fit(..., checkpoint_dir=dirpath, resume=True)` goes on
    from it)."""

    def __init__(self, dirpath: str | Path, monitor: str = "val.loss", mode: str = "auto",
                 every: int = 1, min_delta: float = 0.0):
        if every < 0:
            raise NodegraphError(f"ModelCheckpoint: every must be 0 or more, got {every}")
        self.directory = Path(dirpath)
        self.monitor = _monitor(monitor, mode, min_delta, "ModelCheckpoint")
        self.every = every
        self.writer = Checkpointing(self.directory, max(every, 1), self.monitor)
        self.best_path: Path | None = None

    @property
    def best_score(self) -> float | None:
        return self.monitor.best

    @property
    def best_epoch(self) -> int | None:
        return self.monitor.best_epoch

    def on_run_start(self, trainer: TrainerView) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)

    def on_epoch_end(self, trainer: TrainerView) -> None:
        c = trainer.c
        if self.improved:
            self.best_path = self.directory / "best.safetensors"
            checkpoint.save_weights(self.best_path,
                                    normalization.with_weights(c, c.module.block_state()))
        if self.every and trainer.state.epoch % self.every == 0:
            self.writer.save(trainer)


class CSVLogger(Callback):
    """One row per epoch in `filename`: epoch, seconds, `train.*`, `val.*` (the numbers;
    a list such as a confusion matrix is left out) and `lr.<optimizer>`. The columns are
    those of the first epoch; `append` adds to an existing file."""

    def __init__(self, filename: str | Path, append: bool = False):
        self.path, self.append = Path(filename), append
        self.columns: list[str] | None = None

    def on_run_start(self, trainer: TrainerView) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if not self.append:
            self.path.write_text("", encoding="utf-8")
        self.columns = None

    def on_epoch_end(self, trainer: TrainerView) -> None:
        row = _flat(trainer.state.history[-1])
        if self.columns is None:
            self.columns = list(row)
            fresh = not self.path.exists() or self.path.stat().st_size == 0
            with self.path.open("a", newline="", encoding="utf-8") as f:
                if fresh:
                    csv.writer(f).writerow(self.columns)
        with self.path.open("a", newline="", encoding="utf-8") as f:
            csv.writer(f).writerow([row.get(k, "") for k in self.columns])


def _flat(entry: dict[str, Any]) -> dict[str, Any]:
    row: dict[str, Any] = {"epoch": entry["epoch"], "seconds": entry.get("seconds", "")}
    for split in ("train", "val"):
        for k, v in entry.get(split, {}).items():
            if isinstance(v, int | float) and not isinstance(v, bool):
                row[f"{split}.{k}"] = v
    for node, lr in entry.get("lr", {}).items():
        row[f"lr.{node}"] = lr
    return row


class LearningRateMonitor(Callback):
    """Each optimizer's learning rate (its first parameter group's), after every epoch or,
    with `logging_interval="step"`, after every step: `lrs[node]` is the list."""

    def __init__(self, logging_interval: str = "epoch"):
        if logging_interval not in ("epoch", "step"):
            raise NodegraphError("LearningRateMonitor: logging_interval must be 'epoch' or "
                                 f"'step', got {logging_interval!r}")
        self.interval = logging_interval
        self.lrs: dict[str, list[float]] = {}

    def on_run_start(self, trainer: TrainerView) -> None:
        self.lrs = {o.node: [] for o in trainer.c.optimizers}

    def _record(self, trainer: TrainerView) -> None:
        for o in trainer.c.optimizers:
            self.lrs.setdefault(o.node, []).append(float(o.optimizer.param_groups[0]["lr"]))

    def on_step_end(self, trainer: TrainerView, values: dict) -> None:
        if self.interval == "step":
            self._record(trainer)

    def on_epoch_end(self, trainer: TrainerView) -> None:
        if self.interval == "epoch":
            self._record(trainer)
