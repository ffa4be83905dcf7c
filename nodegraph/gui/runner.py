"""Training off the GUI thread: `nodegraph.train` in a QThread, its events as Qt signals.

The run trains a copy of the graph taken when Train is pressed, so edits made while it
runs cannot race with it. Events reach the GUI thread through a queued signal; per-step
and per-epoch events travel in batches, at most one batch every 50 ms (steps: those
carrying a loss, plus the latest; epochs: all), because every queued signal makes the GUI
thread wait for the interpreter lock and the worker wait for it back: a signal per step or
per epoch would starve the canvas of a fast model, and the model of its speed. Stop and
Pause go through `RunControl`, which the trainer checks every step, so Stop takes effect
within one step. On the GUI thread a batch is handed to the listeners (`listen`) by plain
Python calls: a Qt signal per event cost more than the handlers themselves on a fast model.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from PySide6.QtCore import QCoreApplication, QObject, QThread, Signal

from nodegraph.errors import NodegraphError, NodeRuntimeError, ValidationError
from nodegraph.events import Emitter, EpochEnded, StepEnded
from nodegraph.graph import Graph
from nodegraph.train import RunControl, RunResult, train

STEP_INTERVAL_S = 0.05


class _Worker(QThread):
    """Runs one training; lives (as a QObject) on the GUI thread, runs on its own."""

    events = Signal(list)  # a batch of training events, in order
    failed = Signal(str, object)  # message, node id or None
    done = Signal(object)  # RunResult or None

    def __init__(self, graph: Graph, control: RunControl, **options):
        super().__init__()
        self.graph, self.control, self.options = graph, control, options
        self._steps: list[StepEnded] = []
        self._sent = 0.0

    def run(self) -> None:
        emitter = Emitter()
        emitter.subscribe(self._forward)
        result = None
        try:
            result = train(self.graph, events=emitter, control=self.control, **self.options)
        except ValidationError as e:
            self.failed.emit(str(e), e.problems[0].node if e.problems else None)
        except NodeRuntimeError as e:
            self.failed.emit(str(e), e.node)
        except NodegraphError as e:
            self.failed.emit(str(e), None)
        except Exception as e:  # a block's bug: show it, name its type, keep the editor alive
            self.failed.emit(f"{type(e).__name__}: {e}", None)
        self._flush()
        self.done.emit(result)

    def _forward(self, event) -> None:
        if isinstance(event, StepEnded | EpochEnded):
            last = self._steps[-1] if self._steps else None
            if isinstance(last, StepEnded) and last.loss is None:
                self._steps.pop()  # only the latest step without a loss is worth showing
            self._steps.append(event)
            if time.monotonic() - self._sent < STEP_INTERVAL_S:
                return
        self._flush([event] if not isinstance(event, StepEnded | EpochEnded) else [])

    def _flush(self, then: list | None = None) -> None:
        batch, self._steps = [*self._steps, *(then or [])], []
        if batch:
            self._sent = time.monotonic()
            self.events.emit(batch)


class TrainingRunner(QObject):
    """Starts, pauses and stops runs; hands their events to listeners on the GUI thread."""

    failed = Signal(str, object)
    state_changed = Signal(str)  # "running", "paused", "idle"

    def __init__(self, parent=None):
        super().__init__(parent)
        self.control: RunControl | None = None
        self.result: RunResult | None = None
        self.revision: int | None = None  # document revision the last run trained
        self._worker: _Worker | None = None
        self._listeners: list[Callable[[object], None]] = []

    def listen(self, listener: Callable[[object], None]) -> Callable[[], None]:
        """Call `listener(event)` on the GUI thread for every event of every run
        (RunStarted, StepEnded, EpochEnded, ProbeFrame, Message, RunFinished, ...), in order;
        returns a function that stops it."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener) if listener in self._listeners else None

    @property
    def running(self) -> bool:
        return self._worker is not None

    @property
    def paused(self) -> bool:
        return self.control is not None and self.control.paused

    def start(self, graph: Graph, revision: int, **options) -> None:
        """Train a copy of `graph`; options go to `nodegraph.train` (epochs, device)."""
        if self.running:
            return
        self.control = RunControl()
        self.result, self.revision = None, revision
        self._worker = _Worker(graph.copy(), self.control, **options)
        self._worker.events.connect(self.deliver)
        self._worker.failed.connect(self.failed)
        self._worker.done.connect(self._finished)
        self._worker.start()
        self.state_changed.emit("running")

    def stop(self) -> None:
        if self.control is not None:
            self.control.stop()

    def toggle_pause(self) -> None:
        if self.control is None or not self.running:
            return
        if self.control.paused:
            self.control.resume()
            self.state_changed.emit("running")
        else:
            self.control.pause()
            self.state_changed.emit("paused")

    def wait(self, timeout_s: float = 30.0) -> bool:
        """Block until the run ended and its last events were delivered; False on timeout."""
        end = time.monotonic() + timeout_s
        while self.running and time.monotonic() < end:
            QCoreApplication.processEvents()
            time.sleep(0.005)
        return not self.running

    def deliver(self, batch: list) -> None:
        """Hand a batch of a run's events to the listeners (tests feed events here too)."""
        listeners = list(self._listeners)
        for event in batch:
            for listener in listeners:
                listener(event)

    def _finished(self, result: RunResult | None) -> None:
        worker, self._worker = self._worker, None
        if worker is not None:
            worker.wait()
            worker.deleteLater()
        self.result = result
        self.state_changed.emit("idle")
