"""The training wave: each probe frame played as a forward then a backward pulse on the wires.

A frame (`nodegraph.runtime.probes.ProbeFrame`) becomes a sequence of steps: the data sources, then
each node in forward (topological) order, then each node with a gradient in reverse order,
from the losses back towards the data. At a forward step the wires leaving the node take a
blue stroke whose colour and width grow with the size of the activation (the RMS of its
values) while a dot runs along them; at a backward step the same wires turn orange, width
growing with the norm of the gradient arriving at that output, and the dot runs back. Sizes
are compared on a log scale within the frame, so a tiny gradient reads as a thin line.

A QTimer drives it at 20 frames per second, on the GUI thread, never the trainer's.
Frames that arrive while a wave plays are not queued: the newest replaces any waiting one
(counted in `dropped`), so a fast run skips frames instead of slowing down. `seek` shows a
frame's wave stopped at a given step, for the timeline and for screenshots.
"""

from __future__ import annotations

import math
import time
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING

from PySide6.QtCore import QObject, QTimer, Signal
from PySide6.QtGui import QColor

from nodegraph.gui.base import theme
from nodegraph.gui.canvas.overlays import CanvasMarks

if TYPE_CHECKING:
    from nodegraph.runtime.probes import ProbeFrame

FORWARD_COLORS = ("#2b6cb0", "#8fd3ff")  # small -> large activation
BACKWARD_COLORS = ("#b4531f", "#ffc27a")  # small -> large gradient
MIN_WIDTH, MAX_WIDTH = 1.5, 9.0
TICK_MS = 50  # 20 frames a second: smooth enough, and cheap beside training
STEP_MS = 160  # default time per node


@dataclass(frozen=True)
class WaveStep:
    phase: str  # "forward" or "backward"
    node: str  # canvas node id
    ports: dict[str, float | None]  # output port -> magnitude (None: not measured)


def wave_steps(frame: ProbeFrame, sources: list[str] | None = None) -> list[WaveStep]:
    """The steps of one frame's wave: sources, forward order, then gradients in reverse."""
    steps = [WaveStep("forward", s, {}) for s in sources or []]
    for node in frame.order:
        steps.append(WaveStep("forward", node, {p: _rms(s.mean, s.std) if s.finite else math.inf
                                                for p, s in frame.outputs.get(node, {}).items()}))
    for node in reversed(frame.order):
        grads = frame.grads.get(node)
        if grads:
            steps.append(WaveStep("backward", node, {p: g.norm if g.finite else math.inf
                                                     for p, g in grads.items()}))
    return steps


def _rms(mean: float, std: float) -> float:
    return math.sqrt(mean * mean + std * std)


class _Scale:
    """Maps magnitudes of one phase of one frame to 0..1 on a log scale."""

    def __init__(self, values):
        logs = [math.log10(v) for v in values if v is not None and 0 < v < math.inf]
        self.lo, self.hi = (min(logs), max(logs)) if logs else (0.0, 0.0)

    def __call__(self, v: float | None) -> float:
        if v is None or v <= 0:
            return 0.0
        if self.hi - self.lo < 1e-9:
            return 0.6
        return min(1.0, max(0.0, (math.log10(v) - self.lo) / (self.hi - self.lo)))


def _mix(a: str, b: str, f: float) -> QColor:
    ca, cb = QColor(a), QColor(b)
    return QColor.fromRgbF(ca.redF() + (cb.redF() - ca.redF()) * f,
                           ca.greenF() + (cb.greenF() - ca.greenF()) * f,
                           ca.blueF() + (cb.blueF() - ca.blueF()) * f)


