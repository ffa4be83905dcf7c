"""Validation as you edit: debounced, off the GUI thread, stale results dropped.

Each graph change restarts a short timer; when it fires, a copy of the graph is validated
on a worker thread (shape inference builds datasets and runs blocks on meta tensors, which
a big graph must not do on the GUI thread). A result is applied only if the graph has not
changed since its copy was taken; otherwise another round runs. Checks that only matter
for a run (data and optimizer present) join in once the graph has both a data block and
an optimizer, so a half-built graph is not flooded with complaints.
"""

from __future__ import annotations

import time

from PySide6.QtCore import QObject, QRunnable, QThreadPool, QTimer, Signal

from nodegraph.graph import Graph
from nodegraph.gui.document import Document
from nodegraph.validate import Report, validate

DELAY_MS = 200


def for_training(graph: Graph) -> bool:
    """Whether to add the run checks: the graph has a data block and an optimizer."""
    kinds = {graph.registry.get(n.type).kind for n in graph if n.type in graph.registry}
    return {"data", "optimizer"} <= kinds


def snapshot(graph: Graph) -> Graph:
    """A copy to validate elsewhere, keeping what the loader reported."""
    copy = graph.copy()
    copy.load_problems = list(graph.load_problems)
    return copy


def validate_graph(graph: Graph) -> Report:
    return validate(graph, for_training=for_training(graph))


class _Result(QObject):
    done = Signal(object, int)  # report, revision


class _Job(QRunnable):
    def __init__(self, graph: Graph, revision: int, result: _Result):
        super().__init__()
        self.graph, self.revision, self.result = graph, revision, result

    def run(self) -> None:
        try:
            report = validate_graph(self.graph)
        except Exception as e:  # a bug in a block must not kill the worker silently
            from nodegraph.errors import Problem
            report = Report(problems=[Problem(None, None, "internal_error",
                                              f"validation failed: {type(e).__name__}: {e}")])
        try:
            self.result.done.emit(report, self.revision)
        except RuntimeError:
            pass  # the window closed while this ran; nobody is waiting for the report


class Validator(QObject):
    """Runs validation after edits settle and announces fresh reports."""

    finished = Signal(object)  # Report, fresh for the current graph

    def __init__(self, doc: Document, parent=None):
        super().__init__(parent)
        self.doc = doc
        self.report: Report | None = None
        self.report_revision = -1
        self._timer = QTimer(self, singleShot=True, interval=DELAY_MS)
        self._timer.timeout.connect(self._start)
        self._result = _Result()
        self._result.done.connect(self._on_done)
        self._running = False
        self._closed = False
        self._pool = QThreadPool(self)
        self._pool.setMaxThreadCount(1)
        doc.changed.connect(self.schedule)
        doc.graph_replaced.connect(self.schedule)

    def schedule(self, *_) -> None:
        if not self._closed:
            self._timer.start()

    def shutdown(self) -> None:
        """Start no more rounds and wait for the running one (its window is closing: a
        thread still in torch when the interpreter exits would abort the process)."""
        self._closed = True
        self._timer.stop()
        self._pool.waitForDone()

    @property
    def fresh(self) -> bool:
        return self.report is not None and self.report_revision == self.doc.revision

    def _start(self) -> None:
        if self._running or self._closed:
            return  # the running job's result will be stale; _on_done starts another
        self._running = True
        self._pool.start(_Job(snapshot(self.doc.graph), self.doc.revision, self._result))

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
        self._apply(validate_graph(snapshot(self.doc.graph)))
        return self.report

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
