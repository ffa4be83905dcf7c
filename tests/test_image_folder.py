"""`data.ImageFolder` read lazily, with augmentation blocks (`nodes/augment.py`) wired in.

A small folder of generated JPEGs of mixed sizes (`examples/make_shapes_jpegs.py`) checks
that validation reads headers only, that augmentation runs on the training split only
(a certain flip is exactly the mirror image of the plain pipeline; val unchanged), that a
run reproduces with workers, that MixUp makes class probabilities on every split, and
that an image damaged past its header stops the run naming the file and the block, or is
skipped and counted.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch

import nodegraph
from nodegraph.kinds.streamed import SampleError, StreamedDataset
from nodegraph.model.errors import ValidationError
from nodegraph.model.events import Emitter, Message
from nodegraph.model.graph import Graph

ROOT = Path(__file__).resolve().parents[1]


def _maker():
    spec = importlib.util.spec_from_file_location("make_shapes_jpegs",
                                                  ROOT / "examples" / "make_shapes_jpegs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def folder(tmp_path):
    return _maker().write_folder(tmp_path / "shapes", per_class=10, seed=3)


def graph(folder, *chain: tuple[str, dict], **data) -> Graph:
    g = Graph("jpegs")
    g.add("data.ImageFolder", id="data", path=str(folder),
          **{"size": 24, "batch_size": 8, "shuffle": False, "storage": "stream", **data})
    previous = None
    for k, (block, params) in enumerate(chain):
        g.add(block, id=f"t{k}", **params)
        if previous is not None:
            g.connect((previous, "transform"), (f"t{k}", "input"))
        previous = f"t{k}"
    if previous is not None:
        g.connect((previous, "transform"), ("data", "augment"))
    g.add("layers.Flatten", id="flat")
    g.add("layers.Linear", id="out", out_features=4)
    g.add("losses.CrossEntropy", id="loss")
    g.add("optimizers.Adam", id="opt", lr=0.01)
    g.connect(("data", "x"), ("flat", "input"))
    g.connect(("flat", "output"), ("out", "input"))
    g.connect(("out", "output"), ("loss", "input"))
    g.connect(("data", "y"), ("loss", "target"))
    g.connect(("loss", "loss"), ("opt", "loss"))
    g.update_training({"epochs": 1, "seed": 0})
    return g


def test_validation_reads_headers_only(folder, monkeypatch):
    from nodes.data import _images

    monkeypatch.setattr(_images, "decode", lambda path: pytest.fail("decoded"))
    report = nodegraph.validate(graph(folder, ("augment.RandomResizedCrop", {"size": 16})),
                                for_training=True)
    assert report.ok, report.problems
    assert report.shape("data", "x") == (8, 3, 16, 16)
    assert report.data["data"].sizes == {"train": 32, "val": 8} and report.data["data"].streamed


def _split(g, split):
    compiled = nodegraph.compile(g, for_training=False)
    ds = compiled.datasets["data"]
    assert isinstance(ds, StreamedDataset)
    return torch.cat([b["x"] for b in ds.batches(split)])


def test_augmentation_runs_on_the_training_split_only(folder):
    plain = graph(folder)
    flipped = graph(folder, ("augment.HorizontalFlip", {"p": 1.0}),
                    ("augment.Normalize", {"mean": [0.5] * 3, "std": [0.25] * 3}))
    assert torch.allclose(_split(flipped, "train"), (_split(plain, "train").flip(-1) - 0.5) / 0.25,
                          atol=1e-5)
    assert torch.allclose(_split(flipped, "val"), (_split(plain, "val") - 0.5) / 0.25, atol=1e-5)


def _weights(g):
    result = nodegraph.train(g)
    return [p.detach().clone() for p in result.compiled.module.parameters()]


def test_an_augmented_run_reproduces_whatever_the_workers(folder):
    chain = (("augment.RandomCrop", {"padding": 3}), ("augment.ColorJitter", {}),
             ("augment.TrivialAugment", {}))
    g0, g2 = graph(folder, *chain, shuffle=True), graph(folder, *chain, shuffle=True)
    g0.set_training("workers", 0)
    g2.set_training("workers", 2)
    one, two = _weights(g0), _weights(g2)
    for a, b in zip(one, two, strict=True):
        assert torch.equal(a, b)


def test_mixup_makes_class_probabilities_on_every_split(folder):
    g = graph(folder, ("augment.MixUp", {"num_classes": 4}), ("augment.CutMix",
                                                              {"num_classes": 4}))
    report = nodegraph.validate(g, for_training=True)
    assert report.ok, report.problems
    assert report.shape("data", "y") == (8, 4)
    compiled = nodegraph.compile(g, for_training=False)
    ds = compiled.datasets["data"]
    train = next(ds.batches("train", True, torch.Generator().manual_seed(0)))["y"]
    val = torch.cat([b["y"] for b in ds.batches("val")])
    assert train.dtype == torch.float32 and torch.allclose(train.sum(1), torch.ones(8))
    assert ((val == 0) | (val == 1)).all() and torch.equal(val.sum(1), torch.ones(len(val)))
    assert ((train > 0) & (train < 1)).any()  # mixed
    assert nodegraph.train(g).history[0]["train"]["loss"] > 0


def _truncate(folder) -> Path:
    victim = sorted((folder / "square").iterdir())[0]
    raw = victim.read_bytes()
    victim.write_bytes(raw[:len(raw) * 2 // 3])  # the header survives, the pixels do not
    return victim


def test_an_image_damaged_past_its_header_stops_the_run_naming_file_and_block(folder):
    victim = _truncate(folder)
    g = graph(folder)
    assert nodegraph.validate(g, for_training=True).ok  # headers only: not noticed yet
    with pytest.raises(SampleError, match=rf"data: image '.*{victim.name}' is damaged"):
        nodegraph.train(g)


def test_skip_leaves_a_damaged_image_out_and_reports_the_count(folder):
    _truncate(folder)
    events, said = Emitter(), []
    events.subscribe(lambda e: said.append(e.text), Message)
    result = nodegraph.train(graph(folder, on_error="skip", val_fraction=0.0), events=events)
    assert result.history
    skipped = [s for s in said if "skipped" in s]
    # one report per pass over the split: the training epoch and the final evaluation
    assert len(skipped) == 2 and skipped[0] == skipped[1]
    assert skipped[0].startswith("data: skipped 1 unreadable sample of the train split (first: "
                                 f"image '{sorted((folder / 'square').iterdir())[0]}' is "
                                 "damaged or truncated")


def test_a_folder_without_class_folders_is_a_problem_on_the_block(tmp_path):
    (tmp_path / "photos").mkdir()
    _maker().draw("circle", __import__("numpy").random.default_rng(0)).save(
        tmp_path / "photos" / "a.jpg")
    report = nodegraph.validate(graph(tmp_path / "photos"))
    problem = report.for_node("data")[0]
    assert "has no class subfolders" in problem.message
    with pytest.raises(ValidationError, match="class subfolders"):
        nodegraph.train(graph(tmp_path / "photos"))


def test_the_preview_shows_augmented_training_samples(folder):
    pytest.importorskip("PySide6")
    from nodegraph.gui.training.preview import image_of, node_outputs

    plain = node_outputs(graph(folder), "data")["x"]
    flipped = node_outputs(graph(folder, ("augment.HorizontalFlip", {"p": 1.0})), "data")["x"]
    assert torch.allclose(flipped, plain.flip(-1), atol=1e-6)
    grid = image_of(flipped)
    assert grid.shape == (3 * 25 - 1, 3 * 25 - 1, 3)  # the batch of 8 tiled 3 x 3


def test_a_fitted_model_predicts_and_evaluates_a_streamed_folder_without_augmentation(folder):
    """Model.predict / evaluate read streamed splits through the DataLoader workers (2 here)
    as evaluation does, the training split without its random flip: the numbers are the
    trained linear layer on the plain, normalised images."""
    norm = ("augment.Normalize", {"mean": [0.5] * 3, "std": [0.25] * 3})
    g = graph(folder, ("augment.HorizontalFlip", {"p": 1.0}), norm)
    g.update_training({"workers": 2})
    m = nodegraph.fit(g, epochs=2)
    w = m.weights()
    plain = graph(folder, norm)  # the same files, deterministic: the reference inputs
    for split in ("train", "val"):
        x, y = _split(plain, split), torch.cat([b["y"] for b in nodegraph.compile(
            plain, for_training=False).datasets["data"].batches(split)])
        expected = x.flatten(1) @ w["out.weight"].T + w["out.bias"]
        got = m.predict(split, batch_size=5)
        assert got.shape == (len(x), 4)
        assert torch.allclose(got, expected, atol=1e-5)
        loss = torch.nn.functional.cross_entropy(expected, y).item()
        assert m.evaluate(split)["loss"] == pytest.approx(loss, rel=1e-5)
    flipped = _split(plain, "train").flip(-1)  # what training saw: a different prediction
    assert not torch.allclose(m.predict("train"),
                              flipped.flatten(1) @ w["out.weight"].T + w["out.bias"], atol=1e-3)
