"""The status bar's view of a run: progress, speed, time left and the latest loss.

A step or epoch event is only kept (a fast model sends thousands a second, and the GUI
thread has a canvas to serve); the numbers are worked out from the latest of them, and the
widgets repainted, at most four times a second.
"""

from __future__ import annotations

import time

from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QHBoxLayout, QLabel, QProgressBar, QWidget

from nodegraph.model.events import EpochEnded, RunFinished, RunStarted, StepEnded


def format_duration(seconds: float) -> str:
    seconds = int(round(seconds))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


class RunStatus(QWidget):
    """A progress bar and one line of numbers, fed with training events."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self.bar = QProgressBar()
        self.bar.setFixedWidth(180)
        self.label = QLabel()
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 6, 0)
        layout.addWidget(self.label)
        layout.addWidget(self.bar)
        self.total_steps = 0
        self.start_step = 0
        self.started = 0.0
        self.latest: StepEnded | EpochEnded | None = None  # the run's latest progress
        self.loss: float | None = None
        self.text = ""
        self.note = ""
        self.epoch = 0
        self.setVisible(False)
        self._paint_due = False  # the timer will paint: events need not ask Qt again
        self._timer = QTimer(self, singleShot=True, interval=250)
        self._timer.timeout.connect(self._paint)

    def on_event(self, event) -> None:
        if type(event) is StepEnded:  # the thousands first
            self.latest = event
            if event.loss is not None:
                self.loss = event.loss
            if not self._paint_due:
                self._show()
        elif type(event) is EpochEnded:
            self.latest = event
            self.loss = event.train.get("loss", self.loss)
            if not self._paint_due:
                self._show()
        elif isinstance(event, RunStarted):
            self.total_steps = max(1, (event.epochs - event.start_epoch + 1)
                                   * event.steps_per_epoch)
            self.steps_per_epoch = max(1, event.steps_per_epoch)
            self.start_epoch = event.start_epoch
            self.started, self.latest, self.loss = time.monotonic(), None, None
            self.epochs = event.epochs
            self.bar.setRange(0, self.total_steps)
            self.bar.setValue(0)
            self.setVisible(True)
            self.epoch = event.start_epoch
            self._show(f"starting on {event.device}, {event.parameters:,} parameters")
            self._paint()
        elif isinstance(event, RunFinished):
            self._timer.stop()
            self._paint_due = False
            # a stopped run leaves the bar empty, not at the step it stopped on (which read
            # as "still going"); a finished one shows where it ended
            self.bar.setValue(0 if event.cancelled else min(self.done_steps, self.total_steps))
            word = "stopped" if event.cancelled else "early stop" if event.stopped_early \
                else "finished"
            self.label.setText(f"Training {word} after {len(event.history)} epoch(s) in "
                               f"{format_duration(time.monotonic() - self.started)}")
            self.text = self.label.text()

    def starting(self) -> None:
        """From Train to the run's first event: the training process may still be starting
        (importing torch takes seconds when Train is pressed as the editor opens)."""
        self.setVisible(True)
        self.bar.setRange(0, 0)  # busy
        self.text = "starting the run…"
        self.label.setText(self.text)

    def idle(self) -> None:
        """The run ended; one that never started leaves no busy bar behind."""
        if self.bar.maximum() == 0:
            self.setVisible(False)

    @property
    def done_steps(self) -> int:
        event = self.latest
        if isinstance(event, StepEnded):
            return (event.epoch - self.start_epoch) * self.steps_per_epoch + event.step
        if isinstance(event, EpochEnded):
            return (event.epoch - self.start_epoch + 1) * self.steps_per_epoch
        return 0

    def _show(self, note: str = "") -> None:
        """Note that the line changed; the timer writes it."""
        self.note = note
        if not self._paint_due:
            self._paint_due = True
            self._timer.start()

    def _compose(self) -> str:
        elapsed = time.monotonic() - self.started
        epoch = self.latest.epoch if self.latest is not None else self.epoch
        parts = [f"epoch {epoch}/{self.epochs}"]
        if self.done_steps and elapsed > 0:
            rate = self.done_steps / elapsed
            left = (self.total_steps - self.done_steps) / rate if rate else 0
            parts += [f"{rate:,.0f} steps/s", f"ETA {format_duration(left)}"]
        if self.loss is not None:
            parts.append(f"loss {self.loss:.4g}")
        if self.note:
            parts.append(self.note)
        return " · ".join(parts)

    def _paint(self) -> None:
        self._paint_due = False
        self.bar.setValue(min(self.done_steps, self.total_steps))
        self.text = self._compose()
        self.label.setText(self.text)
