"""Validation knows the classes (issue #32, item 1).

A data block that knows how many classes its labels run over (a folder's subfolders, a CSV
or Parquet class column, the bundled sets) declares the count; a loss or accuracy taking
class indices into fewer scores is an error on its card and in `nodegraph validate`, naming
both numbers and the fix (`out.out_features = 4`), before anything runs. A label no score
can index that validation could not see (a NumPy y) is named with the data block and the
sample when the run starts, or, streamed, with the batch — never a raw IndexError. Soft
targets (MixUp) and regression targets are left alone.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest
import torch

import nodegraph
from nodegraph.cli.main import main
from nodegraph.kinds.dataset import split_indices
from nodegraph.model.errors import NodeRuntimeError, ValidationError
from nodegraph.model.graph import Graph
from nodegraph.model.spec import default_registry

ROOT = Path(__file__).resolve().parents[1]


def _write_folder(root: Path, per_class: int) -> Path:
    spec = importlib.util.spec_from_file_location("make_shapes_jpegs",
                                                  ROOT / "examples" / "make_shapes_jpegs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.write_folder(root, per_class=per_class, seed=1, size=(24, 24))


@pytest.fixture(scope="module")
def photos(tmp_path_factory) -> Path:
    """The README's example beside a folder of generated photos of its four classes."""
    where = tmp_path_factory.mktemp("photos")
    _write_folder(where / "my_photos", per_class=5)
    graph = json.loads((ROOT / "examples" / "jpeg_folder.json").read_text())
    graph["nodes"]["data"]["params"].update(path="my_photos", size=24, batch_size=64)
    graph["training"].update(epochs=1, workers=0)
    (where / "jpeg_folder.json").write_text(json.dumps(graph))
    return where / "jpeg_folder.json"


def _with_classes(path: Path, out_features: int) -> Graph:
    g = nodegraph.load(path)
    g.set_param("out", "out_features", out_features)
    return g


def test_fewer_scores_than_folder_classes_fail_validation_naming_both_and_the_fix(photos):
    report = nodegraph.validate(_with_classes(photos, 2), for_training=True)
    found = {(p.node, p.port): p for p in report.errors}
    assert set(found) == {("loss", "input"), ("accuracy", "input")}, report.problems
    loss = found[("loss", "input")]
    assert "gets 2 class score(s)" in loss.message and "which has 4 classes" in loss.message
    assert "data.ImageFolder 'data'" in loss.message
    assert loss.hint == "set out.out_features = 4"


def test_the_cli_refuses_it_too(photos, capsys):
    g = _with_classes(photos, 2)
    path = photos.parent / "two.json"
    nodegraph.save(g, path)
    assert main(["validate", str(path)]) == 1
    out = "".join(capsys.readouterr())
    assert "loss.input" in out and "4 classes" in out and "set out.out_features = 4" in out


def test_validate_json_gives_the_class_count_of_the_label_wires(photos, capsys):
    assert main(["validate", str(photos), "--json"]) == 0
    wires = json.loads(capsys.readouterr().out)["wires"]
    counts = {(w["from"][0], w["from"][1], w["to"][0]): w.get("classes") for w in wires}
    assert counts[("data", "y", "loss")] == counts[("data", "y", "accuracy")] == 4
    assert counts[("data", "x", "conv1")] is None


def test_as_many_scores_as_classes_validate_and_train_a_step(photos):
    g = _with_classes(photos, 4)
    report = nodegraph.validate(g, for_training=True)
    assert report.ok, report.problems
    assert report.data["data"].classes == {"y": 4}
    assert report.class_targets[("loss", "target")].width == 4
    result = nodegraph.train(g)
    assert len(result.history) == 1 and np.isfinite(result.history[0]["train"]["loss"])


def test_more_scores_than_classes_are_a_warning_not_an_error(photos):
    report = nodegraph.validate(_with_classes(photos, 6), for_training=True)
    assert report.ok
    warned = [p for p in report.problems if p.node == "loss"]
    assert warned and warned[0].severity == "warning" and "scores 4 to 5" in warned[0].message


def test_soft_targets_of_mixup_still_train(photos):
    g = nodegraph.load(photos)
    g.add("augment.MixUp", id="mix", num_classes=4)
    g.disconnect(g.source_of("data", "augment"))
    g.connect(("normalize", "transform"), ("mix", "input"))
    g.connect(("mix", "transform"), ("data", "augment"))
    report = nodegraph.validate(g, for_training=True)
    assert report.ok, report.problems
    assert report.shape("data", "y")[1:] == (4,)  # class probabilities: not indices
    assert not report.class_targets
    assert np.isfinite(nodegraph.train(g).history[0]["train"]["loss"])
    g.set_param("mix", "num_classes", 3)  # one_hot of class 3 would fail in the run
    problems = nodegraph.validate(g, for_training=True).errors
    assert any(p.node == "data" and "holds 4 classes" in p.message for p in problems)


