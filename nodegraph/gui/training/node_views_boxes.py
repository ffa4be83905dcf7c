"""The node view of a detector: predicted and true boxes on test images, and how one
image's objects were assigned to predictors.

It appears on blocks whose output carries boxes (NMS, GridDecode, BoxDecode, DETRHead) in
a graph whose data block emits true boxes. Panels 1-6 draw the first test images with the
true boxes (white, dashed) and the predictions above the score threshold (coloured by
class, labelled with class and score). The last panel draws image 1 again with the
assignment: the grid and the cells responsible for each true box (YOLO's GridEncode), or
the query each true box was matched to by Hungarian matching (DETR's SetLoss), a line
from the query's box to the true box. Numbers come from `nodegraph.runtime.viewdata.detections`.

    QT_QPA_PLATFORM=offscreen python -m nodegraph.gui.training.node_views_boxes examples/x.json \
        NODE OUT.png [EPOCHS]

trains the example headless and saves a picture of this view (the README's screenshot).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QRectF, Qt
from PySide6.QtWidgets import QDoubleSpinBox

from nodegraph.gui.base.later import later
from nodegraph.gui.training.node_views_base import CLASS_COLORS, View
from nodegraph.model.types import BOXES

if TYPE_CHECKING:
    from nodegraph.runtime.compile import Compiled
    from nodegraph.runtime.viewdata import Detections

vd = later("nodegraph.runtime.viewdata")  # torch: imported on first use

SHAPE_NAMES = ("square", "disc", "triangle")  # data.Shapes' classes


def shows_boxes(compiled: Compiled, node: str) -> bool:
    """Whether `node` outputs boxes in a graph whose data holds true boxes."""
    spec = compiled.graph.registry.get(compiled.graph.nodes[node].type)
    return (any(p.type == BOXES for p in spec.outputs) and spec.kind == "op"
            and vd.boxes_source(compiled) is not None)


def _name(cls: int) -> str:
    return SHAPE_NAMES[cls] if 0 <= cls < len(SHAPE_NAMES) else f"class {cls}"


def _rect(box, pen) -> pg.PlotDataItem:
    x0, y0, x1, y1 = box
    return pg.PlotDataItem([x0, x1, x1, x0, x0], [y0, y0, y1, y1, y0], pen=pen)


class DetectionView(View):
    title = "Detections"

    def __init__(self, node: str):
        super().__init__(node)
        self.threshold = QDoubleSpinBox()
        self.threshold.setRange(0.0, 1.0)
        self.threshold.setSingleStep(0.05)
        self.threshold.setValue(0.3)
        self.threshold.setPrefix("score > ")
        self.controls.addStretch(1)
        self.controls.addWidget(self.threshold)
        self.compiled: Compiled | None = None
        self.threshold.valueChanged.connect(lambda _: self._draw())

    def show_model(self, compiled: Compiled) -> None:
        self.compiled = compiled
        self._draw()

    def _draw(self) -> None:
        if self.compiled is None:
            return
        d = vd.detections(self.compiled, self.node, min_score=self.threshold.value())
        self.data = d
        self.canvas.clear()
        for i in range(len(d.images)):
            plot = self._picture(i // 4, i % 4, f"test image {i + 1}", d.images[i])
            for box, _ in d.truth[i]:
                plot.addItem(_rect(box, pg.mkPen("w", width=1.5, style=Qt.PenStyle.DashLine)))
            for box, cls, score in d.predicted[i]:
                colour = CLASS_COLORS[cls % len(CLASS_COLORS)]
                plot.addItem(_rect(box, pg.mkPen(colour, width=2)))
                text = pg.TextItem(f"{_name(cls)} {score:.2f}", color=colour, anchor=(0, 1))
                text.setPos(box[0], box[1])
                plot.addItem(text)
        last = len(d.images)
        self._assignment(last // 4, last % 4, d)
        hits = sum(len(p) for p in d.predicted)
        truths = sum(len(t) for t in d.truth)
        self.status.setText(f"{truths} true boxes (white, dashed) and {hits} predictions "
                            f"scoring above {self.threshold.value():.2f} on the first "
                            f"{len(d.images)} test images; last panel: "
                            + ("the cell responsible for each true box" if d.grid else
                               "the query matched to each true box" if d.matches is not None
                               else "no assignment block in the graph"))

    def _picture(self, row: int, col: int, title: str, img: np.ndarray) -> pg.PlotItem:
        plot = self.picture(row, col, title)
        item = pg.ImageItem(np.ascontiguousarray(img), axisOrder="row-major",
                            levels=(0.0, 1.0))
        plot.addItem(item)
        h, w = img.shape[:2]
        item.setRect(QRectF(0, 0, w, h))
        plot.setAspectLocked(True)
        plot.invertY(True)
        plot.setRange(xRange=(0, w), yRange=(0, h), padding=0.02)
        return plot

    def _assignment(self, row: int, col: int, d: Detections) -> None:
        img = d.images[0]
        h, w = img.shape[:2]
        if d.grid:
            plot = self._picture(row, col, f"image 1: responsible cells ({d.grid}x{d.grid})",
                                 img)
            s = w / d.grid
            grid_pen = pg.mkPen((255, 255, 255, 70), width=1)
            for k in range(1, d.grid):
                plot.addItem(pg.PlotDataItem([k * s, k * s], [0, h], pen=grid_pen))
                plot.addItem(pg.PlotDataItem([0, w], [k * s, k * s], pen=grid_pen))
            for r, c, j in d.cells or []:
                box, cls = d.truth[0][j]
                colour = CLASS_COLORS[cls % len(CLASS_COLORS)]
                cell = pg.QtWidgets.QGraphicsRectItem(c * s, r * s, s, s)
                cell.setBrush(pg.mkBrush(colour + "80"))
                cell.setPen(pg.mkPen(colour, width=2))
                plot.addItem(cell)
                plot.addItem(_rect(box, pg.mkPen("w", width=1.5, style=Qt.PenStyle.DashLine)))
                cx, cy = (box[0] + box[2]) / 2, (box[1] + box[3]) / 2
                plot.addItem(pg.ScatterPlotItem([cx], [cy], size=6, brush=pg.mkBrush("w")))
        elif d.matches is not None:
            plot = self._picture(row, col, "image 1: Hungarian matching", img)
            for q, j, qbox in d.matches:
                box, cls = d.truth[0][j]
                colour = CLASS_COLORS[cls % len(CLASS_COLORS)]
                plot.addItem(_rect(box, pg.mkPen("w", width=1.5, style=Qt.PenStyle.DashLine)))
                plot.addItem(_rect(qbox, pg.mkPen(colour, width=2)))
                a = ((qbox[0] + qbox[2]) / 2, (qbox[1] + qbox[3]) / 2)
                b = ((box[0] + box[2]) / 2, (box[1] + box[3]) / 2)
                plot.addItem(pg.PlotDataItem([a[0], b[0]], [a[1], b[1]],
                                             pen=pg.mkPen(colour, width=1)))
                text = pg.TextItem(f"query {q}", color=colour, anchor=(0, 0))
                text.setPos(qbox[0], qbox[3])
                plot.addItem(text)


def _screenshot(path: str, node: str, out: str, epochs: int | None) -> None:
    from nodegraph.gui.base import theme
    from nodegraph.gui.base.application import application
    from nodegraph.model.fileformat import load
    from nodegraph.runtime.train import train

    app = application()
    theme.apply(app)
    result = train(load(path), epochs=epochs, device="cpu")
    view = DetectionView(node)
    view.resize(1100, 620)
    view.show()
    view.show_model(result.compiled)
    for _ in range(20):
        app.processEvents()
    view.grab().save(out)
    print(out, {k: round(v, 3) for k, v in result.final.get("test", {}).items()})


if __name__ == "__main__":
    import os
    import sys

    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    args = sys.argv[1:]
    _screenshot(args[0], args[1], args[2], int(args[3]) if len(args) > 3 else None)
