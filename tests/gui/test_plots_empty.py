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


def test_a_one_epoch_run_shows_its_points_the_moment_it_finishes(qtbot):
    """A line through one point draws nothing, and the last points waited for the next
    throttled redraw: after a 1-epoch run the plots looked empty."""
    from nodegraph.model.events import RunFinished, RunStarted, StepEnded

    theme.apply(application())
    plots = TrainingPlots()
    qtbot.addWidget(plots)
    plots.resize(700, 250)
    plots.show()
    qtbot.waitExposed(plots)
    plots.reset(metric_nodes=())
    plots.on_event(RunStarted(epochs=1, steps_per_epoch=1, start_epoch=1, device="cpu",
                              parameters=9))
    plots.on_event(StepEnded(epoch=1, step=1, steps=1, loss=0.7))
    plots.on_event(EpochEnded(epoch=1, epochs=1, train={"loss": 0.7}, val={"loss": 0.8},
                              lr={}, seconds=0.1))
    plots.on_event(RunFinished(history=[], final={}))
    for name in ("train loss", "val loss", "train loss (step)"):
        curve = plots._curves[name]
        assert len(curve.getData()[0]) == 1 and curve.opts["symbol"] == "o", name
        assert curve.opts["symbolBrush"].color() == curve.opts["pen"].color()
    image = plots.grab().toImage()
    color = plots._curves["train loss"].opts["pen"].color()
    assert any(image.pixelColor(x, y) == color for x in range(image.width())
               for y in range(image.height()))  # the dot is drawn
    plots.add_epoch(EpochEnded(epoch=2, epochs=2, train={"loss": 0.6}, val={}, lr={},
                               seconds=0.1))
    plots.redraw()
    assert plots._curves["train loss"].opts["symbol"] is None  # two points: a line again
