"""Training off the GUI thread: `nodegraph.train` in a process of its own (or a thread), its
events handed to listeners on the GUI thread.

The run trains a copy of the graph taken when Train is pressed, so edits made while it
runs cannot race with it. It trains in a training process (`nodegraph.runtime.train_process`): a
thread would share the interpreter lock with the GUI thread, and every plot, wave and status
line the GUI draws would be time a fast model waits. One process is started ahead, when the
editor opens, and kept between runs; until it has warmed up (imported torch and trained
once: seconds), a run trains in a thread here instead, so the first Train starts at once.
A graph whose blocks come from a registry other than the default one (blocks defined in
the editor's own process) trains in a thread too.

Threads and Qt: no Qt object is created, owned or finalised off the GUI thread. The thread
that reads the process's messages (or trains, in the fallback) is a plain `threading.Thread`
holding only plain Python (the graph copy, which has no listeners, the process, a queue); it
puts messages on a `queue.SimpleQueue` that a timer on the GUI thread drains, and while it
runs, garbage is collected on the GUI thread only (`collector`), so a cycle of Qt objects
the GUI dropped is never freed in the reader (the deadlock of issue #12).

Events arrive in batches (`EventBatcher`: per-step and per-epoch events at most one batch
every 50 ms) and are handed to the listeners (`listen`) by plain Python calls. A listener
names the kinds of event it handles, so a fast model's thousands of step and epoch events a
second reach only the plots and the status bar. Stop and Pause reach the trainer, which
checks them every step, so Stop takes effect within one step; a process that has not
stopped a few seconds later is ended. A live param (an optimizer's lr) edited while a run
trains reaches it the same way (`set_param`) and applies from its next step.
"""

from __future__ import annotations

import os
import queue
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from PySide6.QtCore import QCoreApplication, QObject, QTimer, Signal

from nodegraph.gui.base import collector
from nodegraph.gui.base.later import later
from nodegraph.model.events import Emitter
from nodegraph.model.graph import Graph
from nodegraph.model.spec import default_registry
from nodegraph.runtime import train_process
from nodegraph.runtime.train_process import EventBatcher, TrainingProcess, failure, rebuild

if TYPE_CHECKING:
    from nodegraph.runtime.train import RunControl, RunResult

training = later("nodegraph.runtime.train")  # torch: imported by the first run (or warm-up)
loading = later("nodegraph.kinds.loading")

KILL_AFTER_STOP_S = 5.0
DRAIN_MS = 10
IN_THREAD = os.environ.get("NODEGRAPH_TRAIN_IN_THREAD") == "1"  # for debugging a block

# Called in the run's thread after each message it posts (tests set it to gc.collect).
after_message: Callable[[], None] | None = None


