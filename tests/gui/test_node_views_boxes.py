"""The detection view in the editor: opened on a block with a boxes output, it draws the
test images with the true boxes and the predictions, and image 1's assignment (the grid
cells of YOLO's GridEncode, DETR's Hungarian matching), from `viewdata.detections`."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from nodegraph.gui.training import node_views as nv
from nodegraph.gui.training.node_views_boxes import DetectionView
from nodegraph.runtime import viewdata as vd
from nodes._detection_heads import set_match

EXAMPLES = Path(__file__).parent.parent.parent / "examples"


def open_view(make_window, name: str, node: str) -> tuple[DetectionView, object]:
    w = make_window(str(EXAMPLES / f"{name}.json"))
    w.validator.wait(60)
    dock = w.node_views.open(node)
    view = dock.view(DetectionView)
    assert view is dock.views[0]
    return view, w.node_views.compiled()[0]


def test_yolo_view_draws_images_boxes_and_the_responsible_cells(make_window):
    view, compiled = open_view(make_window, "yolo_shapes", "nms")
    d = view.data
    test = compiled.datasets["data"].tensors("test")
    assert d.images.shape == (6, 64, 64, 3)
    assert [len(t) for t in d.truth] == test["mask"][:6].sum(1).int().tolist()
    assert d.grid == 8 and len(d.cells) == len(d.truth[0])  # one cell per box of image 1
    images = [i for i in view.canvas.scene().items() if isinstance(i, nv.pg.ImageItem)]
    assert len(images) == 7  # six test images and the assignment panel
    # the score threshold filters what is drawn: 0 shows every kept box
    view.threshold.setValue(0.0)
    out = vd.node_outputs(compiled, "nms", vd.data_values(compiled, "test", 6))
    assert sum(map(len, view.data.predicted)) == int(((out["mask"] > 0)
                                                       & (out["scores"] > 0)).sum())
    assert "true boxes" in view.status.text()


def test_detr_view_shows_the_hungarian_matching_of_image_one(make_window):
    view, compiled = open_view(make_window, "detr_shapes", "detr")
    d = view.data
    values = vd.data_values(compiled, "test", 1)
    out = vd.node_outputs(compiled, "detr", values)
    match = set_match(out["logits"], out["boxes"], values[("data", "boxes")],
                      values[("data", "labels")], values[("data", "mask")], 64, 1.0, 5.0, 2.0)
    real = match[0][match[0] >= 0].tolist()
    assert [q for q, _, _ in d.matches] == real
    for (_, _, drawn), q in zip(d.matches, real, strict=True):  # batch of 6 vs 1: float noise
        assert drawn == pytest.approx(out["boxes"][0, q].tolist(), abs=1e-3)
    assert d.grid is None and torch.tensor([len(t) for t in d.truth]).sum() > 0
