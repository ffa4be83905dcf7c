"""Live training plots: loss and metrics per epoch (train vs val) and loss per step.

Points arrive with the run's events and are kept in plain lists (`series`), so a test can
read what the plot received; the curves are redrawn at most four times a second however
fast the events come, and only the curves that changed (redrawing a plot repaints its axes,
the costliest part of a plot). Painting the plots holds the interpreter lock that the
training thread needs, so the redraw interval stretches (up to four seconds) to keep painting
under 3% of the time: on a slow or busy machine a paint can take 100 ms, and four a second
would cost training a third of its speed. Which numbers are metrics and which are losses
comes from the graph (metric blocks' node ids), never from guessing at names.
"""

from __future__ import annotations

import time

import pyqtgraph as pg
from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QVBoxLayout, QWidget

from nodegraph.events import EpochEnded, RunStarted, StepEnded
from nodegraph.gui import theme

REDRAW_MS = 250  # a person sees no difference; the GUI thread keeps its time
MAX_REDRAW_MS = 4000
PAINT_SHARE = 0.03  # of the wall time, at most, spent painting plots


class _Canvas(pg.GraphicsLayoutWidget):
    """The plots' canvas, adding up the time its paints take (what redraws really cost: a
    redraw can paint twice, when the axes' range follows the new points)."""

    paint_seconds = 0.0

    def paintEvent(self, event) -> None:
        began = time.perf_counter()
        super().paintEvent(event)
        self.paint_seconds += time.perf_counter() - began

    def take_paint_seconds(self) -> float:
        seconds, self.paint_seconds = self.paint_seconds, 0.0
        return seconds


class TrainingPlots(QWidget):
    """Three plots side by side: loss per epoch, metrics per epoch, loss per step."""

    def __init__(self, parent=None):
        super().__init__(parent)
        pg.setConfigOptions(antialias=True, background=theme.BASE, foreground=theme.TEXT_DIM)
        self.canvas = _Canvas()
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.canvas)
        self.loss_plot = self._plot("Loss per epoch", "epoch", col=0)
        self.metric_plot = self._plot("Metrics per epoch", "epoch", col=1)
        self.step_plot = self._plot("Loss per step", "step", col=2)
        self.series: dict[str, tuple[list, list]] = {}
        self._curves: dict[str, pg.PlotDataItem] = {}
        self.metric_nodes: set[str] = set()
        self.steps_per_epoch = 1
        self._dirty: set[str] = set()
        self._timer = QTimer(self, interval=REDRAW_MS)
        self._timer.timeout.connect(self.redraw)
        self._timer.start()

    def _plot(self, title: str, x_label: str, col: int) -> pg.PlotItem:
        plot = self.canvas.addPlot(row=0, col=col, title=title)
        plot.showGrid(x=True, y=True, alpha=0.15)
        plot.setLabel("bottom", x_label)
        # the legend sits in its own row under the plot: inside, it hid the curves (an
        # accuracy of 1.0 runs along the top edge, where a corner legend would be)
        legend = pg.LegendItem(colCount=2, labelTextColor=theme.TEXT, verSpacing=-6)
        self.canvas.addItem(legend, row=1, col=col)
        plot.legend = legend  # curves added with a name are listed in it
        plot.setMenuEnabled(True)
        # a long run has more points than the plot has pixels: draw about one per pixel
        plot.setDownsampling(auto=True, mode="peak")
        plot.setClipToView(True)
        return plot

    # -- data ------------------------------------------------------------------------------

    def reset(self, metric_nodes: set[str] = frozenset()) -> None:
        """Forget the last run's curves (a new run starts)."""
        self.metric_nodes = set(metric_nodes)
        for plot in (self.loss_plot, self.metric_plot, self.step_plot):
            plot.clear()
            if plot.legend is not None:
                plot.legend.clear()
        self.series.clear()
        self._curves.clear()
        self._dirty.clear()

    def on_event(self, event) -> None:
        if isinstance(event, RunStarted):
            self.steps_per_epoch = max(1, event.steps_per_epoch)
        elif isinstance(event, EpochEnded):
            self.add_epoch(event)
        elif isinstance(event, StepEnded) and event.loss is not None:
            x = (event.epoch - 1) * self.steps_per_epoch + event.step
            self._add(self.step_plot, "train loss (step)", x, event.loss, dashed=False)

    def add_epoch(self, event: EpochEnded) -> None:
        for split, values in (("train", event.train), ("val", event.val)):
            for key, value in values.items():
                if not isinstance(value, int | float):
                    continue
                metric = key in self.metric_nodes or key.split(".")[0] in self.metric_nodes
                if not metric and key != "loss" and len(self._loss_keys(values)) < 2:
                    continue  # a single loss node repeats the total: plot it once
                plot = self.metric_plot if metric else self.loss_plot
                self._add(plot, f"{split} {key}", event.epoch, float(value),
                          dashed=split == "val")

    def _loss_keys(self, values: dict) -> list[str]:
        return [k for k in values if k != "loss" and k not in self.metric_nodes
                and k.split(".")[0] not in self.metric_nodes]

    def _add(self, plot: pg.PlotItem, name: str, x: float, y: float, dashed: bool) -> None:
        xs, ys = self.series.setdefault(name, ([], []))
        xs.append(x)
        ys.append(y)
        if name not in self._curves:
            color = theme.PLOT_COLORS[self._color_index(name) % len(theme.PLOT_COLORS)]
            pen = pg.mkPen(color, width=2, style=pg.QtCore.Qt.PenStyle.DashLine if dashed
                           else pg.QtCore.Qt.PenStyle.SolidLine)
            self._curves[name] = plot.plot([], [], pen=pen, name=name)
        self._dirty.add(name)

    def _color_index(self, name: str) -> int:
        # train and val of one quantity share a colour; the line style tells them apart
        quantity = name.split(" ", 1)[1]
        seen = list(dict.fromkeys(n.split(" ", 1)[1] for n in self.series))
        return seen.index(quantity)

    def redraw(self) -> None:
        dirty, self._dirty = self._dirty, set()
        for name in dirty:
            xs, ys = self.series[name]
            self._curves[name].setData(xs, ys)
        if dirty:  # what painting cost since the last redraw sets the pace of the next
            share = self.canvas.take_paint_seconds() / PAINT_SHARE * 1000
            self._timer.setInterval(int(min(MAX_REDRAW_MS, max(REDRAW_MS, share))))

    def points(self, name: str) -> int:
        return len(self.series.get(name, ([], []))[0])
