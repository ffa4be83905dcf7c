"""The event stream: plain-Python events from the graph and the trainer to whoever listens.

The core never imports Qt; the CLI and the editor subscribe to an `Emitter` and render what
arrives (a progress bar, plots, the animation). Listeners run on the emitting thread, so the
editor forwards events to its GUI thread itself. Training events are small frozen dataclasses;
per-step events are emitted only when someone asked for them, so a run nobody watches pays
nothing for them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

Listener = Callable[[Any], None]


class Emitter:
    """A list of listeners called with every event, in subscription order."""

    def __init__(self) -> None:
        self._listeners: list[tuple[Listener, tuple[type, ...] | None]] = []

    def subscribe(self, listener: Listener, *kinds: type) -> Callable[[], None]:
        """Call `listener(event)` for events of `kinds` (all when none); returns unsubscribe."""
        entry = (listener, kinds or None)
        self._listeners.append(entry)
        return lambda: self._listeners.remove(entry) if entry in self._listeners else None

    def wants(self, kind: type) -> bool:
        """True when some listener would receive events of `kind`."""
        listeners = self._listeners
        return bool(listeners) and any(k is None or kind in k for _, k in listeners)

    def emit(self, event: Any) -> None:
        for listener, kinds in list(self._listeners):
            if kinds is None or isinstance(event, kinds):
                listener(event)


@dataclass(frozen=True)
class RunStarted:
    epochs: int
    steps_per_epoch: int
    start_epoch: int  # > 1 when resuming
    device: str
    parameters: int


@dataclass(frozen=True)
class StepEnded:
    """After each training step; `loss` only every `loss_every` steps (reading it syncs)."""

    epoch: int
    step: int  # within the epoch, from 1
    steps: int
    loss: float | None = None


@dataclass(frozen=True)
class EpochEnded:
    epoch: int
    epochs: int
    train: dict[str, Any]
    val: dict[str, Any]
    lr: dict[str, float]
    seconds: float
    improved: bool = False  # the monitored metric reached a new best


@dataclass(frozen=True)
class Message:
    """A line for the run's log (checkpoint written, early stop, restored best, ...)."""

    text: str
    level: str = "info"


@dataclass(frozen=True)
class RunFinished:
    history: list[dict[str, Any]]
    final: dict[str, dict[str, Any]]
    stopped_early: bool = False
    cancelled: bool = False
    extra: dict[str, Any] = field(default_factory=dict)


# Probe frames (nodegraph.runtime.probes.ProbeFrame) travel on the same stream as these events.


@dataclass(frozen=True)
class WeightsSnapshot:
    """The weights at the end of an epoch, as CPU copies keyed `node.param`, for views that
    show the model while it trains (sent only when someone listens, at most twice a
    second): a copy, because the optimizer keeps changing the originals."""

    epoch: int
    state: dict[str, Any]


@dataclass(frozen=True)
class NodeFailed:
    """A run stopped because of a node (NaN loss, a block's runtime error)."""

    node: str | None
    message: str