def _classifier(data: str, width: int, through: str | None = None, **params) -> Graph:
    g = Graph("classes")
    g.add(data, id="data", **params)
    g.add("layers.Linear", id="out", out_features=width)
    g.add("losses.CrossEntropy", id="loss")
    g.add("optimizers.SGD", id="opt", lr=0.1)
    g.connect(("data", "x"), ("out", "input"))
    g.connect(("out", "output"), ("loss", "input"))
    if through is None:
        g.connect(("data", "y"), ("loss", "target"))
    else:  # the labels pass a block that only rearranges them
        g.add(through, id="via")
        g.connect(("data", "y"), ("via", "input"))
        g.connect(("via", "output"), ("loss", "target"))
    g.connect(("loss", "loss"), ("opt", "loss"))
    g.update_training({"epochs": 1, "seed": 0})
    return g


def _class_errors(g: Graph) -> list:
    return [p for p in nodegraph.validate(g, for_training=True).errors
            if p.node == "loss" and p.port == "input"]


@pytest.mark.parametrize("labels, count", [(["cat", "dog", "eel"], 3), (["0", "4", "2"], 5)])
def test_a_csv_class_column_declares_its_classes(tmp_path, labels, count):
    path = tmp_path / "t.csv"
    rows = [f"{i * 0.1},{i % 3},{labels[i % 3]}" for i in range(12)]
    path.write_text("a,b,kind\n" + "\n".join(rows) + "\n")
    params = {"path": str(path), "targets": ["kind"], "target_kind": "class"}
    (problem,) = _class_errors(_classifier("data.CSV", 2, **params))
    assert f"which has {count} classes" in problem.message
    assert problem.hint == f"set out.out_features = {count}"
    assert not _class_errors(_classifier("data.CSV", count, **params))


@pytest.mark.parametrize("kind", ["text", "int"])
def test_a_parquet_class_column_declares_its_classes(tmp_path, kind):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    labels = [["a", "b", "c", "d"][i % 4] if kind == "text" else i % 4 for i in range(16)]
    path = tmp_path / "t.parquet"
    pq.write_table(pa.table({"x1": [float(i) for i in range(16)], "y": labels}), path,
                   row_group_size=5)
    params = {"path": str(path), "targets": ["y"], "target_kind": "class"}
    (problem,) = _class_errors(_classifier("data.Parquet", 3, **params))
    assert "gets 3 class score(s)" in problem.message and "which has 4 classes" in problem.message
    assert not _class_errors(_classifier("data.Parquet", 4, **params))


@pytest.mark.parametrize("via", ["layers.Identity", "layers.StopGradient"])
def test_the_count_travels_through_blocks_that_only_pass_labels_on(via):
    (problem,) = _class_errors(_classifier("data.Iris", 2, through=via))
    assert "which has 3 classes" in problem.message and problem.hint == "set out.out_features = 3"


def test_bundled_and_generated_sets_declare_their_classes():
    assert "10 classes" in _class_errors(_classifier("data.Digits", 8))[0].message
    assert "5 classes" in _class_errors(_classifier("data.Blobs", 3, centers=5))[0].message
    assert not _class_errors(_classifier("data.Blobs", 5, centers=5))


def test_a_regression_target_gets_no_class_check():
    g = Graph("reg")
    g.add("data.NoisyLine", id="data")
    g.add("layers.Linear", id="out", out_features=1)
    g.add("losses.MSE", id="loss")
    g.add("optimizers.SGD", id="opt", lr=0.1)
    for a, b in [(("data", "x"), ("out", "input")), (("out", "output"), ("loss", "input")),
                 (("data", "y"), ("loss", "target")), (("loss", "loss"), ("opt", "loss"))]:
        g.connect(a, b)
    report = nodegraph.validate(g, for_training=True)
    assert report.ok and not report.problems and not report.class_targets


def _numpy_labels(tmp_path: Path, bad_row: int, classes: int) -> dict:
    x = np.random.default_rng(0).normal(size=(40, 3)).astype(np.float32)
    y = np.arange(40) % classes
    y[bad_row] = classes  # one label the scores cannot index
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", y)
    return {"path": str(tmp_path / "x.npy"), "y_path": str(tmp_path / "y.npy"),
            "target_kind": "class", "shuffle": False, "batch_size": 8}


