"""Checkpoints: the whole state of a run (weights, optimizer and schedule states, random
generators, history, position in the stage schedule, the monitor, the GradScaler's loss
scale under 16-mixed precision) written every
`checkpoint_every` epochs and after the last, so `--resume` continues exactly where the run
stopped: the same seed gives the same history, byte for byte, resumed or not. The best
weights go beside it (`best.safetensors`) at each new best. A run stopped by request or by
Ctrl-C writes one more after the run went back to the end of its last whole epoch
(`nodegraph.runtime.epoch_start`): a resume trains the interrupted epoch again, as the run
would have. The callbacks' own `state_dict`s travel in it, taken after every callback's
`on_epoch_end` (a run places `Checkpointing.writer()` last, and `loader()` first), and
every random generator (`nodegraph.runtime.generators`)."""

from __future__ import annotations

from pathlib import Path

import torch

from nodegraph.model.errors import NodegraphError, first_line
from nodegraph.model.events import Message
from nodegraph.runtime import checkpoint, generators, normalization
from nodegraph.runtime.callbacks.base import Callback, callback_states, load_callback_states
from nodegraph.runtime.callbacks.best import BestWeights
from nodegraph.runtime.callbacks.monitor import Monitor


class Checkpointing(Callback):
    """Resumes from `directory` when the run asks to; writes to it after epochs (only
    where `writes`: one rank of a distributed run)."""

    def __init__(self, directory: Path, every: int, monitor: Monitor,
                 best: BestWeights | None = None, writes: bool = True):
        self.directory, self.every = Path(directory), every
        self.monitor, self.best, self.writes = monitor, best, writes
        self.written: Path | None = None  # the checkpoint folder last written, and its epoch
        self.written_epoch = 0

    def on_run_start(self, trainer) -> None:
        if trainer.state.resume:
            self.load(trainer)

    def on_epoch_end(self, trainer) -> None:
        s = trainer.state
        if self.writes and (s.epoch % self.every == 0 or s.index >= s.total):
            self.save(trainer)

    def on_run_end(self, trainer) -> None:
        if self.writes and trainer.state.cancelled:  # the epochs trained before the stop
            self.save(trainer)

    def loader(self) -> Callback:
        """This callback's resuming alone: a run puts it among the first, so every other
        callback starts from the resumed state."""
        return _Part(self, ("on_run_start",))

    def writer(self) -> Callback:
        """This callback's writing alone: a run puts it after every other, so what it
        saves of them (their state, the generators) is what the epoch left."""
        return _Part(self, ("on_epoch_end", "on_run_end"))

    def save(self, trainer) -> None:
        c, s = trainer.c, trainer.state
        tensors = generators.capture(trainer.shuffle_rng)
        done = len(s.history)  # a stopped epoch was undone: only whole ones are written
        info = {"epoch": done, "next": s.index, "history": s.history,
                "global_step": s.global_step, "monitor": self.monitor.state_dict(),
                "schedules": {o.node: o.scheduler.state_dict() for o in c.optimizers
                              if o.scheduler is not None},
                "callbacks": callback_states(_callbacks(trainer), skip=[self.monitor])}
        precision = getattr(trainer, "precision", None)  # 16-mixed: the GradScaler's state
        if precision is not None and precision.state_dict():
            info["precision"] = precision.state_dict()
        self.written = checkpoint.save(
            self.directory, normalization.with_weights(c, c.module.block_state()),
            {o.node: o.optimizer.state_dict() for o in c.optimizers}, tensors, info)
        if s.improved and self.best is not None:
            checkpoint.save_weights(self.directory / "best.safetensors",
                                    normalization.with_weights(c, c.module.block_state()))
        self.written_epoch = done
        trainer.events.emit(Message(f"checkpoint written: epoch {done}", "debug"))

    def load(self, trainer) -> None:
        """Put the run back as the last checkpoint left it."""
        c, s, where = trainer.c, trainer.state, self.directory
        weights, optimizers, tensors, info = checkpoint.load(where)
        try:
            c.module.load_block_state(weights)
        except RuntimeError as e:
            raise NodegraphError(f"the checkpoint in {where} does not fit this graph: "
                                 f"{first_line(e)}") from None
        try:
            for o in c.optimizers:
                if o.node in optimizers:
                    o.optimizer.load_state_dict(optimizers[o.node])
                if o.scheduler is not None and o.node in info.get("schedules", {}):
                    o.scheduler.load_state_dict(info["schedules"][o.node])
        except (ValueError, KeyError, TypeError) as e:  # torch's words for a foreign state
            raise NodegraphError(f"the optimizer state in the checkpoint in {where} does not "
                                 f"fit this graph's optimizers ({first_line(e)}); resume with "
                                 "the graph that wrote it, or start afresh without --resume"
                                 ) from None
        precision = getattr(trainer, "precision", None)
        if precision is not None:
            try:
                precision.load_state_dict(info.get("precision", {}))
            except NodegraphError as e:
                raise NodegraphError(f"the checkpoint in {where}: {e}") from None
        generators.restore({k: v for k, v in tensors.items() if k != "rng/cuda"},
                           trainer.shuffle_rng, f"the checkpoint in {where}")
        if "rng/cuda" in tensors and torch.cuda.is_available():  # written by an older version
            torch.cuda.set_rng_state(tensors["rng/cuda"])
        s.history = info["history"]
        s.global_step = info.get("global_step", 0)
        self.monitor.load_state_dict(info.get("monitor", {}))
        load_callback_states(_callbacks(trainer), info.get("callbacks", {}))
        best = where / "best.safetensors"
        if self.best is not None and best.exists():
            self.best.weights = checkpoint.load_file(str(best))
        s.index, s.epoch = info.get("next", info["epoch"]), info["epoch"]
        s.before = max(0, s.epoch - s.index)  # a checkpoint of a continued Model.fit
        trainer.events.emit(Message(f"resumed from the checkpoint of epoch {info['epoch']}"))


class _Part(Callback):
    """Some of `Checkpointing`'s hooks, to place them apart in a run's callback order."""

    def __init__(self, owner: Checkpointing, hooks: tuple[str, ...]):
        self.owner, self.hooks = owner, hooks

    def on_run_start(self, trainer) -> None:
        if "on_run_start" in self.hooks:
            self.owner.on_run_start(trainer)

    def on_epoch_end(self, trainer) -> None:
        if "on_epoch_end" in self.hooks:
            self.owner.on_epoch_end(trainer)

    def on_run_end(self, trainer) -> None:
        if "on_run_end" in self.hooks:
            self.owner.on_run_end(trainer)


def _callbacks(trainer) -> list[Callback]:
    """The run's callbacks (none for a trainer stand-in that keeps no list)."""
    hooks = getattr(trainer, "callbacks", None)
    return list(getattr(hooks, "all", []))
