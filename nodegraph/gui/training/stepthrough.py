"""Step-through: one batch, walked node by node, forward and then backward, with its numbers.

"Step" runs one batch through the graph with `nodegraph.runtime.probes.trace_batch` (weights are
not changed) and then walks it: first forward in topological order, highlighting the
current node and showing its input and output values; then backward from the loss,
showing the gradient arriving at each node's output. Previous / Next move one node.

On the canvas the actual numbers are drawn on the wires: above a wire the value it carries
(every value when it holds a few, else its mean and spread), below it, during the backward
walk, the gradient of the loss with respect to it. On the 2-1-2 network of the notes this
shows 1.6 on the hidden wire and 1.32, 0.28 on the output wire, values a student checks
against the worked example by hand. The panel lists the current node's values in full.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from PySide6.QtCore import Signal
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QHBoxLayout, QLabel, QPlainTextEdit, QPushButton, QVBoxLayout, QWidget

from nodegraph.gui.base import theme
from nodegraph.gui.base.later import later
from nodegraph.gui.canvas.overlays import CanvasMarks
from nodegraph.gui.training.animation import BACKWARD_COLORS, FORWARD_COLORS
from nodegraph.model.graph import Edge
from nodegraph.model.types import BOXES

if TYPE_CHECKING:
    import torch

    from nodegraph.runtime.probes import TraceRecord

probes = later("nodegraph.runtime.probes")  # torch: imported by the first Step

WIRE_VALUES = 12  # a wire with at most this many numbers shows them all
PANEL_VALUES = 64  # the panel prints tensors up to this size in full


def fmt_number(v: float) -> str:
    return f"{v:.3g}"


def fmt_values(t: torch.Tensor, limit: int = WIRE_VALUES) -> str:
    """A tensor as a student reads it: a batch of one loses its batch axis, each sample of a
    small batch is one line, a large tensor is summarised by its mean and spread."""
    t = t.detach().float()
    if t.ndim >= 1 and t.shape[0] == 1:
        t = t[0]
    if t.numel() > limit:
        return (f"{tuple(t.shape)}\nmean {fmt_number(t.mean().item())} "
                f"± {fmt_number(t.std().item() if t.numel() > 1 else 0.0)}")
    if t.ndim == 0:
        return fmt_number(t.item())
    if t.ndim == 1:
        return ", ".join(fmt_number(v) for v in t.tolist())
    return "\n".join(", ".join(fmt_number(v) for v in row.flatten().tolist()) for row in t)


def fmt_boxes(t: torch.Tensor, limit: int = 4) -> str:
    """Boxes (…, K, 4) as the corners of the first image's boxes, one a line; padding rows
    (all zeros) are left out, as the mask would."""
    b = t.detach().float()
    while b.ndim > 2:
        b = b[0]
    rows = [r for r in b.reshape(-1, 4).tolist() if any(r)]
    lines = [f"({fmt_number(x0)}, {fmt_number(y0)})–({fmt_number(x1)}, {fmt_number(y1)})"
             for x0, y0, x1, y1 in rows[:limit]]
    more = [f"… {len(rows) - limit} more"] if len(rows) > limit else []
    return "\n".join([f"{len(rows)} box(es) of image 0", *lines, *more])


@dataclass(frozen=True)
class Stop:
    phase: str  # "forward" or "backward"
    index: int  # into the trace's records


class StepTrace:
    """One traced batch and the walk over it (Qt-free: the panel and the canvas read it)."""

    def __init__(self, records: list[TraceRecord], edges: list[Edge],
                 boxes: frozenset[tuple[str, str]] = frozenset()):
        self.records = records
        self.boxes = boxes  # (node, output port) pairs that carry boxes
        self.by_node = {r.node: r for r in records}
        self.edges = edges
        backward = [i for i in reversed(range(len(records))) if records[i].grads]
        self.stops = [Stop("forward", i) for i in range(len(records))] + \
                     [Stop("backward", i) for i in backward]
        self.pos = 0

    @staticmethod
    def of(compiled, edges: list[Edge]) -> StepTrace:
        specs = compiled.report.specs
        boxes = frozenset((n, p.name) for n, spec in specs.items() for p in spec.outputs
                          if p.type == BOXES)
        return StepTrace(probes.trace_batch(compiled), edges, boxes)

    def _fmt(self, node: str, port: str, t: torch.Tensor, limit: int = WIRE_VALUES) -> str:
        if (node, port) in self.boxes and t.shape[-1:] == (4,):
            return fmt_boxes(t)
        return fmt_values(t, limit)

    @property
    def stop(self) -> Stop:
        return self.stops[self.pos]

    @property
    def record(self) -> TraceRecord:
        return self.records[self.stop.index]

    def move(self, delta: int) -> bool:
        pos = min(max(self.pos + delta, 0), len(self.stops) - 1)
        moved, self.pos = pos != self.pos, pos
        return moved

    def value(self, edge: Edge) -> torch.Tensor | None:
        """What the wire carries: its source's output, or (a data source) its target's input."""
        src = self.by_node.get(edge.src)
        if src is not None and edge.src_port in src.outputs:
            return src.outputs[edge.src_port]
        dst = self.by_node.get(edge.dst)
        return dst.inputs.get(edge.dst_port) if dst is not None else None

    def grad(self, edge: Edge) -> torch.Tensor | None:
        src = self.by_node.get(edge.src)
        return src.grads.get(edge.src_port) if src is not None else None

    def _rank(self) -> dict[str, int]:
        return {r.node: i for i, r in enumerate(self.records)}

    def shown_values(self) -> dict[Edge, str]:
        """Wire value labels at the current stop: every wire the forward walk has reached."""
        rank, stop = self._rank(), self.stop
        reached = len(self.records) - 1 if stop.phase == "backward" else stop.index
        out = {}
        for e in self.edges:
            at = rank[e.src] if e.src in rank else rank.get(e.dst)
            value = self.value(e)
            if at is not None and at <= reached and value is not None:
                out[e] = self._fmt(e.src, e.src_port, value)
        return out

    def shown_grads(self) -> dict[Edge, str]:
        """Gradient labels: wires whose source the backward walk has reached."""
        stop = self.stop
        if stop.phase != "backward":
            return {}
        rank = self._rank()
        out = {}
        for e in self.edges:
            grad = self.grad(e)
            if e.src in rank and rank[e.src] >= stop.index and grad is not None:
                out[e] = "∂L " + fmt_values(grad).replace("\n", "\n   ")
        return out

    def describe(self) -> str:
        """The panel's text for the current stop."""
        r, stop = self.record, self.stop
        if stop.phase == "forward":
            sources = {e.dst_port: (e.src, e.src_port) for e in self.edges if e.dst == r.node}
            lines = [_entry(f"input {name}", t, self._fmt(*sources.get(name, ("", "")), t,
                                                          PANEL_VALUES))
                     for name, t in r.inputs.items()]
            lines += [_entry(f"output {name}", t, self._fmt(r.node, name, t, PANEL_VALUES))
                      for name, t in r.outputs.items()]
        else:
            lines = [_entry(f"∂L/∂{name}", g) for name, g in r.grads.items()]
        return "\n".join(lines)

    def title(self) -> str:
        stop = self.stop
        count = sum(1 for s in self.stops if s.phase == stop.phase)
        done = sum(1 for s in self.stops[:self.pos + 1] if s.phase == stop.phase)
        return f"{stop.phase.capitalize()} {done}/{count}: {self.record.node}"


