"""What every tab of the node view dock is, and the trajectory tab that two kinds share.

A `View` is one tab: a pyqtgraph canvas with controls above and a status line below, and
the helpers to draw plots and images on it; live tabs draw probe frames (`show_frames`),
model tabs the model (`show_model`). `TrajectoryView` draws what a procedure emits (sample
grids, chains, a forecast); a regularisation path (`node_views_trees`) is drawn the same
way. `node_views` chooses the tabs for a node and feeds them; the views for special kinds
of block live beside it (`node_views_boxes`, `node_views_trees`) and build on this module.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QRectF
from PySide6.QtWidgets import QHBoxLayout, QLabel, QVBoxLayout, QWidget

from nodegraph.gui.base import theme
from nodegraph.gui.base.later import later

if TYPE_CHECKING:
    from nodegraph.runtime.compile import Compiled
    from nodegraph.runtime.probe_frames import ProbeFrame

vd = later("nodegraph.runtime.viewdata")  # torch: imported when a view first computes

CLASS_COLORS = ("#5aa9ff", "#ff9f43", "#5cc689", "#e86a92", "#b48cf2", "#f2d24e",
                "#4ad6d6", "#c0c0c0", "#ff6b6b", "#9acd32")


def colormap(name: str) -> pg.ColorMap:
    return pg.colormap.get(name)


class View(QWidget):
    """One tab of a node's dock. Live tabs draw probe frames; model tabs the model."""

    title = ""
    live = False  # draws probe frames (show_frames)
    model = True  # draws the model (show_model)

    def __init__(self, node: str | None):
        super().__init__()
        self.node = node
        self.data: Any = None  # what was drawn last (each view its own kind), for tests
        self.canvas = pg.GraphicsLayoutWidget()
        self.status = QLabel()
        self.status.setProperty("role", "dim")
        self.status.setWordWrap(True)
        self.controls = QHBoxLayout()
        layout = QVBoxLayout(self)
        layout.setContentsMargins(2, 2, 2, 2)
        layout.addLayout(self.controls)
        layout.addWidget(self.canvas, 1)
        layout.addWidget(self.status)

    def show_frames(self, frames: list[ProbeFrame]) -> None:
        pass

    def show_model(self, compiled: Compiled) -> None:
        pass

    def plot(self, row: int = 0, col: int = 0, title: str = "", x: str = "", y: str = ""
             ) -> pg.PlotItem:
        p = self.canvas.addPlot(row=row, col=col, title=title)
        p.showGrid(x=True, y=True, alpha=0.12)
        if x:
            p.setLabel("bottom", x)
        if y:
            p.setLabel("left", y)
        return p

    def picture(self, row: int, col: int, title: str) -> pg.PlotItem:
        """A plot for an image or a panel whose axes say nothing (pixels, shared scales)."""
        plot = self.plot(row, col, title)
        plot.hideAxis("left")
        plot.hideAxis("bottom")
        return plot

    def image(self, plot: pg.PlotItem, img: np.ndarray, rect: QRectF | None = None,
              cmap: str = "viridis", levels: tuple[float, float] | None = None,
              square: bool = True) -> pg.ImageItem:
        """`img` (rows from the top) in `plot`, covering `rect` (default: one unit a pixel)."""
        item = pg.ImageItem(axisOrder="row-major")
        item.setColorMap(colormap(cmap))
        finite = img[np.isfinite(img)]
        lo, hi = levels or ((float(finite.min()), float(finite.max())) if finite.size else (0, 1))
        item.setImage(img, levels=(lo, hi if hi > lo else lo + 1))
        plot.addItem(item)
        if rect is not None:
            item.setRect(rect)
        if square:
            plot.setAspectLocked(True)
            plot.invertY(rect is None)  # pictures read top-down; value axes bottom-up
        return item


class TrajectoryView(View):
    title = "Trajectory"

    def show_model(self, compiled: Compiled) -> None:
        t = vd.procedure_trajectory(compiled, self.node)
        self.data = t
        self.canvas.clear()
        if t.kind == "images":
            rows, cols = t.images.shape[:2]
            plot = self.picture(0, 0, " · ".join(t.labels) if rows > 1 else
                                f"{t.labels[0]} … {t.labels[-1]}" if t.labels[0].startswith("α")
                                else f"{cols} samples")
            tiles = t.images.reshape(rows * cols, *t.images.shape[2:])
            self.image(plot, vd.image_grid(tiles, cols=cols if rows > 1 else
                                           int(np.ceil(np.sqrt(cols)))), cmap="CET-L1")
            what = "one row per chain, one column per kept step" if rows > 1 else "samples"
            self.status.setText(f"{what}, on the current weights")
        elif t.kind == "points":
            everything = np.concatenate(t.points)
            lo, hi = everything.min(0), everything.max(0)
            for j, (label, pts) in enumerate(zip(t.labels, t.points, strict=True)):
                plot = self.picture(j // 5, j % 5, label)  # one scale for all: said below
                plot.addItem(pg.ScatterPlotItem(pts[:, 0], pts[:, 1], size=3, pen=None,
                                                brush=theme.PLOT_COLORS[0]))
                plot.setXRange(lo[0], hi[0])
                plot.setYRange(lo[1], hi[1])
            self.status.setText(f"the reverse chain from noise (first) to samples (last); "
                                f"every panel x {lo[0]:.3g} … {hi[0]:.3g}, y {lo[1]:.3g} … "
                                f"{hi[1]:.3g}")
        elif t.kind == "series":
            plot = self.plot(0, 0, "forecast", "step")
            plot.addLegend()
            for i, (name, ys) in enumerate(t.series.items()):
                plot.plot(ys, name=name, pen=pg.mkPen(theme.PLOT_COLORS[i], width=2))
        else:
            self.canvas.clear()
            self.status.setText(t.text)
