"""An empty plot says nothing it does not know: no 0.2 ... 0.8 axes before the first
point, and its hint wrapped inside the plot, not cut off at its edges."""

from __future__ import annotations

from nodegraph.gui.base import theme
from nodegraph.gui.base.application import application
from nodegraph.gui.training.plots import TrainingPlots
from nodegraph.model.events import EpochEnded


def _values_shown(plot) -> bool:
    return all(plot.getAxis(n).style["showValues"] for n in ("left", "bottom"))


def test_empty_plots_show_no_numbers_and_a_hint_that_fits(qtbot):
    theme.apply(application())
    plots = TrainingPlots()
    qtbot.addWidget(plots)
    plots.resize(700, 250)  # a folded-open bottom panel: each plot about 220 px wide
    plots.show()
    qtbot.waitExposed(plots)
    plots.reset(metric_nodes=())
    qtbot.wait(50)
    for plot in (plots.loss_plot, plots.metric_plot, plots.step_plot):
        assert not _values_shown(plot)
    vb = plots.metric_plot.vb
    hint = plots.metric_hint
    assert hint.isVisible()
    shown = hint.mapRectToItem(vb, hint.boundingRect())
    assert vb.rect().contains(shown), (vb.rect(), shown)
    plots.add_epoch(EpochEnded(epoch=1, epochs=3, train={"loss": 0.7}, val={}, lr={},
                               seconds=0.1))
    plots.redraw()
    assert _values_shown(plots.loss_plot)  # a point: its numbers mean something now
    assert not _values_shown(plots.metric_plot)
    plots.reset()
    assert not _values_shown(plots.loss_plot)
