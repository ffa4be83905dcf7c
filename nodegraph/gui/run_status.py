"""The status bar's view of a run: progress, speed, time left and the latest loss.

The numbers are kept current with every event, but the widgets are repainted at most
four times a second: repainting per step would keep the GUI thread busy for nothing.
"""

from __future__ import annotations

import time

from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QHBoxLayout, QLabel, QProgressBar, QWidget

from nodegraph.events import EpochEnded, RunFinished, RunStarted, StepEnded


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
        self.done_steps = 0
        self.loss: float | None = None
        self.text = ""
        self.note = ""
        self.epoch = 0
        self.setVisible(False)
        self._timer = QTimer(self, singleShot=True, interval=250)
        self._timer.timeout.connect(self._paint)

    def on_event(self, event) -> None:
        if isinstance(event, RunStarted):
            self.total_steps = max(1, (event.epochs - event.start_epoch + 1)
                                   * event.steps_per_epoch)
            self.steps_per_epoch = max(1, event.steps_per_epoch)
            self.start_epoch = event.start_epoch
            self.started, self.done_steps, self.loss = time.monotonic(), 0, None
            self.epochs = event.epochs
            self.bar.setRange(0, self.total_steps)
            self.bar.setValue(0)
            self.setVisible(True)
            self.epoch = event.start_epoch
            self._show(f"starting on {event.device}, {event.parameters:,} parameters")
            self._paint()
        elif isinstance(event, StepEnded):
            self.done_steps = (event.epoch - self.start_epoch) * self.steps_per_epoch + event.step
            self.epoch = event.epoch
            if event.loss is not None:
                self.loss = event.loss
            self._show()
        elif isinstance(event, EpochEnded):
            self.done_steps = (event.epoch - self.start_epoch + 1) * self.steps_per_epoch
            self.epoch = event.epoch
            self.loss = event.train.get("loss", self.loss)
            self._show()
        elif isinstance(event, RunFinished):
            self._timer.stop()
            self.bar.setValue(min(self.done_steps, self.total_steps))
            word = "stopped" if event.cancelled else "early stop" if event.stopped_early \
                else "finished"
            self.label.setText(f"Training {word} after {len(event.history)} epoch(s) in "
                               f"{format_duration(time.monotonic() - self.started)}")
            self.text = self.label.text()

    def _show(self, note: str = "") -> None:
        """Note that the line changed; the timer writes it (events may come by the thousand
        per second, the line is read a few times a second)."""
        self.note = note
        if not self._timer.isActive():
            self._timer.start()

    def _compose(self) -> str:
        elapsed = time.monotonic() - self.started
        parts = [f"epoch {self.epoch}/{self.epochs}"]
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
        self.bar.setValue(min(self.done_steps, self.total_steps))
        self.text = self._compose()
        self.label.setText(self.text)
