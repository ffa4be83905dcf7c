"""Validation as you edit: debounced, off the GUI thread, stale results dropped.

Each graph change restarts a short timer; when it fires, a copy of the graph is validated
on a worker thread (shape inference builds datasets and runs blocks on meta tensors, which
a big graph must not do on the GUI thread). The thread is a plain `threading.Thread` that
holds no Qt object; its report comes back through a queue a GUI-thread timer drains, and
while it runs garbage is collected on the GUI thread only (see `collector`). A result is
applied only if the graph has not changed since its copy was taken; otherwise another
round runs. Checks that only matter for a run (data and optimizer present) join in once
the graph has both a data block and an optimizer, so a half-built graph is not flooded
with complaints.
"""

from __future__ import annotations

import queue
import threading
import time
from typing import TYPE_CHECKING

from PySide6.QtCore import QObject, QTimer, Signal

from nodegraph.check.opcache import OpCache, using
from nodegraph.gui.base import collector
from nodegraph.gui.base.later import later
from nodegraph.gui.document.document import Document
from nodegraph.model import wire_labels
from nodegraph.model.graph import Graph

if TYPE_CHECKING:
    from nodegraph.check.validate import Report

checks = later("nodegraph.check.validate")  # torch: imported by the first round

DELAY_MS = 200
POLL_MS = 10


for_training = wire_labels.for_training  # the run checks: a data block and an optimizer


def snapshot(graph: Graph) -> Graph:
    """A copy to validate elsewhere, keeping what the loader reported."""
    copy = graph.copy()
    copy.load_problems = list(graph.load_problems)
    return copy


def validate_graph(graph: Graph) -> Report:
    return checks.validate(graph, for_training=for_training(graph))


def validate_safely(graph: Graph) -> Report:
    """`validate_graph`, with a failure of ours (a bug in a block, a file the validator did
    not foresee) reported as a problem instead of raised: the editor stays up."""
    try:
        return validate_graph(graph)
    except Exception as e:
        from nodegraph.model.errors import Problem
        return checks.Report(problems=[Problem(None, None, "internal_error",
                                        f"validation failed: {type(e).__name__}: {e}")])


def _validate_into(graph: Graph, revision: int, outbox: queue.SimpleQueue,
                   cache: OpCache) -> None:
    """The worker thread: validate `graph`, post (report, revision). No Qt here."""
    with using(cache):  # the document's cache
        outbox.put((validate_safely(graph), revision))


class Validator(QObject):
    """Runs validation after edits settle and announces fresh reports."""

    finished = Signal(object)  # Report, fresh for the current graph
    started = Signal()  # a check began (the Problems panel says "checking…" till finished)

    def __init__(self, doc: Document, parent=None):
        super().__init__(parent)
        self.doc = doc
        self.report: Report | None = None
        self.report_revision = -1
        self.cache = OpCache()  # this document's shapes, kept between rounds
        self._timer = QTimer(self, singleShot=True, interval=DELAY_MS)
        self._timer.timeout.connect(self._start)
        self._outbox: queue.SimpleQueue = queue.SimpleQueue()
        self._poll = QTimer(self, interval=POLL_MS)
        self._poll.timeout.connect(self._collect)
        self._thread: threading.Thread | None = None
        self._collection = collector.Hold(self)
        self._running = False
        self._closed = False
        # True while the window waits for its block library: rounds start when it comes
        self.held = False
        doc.changed.connect(self.schedule)
        doc.graph_replaced.connect(self.schedule)

    def schedule(self, *_) -> None:
        if not self._closed and not self.held:
            self._timer.start()

    def hold(self, held: bool) -> None:
        """Start no round while `held` (the blocks are loading); a release checks at once:
        as soon as control is back in the event loop (after what the caller does next, such
        as opening the file), not after the edit debounce, for the wires wait for it."""
        self.held = held
        if not held and not self._closed:
            self._timer.stop()
            QTimer.singleShot(0, self, self._start)

    def shutdown(self) -> None:
        """Start no more rounds and wait for the running one (its window is closing: a
        thread still in torch when the interpreter exits would abort the process)."""
        self._closed = True
        self._timer.stop()
        if self._thread is not None:
            self._thread.join()
        self._collect()

    @property
    def fresh(self) -> bool:
        return self.report is not None and self.report_revision == self.doc.revision

    def _start(self) -> None:
        if self._running or self._closed:
            return  # the running job's result will be stale; _on_done starts another
        self._running = True
        self._collection.take()
        self._thread = threading.Thread(
            target=_validate_into, args=(snapshot(self.doc.graph), self.doc.revision,
                                         self._outbox, self.cache),
            name="nodegraph-validate", daemon=True)
        self._thread.start()
        self._poll.start()
        self.started.emit()

    def _collect(self) -> None:
        """Take the worker's report when it has posted it (on the GUI thread)."""
        try:
            report, revision = self._outbox.get_nowait()
        except queue.Empty:
            return
        self._poll.stop()
        if self._thread is not None:
            self._thread.join()  # the report was its last act
            self._thread = None
        self._collection.release()
        self._on_done(report, revision)

    def _on_done(self, report: Report, revision: int) -> None:
        self._running = False
        if self._closed:
            return
        if revision != self.doc.revision:
            self._start()
            return
        self._apply(report)

    def _apply(self, report: Report) -> None:
        self.report, self.report_revision = report, self.doc.revision
        self.finished.emit(report)

    def validate_now(self) -> Report:
        """Validate on this thread and announce the result (tests, before a preview)."""
        self._timer.stop()
        with using(self.cache):
            report = validate_safely(snapshot(self.doc.graph))
            self._apply(report)
        return report

    def wait(self, timeout: float = 10.0) -> bool:
        """Process events until a fresh report arrived (for tests and scripted use)."""
        from PySide6.QtCore import QCoreApplication
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.fresh and not self._timer.isActive() and not self._running:
                return True
            QCoreApplication.processEvents()
            time.sleep(0.005)
        return False
