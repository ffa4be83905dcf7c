"""The hooks the training loop calls, and the state it shares with them.

The loop (`nodegraph.runtime.train.Trainer.run`) only walks the epochs: for each, it trains the
steps, evaluates the val split and records the history. Everything else — stages, the
monitored number, best weights, weight snapshots, early stopping, checkpoints, probes — is a
`Callback` called at fixed points, in the manner of Keras callbacks and Lightning hooks:

    on_run_start                      once, before the first epoch (resume loads here)
      on_stage_start(fresh)           when the schedule enters a stage
      on_epoch_start                  the module is in train mode; the steps follow
        on_step_start / on_step_end   around each step's optimizer updates
      on_validation_end               the epoch's numbers are in `state.train` / `state.val`
      (the loop records the history entry and emits EpochEnded)
      on_epoch_end                    `state.index` already points at the next epoch
    on_run_end                        once, also after a stop by request
    on_exception(error)               instead of on_run_end when the run fails

A hook receives the trainer (typed as the `TrainerView` protocol: what a callback may
read); callbacks read `trainer.state` (a `LoopState`), `trainer.c` (the compiled graph),
`trainer.events`, and move the run with `state.end_stage()`. A callback defines only the
hooks it needs; the step hooks are called only on callbacks that define them, so an
unwatched run pays nothing per step. A callback with state to keep across a resume returns
it (plain JSON values) from `state_dict` and takes it back in `load_state_dict`: checkpoints
and saved models carry it.

    class CountSteps(nodegraph.Callback):
        def __init__(self):
            self.steps = 0
        def on_step_end(self, trainer, values):
            self.steps += 1
        def state_dict(self):
            return {"steps": self.steps}
        def load_state_dict(self, state):
            self.steps = state["steps"]
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from nodegraph.model.errors import NodegraphError
from nodegraph.model.events import Emitter

if TYPE_CHECKING:
    from nodegraph.runtime.compile import Compiled

HOOKS = ("on_run_start", "on_stage_start", "on_epoch_start", "on_step_start", "on_step_end",
         "on_validation_end", "on_epoch_end", "on_run_end", "on_exception")


@dataclass(frozen=True)
class Stage:
    """A phase of training: which optimizers step, which nodes stay fixed, how long."""

    name: str
    epochs: int
    optimizers: list[str]
    frozen: list[str]


@dataclass
class LoopState:
    """Where a run stands: the epoch schedule, the position in it, the history so far."""

    stages: list[Stage]
    schedule: list[tuple[int, int]] = field(init=False)  # (stage, epoch within it) per epoch
    index: int = 0  # the next entry of `schedule` to train
    epoch: int = 0  # epochs done; during an epoch's hooks, that epoch's number
    stage: int | None = None  # the stage under way
    global_step: int = 0
    history: list[dict[str, Any]] = field(default_factory=list)
    train: dict[str, Any] = field(default_factory=dict)  # this epoch's numbers
    val: dict[str, Any] = field(default_factory=dict)
    improved: bool = False  # this epoch set a new best of the monitored number
    resume: bool = False  # the run continues from a checkpoint
    stopped_early: bool = False
    cancelled: bool = False
    before: int = 0  # epochs trained before this schedule began (a continued fit's)

    def __post_init__(self) -> None:
        self.schedule = [(si, k) for si, st in enumerate(self.stages) for k in range(st.epochs)]

    @property
    def total(self) -> int:
        """Epochs in this run's schedule."""
        return len(self.schedule)

    @property
    def last(self) -> int:
        """The number of the schedule's last epoch: `total` plus the epochs trained before
        it (a continued `Model.fit` of 10 after 70 runs epochs 71 to 80)."""
        return self.before + len(self.schedule)

    @property
    def finished(self) -> bool:
        """No epoch left in the schedule (or the run was stopped)."""
        return self.index >= len(self.schedule) or self.cancelled

    def end_stage(self) -> None:
        """End the stage under way after this epoch; the next stage starts, or, when none
        with epochs follows, the run ends early."""
        current = self.stage
        if current is None:
            raise NodegraphError("end_stage() was called before the run started a stage: "
                                 "call it from on_epoch_end or later, not on_run_start")
        following = next((i for i, (si, _) in enumerate(self.schedule) if si > current), None)
        if following is None:
            self.index, self.stopped_early = len(self.schedule), True
        else:
            self.index = following


