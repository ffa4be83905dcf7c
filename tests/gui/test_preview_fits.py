"""The Preview's remedy text and image grid fit their panel: a long message can be read to
its end (it scrolls, it is not cut off at the bottom), and a grid of images is shown whole."""

from __future__ import annotations

import torch

from nodegraph.gui.base import theme
from nodegraph.gui.base.application import application
from nodegraph.gui.training.preview import PreviewPanel

REMEDY = ("data.path: photos/ leads outside the graph's folder. " * 6
          + "Remedy: move the folder beside the graph, or allow it when asked. END")


def _panel(qtbot, width=360, height=260) -> PreviewPanel:
    theme.apply(application())
    panel = PreviewPanel()
    qtbot.addWidget(panel)
    panel.resize(width, height)
    panel.show()
    qtbot.waitExposed(panel)
    return panel


def test_a_long_remedy_can_be_read_to_its_end(qtbot):
    panel = _panel(qtbot)
    panel.show_message(REMEDY, "data")
    qtbot.wait(30)
    area, label = panel.message, panel.shape
    assert panel.rect().contains(area.geometry())  # the area lies inside the panel
    need = label.heightForWidth(area.viewport().width())
    bar = area.verticalScrollBar()
    # all of it shown, or the rest a scroll away (the label as tall as its text)
    assert label.height() >= need - 1
    assert need <= area.viewport().height() or bar.maximum() >= need - area.viewport().height() - 1


def test_an_image_grid_is_shown_whole_in_a_short_panel(qtbot):
    panel = _panel(qtbot, height=300)
    panel.show_outputs("data", {"x": torch.rand(16, 1, 28, 28)})
    qtbot.wait(30)
    view = panel.image.getView()
    shown = view.viewRange()
    grid = panel.image.image.shape  # (x, y) after the transpose
    assert shown[0][0] <= 0 and shown[0][1] >= grid[0] - 1
    assert shown[1][0] <= 0 and shown[1][1] >= grid[1] - 1
    assert panel.rect().contains(panel.image.geometry())
