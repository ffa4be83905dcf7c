"""Preview: what one node outputs for one sample batch, without training.

The graph is compiled for inference (`for_training=False`) and the part of its forward plan
the node depends on is run on the first training batch of its data blocks, in eval mode,
without gradients; the selected
node's outputs are shown as a shape, summary numbers, a table of values and, for outputs
shaped like images ((N, C, H, W) with 1 or 3 channels, or (N, H, W)), a grid of the
batch's first 16 samples — for a data block with augmentation wired in, 16 augmented
training samples. After a run the trained weights are used, as long as the graph has not changed
since the run started. The panel never shows what no longer holds: the window refreshes
it after every change of the graph and at the end of a run, or clears it when previewing
on select is off (`mark_stale`).
"""

from __future__ import annotations

import html
import math
from typing import TYPE_CHECKING

import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QFrame,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QScrollArea,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from nodegraph.gui.base.later import later
from nodegraph.model.errors import NodegraphError
from nodegraph.model.graph import Graph

if TYPE_CHECKING:
    from nodegraph.runtime.compile import Compiled

if TYPE_CHECKING:
    import torch
else:  # torch: imported by the first preview, not before the window is drawn
    torch = later("torch")
compiler = later("nodegraph.runtime.compile")
forwarding = later("nodegraph.runtime.forward")

MAX_ROWS, MAX_COLS = 64, 32
GRID = 16  # samples of an image batch the Preview tiles


def node_outputs(graph: Graph, node: str, compiled: Compiled | None = None
                 ) -> dict[str, torch.Tensor]:
    """The outputs of `node` for the first batch, by port name (compiling `graph` if
    needed): `nodegraph.forward` limited to what the node needs. A group instance's
    outputs are read where its inner nodes put them."""
    compiled = compiled or compiler.compile_graph(graph, for_training=False)
    values = forwarding.forward(graph, compiled=compiled, nodes={node})
    if node in graph.nodes:
        spec = graph.registry.get(graph.nodes[node].type)
    else:  # a card inside a group's tab, named as the flat graph names it
        spec = compiled.report.specs[node]
    return {p.name: values[node, p.name] for p in spec.outputs if (node, p.name) in values}


def image_of(t: torch.Tensor, most: int = GRID) -> torch.Tensor | None:
    """The batch's first `most` samples tiled row by row with one-pixel gaps, as an
    (H', W') or (H', W', 3) image, when `t` is shaped like images: a data block's
    augmented samples (its training transforms run on the batch) side by side."""
    if t.ndim == 4 and t.shape[1] in (1, 3) and min(t.shape[2:]) >= 4:
        imgs = t[:most].float().permute(0, 2, 3, 1)  # (K, H, W, C)
    elif t.ndim == 3 and min(t.shape[1:]) >= 4:
        imgs = t[:most].float()[..., None]
    else:
        return None
    k, h, w, c = imgs.shape
    cols = math.ceil(math.sqrt(k))
    rows = math.ceil(k / cols)
    # gaps at the batch's minimum, so they read as background whatever the value range
    grid = torch.full((rows * (h + 1) - 1, cols * (w + 1) - 1, c), float(imgs.min()))
    for i in range(k):
        r, col = divmod(i, cols)
        grid[r * (h + 1):r * (h + 1) + h, col * (w + 1):col * (w + 1) + w] = imgs[i]
    return grid[..., 0] if c == 1 else grid


def table_of(t: torch.Tensor) -> torch.Tensor:
    """A 2-D view for the values table: samples by features (trailing dims flattened)."""
    t = t.detach().cpu()
    if t.ndim == 0:
        return t.reshape(1, 1)
    if t.ndim == 1:
        return t.reshape(-1, 1)
    return t.reshape(t.shape[0], -1)


