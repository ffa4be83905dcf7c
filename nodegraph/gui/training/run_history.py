"""The Runs panel: every finished or stopped run of the open graph, and any two compared.

A dock beside the Training panel lists the runs (newest last); picking two (Ctrl+click)
overlays their loss and metric curves, one colour per run (train solid, val dashed, the
legend naming the run), and a table lists the settings and params that differed. The
records and the diff come from `nodegraph.runtime.run_history`, which keeps them in
NAME.runs.json beside the graph file; an unsaved graph keeps its runs in memory until it is
saved. The panel records a run from the runner's events: the settings of the graph copy the
runner trains (taken when Train was pressed, so edits during the run do not count), and the
history of the RunFinished event. The examples that come with nodegraph keep their runs in
memory (nothing is written into the installation) until saved elsewhere.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path

import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHeaderView,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QPushButton,
    QSplitter,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from nodegraph.gui.base import theme
from nodegraph.gui.document import files
from nodegraph.model.errors import NodegraphError
from nodegraph.model.events import RunFinished, RunStarted
from nodegraph.runtime.run_history import (
    STRUCTURE,
    RunHistory,
    RunRecord,
    definition,
    diff,
    history_path,
)

MAX_OVERLAID = 4  # more curves than this in one plot read as noise


LEGEND_LINE = 22  # px of one line of the runs' legend

class RunHistoryPanel(QWidget):
    """The list of runs, their overlaid curves and the table of what differed."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self.history = RunHistory()
        self.list = QListWidget()
        self.list.setSelectionMode(QAbstractItemView.SelectionMode.ExtendedSelection)
        self.list.setToolTip("Ctrl+click a second run to compare the two")
        self.list.itemSelectionChanged.connect(self.compare_selected)
        self.hint = QLabel()
        self.hint.setWordWrap(True)
        self.forget_button = QPushButton("Forget selected")
        self.forget_button.clicked.connect(self.forget_selected)
        self.table = QTableWidget(0, 0)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Stretch)
        self.table.setToolTip("the settings and params that differed between the runs")
        left = QSplitter(Qt.Orientation.Vertical)  # the runs above what set them apart
        top = QWidget()
        column = QVBoxLayout(top)
        column.setContentsMargins(0, 0, 0, 0)
        column.setSpacing(2)
        column.addWidget(self.list)
        column.addWidget(self.hint)
        column.addWidget(self.forget_button)
        left.addWidget(top)
        left.addWidget(self.table)
        self.canvas = pg.GraphicsLayoutWidget()
        self.canvas.setBackground(theme.BASE)
        self.canvas.ci.setContentsMargins(2, 2, 2, 2)
        self.loss_plot = self._plot("Loss per epoch", 0)
        self.metric_plot = self._plot("Metrics per epoch", 1)
        # one legend for both plots, a line per run: its colour, name and what set it apart
        self.legend = pg.LegendItem(colCount=2, labelTextColor=theme.TEXT, verSpacing=-6)
        self.canvas.addItem(self.legend, row=1, col=0, colspan=2)
        # side by side: a dock at the bottom of the window is wide and short
        split = QSplitter(Qt.Orientation.Horizontal)
        split.addWidget(left)
        split.addWidget(self.canvas)
        split.setStretchFactor(1, 1)
        split.setSizes([240, 700])
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(split)
        self.shown: list[RunRecord] = []  # the runs whose curves are drawn
        self.curves: dict[str, pg.PlotDataItem] = {}  # "run N split key" -> curve
        self.set_history(self.history)

    def apply_theme(self) -> None:
        """The theme's colours (View > Theme): background and legend text."""
        self.canvas.setBackground(theme.BASE)
        self.legend.setLabelTextColor(theme.TEXT)
        self.compare_selected()

    def _plot(self, title: str, col: int) -> pg.PlotItem:
        plot = self.canvas.addPlot(row=0, col=col, title=title)
        plot.showGrid(x=True, y=True, alpha=0.15)
        plot.setLabel("bottom", "epoch")
        return plot

    # -- the list --------------------------------------------------------------------------

    def set_history(self, history: RunHistory) -> None:
        self.history = history
        self.list.clear()  # another graph's runs: nothing of the last one stays picked
        self.refresh()

    def refresh(self) -> None:
        """List the history's runs again, keeping which are selected."""
        chosen = {r.number for r in self.selected()}
        self.list.blockSignals(True)
        self.list.clear()
        for run in self.history.runs:
            item = QListWidgetItem(describe(run))
            item.setData(Qt.ItemDataRole.UserRole, run.number)
            item.setToolTip(f"{run.name}: started {run.started}, {run.status} after "
                            f"{run.epochs} epoch(s) in {run.seconds:.1f} s")
            self.list.addItem(item)
            item.setSelected(run.number in chosen)
        self.list.blockSignals(False)
        self.compare_selected()

    def selected(self) -> list[RunRecord]:
        numbers = sorted(i.data(Qt.ItemDataRole.UserRole) for i in self.list.selectedItems())
        return [r for n in numbers if (r := self.history.get(n)) is not None]

    def item(self, number: int) -> QListWidgetItem | None:
        for row in range(self.list.count()):
            if self.list.item(row).data(Qt.ItemDataRole.UserRole) == number:
                return self.list.item(row)
        return None

    def forget_selected(self) -> None:
        numbers = {r.number for r in self.selected()}
        if numbers:
            try:
                self.history.remove(numbers)
            except OSError as e:  # the folder went read-only: forgotten here, not in the file
                self.hint.setText(f"The run history could not be written: {e}")
            self.refresh()

    # -- the comparison --------------------------------------------------------------------

    def compare_selected(self) -> None:
        runs = self.selected()[-MAX_OVERLAID:]
        self.shown = runs
        self._draw(runs)
        self._fill_table(runs)
        if not self.history.runs:
            self.hint.setText("Finished and stopped runs are listed here.")
        elif len(runs) < 2:
            self.hint.setText("Ctrl+click a second run to compare.")
        else:
            self.hint.setText("Train solid, val dashed.")
        self.forget_button.setEnabled(bool(runs))

    def _draw(self, runs: list[RunRecord]) -> None:
        for plot in (self.loss_plot, self.metric_plot):
            plot.clear()
        self.legend.clear()
        self.curves.clear()
        rows = diff(runs) if len(runs) > 1 else []
        for i, run in enumerate(runs):
            color = theme.PLOT_COLORS[i % len(theme.PLOT_COLORS)]
            metrics = set(run.extra.get("metrics", ()))
            for split, key in run.keys():
                metric = key.split(".")[0] in metrics
                if key != "loss" and not metric:
                    continue  # a graph's partial losses: its own plots show them
                style = Qt.PenStyle.DashLine if split == "val" else Qt.PenStyle.SolidLine
                plot = self.metric_plot if metric else self.loss_plot
                xs, ys = run.series(split, key)
                self.curves[f"{run.name} {split} {key}"] = plot.plot(
                    xs, ys, pen=pg.mkPen(color, width=2, style=style))
            sample = pg.PlotDataItem(pen=pg.mkPen(color, width=2))
            self.legend.addItem(sample, legend_label(run, [(k, vs[i]) for k, vs in rows]))
        # pyqtgraph's legend moves itself to its parent's corner, over the plots' titles,
        # when it resizes for new lines: its row keeps their height, and the grid places
        # it again
        lines = -(-len(runs) // 2)  # two runs per line
        grid = self.canvas.ci.layout
        grid.setRowFixedHeight(1, LEGEND_LINE * lines)
        grid.invalidate()
        grid.activate()
        for plot in (self.loss_plot, self.metric_plot):
            plot.enableAutoRange()

    def _fill_table(self, runs: list[RunRecord]) -> None:
        self.table.clear()
        if len(runs) < 2:
            self.table.setRowCount(0)
            self.table.setColumnCount(0)
            return
        rows = diff(runs)
        self.table.setColumnCount(len(runs))
        self.table.setHorizontalHeaderLabels([r.name for r in runs])
        shown = rows or [("(no setting differed)", [""] * len(runs))]
        self.table.setRowCount(len(shown))
        self.table.setVerticalHeaderLabels([k for k, _ in shown])
        for row, (_, values) in enumerate(shown):
            for col, value in enumerate(values):
                self.table.setItem(row, col, QTableWidgetItem(format_value(value)))

    def differences(self) -> dict[str, list[str]]:
        """What the table shows: setting -> the text in each run's column."""
        return {_text(self.table.verticalHeaderItem(r)):
                [_text(self.table.item(r, c)) for c in range(self.table.columnCount())]
                for r in range(self.table.rowCount())}


def describe(run: RunRecord) -> str:
    """One line for the list: name, time, length, end, final loss."""
    when = run.started[11:16] if len(run.started) >= 16 else run.started
    loss = run.final.get("val", {}).get("loss", run.final.get("train", {}).get("loss"))
    numbers = f" · loss {loss:.4g}" if isinstance(loss, int | float) else ""
    end = "" if run.status == "finished" else f" · {run.status}"
    return f"{run.name} · {when} · {run.epochs} ep{numbers}{end}"


def legend_label(run: RunRecord, settings: list[tuple[str, object]]) -> str:
    """The run's name and, for the first two settings that set it apart, their values."""
    parts = [f"{k} {format_value(v)}" for k, v in settings[:2] if k != STRUCTURE]
    return run.name + (f" ({', '.join(parts)})" if parts else "")


def _text(item: QTableWidgetItem | None) -> str:
    return item.text() if item is not None else ""


def format_value(value) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def shipped(path: str) -> bool:
    """A graph of the examples folder that comes with nodegraph: its runs are kept in memory,
    never written into the installation (Save As elsewhere keeps them in a file)."""
    return Path(path).resolve().parent == files.examples_dir()


class RunRecorder:
    """Records the window's runs in the history of the open graph and keeps the panel's
    history that of the open graph (loaded when a file opens, moved on Save As)."""

    def __init__(self, window, panel: RunHistoryPanel):
        self.window, self.panel = window, panel
        self._pending_load = True  # a graph was opened: its file names the history
        self._run: tuple | None = None  # the history, settings, start of the run going
        doc = window.doc
        doc.graph_replaced.connect(self._graph_replaced)
        doc.path_changed.connect(self._path_changed)
        window.runner.listen(self.on_event, RunStarted, RunFinished)
        self._path_changed()

    def _graph_replaced(self) -> None:
        self._pending_load = True  # the new path follows (Document.set_graph)

    def _path_changed(self) -> None:
        path = self.window.doc.path
        if self._pending_load:
            self._pending_load = False
            history = RunHistory()
            if path and not shipped(path):
                try:
                    history = RunHistory(history_path(path))
                except NodegraphError as e:  # a broken file stays as it is: runs in memory
                    self.window.notify(str(e))
            self.panel.set_history(history)
        elif path and not shipped(path):  # Save As: the runs go with the graph
            self.panel.history.attach(history_path(path))
            self.panel.refresh()

    def on_event(self, event) -> None:
        if isinstance(event, RunStarted):
            graph = self.window.runner.graph
            if graph is None:
                return
            started = datetime.now(UTC).isoformat(timespec="seconds")
            metrics = sorted(self.window.plots.metric_nodes)
            self._run = (self.panel.history, definition(graph), started, time.monotonic(),
                         metrics, graph)
        elif isinstance(event, RunFinished) and self._run is not None:
            history, settings, started, began, metrics, graph = self._run
            self._run = None
            try:
                history.add(graph, started, time.monotonic() - began, event.history,
                            event.final, stopped_early=event.stopped_early,
                            cancelled=event.cancelled, settings=settings,
                            extra={"metrics": metrics})
            except OSError as e:  # a read-only folder: the run stays listed in memory
                self.window.notify(f"The run history could not be written: {e}")
            if history is self.panel.history:
                self.panel.refresh()


def install(window) -> RunRecorder:
    """The Runs dock beside the Training panel, recording the window's runs."""
    panel = RunHistoryPanel()
    window.add_dock("runs", "Runs", panel, Qt.DockWidgetArea.BottomDockWidgetArea,
                    tab_with="plots")
    window.docks["plots"].raise_()
    window.run_history = panel
    return RunRecorder(window, panel)