class WaveAnimator(QObject):
    """Plays probe frames on the canvas; the latest frame wins."""

    step_started = Signal(int, str, str)  # frame step, phase, node
    wave_finished = Signal(int)  # frame step

    def __init__(self, marks: CanvasMarks, parent=None):
        super().__init__(parent)
        self.marks = marks
        self.step_ms = STEP_MS
        self.paused = False
        self.frame: ProbeFrame | None = None
        self.pending: ProbeFrame | None = None
        self.steps: list[WaveStep] = []
        self.pos = 0
        self.t = 0.0
        self.dropped = 0
        self.played: deque[tuple[int, str, str]] = deque(maxlen=2000)  # (step, phase, node)
        self._scales: dict[str, _Scale] = {}
        self._active: list = []  # overlays carrying the pulse dot now
        self._last = 0.0
        self.timer = QTimer(self, interval=TICK_MS)
        self.timer.timeout.connect(self._tick)

    # -- control ---------------------------------------------------------------------------

    @property
    def playing(self) -> bool:
        return self.timer.isActive()

    def push(self, frame: ProbeFrame) -> None:
        """A new frame: played now when idle, else it waits (replacing any waiting one)."""
        if self.playing or self.paused and self.frame is not None:
            if self.pending is not None:
                self.dropped += 1
            self.pending = frame
        else:
            self.play(frame)

    def play(self, frame: ProbeFrame) -> None:
        """Start `frame`'s wave from its first step."""
        self._load(frame)
        self._begin()
        if not self.paused:
            self._last = time.monotonic()
            self.timer.start()

    def seek(self, frame: ProbeFrame, pos: int, t: float = 1.0) -> None:
        """Show `frame`'s wave stopped in step `pos` (`t` of the way through it)."""
        self.timer.stop()
        self._load(frame)
        for i in range(min(pos, len(self.steps))):
            self._apply(self.steps[i], None)
        self.pos = min(pos, len(self.steps))
        if self.pos < len(self.steps):
            self._apply(self.steps[self.pos], t)

    def set_paused(self, paused: bool) -> None:
        self.paused = paused
        if paused:
            self.timer.stop()
        elif self.frame is not None and self.pos < len(self.steps):
            self._last = time.monotonic()
            self.timer.start()
        elif self.pending is not None:
            self.play(self._take_pending())

    def set_speed(self, step_ms: int) -> None:
        """Milliseconds per node."""
        self.step_ms = max(1, int(step_ms))

    def stop(self) -> None:
        """Stop and wipe the wave (a new run, a replaced graph)."""
        self.timer.stop()
        self.frame, self.pending, self.steps, self.pos = None, None, [], 0
        self._active = []
        self.marks.clear_strokes()

    # -- playing ---------------------------------------------------------------------------

    def _load(self, frame: ProbeFrame) -> None:
        self.frame = frame
        self.steps = wave_steps(frame, self._sources(frame))
        self._scales = {phase: _Scale(v for s in self.steps if s.phase == phase
                                      for v in s.ports.values())
                        for phase in ("forward", "backward")}
        self.pos, self.t, self._active = 0, 0.0, []
        self.marks.clear_strokes()

    def _sources(self, frame: ProbeFrame) -> list[str]:
        """Canvas nodes that feed the frame's nodes without being probed (the data)."""
        probed = {self.marks.canvas_node(n) for n in frame.order}
        sources = []
        for node in self.marks.scene.nodes:
            if node not in probed and any(e.dst in probed for e in self.marks.edges_from(node)):
                sources.append(node)
        return sources

    def _begin(self) -> None:
        if self.pos < len(self.steps) and self.frame is not None:  # steps come with a frame
            step = self.steps[self.pos]
            self.played.append((self.frame.step, step.phase, step.node))
            self.step_started.emit(self.frame.step, step.phase, step.node)
            self._active = self._apply(step, 0.0)

    def _tick(self) -> None:
        now = time.monotonic()
        self.t += (now - self._last) * 1000.0 / self.step_ms
        self._last = now
        while self.t >= 1.0:
            self.t -= 1.0
            for item in self._active:
                item.set_pulse(None)
            self.pos += 1
            if self.pos >= len(self.steps):
                self._end_wave()
                return
            self._begin()
        pulse = self.t if self.steps[self.pos].phase == "forward" else 1.0 - self.t
        for item in self._active:
            item.set_pulse(pulse)

    def _end_wave(self) -> None:
        self.timer.stop()
        self._active = []
        self.wave_finished.emit(self.frame.step if self.frame else 0)
        if self.pending is not None and not self.paused:
            self.play(self._take_pending())

    def _take_pending(self) -> ProbeFrame:
        frame, self.pending = self.pending, None
        assert frame is not None  # callers take one only when one is waiting
        return frame

    def _apply(self, step: WaveStep, t: float | None) -> list:
        """Stroke the wires leaving `step.node`; returns their overlays."""
        node = self.marks.canvas_node(step.node)
        if node is None:
            return []
        forward = step.phase == "forward"
        colors = FORWARD_COLORS if forward else BACKWARD_COLORS
        scale = self._scales[step.phase]
        items = []
        edges = self.marks.edges_from(node) if node != step.node or not step.ports else \
            [e for p in step.ports for e in self.marks.edges_from(node, p)]
        for edge in edges:
            value = step.ports.get(edge.src_port)
            if value == math.inf:
                color, width = QColor(theme.ERROR), MAX_WIDTH
            else:
                f = scale(value) if value is not None else 0.35
                color, width = _mix(*colors, f), MIN_WIDTH + (MAX_WIDTH - MIN_WIDTH) * f
            item = self.marks.stroke(edge)
            if item is not None:
                pulse = None if t is None else (t if forward else 1.0 - t)
                item.set_stroke(color, width, pulse)
                items.append(item)
        return items