def _entry(name: str, t: torch.Tensor, text: str | None = None) -> str:
    """One tensor of the panel: its name and shape, then its values (`text`), indented."""
    values = (fmt_values(t, PANEL_VALUES) if text is None else text).splitlines()
    return f"{name} {tuple(t.shape)}:\n" + "\n".join("  " + line for line in values)


def _short_wires_first(marks: CanvasMarks, labels: dict[Edge, str]) -> list[tuple[Edge, str]]:
    """Labels in the order they are placed: a short wire has no room to move its label
    along, a long one does, so the long ones make way."""
    def length(item: tuple[Edge, str]) -> float:
        wire = marks.scene.wires.get(item[0])
        return wire.path().length() if wire is not None else 0.0
    return sorted(labels.items(), key=length)


class StepPanel(QWidget):
    """The dock's contents: Step, Previous / Next, and the current node's values."""

    step_requested = Signal()

    def __init__(self, marks: CanvasMarks, parent=None):
        super().__init__(parent)
        self.marks = marks
        self.trace: StepTrace | None = None
        self.step_button = QPushButton("Step (one batch)")
        self.step_button.setToolTip("run one batch and walk it node by node (weights unchanged)")
        self.prev_button = QPushButton("◀ Previous")
        self.next_button = QPushButton("Next ▶")
        self.clear_button = QPushButton("Clear")
        self.title = QLabel("Press Step to run one batch and walk through it.")
        self.title.setWordWrap(True)
        self.values = QPlainTextEdit()
        self.values.setReadOnly(True)
        self.values.setFont(theme.font(9.0, mono=True))
        buttons = QHBoxLayout()
        for b in (self.step_button, self.prev_button, self.next_button, self.clear_button):
            buttons.addWidget(b)
        layout = QVBoxLayout(self)
        layout.addLayout(buttons)
        layout.addWidget(self.title)
        layout.addWidget(self.values)
        self.step_button.clicked.connect(self.step_requested)
        self.prev_button.clicked.connect(lambda: self.walk(-1))
        self.next_button.clicked.connect(lambda: self.walk(1))
        self.clear_button.clicked.connect(self.clear)
        self._enable()

    def show_trace(self, trace: StepTrace) -> None:
        self.trace = trace
        self._show()

    def walk(self, delta: int) -> None:  # (not `move`: that is QWidget's)
        if self.trace is not None and self.trace.move(delta):
            self._show()

    def clear(self) -> None:
        self.trace = None
        self.marks.clear()
        self.title.setText("Press Step to run one batch and walk through it.")
        self.values.setPlainText("")
        self._enable()

    def show_message(self, text: str) -> None:
        self.title.setText(text)

    def _show(self) -> None:
        trace, marks = self.trace, self.marks
        marks.clear()
        if trace is None:  # cleared meanwhile: nothing to mark
            return
        stop = trace.stop
        forward = stop.phase == "forward"
        for edge, text in _short_wires_first(marks, trace.shown_values()):
            item = marks.label(edge)
            if item is not None:
                item.set_text(text, QColor(FORWARD_COLORS[1]))
            stroke = marks.stroke(edge)
            if stroke is not None:
                stroke.set_stroke(QColor(FORWARD_COLORS[0]), 3.0)
        for edge, text in _short_wires_first(marks, trace.shown_grads()):
            item = marks.label(edge, below=True)
            if item is not None:
                item.set_text(text, QColor(BACKWARD_COLORS[1]))
            stroke = marks.stroke(edge)
            if stroke is not None:
                stroke.set_stroke(QColor(BACKWARD_COLORS[0]), 3.0)
        node = marks.canvas_node(trace.record.node)
        ring = marks.node(node) if node else None
        if ring is not None:
            ring.set_ring(QColor(FORWARD_COLORS[1] if forward else BACKWARD_COLORS[1]))
        self.title.setText(trace.title())
        self.values.setPlainText(trace.describe())
        self._enable()

    def _enable(self) -> None:
        t = self.trace
        self.prev_button.setEnabled(t is not None and t.pos > 0)
        self.next_button.setEnabled(t is not None and t.pos < len(t.stops) - 1)
        self.clear_button.setEnabled(t is not None)
