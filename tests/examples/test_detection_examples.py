"""yolo_shapes, rcnn_shapes and detr_shapes (seed 000 §6): the builder writes the files,
they validate with the detection shapes on every wire, and a short run of each learns to
find the shapes: test mAP@0.5 far above the untrained model's (full-run figures in
examples/README.md). The detection view's numbers are checked on the trained YOLO."""

from __future__ import annotations

import pytest
import torch
from classic_support import assert_builder_writes_files, example, run

import nodegraph
from nodegraph.runtime import viewdata as vd
from nodes._detection_heads import grid_encode

FILES = ["yolo_shapes", "rcnn_shapes", "detr_shapes"]
QUICK = {"data__n": 600}  # 420 training images instead of 1,050


def test_the_builder_writes_the_example_files():
    assert_builder_writes_files("detection")


@pytest.mark.parametrize("name", FILES)
def test_the_examples_validate_with_box_shapes_on_the_wires(name):
    report = nodegraph.validate(example(name), for_training=True)
    assert report.ok, report.problems
    assert report.shape("data", "boxes")[1:] == (3, 4)
    assert report.shape("data", "x")[1:] == (3, 64, 64)
    if name == "yolo_shapes":
        assert report.shape("head", "output")[1:] == (8, 8, 8)
        assert report.shape("encode", "output")[1:] == (8, 8, 6)
        assert report.shape("nms", "boxes")[1:] == (10, 4)
    elif name == "rcnn_shapes":
        assert report.shape("proposals", "boxes")[1:] == (8, 4)
        assert report.shape("roi", "output")[1:] == (8, 64, 4, 4)
        assert report.shape("cls", "output")[1:] == (8, 4)
    else:
        assert report.shape("detr", "logits")[1:] == (8, 4)
        assert report.shape("detr", "boxes")[1:] == (8, 4)


def untrained_map(name: str, **sets) -> float:
    return run(name, 0, **sets).final["test"]["map.map_50"]


@pytest.mark.slow
@pytest.mark.timeout(600)  # a few CPU-minutes; several times that at load 10
def test_yolo_learns_to_find_the_shapes_and_the_view_shows_it():
    result = run("yolo_shapes", 6, **QUICK)
    trained = result.final["test"]["map.map_50"]
    assert trained > 0.25 and trained > 10 * untrained_map("yolo_shapes", **QUICK)  # 0.344
    assert result.final["test"]["map.map"] < trained  # stricter IoUs score lower
    # the view: predictions are the NMS node's kept boxes, truths the data's boxes
    d = vd.detections(result.compiled, "nms", limit=4, min_score=0.3)
    test = result.compiled.datasets["data"].tensors("test")
    out = vd.node_outputs(result.compiled, "nms",
                          vd.data_values(result.compiled, "test", 4))
    for i in range(4):
        real = test["mask"][i] > 0
        assert [b for b, _ in d.truth[i]] == test["boxes"][i][real].tolist()
        keep = (out["scores"][i] > 0.3) & (out["mask"][i] > 0)
        assert sorted(s for _, _, s in d.predicted[i]) == sorted(
            out["scores"][i][keep].tolist())
    # the grid assignment: the cells GridEncode made responsible for image 1's boxes
    target = grid_encode(test["boxes"][:1], test["labels"][:1], test["mask"][:1], 8, 64, 16)
    assert d.grid == 8
    assert sorted((r, c) for r, c, _ in d.cells) == sorted(
        map(tuple, torch.nonzero(target[0, ..., 0]).tolist()))


@pytest.mark.slow
@pytest.mark.timeout(600)  # a few CPU-minutes; several times that at load 10
def test_rcnn_learns_to_find_the_shapes():
    result = run("rcnn_shapes", 6, **QUICK)
    trained = result.final["test"]["map.map_50"]
    assert trained > 0.3 and trained > 10 * untrained_map("rcnn_shapes", **QUICK)  # 0.503


@pytest.mark.slow
@pytest.mark.timeout(600)  # a few CPU-minutes; several times that at load 10
def test_detr_learns_to_find_the_shapes_and_the_view_shows_its_matching():
    result = run("detr_shapes", 8)  # DETR learns slowly: all 1,050 training images
    trained = result.final["test"]["map.map_50"]
    assert trained > 0.05 and trained > 10 * untrained_map("detr_shapes")
    d = vd.detections(result.compiled, "detr", limit=2)
    queries = [q for q, _, _ in d.matches]
    assert len(queries) == len(d.truth[0]) == len(set(queries))  # one query per true box