class TrainerView(Protocol):
    """What a callback's hooks receive: the trainer, as far as a callback may use it."""

    state: LoopState  # the epoch, step, history and this epoch's numbers
    c: Compiled  # the compiled graph: `c.module`, `c.optimizers`, `c.datasets`
    opts: Any  # the resolved training options (`opts["epochs"]`, ...)
    events: Emitter  # emit `nodegraph.model.events` messages here

    def evaluate(self, split: str) -> dict[str, Any]:
        """Mean losses and metric values over `split` ("train", "val", "test")."""
        ...


class Callback:
    """A unit of the training loop; override the hooks it needs (see the module doc)."""

    def on_run_start(self, trainer: TrainerView) -> None:
        pass

    def on_stage_start(self, trainer: TrainerView, fresh: bool) -> None:
        """`fresh`: the stage starts at its first epoch (not resumed in its middle)."""

    def on_epoch_start(self, trainer: TrainerView) -> None:
        pass

    def on_step_start(self, trainer: TrainerView, values: dict) -> None:
        pass

    def on_step_end(self, trainer: TrainerView, values: dict) -> None:
        """`values` holds every output the step computed."""

    def on_validation_end(self, trainer: TrainerView) -> None:
        pass

    def on_epoch_end(self, trainer: TrainerView) -> None:
        pass

    def on_run_end(self, trainer: TrainerView) -> None:
        """Also after a stop by request or Ctrl-C (`trainer.state.cancelled`)."""

    def on_exception(self, trainer: TrainerView, error: BaseException) -> None:
        pass

    def state_dict(self) -> dict[str, Any]:
        """What this callback must keep across a resume, as plain JSON values; checkpoints
        and saved models store it. Nothing by default."""
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Take back what `state_dict` returned (from a checkpoint or a saved model)."""


def callback_states(callbacks: Iterable[Callback], skip: Iterable[Callback] = (),
                    plain: bool = True) -> dict[str, dict[str, Any]]:
    """The non-empty `state_dict` of each callback, keyed by its class name (`Name#2` for a
    second of a class), as checkpoints store them; `skip` are saved elsewhere. `plain`:
    refuse a state that is not plain JSON (what a file can hold)."""
    out: dict[str, dict[str, Any]] = {}
    left_out = {id(cb) for cb in skip}
    for key, cb in _keyed(callbacks):
        if id(cb) in left_out:
            continue
        state = cb.state_dict()
        if not state:
            continue
        try:
            if plain:
                json.dumps(state, allow_nan=True)
        except (TypeError, ValueError) as e:
            raise NodegraphError(f"callback {key}: its state_dict() must hold plain JSON "
                                 f"values (numbers, text, lists, dicts) to be saved ({e})"
                                 ) from None
        out[key] = state
    return out


def load_callback_states(callbacks: Iterable[Callback], states: dict[str, Any]) -> None:
    """Give each callback the state saved under its key (a callback with none keeps its
    own)."""
    for key, cb in _keyed(callbacks):
        if isinstance(states.get(key), dict):
            cb.load_state_dict(states[key])


def _keyed(callbacks: Iterable[Callback]) -> list[tuple[str, Callback]]:
    seen: dict[str, int] = {}
    out = []
    for cb in callbacks:
        name = type(cb).__name__
        seen[name] = seen.get(name, 0) + 1
        out.append((name if seen[name] == 1 else f"{name}#{seen[name]}", cb))
    return out


class Callbacks:
    """Calls each hook on the callbacks, in their order."""

    def __init__(self, callbacks: Iterable[Callback]):
        self.all = list(callbacks)
        self.step_start = self.defining("on_step_start")
        self.step_end = self.defining("on_step_end")

    def defining(self, hook: str) -> list[Callback]:
        """The callbacks that override `hook`."""
        return [cb for cb in self.all if getattr(type(cb), hook) is not getattr(Callback, hook)]

    def on_run_start(self, trainer) -> None:
        for cb in self.all:
            cb.on_run_start(trainer)

    def on_stage_start(self, trainer, fresh: bool) -> None:
        for cb in self.all:
            cb.on_stage_start(trainer, fresh)

    def on_epoch_start(self, trainer) -> None:
        for cb in self.all:
            cb.on_epoch_start(trainer)

    def on_validation_end(self, trainer) -> None:
        for cb in self.all:
            cb.on_validation_end(trainer)

    def on_epoch_end(self, trainer) -> None:
        for cb in self.all:
            cb.on_epoch_end(trainer)

    def on_run_end(self, trainer) -> None:
        for cb in self.all:
            cb.on_run_end(trainer)

    def on_exception(self, trainer, error: BaseException) -> None:
        for cb in self.all:
            cb.on_exception(trainer, error)
