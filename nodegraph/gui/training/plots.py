"""Live training plots: loss and metrics per epoch (train vs val) and loss per step.

Points arrive with the run's events and are kept in plain lists (`series`), so a test can
read what the plot received; the curves are redrawn at most four times a second however
fast the events come, and only the curves that changed (redrawing a plot repaints its axes,
the costliest part of a plot). Painting takes the GUI thread from the canvas and, on a
machine with few cores, CPU from the training process (or, for a run in a thread, the
interpreter lock), so the redraw interval stretches (up to four seconds) to keep painting
under 1.5% of the time: on a slow or busy machine a paint can take 100 ms. Axes are the
costliest part of a paint, so while a run lasts they hold still: x spans the run's epochs
(steps) from its start, y the values seen so far rounded out to round numbers, and each
axis is kept as a pixmap, redrawn only when its range moves. A person who pans or zooms a
plot takes it over until the next run; at the run's end the plots fit their curves. Which
numbers are metrics and which are losses comes from the graph (metric blocks' node ids),
never from guessing at names.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable

import pyqtgraph as pg
from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QGraphicsItem, QVBoxLayout, QWidget

from nodegraph.gui.base import theme
from nodegraph.model.events import EpochEnded, RunFinished, RunStarted, StepEnded

REDRAW_MS = 250  # a person sees no difference; the GUI thread keeps its time
MAX_REDRAW_MS = 4000
PAINT_SHARE = 0.015  # of the wall time, at most, spent painting plots


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


METRIC_HINT = "connect a metric block to see metrics here"


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
        # said where the metrics would be, while the graph has no metric block: an empty
        # plot alone reads as "broken" (parented to the view box: it stays put, in pixels)
        self.metric_hint = pg.TextItem(METRIC_HINT, color=theme.TEXT_DIM, anchor=(0.5, 0.5))
        self.metric_hint.setParentItem(self.metric_plot.vb)
        self.metric_plot.vb.sigResized.connect(self._place_hint)
        self._ticks_shown: dict[pg.PlotItem, bool] = {}
        for plot in (self.loss_plot, self.metric_plot, self.step_plot):
            self._show_ticks(plot, False)  # an empty plot's 0.2 ... 0.8 would mean nothing
        self.series: dict[str, tuple[list, list]] = {}
        self._curves: dict[str, pg.PlotDataItem] = {}
        self.metric_nodes: set[str] = set()
        self.steps_per_epoch = 1
        self._dirty: set[str] = set()
        self._routes: dict[tuple, list[tuple]] = {}  # an epoch's keys -> where each goes
        # plots whose axes hold still during a run -> the y range they were given
        self._held: dict[pg.PlotItem, tuple[float, float] | None] = {}
        self._y_seen: dict[str, tuple[float, float, int]] = {}  # name -> lo, hi, points read
        self._timer = QTimer(self, interval=REDRAW_MS)
        self._timer.timeout.connect(self.redraw)
        self._timer.start()

    def restyle(self) -> None:
        """Background, axes, ticks, tick labels, titles and legends in the theme's colours
        (after a switch between the dark and the light theme)."""
        pg.setConfigOptions(background=theme.BASE, foreground=theme.TEXT_DIM)
        self.canvas.setBackground(theme.BASE)
        pen = pg.mkPen(theme.TEXT_DIM)
        for plot in (self.loss_plot, self.metric_plot, self.step_plot):
            for name in ("left", "bottom"):
                axis = plot.getAxis(name)
                axis.setPen(pen)
                axis.setTickPen(pen)
                axis.setTextPen(pen)  # the tick labels and the axis label
            plot.setTitle(plot.titleLabel.text, color=theme.TEXT_DIM)
            plot.legend.setLabelTextColor(theme.TEXT)
        self.metric_hint.setColor(theme.TEXT_DIM)

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
        plot.vb.sigRangeChangedManually.connect(lambda *_: self._held.pop(plot, None))
        for name in ("left", "bottom"):  # repainted from a pixmap until their ticks change
            plot.getAxis(name).setCacheMode(QGraphicsItem.CacheMode.DeviceCoordinateCache)
        return plot

    def _show_ticks(self, plot: pg.PlotItem, shown: bool) -> None:
        """The axes' numbers only while the plot has points."""
        if self._ticks_shown.get(plot) == shown:
            return
        self._ticks_shown[plot] = shown
        for name in ("left", "bottom"):
            plot.getAxis(name).setStyle(showValues=shown)

    def _place_hint(self, *_) -> None:
        """Centred in the empty plot, wrapped to its width (a narrow plot cut it off)."""
        box = self.metric_plot.vb.rect()
        self.metric_hint.setTextWidth(max(60.0, box.width() - 12))
        self.metric_hint.setPos(box.center())

    def show_metric_hint(self, shown: bool) -> None:
        """Say "connect a metric block…" on the empty metrics plot (or stop saying it)."""
        self.metric_hint.setVisible(shown)
        self._place_hint()

    # -- data ------------------------------------------------------------------------------

    def reset(self, metric_nodes: Iterable[str] = frozenset()) -> None:
        """Forget the last run's points (a new run starts). Its curves are emptied and kept
        for the new run's numbers of the same names (making a curve and its legend entry
        takes milliseconds); those the new run does not plot go when it ends."""
        self.metric_nodes = set(metric_nodes)
        self.show_metric_hint(not self.metric_nodes)
        for curve in self._curves.values():
            curve.setData([], [])
        for plot in (self.loss_plot, self.metric_plot, self.step_plot):
            self._show_ticks(plot, False)
        self.series.clear()
        self._dirty.clear()
        self._routes.clear()
        self._y_seen.clear()
        self._release()

    def on_event(self, event) -> None:
        kind = type(event)  # a fast model sends thousands a second: the cheapest test first
        if kind is StepEnded:
            if event.loss is not None:
                x = (event.epoch - 1) * self.steps_per_epoch + event.step
                self._add(self.step_plot, "train loss (step)", x, event.loss, dashed=False)
        elif kind is EpochEnded:
            self.add_epoch(event)
        elif kind is RunStarted:
            self.steps_per_epoch = max(1, event.steps_per_epoch)
            self._hold(event)
        elif kind is RunFinished:
            self.redraw()  # the run's last points, now: not at the throttled next redraw
            self._release()
            for name in [n for n in self._curves if n not in self.series]:
                self._drop_curve(name)

    def _hold(self, event: RunStarted) -> None:
        """Fix the x axes to the run's length; y follows the values in round steps."""
        first, last = event.start_epoch, max(event.start_epoch + 1, event.epochs)
        steps = ((first - 1) * self.steps_per_epoch, last * self.steps_per_epoch)
        for plot, (lo, hi) in ((self.loss_plot, (first, last)),
                               (self.metric_plot, (first, last)), (self.step_plot, steps)):
            plot.disableAutoRange()
            plot.setXRange(lo, hi, padding=0.02)
            self._held[plot] = None

    def _release(self) -> None:
        for plot in self._held:
            plot.enableAutoRange()
        self._held.clear()

    def add_epoch(self, event: EpochEnded) -> None:
        keys = (tuple(event.train), tuple(event.val))
        routes = self._routes.get(keys)
        if routes is None:  # once per run: which curve each number goes to
            routes = self._routes[keys] = [
                (split, key, *route) for split, values in (("train", event.train),
                                                           ("val", event.val))
                for key in values if (route := self._route(split, key, values))]
        for split, key, plot, name, dashed in routes:
            value = (event.train if split == "train" else event.val)[key]
            if isinstance(value, int | float):
                self._add(plot, name, event.epoch, float(value), dashed)

    def _route(self, split: str, key: str, values: dict) -> tuple | None:
        """(plot, curve name, dashed) for one number of an epoch, or None: not plotted."""
        metric = key in self.metric_nodes or key.split(".")[0] in self.metric_nodes
        if not metric and key != "loss" and len(self._loss_keys(values)) < 2:
            return None  # a single loss node repeats the total: plot it once
        plot = self.metric_plot if metric else self.loss_plot
        return plot, f"{split} {key}", split == "val"

    def _loss_keys(self, values: dict) -> list[str]:
        return [k for k in values if k != "loss" and k not in self.metric_nodes
                and k.split(".")[0] not in self.metric_nodes]

    def _add(self, plot: pg.PlotItem, name: str, x: float, y: float, dashed: bool) -> None:
        series = self.series.get(name)
        if series is None:
            series = self.series[name] = ([], [])
            self._curve(plot, name, dashed)
        series[0].append(x)
        series[1].append(y)
        self._dirty.add(name)

    def _curve(self, plot: pg.PlotItem, name: str, dashed: bool) -> None:
        """The curve `name` on `plot`: the last run's, if it had one there, or a new one."""
        color = theme.PLOT_COLORS[self._color_index(name) % len(theme.PLOT_COLORS)]
        pen = pg.mkPen(color, width=2, style=pg.QtCore.Qt.PenStyle.DashLine if dashed
                       else pg.QtCore.Qt.PenStyle.SolidLine)
        curve = self._curves.get(name)
        if curve is not None and curve.getViewBox() is plot.vb:
            curve.setPen(pen)
            return
        if curve is not None:
            self._drop_curve(name)
        self._curves[name] = plot.plot([], [], pen=pen, name=name)

    def _drop_curve(self, name: str) -> None:
        curve = self._curves.pop(name)
        for plot in (self.loss_plot, self.metric_plot, self.step_plot):
            if curve.getViewBox() is plot.vb:
                plot.removeItem(curve)
                plot.legend.removeItem(curve)

    def _color_index(self, name: str) -> int:
        # train and val of one quantity share a colour; the line style tells them apart
        quantity = name.split(" ", 1)[1]
        seen = list(dict.fromkeys(n.split(" ", 1)[1] for n in self.series))
        return seen.index(quantity)

    def redraw(self) -> None:
        dirty, self._dirty = self._dirty, set()
        for name in dirty:
            xs, ys = self.series[name]
            curve = self._curves[name]
            curve.setData(xs, ys)
            _mark_a_lone_point(curve, len(xs) == 1)
            for plot in (self.loss_plot, self.metric_plot, self.step_plot):
                if curve.getViewBox() is plot.vb and xs:
                    self._show_ticks(plot, True)
        for plot in list(self._held):
            self._follow_y(plot)
        if dirty:  # what painting cost since the last redraw sets the pace of the next
            share = self.canvas.take_paint_seconds() / PAINT_SHARE * 1000
            self._timer.setInterval(int(min(MAX_REDRAW_MS, max(REDRAW_MS, share))))

    def _follow_y(self, plot: pg.PlotItem) -> None:
        """Widen a held plot's y range to its values, in round steps, so it rarely moves."""
        lo, hi = math.inf, -math.inf
        for name, curve in self._curves.items():
            if curve.getViewBox() is not plot.vb or name not in self.series:
                continue
            ys = self.series[name][1]
            seen_lo, seen_hi, read = self._y_seen.get(name, (math.inf, -math.inf, 0))
            new = [y for y in ys[read:] if math.isfinite(y)]
            if new:
                seen_lo, seen_hi = min(seen_lo, *new), max(seen_hi, *new)
            self._y_seen[name] = (seen_lo, seen_hi, len(ys))
            lo, hi = min(lo, seen_lo), max(hi, seen_hi)
        given = self._held[plot]
        if lo > hi or (given is not None and given[0] <= lo and hi <= given[1]):
            return
        if given is not None:  # grow by the range's own span at least: few moves a run
            span = given[1] - given[0]
            lo, hi = min(lo, given[0] - span if lo < given[0] else given[0]), \
                max(hi, given[1] + span if hi > given[1] else given[1])
        self._held[plot] = given = round_out(lo, hi)
        plot.setYRange(*given, padding=0.02)

    def points(self, name: str) -> int:
        return len(self.series.get(name, ([], []))[0])


def _mark_a_lone_point(curve: pg.PlotDataItem, lone: bool) -> None:
    """A line through one point draws nothing (a 1-epoch run left its plots empty): a
    series of one point shows it as a dot of the line's colour."""
    if lone == (curve.opts.get("symbol") is not None):
        return
    if lone:
        color = curve.opts["pen"].color()
        curve.setSymbol("o")
        curve.setSymbolSize(7)
        curve.setSymbolBrush(color)
        curve.setSymbolPen(color)
    else:
        curve.setSymbol(None)


def round_out(lo: float, hi: float) -> tuple[float, float]:
    """[lo, hi] widened to multiples of the largest power of ten within its span, and down
    to zero for values that are at least half their range away from it (losses, shares)."""
    if 0 < lo <= hi / 2:
        lo = 0.0
    span = hi - lo or abs(hi) or 1.0
    step = 10 ** math.floor(math.log10(span))
    return math.floor(lo / step) * step, math.ceil(hi / step) * step + (step if lo == hi else 0)
