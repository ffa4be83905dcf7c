"""Node views of estimators and regularisation paths: the fitted tree, its pruning path,
and w(λ).

A tree estimator (estimators.DecisionTree*, RandomForest*: its first tree) gets a Tree
tab — each node a dot coloured by its majority class (or predicted value), captions with
the split, the class share and the sample count down to `LABEL_DEPTH` — and a Pruning tab:
accuracy (R² for a regressor) on every split against the cost-complexity α, with the
block's own ccp_alpha marked. A procedures.RegularizationPath block gets a Path tab: every
weight against the penalty, on a log axis. Numbers come from `nodegraph.runtime.viewdata_trees`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pyqtgraph as pg

from nodegraph.gui.base import theme
from nodegraph.gui.base.later import later
from nodegraph.gui.training.node_views_base import TrajectoryView, View

if TYPE_CHECKING:
    from nodegraph.runtime.compile import Compiled

vt = later("nodegraph.runtime.viewdata_trees")  # torch: imported on first use

LABEL_DEPTH = 3  # deeper nodes are dots only: captions would overlap


class TreeView(View):
    title = "Tree"

    def show_model(self, compiled: Compiled) -> None:
        t = vt.fitted_tree(compiled, self.node)
        self.data = t
        self.canvas.clear()
        plot = self.picture(0, 0, f"{len(t.x)} nodes, {t.leaves} leaves, depth "
                            f"{int(t.depth.max())}")
        plot.invertY(True)
        pairs = np.array([[t.x[a], t.depth[a], t.x[b], t.depth[b]] for a, b in t.edges])
        if len(pairs):
            xs = pairs[:, [0, 2]].reshape(-1)
            ys = pairs[:, [1, 3]].reshape(-1)
            plot.plot(xs, ys, connect="pairs", pen=pg.mkPen(theme.TEXT_DIM, width=1))
        if t.classifier:
            colors = [theme.PLOT_COLORS[int(v.argmax()) % len(theme.PLOT_COLORS)]
                      for v in t.value]
        else:
            v = t.value[:, 0]
            lo, hi = float(v.min()), float(v.max())
            cmap = pg.colormap.get("viridis")
            colors = [cmap.map((x - lo) / (hi - lo) if hi > lo else 0.5, mode="qcolor")
                      for x in v]
        sizes = 8 + 14 * np.sqrt(t.samples / max(int(t.samples[0]), 1))
        plot.addItem(pg.ScatterPlotItem(t.x, t.depth.astype(float), size=sizes,
                                        brush=colors, pen=pg.mkPen(theme.TEXT, width=0.5)))
        for i, label in enumerate(t.labels):
            if t.depth[i] <= LABEL_DEPTH:
                text = pg.TextItem(label, anchor=(0.5, -0.15), color=theme.TEXT)
                text.setPos(float(t.x[i]), float(t.depth[i]))
                plot.addItem(text)
        plot.setYRange(-0.5, float(t.depth.max()) + 0.8)
        plot.setXRange(float(t.x.min()) - 0.8, float(t.x.max()) + 0.8)
        forest = f" (the first of {t.trees} trees)" if t.trees > 1 else ""
        self.status.setText(f"the fitted tree{forest}: dots sized by training samples, "
                            "coloured by majority class; left branch where x[f] ≤ threshold")


class PruningView(View):
    title = "Pruning path"

    def show_model(self, compiled: Compiled) -> None:
        path = vt.pruning_path(compiled, self.node)
        self.data = path
        self.canvas.clear()
        plot = self.plot(0, 0, f"{path.metric} against the pruning strength",
                         "ccp_alpha (log10; α = 0 at the left end)", path.metric)
        plot.addLegend(offset=(-10, 10))
        xs = _log_axis(path.alphas)
        for i, (split, ys) in enumerate(path.scores.items()):
            plot.plot(xs, ys, name=split, symbol="o", symbolSize=5,
                      pen=pg.mkPen(theme.PLOT_COLORS[i], width=2),
                      symbolBrush=theme.PLOT_COLORS[i])
        plot.addItem(pg.InfiniteLine(float(_log_axis(path.alphas, path.current)[0]), angle=90,
                                     pen=pg.mkPen(theme.WARNING, style=pg.QtCore.Qt.DashLine)))
        best = {s: path.alphas[int(np.argmax(v))] for s, v in path.scores.items()}
        held = next((s for s in ("val", "test") if s in best), "train")
        self.status.setText(f"refitted for {len(path.alphas)} values of α ({path.leaves[0]} "
                            f"leaves at α = 0, {path.leaves[-1]} at the largest); best "
                            f"{held} {path.metric} at α = {best[held]:.3g}; dashed: this "
                            f"block's ccp_alpha {path.current:g}")


class WeightPathView(TrajectoryView):
    title = "Path"  # a TrajectoryView: it retrains per value, so it waits for Refresh

    def show_model(self, compiled: Compiled) -> None:
        from nodegraph.runtime.procedure import run_procedure

        if self.node is None:  # not expected: a procedure node's view
            return
        path = vt.weight_path(run_procedure(compiled, self.node))
        self.data = path
        self.canvas.clear()
        plot = self.plot(0, 0, "weights against the penalty", "penalty (log; 0 at the "
                         "left end)", "weight")
        plot.addLegend()
        xs = _log_axis(path.values)
        for j in range(path.weights.shape[1]):
            plot.plot(xs, path.weights[:, j], name=f"w{j + 1}", symbol="o", symbolSize=4,
                      pen=pg.mkPen(theme.PLOT_COLORS[j % len(theme.PLOT_COLORS)], width=2))
        self.status.setText("each weight of the model after training at each penalty "
                            "value; x is log10 of the penalty")


def _log_axis(values: list[float], value: float | None = None) -> np.ndarray:
    """log10 of `values` (or of `value` on their axis), 0 drawn a decade below the
    smallest positive value."""
    positive = [v for v in values if v > 0]
    floor = min(positive) / 10 if positive else 1e-3
    pick = values if value is None else [value]
    return np.log10([v if v > 0 else floor for v in pick])


def views_for(compiled: Compiled, node: str) -> list[View] | None:
    """The tabs for a tree estimator or a regularisation path; None for other nodes."""
    graph = compiled.graph
    kind = graph.nodes[node].type if node in graph.nodes else ""
    if kind == "procedures.RegularizationPath":
        return [WeightPathView(node)]
    if vt.is_tree(compiled.module.module_of(node)):
        views: list[View] = [TreeView(node)]
        if kind.startswith("estimators.DecisionTree"):
            views.append(PruningView(node))
        return views
    return None