class PreviewPanel(QWidget):
    """Shape, values and image of the selected node's output for one batch."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self.title = QLabel("Select a node and press Preview.")
        self.title.setWordWrap(True)
        self.node: str | None = None  # the node shown, if any
        self.port = QComboBox()
        self.refresh_button = QPushButton("Preview")
        self.refresh_button.setToolTip("run one batch through the graph up to this node")
        self.auto = QCheckBox("on select")
        self.auto.setChecked(True)
        self.auto.setToolTip("preview whenever one node is selected (turned off by itself "
                             "when compiling the graph is slow)")
        self.shape = QLabel()
        self.shape.setProperty("role", "dim")
        self.shape.setWordWrap(True)
        self.shape.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.shape.setAlignment(Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignLeft)
        self.table = QTableWidget()
        self._image: pg.ImageView | None = None  # made on first use: it is slow to build
        top = QHBoxLayout()
        top.addWidget(self.port, 1)
        top.addWidget(self.auto)
        top.addWidget(self.refresh_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addWidget(self.title)
        layout.addLayout(top)
        # a long message (a remedy) scrolls inside the panel rather than being cut off
        self.message = QScrollArea()
        self.message.setWidget(self.shape)
        self.message.setWidgetResizable(True)
        self.message.setFrameShape(QFrame.Shape.NoFrame)
        self.message.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        layout.addWidget(self.message)
        layout.addWidget(self.table, 1)
        layout.addStretch(0)  # with the table hidden, a message stays at the top
        self._layout = layout
        self.outputs: dict[str, torch.Tensor] = {}
        self.port.currentTextChanged.connect(self._show_port)

    @property
    def image(self) -> pg.ImageView:
        if self._image is None:
            self._image = pg.ImageView()
            self._image.ui.roiBtn.hide()
            self._image.ui.menuBtn.hide()
            self._image.setMinimumHeight(100)  # a short panel still shows the whole grid
            self._image.hide()
            self._layout.addWidget(self._image, 1)
        return self._image

    @property
    def showing_image(self) -> bool:
        return self._image is not None and not self._image.isHidden()

    def show_outputs(self, node: str, outputs: dict[str, torch.Tensor], note: str = "",
                     label: str | None = None) -> None:
        """`label`: how the title names the node (a card in a group's tab: by its path)."""
        self.outputs = outputs
        self.node = node
        self.table.show()
        self.title.setText(f"<b>{html.escape(label or node)}</b> on one training batch {note}")
        self.port.blockSignals(True)
        self.port.clear()
        self.port.addItems(list(outputs))
        self.port.blockSignals(False)
        if outputs:
            self._show_port(next(iter(outputs)))
        else:
            self.show_message(f"'{node}' has no tensor output to preview (metrics and "
                              "optimizers report numbers during training).", node)

    def show_message(self, text: str, node: str | None = None) -> None:
        """Say `text` in place of values (a message gets the table's room: never cut)."""
        self.node = node
        self.outputs = {}
        self.port.blockSignals(True)
        self.port.clear()
        self.port.blockSignals(False)
        if node is None:
            self.title.setText("Preview")
        self.shape.setText(text)
        self.shape.setToolTip(text)
        self._fit_message(True)
        self.table.hide()
        self.table.clear()
        self.table.setRowCount(0)
        self.table.setColumnCount(0)
        if self._image is not None:
            self._image.hide()

    def _fit_message(self, long: bool) -> None:
        """A message takes the room the table leaves (scrolling when longer); a shape line
        only its own height."""
        self._layout.setStretchFactor(self.message, 1 if long else 0)
        width = max(50, self.message.viewport().width() or self.width() - 8)
        need = self.shape.heightForWidth(width) if self.shape.wordWrap() else -1
        self.message.setMaximumHeight(16_777_215 if long else max(18, need + 4))

    def mark_stale(self) -> None:
        """The graph changed and no refresh follows: drop the values, say so."""
        if self.node is not None or self.outputs:
            self.show_message("The graph changed since this preview: press Preview to "
                              "run it again.")

    def _show_port(self, port: str) -> None:
        t = self.outputs.get(port)
        if t is None:
            return
        t = t.detach().cpu()
        stats = ""
        if t.numel() and (t.is_floating_point() or t.dtype in (torch.int64, torch.int32)):
            f = t.float()
            stats = (f"  mean {f.mean():.4g} · std {f.std(unbiased=False):.4g} · "
                     f"min {f.min():.4g} · max {f.max():.4g}")
        self.shape.setText(f"shape {tuple(t.shape)} {str(t.dtype).replace('torch.', '')}"
                           + stats)
        self._fit_message(False)
        self._fill_table(table_of(t))
        img = image_of(t)
        if img is not None:
            self.image.setImage(img.numpy().T if img.ndim == 2 else img.numpy().swapaxes(0, 1))
            self.image.show()
            self.table.setMaximumHeight(110)  # the grid of images gets the room
            self.image.autoRange()  # the whole grid, every row of it, in the view
        else:
            self.table.setMaximumHeight(16_777_215)
            if self._image is not None:
                self._image.hide()

    def _fill_table(self, values: torch.Tensor) -> None:
        rows, cols = min(values.shape[0], MAX_ROWS), min(values.shape[1], MAX_COLS)
        self.table.clear()
        self.table.setRowCount(rows)
        self.table.setColumnCount(cols)
        for r in range(rows):
            for c in range(cols):
                v = values[r, c].item()
                text = f"{v:.4g}" if isinstance(v, float) else str(v)
                self.table.setItem(r, c, QTableWidgetItem(text))
        self.table.resizeColumnsToContents()


def preview_error(e: Exception) -> str:
    if isinstance(e, NodegraphError):
        return str(e)
    return f"{type(e).__name__}: {e}"