class _Worker:
    """One run trained in a plain thread of this process. It holds no Qt object: what
    happens goes to `outbox` as tuples ("events", batch), ("failed", message, node),
    ("lost", exit code) and, last, ("done", RunResult or None, CPU seconds or None)."""

    def __init__(self, graph: Graph, control, options: dict):
        self.graph, self.control, self.options = graph, control, options
        self.outbox: queue.SimpleQueue = queue.SimpleQueue()
        self.thread = threading.Thread(target=self.run, name="nodegraph-train", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def post(self, *message) -> None:
        self.outbox.put(message)
        hook = after_message
        if hook is not None:
            hook()

    def run(self) -> None:
        batcher = EventBatcher(lambda batch: self.post("events", batch))
        emitter = Emitter()
        emitter.subscribe(batcher)
        result = cpu_seconds = None
        began = time.thread_time()
        compiled: list = []  # the run's compiled graph, whose data workers end with the run
        try:
            result = training.train(self.graph, events=emitter, control=self.control,
                                    prepare=compiled.append, **self.options)
            cpu_seconds = time.thread_time() - began
        except Exception as e:  # shown in the editor, which stays alive
            batcher.flush()
            self.post("failed", *failure(e))
        finally:  # a stopped or finished run leaves no DataLoader worker behind
            for c in compiled:
                loading.release_workers(c.datasets.values())
        batcher.flush()
        self.post("done", result, cpu_seconds)


class _ProcessWorker(_Worker):
    """Relays one run of a training process: its messages in, the trained model rebuilt."""

    def __init__(self, graph: Graph, process: TrainingProcess, options: dict):
        super().__init__(graph, _ProcessControl(process), options)
        self.process = process
        self.thread.name = "nodegraph-train-reader"
        self.lost = False  # the process ended during the run (set on the GUI thread)
        self.killed = False  # ... because it did not stop when asked

    def run(self) -> None:
        result = cpu_seconds = None
        while (message := self.process.receive()) is not None:
            if message[0] == "events":
                self.post("events", message[1])
            elif message[0] == "failed":
                self.post("failed", message[1], message[2])
            elif message[0] == "done":
                if message[1] is not None:
                    cpu_seconds = message[1]["cpu_seconds"]
                    try:
                        result = rebuild(self.graph, self.options, message[1])
                    except Exception as e:
                        self.post("failed", f"the trained weights could not be loaded back: "
                                            f"{type(e).__name__}: {e}", None)
                break
        else:
            self.post("lost", self.process.popen.wait())
        self.post("done", result, cpu_seconds)


class _ProcessControl:
    """`RunControl` for a run in a training process: Stop and Pause become messages."""

    def __init__(self, process: TrainingProcess):
        self.process = process
        self.paused = self.stopped = False

    def stop(self) -> None:
        self.stopped, self.paused = True, False
        self.process.send("stop")

    def pause(self) -> None:
        self.paused = True
        self.process.send("pause")

    def resume(self) -> None:
        self.paused = False
        self.process.send("resume")

    def set_param(self, node: str, name: str, value) -> None:
        self.process.send("set", node, name, value)


class TrainingRunner(QObject):
    """Starts, pauses and stops runs; hands their events to listeners on the GUI thread."""

    failed = Signal(str, object)
    state_changed = Signal(str)  # "running", "paused", "idle"

    def __init__(self, parent=None, in_process: bool = not IN_THREAD, warm: bool = True):
        super().__init__(parent)
        self.in_process = in_process
        self.control: RunControl | _ProcessControl | None = None
        self.result: RunResult | None = None
        self.revision: int | None = None  # document revision the last run trained
        self.graph: Graph | None = None  # the copy the last run trained (the run history's)
        self._worker: _Worker | None = None
        self.train_cpu_seconds: float | None = None  # the last run's, in its thread or process
        self._listeners: list[tuple[Callable[[object], None], tuple[type, ...]]] = []
        self._by_type: dict[type, list[Callable[[object], None]]] = {}
        self._drain_timer = QTimer(self, interval=DRAIN_MS)
        self._drain_timer.timeout.connect(self._drain)
        self._draining = False
        self._collection = collector.Hold(self)
        if warm:
            self.warm_up()

    def warm_up(self) -> None:
        """Get the first run ready now: a training process started ahead (it imports torch
        in its own time), or, training in threads, the training code imported."""
        if self.in_process:
            train_process.prewarm()
        else:
            training.train  # noqa: B018 — the import is the point

    def listen(self, listener: Callable[[object], None], *kinds: type) -> Callable[[], None]:
        """Call `listener(event)` on the GUI thread for every event of every run
        (RunStarted, StepEnded, EpochEnded, ProbeFrame, Message, RunFinished, ...), or only
        for events of `kinds`, in order; returns a function that stops it."""
        entry = (listener, kinds)
        self._listeners.append(entry)
        self._by_type.clear()

        def stop() -> None:
            if entry in self._listeners:
                self._listeners.remove(entry)
                self._by_type.clear()
        return stop

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
        copy = graph.copy()
        self.result, self.revision, self.graph = None, revision, copy
        worker = None
        if self.in_process and copy.base_registry is default_registry():
            worker = self._process_worker(copy, options)
        self._worker = worker or _Worker(copy, training.RunControl(), options)
        self.control = self._worker.control
        self._collection.take()
        self._drain_timer.start()
        self._worker.start()
        self.state_changed.emit("running")

    @staticmethod
    def _process_worker(graph: Graph, options: dict) -> _ProcessWorker | None:
        """A run of `graph` in a training process, or None when no process can take it
        (the graph does not go into a file, no process starts): then it trains in a thread."""
        for _ in range(2):  # a process that died while it waited: one more try
            try:
                process = train_process.acquire(ready_only=True)
            except OSError:  # no Python to start (an embedded editor): train in a thread
                return None
            if process is None:  # the process is still warming up: this run trains in a
                return None  # thread at once rather than wait for it (the first Train)
            if process.train(graph, options):
                return _ProcessWorker(graph, process, options)
            if process.alive:
                train_process.release(process)
                return None
        return None

    def stop(self) -> None:
        if self.control is None:
            return
        self.control.stop()
        worker = self._worker
        if isinstance(worker, _ProcessWorker):
            QTimer.singleShot(int(KILL_AFTER_STOP_S * 1000), lambda: self._kill(worker))

    def shutdown(self, timeout_s: float = 10.0) -> None:
        """Stop the run for good (its window closes): wait up to `timeout_s` for it to end,
        then end its training process, and the DataLoader workers with it, if it has not."""
        if not self.running:
            return
        self.stop()
        if self.wait(timeout_s):
            return
        worker = self._worker
        if isinstance(worker, _ProcessWorker):
            self._kill(worker)
            self.wait(5.0)

    def _kill(self, worker: _ProcessWorker) -> None:
        if worker is self._worker and worker.process.alive:
            worker.killed = True
            worker.process.kill()

    def set_param(self, node: str, name: str, value) -> bool:
        """Send a live param change to the running run (applied from its next step)."""
        if self.control is None or not self.running:
            return False
        self.control.set_param(node, name, value)
        return True

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
            self._drain()
            if self.running:
                time.sleep(0.005)
        return not self.running

    def deliver(self, batch: list) -> None:
        """Hand a batch of a run's events to the listeners (tests feed events here too)."""
        by_type = self._by_type
        for event in batch:
            listeners = by_type.get(type(event))
            if listeners is None:
                listeners = by_type[type(event)] = [
                    listener for listener, kinds in self._listeners
                    if not kinds or isinstance(event, kinds)]
            for listener in listeners:
                listener(event)

    def _drain(self) -> None:
        """Hand the run's posted messages on, in order (on the GUI thread, by the timer)."""
        worker = self._worker
        if worker is None or self._draining:
            return
        self._draining = True
        try:
            while worker is self._worker:
                try:
                    message = worker.outbox.get_nowait()
                except queue.Empty:
                    return
                kind = message[0]
                if kind == "events":
                    self.deliver(message[1])
                elif kind == "failed":
                    self.failed.emit(message[1], message[2])
                elif kind == "lost" and isinstance(worker, _ProcessWorker):  # only it sends it
                    worker.lost = True
                    self.failed.emit(
                        f"the run did not stop within {KILL_AFTER_STOP_S:.0f} s, so its process "
                        "was ended" if worker.killed else
                        f"the training process ended unexpectedly (exit code {message[1]})", None)
                elif kind == "done":
                    self._finished(worker, message[1], message[2])
        finally:
            self._draining = False

    def _finished(self, worker: _Worker, result: RunResult | None,
                  cpu_seconds: float | None) -> None:
        self._worker = None
        self._drain_timer.stop()
        worker.thread.join(5.0)  # "done" is its last message: it is returning
        if isinstance(worker, _ProcessWorker) and not worker.lost:
            train_process.release(worker.process)
        self.train_cpu_seconds = cpu_seconds
        self._collection.release()
        self.result = result
        self.state_changed.emit("idle")
