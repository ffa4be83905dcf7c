"""The timeline: every probe frame of a run (or of a `--probe-out` recording), scrubbable.

`FrameLog` keeps the frames of the current run. It is bounded: when full it drops every
other frame and from then on keeps every other one arriving, so a long run keeps an evenly
thinned history from its start to its end instead of only its last minutes.

`TimelinePanel` is the animation's dock: a slider over the recorded frames (moving it
replays that frame's wave on the canvas and stops following the run), a Live switch to
follow the run again, Pause and a speed slider for the wave, and a line saying which step
is shown and how many frames the animation skipped.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QSlider,
    QVBoxLayout,
    QWidget,
)

from nodegraph.gui.training.animation import BACKWARD_COLORS, FORWARD_COLORS

if TYPE_CHECKING:
    from nodegraph.runtime.probes import ProbeFrame

MAX_FRAMES = 2000


class FrameLog:
    """The recorded frames, thinned evenly once there are more than `limit`.

    Frames are kept on a regular grid (every `stride`-th); when the log overflows, every
    other one goes and the stride doubles. The newest frame is always kept (as a "tail"
    replaced by the next one when it is off the grid), so following the run shows it.
    """

    def __init__(self, limit: int = MAX_FRAMES):
        self.limit = limit
        self.frames: list[ProbeFrame] = []
        self.stride = 1
        self._count = 0
        self._tail = False

    def add(self, frame: ProbeFrame) -> None:
        if self._tail:
            self.frames.pop()
        self._tail = self._count % self.stride != 0
        self._count += 1
        self.frames.append(frame)
        if len(self.frames) > self.limit:
            regular = self.frames[:-1] if self._tail else self.frames
            thinned = regular[::2]
            self.stride *= 2
            self._tail = thinned[-1] is not frame
            self.frames = thinned + [frame] if self._tail else thinned

    def replace(self, frames: list[ProbeFrame]) -> None:
        self.frames, self.stride, self._count, self._tail = [], 1, 0, False
        for f in frames:
            self.add(f)

    def __len__(self) -> int:
        return len(self.frames)

    def __getitem__(self, i: int) -> ProbeFrame:
        return self.frames[i]


class TimelinePanel(QWidget):
    """Slider over the frames plus the wave's controls."""

    frame_chosen = Signal(object)  # ProbeFrame picked by the user
    live_changed = Signal(bool)
    paused_changed = Signal(bool)
    speed_changed = Signal(int)  # ms per node
    open_requested = Signal()

    def __init__(self, parent=None):
        super().__init__(parent)
        self.log = FrameLog()
        self.source = ""  # "" for the current run, else the recording's file name
        self.slider = QSlider(Qt.Orientation.Horizontal)
        self.slider.setRange(0, 0)
        self.slider.setToolTip("scrub the recorded frames: activations and gradients per step")
        self.live = QCheckBox("Live")
        self.live.setChecked(True)
        self.live.setToolTip("follow the run (moving the slider stops following it)")
        self.pause = QPushButton("Pause")
        self.pause.setCheckable(True)
        self.pause.setToolTip("pause the animation (training goes on)")
        self.speed = QSlider(Qt.Orientation.Horizontal)
        self.speed.setRange(20, 600)  # ms per node; the slider reads "slower to the right"
        self.speed.setValue(160)
        self.speed.setInvertedAppearance(True)
        self.speed.setToolTip("animation speed: time per node")
        self.speed.setMaximumWidth(120)
        self.open_button = QPushButton("Open recording…")
        self.open_button.setToolTip("replay a --probe-out file of a run")
        self.info = QLabel("No frames yet: train, or open a --probe-out recording.")
        self.info.setWordWrap(True)
        self.legend = QLabel(
            f"<span style='color:{FORWARD_COLORS[1]}'>▬ forward</span>: width = size of the "
            f"activation (RMS) · <span style='color:{BACKWARD_COLORS[1]}'>▬ backward</span>: "
            "width = norm of the gradient · each relative to the others in the frame")
        self.legend.setWordWrap(True)
        row = QHBoxLayout()
        row.addWidget(self.live)
        row.addWidget(self.slider, 1)
        controls = QHBoxLayout()
        controls.addWidget(self.pause)
        controls.addWidget(QLabel("Speed"))
        controls.addWidget(self.speed)
        controls.addStretch(1)
        controls.addWidget(self.open_button)
        layout = QVBoxLayout(self)
        layout.addLayout(row)
        layout.addLayout(controls)
        layout.addWidget(self.info)
        layout.addWidget(self.legend)
        layout.addStretch(1)
        self.slider.valueChanged.connect(self._scrubbed)
        self.live.toggled.connect(self.live_changed)
        self.pause.toggled.connect(self.paused_changed)
        self.speed.valueChanged.connect(self.speed_changed)
        self.open_button.clicked.connect(self.open_requested)

    def reset(self, frames: list[ProbeFrame] | None = None, source: str = "") -> None:
        self.log.replace(frames or [])
        self.source = source
        self.live.setChecked(not source)
        self._sync_slider()
        if frames:
            self.slider.setValue(0)
            self._scrubbed(0)

    def add(self, frame: ProbeFrame) -> None:
        self.log.add(frame)
        self._sync_slider()

    def show_info(self, frame: ProbeFrame | None, dropped: int = 0) -> None:
        if frame is None:
            return
        where = f"{self.source}: " if self.source else ""
        skipped = f" · {dropped} frame(s) skipped to keep up" if dropped else ""
        bad = f" · NaN/Inf first at {frame.nonfinite}" if frame.nonfinite else ""
        self.info.setText(f"{where}step {frame.step} (epoch {frame.epoch}) · frame "
                          f"{self.slider.value() + 1}/{len(self.log)}{skipped}{bad}")

    def _sync_slider(self) -> None:
        self.slider.blockSignals(True)
        self.slider.setRange(0, max(0, len(self.log) - 1))
        if self.live.isChecked():
            self.slider.setValue(len(self.log) - 1)
        self.slider.blockSignals(False)

    def _scrubbed(self, value: int) -> None:
        if 0 <= value < len(self.log):
            if self.live.isChecked() and value != len(self.log) - 1:
                self.live.setChecked(False)
            self.frame_chosen.emit(self.log[value])
