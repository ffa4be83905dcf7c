"""Per-node views: a dock that shows, for the node a person picks, what it is doing.

Open it from a node's context menu, with Alt+double-click on a node, or from View > Node
View (Ctrl+Shift+V). Which tabs appear depends on the node and its data:

- Histograms: the node's activation and gradient histograms over the probed steps of
  the current run (or of a `--probe-out` recording loaded with View > Load Probe
  Recording), one column per frame;
- Layers: the gradient norm of every layer's weights, latest frame and over time — the
  vanishing-gradient picture (also View > Gradient Norms per Layer);
- Feature maps for image-shaped outputs (every channel of a sample on the current
  weights, and the probes' thumbnail while training), attention heat maps per head for attention
  weights, the 2-D decision boundary of a classifier of two-feature data, a latent-space
  scatter (PCA) coloured by label for a code narrower than the data, Hopfield recall
  (energy per step, states), and a procedure's trajectory (sample grids, Gibbs chains,
  DDPM denoising) run on the current weights.

Probe frames arrive with the run's events and are only stored; a timer redraws the live
tabs at most every REFRESH_MS, and only when new frames came, so training never waits for
a view (older frames in between are simply not drawn separately). Model tabs compute on
the initial weights before a run, on the weights the trainer sends at epoch ends while it
runs (at most every MODEL_REFRESH_S), on the trained weights once it is over, when the
dock opens, and on Refresh (procedures only then). Numbers come from `nodegraph.runtime.viewdata`;
each tab keeps what it drew in `data` so tests can read it.
"""

from __future__ import annotations

