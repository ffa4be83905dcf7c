"""Preview: one node's output for one batch, with untrained and trained weights."""

from __future__ import annotations

import pytest
import torch
from PySide6.QtCore import QPointF

from nodegraph.gui import main_window
from nodegraph.gui.preview import image_of, table_of


@pytest.fixture(autouse=True)
def never_slow(monkeypatch):
    """A loaded test machine must not turn preview-on-select off."""
    monkeypatch.setattr(main_window, "SLOW_PREVIEW_S", 60.0)


def test_preview_shows_the_selected_nodes_output(xor_window):
    w = xor_window
    w.scene.select_nodes(["hidden"])  # preview follows the selection
    assert w.preview.port.currentText() == "output"
    assert w.preview.shape.text().startswith("shape (4, 4) float32")
    assert (w.preview.table.rowCount(), w.preview.table.columnCount()) == (4, 4)
    assert "initial weights" in w.preview.title.text() and not w.preview.showing_image
    w.scene.select_nodes(["data"])
    assert [w.preview.port.itemText(i) for i in range(2)] == ["x", "y"]
    assert float(w.preview.table.item(3, 0).text()) == 1.0  # the XOR inputs, in order
    w.scene.select_nodes(["accuracy"])
    assert "no tensor output" in w.preview.shape.text()


def test_preview_uses_trained_weights_after_a_run(xor_window):
    w = xor_window
    w.epochs.setValue(5)
    w.start_training()
    assert w.runner.wait(180)
    w.scene.select_nodes(["out"])
    assert "trained weights" in w.preview.title.text()
    trained = w.runner.result.compiled.module.blocks["out"].weight
    assert torch.isfinite(trained).all()


def test_image_shaped_outputs_are_drawn(window):
    node = window.edit_actions.add_block("data.Digits", QPointF(0, 0))
    window.doc.set_param(node, "layout", "image")
    window.preview_selected()
    assert window.preview.shape.text().startswith("shape (64, 1, 8, 8)")
    assert window.preview.showing_image
    assert window.preview.table.columnCount() == 32  # 64 pixels, the first 32 shown


def test_image_and_table_views_of_tensors():
    assert image_of(torch.zeros(2, 1, 8, 8)).shape == (8, 8)
    assert image_of(torch.zeros(2, 3, 8, 8)).shape == (8, 8, 3)
    assert image_of(torch.zeros(2, 10)) is None
    assert table_of(torch.tensor(1.5)).shape == (1, 1)
    assert table_of(torch.zeros(5, 2, 3)).shape == (5, 6)
