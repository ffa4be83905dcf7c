"""Preview: one node's output for one batch, with untrained and trained weights."""

from __future__ import annotations

import pytest
import torch
from PySide6.QtCore import QPointF

from nodegraph.gui.shell import main_window
from nodegraph.gui.training.preview import image_of, table_of


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
    assert image_of(torch.zeros(2, 1, 8, 8)).shape == (8, 17)  # two side by side
    assert image_of(torch.zeros(2, 3, 8, 8)).shape == (8, 17, 3)
    batch = torch.arange(20 * 3 * 4 * 5, dtype=torch.float32).reshape(20, 3, 4, 5)
    grid = image_of(batch)  # the first 16 of 20, 4 x 4
    assert grid.shape == (4 * 5 - 1, 4 * 6 - 1, 3)
    assert torch.equal(grid[5:9, 6:11], batch[5].permute(1, 2, 0))  # row 1, column 1
    assert image_of(torch.zeros(2, 10)) is None
    assert table_of(torch.tensor(1.5)).shape == (1, 1)
    assert table_of(torch.zeros(5, 2, 3)).shape == (5, 6)


def test_an_augmented_image_folder_previews_as_a_grid_of_samples(window):
    from pathlib import Path

    folder = Path(__file__).resolve().parents[2] / "examples" / "data" / "shapes_sample"
    data = window.edit_actions.add_block("data.ImageFolder", QPointF(0, 0))
    flip = window.edit_actions.add_block("augment.HorizontalFlip", QPointF(-200, 0))
    window.doc.set_param(data, "path", str(folder))
    window.doc.set_param(data, "size", 16)
    window.doc.set_param(data, "batch_size", 9)
    assert window.doc.connect((flip, "transform"), (data, "augment"))
    window.scene.select_nodes([data])
    window.preview_selected()
    assert window.preview.shape.text().startswith("shape (9, 3, 16, 16)")
    assert window.preview.showing_image  # 9 augmented samples, 3 x 3