import math
import time
from collections import deque
from typing import TYPE_CHECKING

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QEvent, QObject, QPoint, QRectF, Qt, QTimer
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import (
    QComboBox,
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QMenu,
    QPushButton,
    QSpinBox,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from nodegraph.gui.base import theme
from nodegraph.gui.base.later import later
from nodegraph.gui.canvas.node_item import NodeItem
from nodegraph.gui.training import node_views_trees
from nodegraph.gui.training.node_views_base import CLASS_COLORS, TrajectoryView, View, colormap
from nodegraph.gui.training.node_views_boxes import DetectionView, shows_boxes
from nodegraph.model.errors import NodegraphError, first_line
from nodegraph.model.events import RunStarted, WeightsSnapshot
from nodegraph.model.types import LOSS
from nodegraph.runtime.probe_frames import ProbeFrame, read_frames

if TYPE_CHECKING:
    from nodegraph.runtime.compile import Compiled
    from nodegraph.runtime.viewdata import HistogramHistory

vd = later("nodegraph.runtime.viewdata")  # torch: imported when a view first computes
compiler = later("nodegraph.runtime.compile")

REFRESH_MS = 500
MODEL_REFRESH_S = 2.0  # model tabs follow a training run's weights at most this often
DRAWN_FRAMES = 200  # a histogram column per frame at most this many, spread over the run
MAX_FRAMES = 2000  # the oldest frames of a very long run give way


# -- live views: probe frames -----------------------------------------------------------------


class HistogramView(View):
    """Activation and gradient histograms of one output over the probed steps."""

    title = "Histograms"
    live, model = True, False

    node: str  # one node's outputs (only the layers' view may have none)

    def __init__(self, node: str, targets: dict[str, tuple[str, str]] | None = None):
        super().__init__(node)
        # where each output is probed: a group instance's outputs live on inner nodes
        self.targets = targets or {}
        self.port = QComboBox()
        self.controls.addWidget(QLabel("output"))
        self.controls.addWidget(self.port, 1)
        self.port.currentTextChanged.connect(lambda _: self.show_frames(self._frames))
        self._frames: list[ProbeFrame] = []
        self.plots = {"output": self.plot(0, 0, "activations", "probed step", "value"),
                      "grad": self.plot(1, 0, "gradients arriving", "probed step", "gradient")}
        self.data: dict[str, HistogramHistory | None] = {}

    def show_frames(self, frames: list[ProbeFrame]) -> None:
        self._frames = frames
        ports = [p for p, (n, q) in self.targets.items()
                 if any(q in f.outputs.get(n, {}) for f in frames)] or list(dict.fromkeys(
                     p for f in frames for p in f.outputs.get(self.node, {})))
        if ports != [self.port.itemText(i) for i in range(self.port.count())]:
            self.port.blockSignals(True)
            current = self.port.currentText()
            self.port.clear()
            self.port.addItems(ports)
            if current in ports:
                self.port.setCurrentText(current)
            self.port.blockSignals(False)
        if not self.port.currentText():
            self.status.setText(f"No probe frames of '{self.node}' yet: train the graph, or "
                                "load a --probe-out recording (View menu).")
            return
        node, port = self.targets.get(self.port.currentText(),
                                      (self.node, self.port.currentText()))
        frames = [frames[i] for i in vd.spread(len(frames), DRAWN_FRAMES)]  # bounded work
        for which, plot in self.plots.items():
            plot.clear()
            h = vd.histogram_history(frames, node, port, which)
            self.data[which] = h
            if h is None:
                continue
            xs, counts = vd.on_step_axis(h)
            half = (xs[1] - xs[0]) / 2 if len(xs) > 1 else 0.5
            x0, x1 = xs[0] - half, xs[-1] + half
            rect = QRectF(x0, h.edges[0], x1 - x0, h.edges[-1] - h.edges[0])
            share = counts / np.maximum(counts.sum(1, keepdims=True), 1)
            self.image(plot, np.sqrt(share.T), rect, "inferno", square=False)
            plot.setXRange(x0, x1, padding=0)
            plot.setYRange(h.edges[0], h.edges[-1], padding=0)
        last = frames[-1].outputs.get(node, {}).get(port)
        grad = frames[-1].grads.get(node, {}).get(port)
        shown = self.data["output"]
        text = f"{len(shown.steps) if shown is not None else 0} frames"
        if last is not None:
            text += (f" · step {frames[-1].step}: mean {last.mean:.3g}, std {last.std:.3g}, "
                     f"zeros {last.zero_frac:.0%}, saturated {last.saturated_frac:.0%}")
        if grad is not None:
            text += f" · gradient norm {grad.norm:.3g}"
        self.status.setText(text)


class GradNormView(View):
    """Gradient norm of each layer's weights: the latest frame as bars, and over time."""

    title = "Layers"
    live, model = True, False

    def __init__(self, node: str | None = None):
        super().__init__(node)
        self.bars = self.plot(0, 0, "gradient norm per layer, input → output: bars latest, "
                              "ticks first frame",
                              "", "log₁₀ ‖∂L/∂w‖")
        self.lines = self.plot(1, 0, "over time", "probed step", "log₁₀ ‖∂L/∂w‖")
        for p in (self.bars, self.lines):
            p.getAxis("left").enableAutoSIPrefix(False)
        self.data: dict[str, float] = {}

    def show_frames(self, frames: list[ProbeFrame]) -> None:
        layers, steps, table = vd.grad_norm_history(frames)
        if not layers:
            self.status.setText("No gradients probed yet: train the graph, or load a "
                                "--probe-out recording (View menu).")
            return
        latest = vd.layer_grad_norms(frames[-1])
        self.data = latest
        self.bars.clear()
        heights = [np.log10(max(latest.get(n, np.nan), 1e-30)) for n in layers]
        colors = [self._color(i, len(layers)) for i in range(len(layers))]
        lows = [h for h in heights if np.isfinite(h)]
        lows += [np.log10(v) for v in vd.layer_grad_norms(frames[0]).values() if v > 0]
        bottom = np.floor(min(lows)) - 0.5
        self.bars.addItem(pg.BarGraphItem(x=np.arange(len(layers)), y0=bottom,
                                          height=np.array(heights) - bottom, width=0.7,
                                          brushes=colors, pens=[pg.mkPen(None)] * len(layers)))
        self.bars.getAxis("bottom").setTicks([list(enumerate(layers))])
        start = vd.layer_grad_norms(frames[0])
        if len(frames) > 1:  # where each layer started, as a tick over its bar
            at = [(i, np.log10(start[n])) for i, n in enumerate(layers) if start.get(n, 0) > 0]
            self.bars.addItem(pg.ScatterPlotItem([a for a, _ in at], [b for _, b in at],
                                                 symbol="_", size=34, pen=pg.mkPen("w", width=3),
                                                 brush=pg.mkBrush("w"),
                                                 name=f"step {frames[0].step}"))
        self.lines.clear()
        named = len(layers) <= 6  # beyond, colour alone tells depth (as in the bars)
        if named and self.lines.legend is None:
            self.lines.addLegend(offset=(-10, 10), labelTextColor=theme.TEXT,
                                 brush=theme.LABEL_BG)
        if self.lines.legend is not None:
            self.lines.legend.clear()
        for i, name in enumerate(layers):
            ok = np.isfinite(table[i]) & (table[i] > 0)
            self.lines.plot(np.array(steps)[ok], np.log10(table[i][ok]),
                            name=name if named else None,
                            pen=pg.mkPen(colors[i], width=2))
        first, last = layers[0], layers[-1]
        ratio = latest.get(first, np.nan) / latest.get(last, np.nan)
        text = f"step {frames[-1].step}: {first} gets {ratio:.2g}× the gradient norm of {last}"
        if len(frames) > 1 and start.get(last):
            text += (f" (white ticks: step {frames[0].step}, "
                     f"{start.get(first, np.nan) / start[last]:.2g}×)")
        self.status.setText(text + ("  — vanishing gradients" if ratio < 0.01 else
                                    "  — exploding gradients" if ratio > 100 else ""))

    @staticmethod
    def _color(i: int, n: int) -> str:
        """Input side blue, output side orange: depth reads as colour."""
        return colormap("CET-D1").map(0.1 + 0.8 * i / max(n - 1, 1), mode="qcolor")


# -- model views -------------------------------------------------------------------------------


def _ports(compiled: Compiled, node: str):
    """(port, meta tensor) of each output of top-level `node`, as validation inferred them."""
    for port in vd.output_ports(compiled, node):
        meta = compiled.report.outputs.get(vd.flat_key(compiled, node, port))
        if meta is not None and hasattr(meta, "shape"):
            yield port, meta


class _PortView(View):
    """A model view of one of the node's outputs, with a port choice and a sample number."""

    node: str  # one node's outputs (only the layers' view may have none)

    def __init__(self, node: str, ports: list[str]):
        super().__init__(node)
        self.port = QComboBox()
        self.port.addItems(ports)
        self.sample = QSpinBox()
        self.sample.setRange(0, 10_000)
        self.sample.setPrefix("sample ")
        self.controls.addWidget(self.port, 1)
        self.controls.addWidget(self.sample)
        self.compiled: Compiled | None = None
        self.outputs: dict = {}
        self.port.currentTextChanged.connect(lambda _: self._draw())
        self.sample.valueChanged.connect(lambda _: self._draw())

    def show_model(self, compiled: Compiled) -> None:
        values = vd.data_values(compiled, vd.split_of(compiled, ("train",)), 16)
        self.outputs = vd.node_outputs(compiled, self.node, values)
        self.sample.setMaximum(max(len(t) for t in self.outputs.values()) - 1)
        self._draw()

    def _draw(self) -> None:
        t = self.outputs.get(self.port.currentText())
        if t is not None:
            self.canvas.clear()
            self.draw(t, min(self.sample.value(), len(t) - 1))

    def draw(self, t, sample: int) -> None:
        raise NotImplementedError


class _ThumbView(_PortView):
    """A port view that also shows, while training, the probes' thumbnail of the output
    (its first sample's first channel or head) at the latest probed step."""

    live = True
    thumb_what = "the batch's first sample, channel 1"
    thumb_cmap = "CET-L1"

    def __init__(self, node: str, ports: list[str], targets: dict[str, tuple[str, str]]):
        super().__init__(node, ports)
        self.targets = targets
        self.thumb: tuple[int, np.ndarray] | None = None  # (step, image) from the probes

    def show_frames(self, frames: list[ProbeFrame]) -> None:
        node, port = self.targets.get(self.port.currentText(), (self.node, ""))
        for f in reversed(frames):
            s = f.outputs.get(node, {}).get(port)
            if s is not None and s.thumbnail is not None:
                self.thumb = (f.step, np.asarray(s.thumbnail, dtype=float))
                self._draw()
                return

    def _draw(self) -> None:
        t = self.outputs.get(self.port.currentText())
        if t is None and self.thumb is not None:  # frames came before the model was drawn
            self.canvas.clear()
            self.draw_thumb(0, 0)
        else:
            super()._draw()

    def draw_thumb(self, row: int, col: int) -> None:
        if self.thumb is None:
            return
        step, img = self.thumb
        plot = self.picture(row, col, f"training, step {step}: {self.thumb_what}")
        self.image(plot, img, cmap=self.thumb_cmap)


class FeatureMapView(_ThumbView):
    """Every channel of one sample on the current weights, and the probes' thumbnail."""

    title = "Feature maps"

    def draw(self, t, sample: int) -> None:
        maps = vd.as_images(t, sample)
        self.data = vd.image_grid(maps, per_tile=len(maps) > 1)
        plot = self.picture(0, 0, f"{len(maps)} channel(s) of sample {sample}, "
                                  f"{maps.shape[1]}×{maps.shape[2]}")
        self.image(plot, self.data, cmap="CET-L1" if len(maps) == 1 else "viridis")
        self.status.setText("each map scaled to its own range" if len(maps) > 1 else
                            f"values {np.nanmin(self.data):.3g} … {np.nanmax(self.data):.3g}")
        self.draw_thumb(0, 1)


class AttentionView(_ThumbView):
    """Each head's weights for one sample on the current weights, and the probes'
    thumbnail of head 1 while training."""

    title = "Attention"
    thumb_what = "the batch's first sample, head 1"
    thumb_cmap = "inferno"

    def draw(self, t, sample: int) -> None:
        self.data = vd.attention_heads(t, sample)
        cols = min(4, len(self.data))
        for h, w in enumerate(self.data):
            plot = self.plot(h // cols, h % cols, f"head {h + 1}", "key", "query")
            self.image(plot, w, cmap="inferno", levels=(0.0, float(self.data.max())))
        self.draw_thumb(len(self.data) // cols + (len(self.data) % cols > 0), 0)
        self.status.setText(f"attention weights of sample {sample}: rows are queries "
                            "(each sums to 1), columns keys")


class DecisionView(View):
    title = "Decision boundary"

    def show_model(self, compiled: Compiled) -> None:
        grid = vd.decision_grid(compiled, self.node)
        self.data = grid
        self.canvas.clear()
        plot = self.plot(0, 0, f"{self.node}: P(class 1) over the input plane"
                         if grid.scores.shape[2] <= 2 else f"{self.node}: predicted class",
                         f"{grid.input[0]}.{grid.input[1]}[0]", f"{grid.input[1]}[1]")
        dx, dy = grid.xs[1] - grid.xs[0], grid.ys[1] - grid.ys[0]
        rect = QRectF(grid.xs[0] - dx / 2, grid.ys[0] - dy / 2, dx * len(grid.xs),
                      dy * len(grid.ys))
        classes = grid.scores.shape[2]
        binary = classes <= 2  # shown as P(class 1), blue to red
        shown = (grid.prob if classes == 1 else _softmax(grid.scores)[..., 1] if binary
                 else grid.classes.astype(float))
        image = self.image(plot, shown, rect, "CET-D1" if binary else "CET-C6s",
                           (0.0, 1.0) if binary else None)
        self.shown = shown
        if binary:  # the boundary itself, drawn in the image's pixel coordinates
            pg.IsocurveItem(shown.T, level=0.5, pen=pg.mkPen("w", width=2)
                            ).setParentItem(image)
        labels = grid.labels if grid.labels is not None else np.zeros(len(grid.points), int)
        brushes = [pg.mkBrush(CLASS_COLORS[int(c) % len(CLASS_COLORS)]) for c in labels]
        plot.addItem(pg.ScatterPlotItem(grid.points[:, 0], grid.points[:, 1], size=9,
                                        brush=brushes, pen=pg.mkPen("#111", width=1)))
        accuracy = ""
        if grid.labels is not None:
            at = np.stack([np.searchsorted(grid.xs, grid.points[:, 0]).clip(0, len(grid.xs) - 1),
                           np.searchsorted(grid.ys, grid.points[:, 1]).clip(0, len(grid.ys) - 1)])
            hits = (grid.classes[at[1], at[0]] == labels).mean()
            accuracy = f" · {hits:.0%} of the training points on their class's side"
        self.status.setText(f"{len(grid.points)} training points coloured by label{accuracy}")


def _softmax(scores: np.ndarray) -> np.ndarray:
    e = np.exp(scores - scores.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


class LatentView(_PortView):
    title = "Latent space"

    def __init__(self, node: str, ports: list[str]):
        super().__init__(node, ports)
        self.sample.hide()  # every sample of the split is a point

    def show_model(self, compiled: Compiled) -> None:
        self.compiled = compiled
        self._draw()

    def _draw(self) -> None:
        if self.compiled is None:
            return
        s = vd.latent_scatter(self.compiled, self.node, self.port.currentText())
        self.data = s
        self.canvas.clear()
        axes = ("z₁", "z₂") if np.isnan(s.explained[0]) else (
            f"PC1 ({s.explained[0]:.0%} of the variance)", f"PC2 ({s.explained[1]:.0%})")
        plot = self.plot(0, 0, f"{self.node}.{self.port.currentText()} on the {s.split} split",
                         *axes)
        plot.addLegend(offset=(-10, 10), labelTextColor=theme.TEXT, brush=theme.LABEL_BG)
        labels = s.labels if s.labels is not None else np.zeros(len(s.points), int)
        for c in np.unique(labels):
            pts = s.points[labels == c]
            plot.addItem(pg.ScatterPlotItem(pts[:, 0], pts[:, 1], size=5, pen=None,
                                            brush=CLASS_COLORS[int(c) % len(CLASS_COLORS)],
                                            name=str(c) if s.labels is not None else None))
        self.status.setText(f"{len(s.points)} samples, a {s.dims}-dimensional code"
                            + (" projected on its two principal axes" if s.dims > 2 else ""))


class RecallView(View):
    title = "Recall"

    def show_model(self, compiled: Compiled) -> None:
        r = vd.hopfield_recall(compiled, self.node)
        self.data = r
        self.canvas.clear()
        energy = self.plot(0, 0, "energy per step", "step", "E = −½xᵀWx − bᵀx")
        last = int(np.where(r.iterations < 0, r.energy.shape[1] - 1, r.iterations).max())
        for i, e in enumerate(r.energy):
            energy.plot(np.arange(last + 1), e[:last + 1],
                        pen=pg.mkPen(CLASS_COLORS[i % len(CLASS_COLORS)], width=1.5))
        units = r.trajectory.shape[2]
        side = int(round(units ** 0.5))
        if units == 2:
            phase = self.plot(0, 1, "states, start (○) to end (●)", "x₁", "x₂")
            phase.setAspectLocked(True)
            for i, path in enumerate(r.trajectory):
                color = CLASS_COLORS[i % len(CLASS_COLORS)]
                phase.plot(path[:last + 1, 0], path[:last + 1, 1], pen=pg.mkPen(color))
                phase.plot([path[0, 0]], [path[0, 1]], pen=None, symbol="o", symbolBrush=None,
                           symbolPen=color)
                phase.plot([path[-1, 0]], [path[-1, 1]], pen=None, symbol="o",
                           symbolBrush=color)
        elif side * side == units:
            steps = vd.spread(last + 1, 8)
            states = r.trajectory[:4][:, steps].reshape(-1, side, side)
            strip = self.picture(1, 0, f"first samples' states at steps {steps}")
            self.image(strip, vd.image_grid(states, cols=len(steps)), cmap="CET-L1")
        settled = (r.iterations >= 0).sum()
        rose = int((np.diff(r.energy, axis=1) > 1e-5).any(1).sum())
        self.status.setText(f"{settled} of {len(r.iterations)} samples settled (iterations "
                            f"{r.iterations.tolist()}); the energy rose on the way for "
                            f"{rose} of them")


# -- choosing, docking, feeding ----------------------------------------------------------------


def views_for(compiled: Compiled, node: str) -> list[View]:
    """The tabs that fit `node`: live tabs always (for a block that computes), model tabs
    by the kind of block and the shapes of its outputs."""
    spec = compiled.graph.registry.get(compiled.graph.nodes[node].type)
    special = node_views_trees.views_for(compiled, node)  # fitted trees, weight paths
    if special is not None:
        return special
    if spec.kind == "procedure":
        return [TrajectoryView(node)]
    if spec.kind not in ("op",) and not compiled.graph.nodes[node].type.startswith("group."):
        return [GradNormView(node)]
    ports = dict(_ports(compiled, node))
    targets = {p: vd.flat_key(compiled, node, p) for p in ports}
    wanted = {p: _declared_views(compiled, key) for p, key in targets.items()}
    views: list[View] = [HistogramView(node, targets)]
    if any("trajectory" in w for w in wanted.values()):
        return [RecallView(node), *views]  # not trained: no gradients to chart
    attention = [p for p, m in ports.items() if "attention" in wanted[p]
                 and m.ndim in (3, 4) and m.shape[-1] > 1]
    if attention:
        views.insert(0, AttentionView(node, attention, targets))
    images = [p for p, m in ports.items() if p not in attention and m.ndim == 4]
    if images:
        views.insert(0, FeatureMapView(node, images, targets))
    flat = [p for p, m in ports.items() if m.ndim == 2 and m.is_floating_point()]
    key = vd.two_d_input(compiled, node)
    if key is not None and _predicts(compiled, node) and any(ports[p].shape[1] <= 10
                                                             for p in flat):
        views.insert(0, DecisionView(node))
    width = _data_width(compiled)
    codes = [p for p in flat if 2 <= ports[p].shape[1] < width]
    if codes and key is None:
        views.insert(0, LatentView(node, codes))
    if shows_boxes(compiled, node):
        views.insert(0, DetectionView(node))
    return [*views, GradNormView(node)]


def _declared_views(compiled: Compiled, key: tuple[str, str]) -> tuple[str, ...]:
    """The views the block declares for output port `key` (of a flat node: inside a group
    instance, the inner block's port)."""
    spec = compiled.report.specs.get(key[0])
    port = spec.output(key[1]) if spec is not None else None
    return port.views if port is not None else ()


def _predicts(compiled: Compiled, node: str) -> bool:
    """Whether `node`'s output is a prediction: it feeds a loss or a metric."""
    graph = compiled.graph
    for edge in graph.edges_from(node):
        spec = graph.registry.get(graph.nodes[edge.dst].type)
        if spec.kind == "metric" or any(p.type == LOSS for p in spec.outputs):
            return True
    return False


def _data_width(compiled: Compiled) -> int:
    """Features per sample of the widest data port (what a latent code compresses)."""
    return max((int(np.prod(t.shape[1:])) for ds in compiled.datasets.values()
                for t in ds.tensors("train").values()), default=0)


class NodeViewPanel(QWidget):
    """The node view's body: which node, on which weights, a Refresh button and the
    node's tabs (in a floating dock of the window)."""

    def __init__(self):
        super().__init__()
        self.node: str | None = None
        self.header = QLabel("Select a node and open its view.")
        self.header.setWordWrap(True)
        self.refresh_button = QPushButton("Refresh")
        self.refresh_button.setToolTip("recompute the model views on the current weights")
        self.tabs = QTabWidget()
        top = QHBoxLayout()
        top.addWidget(self.header, 1)
        top.addWidget(self.refresh_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addLayout(top)
        layout.addWidget(self.tabs, 1)

    @property
    def views(self) -> list[View]:
        return [w for i in range(self.tabs.count()) if isinstance(w := self.tabs.widget(i), View)]

    def view(self, kind: type[View]) -> View | None:
        return next((v for v in self.views if isinstance(v, kind)), None)

    def set_views(self, node: str | None, views: list[View]) -> None:
        self.node = node
        while self.tabs.count():
            widget = self.tabs.widget(0)
            self.tabs.removeTab(0)
            if widget is not None:
                widget.deleteLater()
        for v in views:
            self.tabs.addTab(v, v.title)


class NodeViews(QObject):
    """Keeps the run's probe frames and feeds the node view dock."""

    def __init__(self, window):
        super().__init__(window)
        self.window = window
        self.frames: deque[ProbeFrame] = deque(maxlen=MAX_FRAMES)
        self.panel = NodeViewPanel()
        self.dock = window.add_dock("node_view", "Node View", self.panel)  # floating
        self.dock.resize(860, 600)
        self.dock.hide()
        self.panel.refresh_button.clicked.connect(lambda: self.refresh_model())
        self.source = ""  # "run" or the recording's path
        self._drawn = 0  # frames received when the live tabs were last drawn
        self._received = 0
        self.context_menu: QMenu | None = None  # the last node menu shown
        self.snapshot: WeightsSnapshot | None = None  # the running model's latest weights
        self._snapshot_drawn: WeightsSnapshot | None = None
        self._model_drawn_at = -math.inf
        self._live_model: tuple[int, Compiled] | None = None  # (revision, eval copy)
        self.timer = QTimer(self, interval=REFRESH_MS)
        self.timer.timeout.connect(self.refresh_live)
        self.timer.start()
        window.runner.listen(self.on_event, ProbeFrame, WeightsSnapshot, RunStarted)
        window.runner.state_changed.connect(self._on_run_state)
        window.view.viewport().installEventFilter(self)

    # -- frames ----------------------------------------------------------------------------

    def on_event(self, event) -> None:
        if isinstance(event, ProbeFrame):
            if self.source != "run":
                self.frames.clear()
                self.source = "run"
            self.frames.append(event)  # drawn later by the timer: never slows the run
            self._received += 1
        elif isinstance(event, WeightsSnapshot):
            self.snapshot = event  # drawn by the timer, at most every MODEL_REFRESH_S
        elif isinstance(event, RunStarted):
            self.frames.clear()
            self.source = "run"
            self.snapshot = None

    def _on_run_state(self, state: str) -> None:
        """A run ended (its result is in by now): model tabs move to the trained weights;
        procedures wait for Refresh, a sampling chain can take a while."""
        if state == "idle" and self.dock.isVisible():
            self.refresh_model(procedures=False)

    def load_recording(self, path: str) -> int:
        """Replace the frames by a `--probe-out` recording; returns how many were read."""
        self.frames = deque(read_frames(path), maxlen=MAX_FRAMES)
        self.source = path
        self._received += 1
        self.refresh_live()
        return len(self.frames)

    def refresh_live(self) -> None:
        self.refresh_running_model()
        if self._drawn == self._received or not self.dock.isVisible():
            return
        self._drawn = self._received
        frames = list(self.frames)
        for v in self.panel.views:
            if v.live:
                v.show_frames(frames)

    # -- the model -------------------------------------------------------------------------

    def compiled(self) -> tuple[Compiled, str]:
        """The trained model when the last run trained this very graph, else the initial
        weights (compiled once per revision)."""
        w = self.window
        if w.runner.result is not None and w.runner.revision == w.doc.revision:
            return w.runner.result.compiled, "trained weights"
        cache = getattr(w, "_preview_cache", None)
        if cache is None or cache[0] != w.doc.revision:
            compiled = compiler.compile_graph(w.doc.graph, for_training=False)
            w._preview_cache = (w.doc.revision, compiled)
        return w._preview_cache[1], "initial weights"

    def refresh_running_model(self) -> None:
        """While a run trains the graph as it is on the canvas, model tabs (boundary, latent
        scatter, feature maps...) follow its weights: the latest snapshot is loaded into an
        eval copy of the model, throttled; procedures wait for Refresh."""
        w, snap = self.window, self.snapshot
        if (snap is None or snap is self._snapshot_drawn or not self.dock.isVisible()
                or w.runner.revision != w.doc.revision or w.runner.result is not None
                or time.monotonic() - self._model_drawn_at < MODEL_REFRESH_S):
            return
        self._snapshot_drawn, self._model_drawn_at = snap, time.monotonic()
        try:
            if self._live_model is None or self._live_model[0] != w.doc.revision:
                compiled = compiler.compile_graph(w.doc.graph, for_training=False)
                self._live_model = (w.doc.revision, compiled)
            compiled = self._live_model[1]
            compiled.module.load_block_state(snap.state)
        except Exception as e:  # the graph changed shape under the run: say so, keep going
            self.panel.header.setText(f"<b>{self.panel.node}</b>: {first_line(e)}")
            return
        self._show_model(compiled, f"weights of epoch {snap.epoch} (training)", False)

    def refresh_model(self, procedures: bool = True) -> None:
        node = self.panel.node
        if node is None or node not in self.window.doc.graph.nodes:
            return
        try:
            compiled, note = self.compiled()
        except Exception as e:  # a graph that cannot run: say so in the dock
            self.panel.header.setText(f"<b>{node}</b>: {e}")
            return
        self._show_model(compiled, note, procedures)

    def _show_model(self, compiled: Compiled, note: str, procedures: bool) -> None:
        node = self.panel.node
        if node is None or node not in self.window.doc.graph.nodes:
            return
        self.panel.header.setText(f"<b>{node}</b> — {self.window.doc.graph.nodes[node].type}"
                                 f" · model views on the {note}" + self._source_note())
        for v in self.panel.views:
            if not v.model or (isinstance(v, TrajectoryView) and not procedures):
                continue
            try:
                v.show_model(compiled)
            except (NodegraphError, RuntimeError, ValueError) as e:
                v.status.setText(first_line(e))

    def _source_note(self) -> str:
        if not self.frames:
            return ""
        where = "this run" if self.source == "run" else self.source
        return f" · {len(self.frames)} probe frame(s) from {where}"

    # -- opening ---------------------------------------------------------------------------

    def open(self, node: str | None = None) -> NodeViewPanel:
        """Show the views of `node` (default: the selected node; none: the layers chart)."""
        if node is None:
            selected = self.window.scene.selected_node_ids()
            node = selected[0] if len(selected) == 1 else None
        if node is None:
            return self.open_layers()
        try:
            compiled, _ = self.compiled()
            views = views_for(compiled, node)
        except Exception as e:
            self.window.notify(f"No view for '{node}': {first_line(e)}")
            return self.panel
        self.panel.set_views(node, views)
        self.dock.setWindowTitle(f"Node View — {node}")
        self._show()
        self.refresh_model()
        return self.panel

    def open_layers(self) -> NodeViewPanel:
        self.panel.set_views(None, [GradNormView()])
        self.dock.setWindowTitle("Node View — gradient norm per layer")
        self.panel.header.setText("Gradient norm of every layer's weights" + self._source_note())
        self._show()
        return self.panel

    def _show(self) -> None:
        if not self.dock.isVisible():
            corner = self.window.mapToGlobal(QPoint(self.window.width() - 900, 120))
            self.dock.move(corner)
            self.dock.show()
        self.dock.raise_()
        self._drawn = -1  # draw the live tabs now
        self.refresh_live()

    def eventFilter(self, obj, event) -> bool:
        """Alt+double-click on a node opens its view; right-click on a node offers it."""
        kind = event.type()
        if kind == QEvent.Type.MouseButtonDblClick and (
                event.modifiers() & Qt.KeyboardModifier.AltModifier):
            node = self._node_at(event.position().toPoint())
            if node is not None:
                self.open(node)
                return True
        elif kind == QEvent.Type.ContextMenu:
            node = self._node_at(event.pos())
            if node is not None:
                menu = QMenu(self.window.view)
                menu.addAction(f"Open Node View of '{node}'", lambda: self.open(node))
                menu.addAction("Gradient Norms per Layer", self.open_layers)
                for hook in getattr(self.window, "node_menu_hooks", ()):
                    hook(menu, node)  # other parts' entries (collapse.install)
                menu.popup(event.globalPos())
                self.context_menu = menu
                return True
        return False

    def _node_at(self, pos) -> str | None:
        item = self.window.view.itemAt(pos)
        while item is not None and not isinstance(item, NodeItem):
            item = item.parentItem()
        return item.node_id if item is not None else None

    def ask_recording(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self.window, "Load probe recording", "",
                                              "Probe frames (*.jsonl);;All files (*)")
        if path:
            n = self.load_recording(path)
            self.window.notify(f"{n} probe frame(s) loaded for the node views")
            if not self.dock.isVisible():
                self.open()


def install(window) -> NodeViews:
    """Node views for `window`, with their actions at the end of its View menu."""
    views = NodeViews(window)
    menu = next(a.menu() for a in window.menuBar().actions() if a.text() == "&View")
    menu.addSeparator()
    actions = {
        "node_view": ("&Node View", views.open, "Ctrl+Shift+V",
                      "views of the selected node (also Alt+double-click a node)"),
        "grad_norms": ("&Gradient Norms per Layer", views.open_layers, None,
                       "the gradient norm of every layer's weights while training"),
        "load_probes": ("Load Probe &Recording…", views.ask_recording, None,
                        "show a --probe-out file in the node views"),
    }
    for name, (text, slot, key, tip) in actions.items():
        action = QAction(text, window)
        if key:
            action.setShortcut(QKeySequence(key))
        action.setStatusTip(tip)
        action.triggered.connect(lambda *_, s=slot: s())
        menu.addAction(action)
        window.actions_by_name[name] = action
    return views