def test_a_label_out_of_range_in_memory_is_named_with_block_and_sample(tmp_path):
    g = _classifier("data.NumPy", 3, **_numpy_labels(tmp_path, 13, 3), storage="memory")
    assert nodegraph.validate(g, for_training=True).ok  # headers only: y is not read
    with pytest.raises(ValidationError) as caught:
        nodegraph.train(g)
    (problem,) = caught.value.problems
    assert (problem.node, problem.port) == ("loss", "target")
    # where row 13 went: the split data.NumPy draws (val_fraction 0.2, split_seed 0)
    splits = split_indices(40, 0.2, 0.0, "random", 0, None, 0, 0)
    split = next(s for s, rows in splits.items() if 13 in rows.tolist())
    sample = splits[split].tolist().index(13)
    assert (f"class index 3 of data.NumPy 'data' (row 13 of its data, sample {sample} of its "
            f"{split} split)") in problem.message
    assert "outside [0, 3)" in problem.message and "IndexError" not in str(caught.value)


def test_a_label_out_of_range_streamed_is_named_at_its_batch(tmp_path):
    g = _classifier("data.NumPy", 3, **_numpy_labels(tmp_path, 13, 3), storage="stream")
    g.set_training("device", "cpu")  # torch on a GPU asserts on the device instead
    with pytest.raises(NodeRuntimeError) as caught:
        nodegraph.train(g)
    text = str(caught.value)
    assert text.startswith("node 'loss': input 'target' from 'data'.y: class index 3")
    splits = split_indices(40, 0.2, 0.0, "random", 0, None, 0, 0)  # batches of 8, in order
    split = next(s for s, rows in splits.items() if 13 in rows.tolist())
    position = splits[split].tolist().index(13) % 8
    assert f"(sample {position} of this batch) is outside [0, 3)" in text
    assert "IndexError" not in text


def test_ignored_labels_are_no_error():
    # the karate club's unlabelled nodes are -100, which cross-entropy skips
    g = Graph("karate")
    g.add("data.KarateClub", id="data", val_fraction=0.5)
    g.add("graph.GCN", id="gcn", out_features=2)
    g.add("losses.CrossEntropy", id="loss")
    g.add("optimizers.Adam", id="opt", lr=0.01)
    g.connect(("data", "x"), ("gcn", "features"))
    g.connect(("data", "adjacency"), ("gcn", "adjacency"))
    g.connect(("gcn", "output"), ("loss", "input"))
    g.connect(("data", "y"), ("loss", "target"))
    g.connect(("loss", "loss"), ("opt", "loss"))
    g.update_training({"epochs": 1, "seed": 0})
    assert nodegraph.validate(g, for_training=True).ok
    assert torch.isfinite(torch.tensor(nodegraph.train(g).history[0]["train"]["loss"]))


GENERATED = [s for s in default_registry() if s.kind == "data" and s.meta is not None
             and not any(p.required for p in s.params)
             and s.id not in ("data.LagWindows", "data.ChaoticSeries")]


@pytest.mark.parametrize("spec", GENERATED, ids=lambda s: s.id)
def test_a_declared_class_count_holds_every_label_the_build_makes(spec):
    for variant in ({}, {"target": "class"}, {"n": 37, "val_fraction": 0.3}):
        params, _ = spec.resolve_params({k: v for k, v in variant.items()
                                         if spec.param(k) is not None})
        meta, built = spec.meta(params), spec.build(params)
        for port, count in meta.classes.items():
            labels = torch.cat([built.tensors(s)[port] for s in ("train", "val", "test")
                                if built.has(s)])
            kept = labels[labels != -100]
            assert not labels.is_floating_point() and kept.min() >= 0, (spec.id, variant)
            assert kept.max() < count, (spec.id, variant)
            if spec.id not in ("data.Blobs", "data.GaussianMixture"):  # random: may miss one
                assert kept.max() == count - 1, (spec.id, variant)


def test_the_classifying_sets_all_declare_a_count():
    declaring = {s.id for s in GENERATED
                 if s.meta(s.resolve_params({"target": "class"} if s.param("target")
                                            else {})[0]).classes}
    assert {"data.Digits", "data.Iris", "data.Wine", "data.BreastCancer", "data.XOR",
            "data.Moons", "data.Spirals", "data.Blobs", "data.GaussianMixture",
            "data.KarateClub", "data.TokenText"} <= declaring
