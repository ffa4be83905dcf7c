"""The built-in data blocks that once built their data during validation describe it from
their params and a cheap look (a file's header, the known size of a bundled set) exactly as
the built dataset: shapes, dtypes, split sizes, batches, bytes; and refuse what the build
refuses, with the same error class and message. Validating an example builds no dataset."""

from __future__ import annotations

import gzip
import json
import struct
from pathlib import Path

import numpy as np
import pytest

import nodegraph
from nodegraph.kinds import footprint
from nodegraph.kinds.datameta import DataMeta
from nodegraph.model.errors import NodegraphError
from nodegraph.model.spec import default_registry

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = sorted((ROOT / "examples").glob("*.json"))


# -- files the file-reading blocks read ----------------------------------------------------

def _idx(array: np.ndarray, code: int) -> bytes:
    """IDX bytes written from the format's definition."""
    big = {0x08: ">u1", 0x0C: ">i4", 0x0D: ">f4"}[code]
    return (struct.pack(">BBBB", 0, 0, code, array.ndim)
            + struct.pack(f">{array.ndim}I", *array.shape) + array.astype(big).tobytes())


def _ppm(image: np.ndarray) -> bytes:
    h, w = image.shape[1:]
    data = (image * 255).round().astype(np.uint8).transpose(1, 2, 0)
    return f"P6 {w} {h} 255\n".encode() + data.tobytes()


@pytest.fixture
def files(tmp_path) -> dict[str, str]:
    """Small files of every kind the blocks read, by name."""
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, size=(40, 5, 4), dtype=np.uint8)
    labels = (np.arange(40) % 3).astype(np.uint8)
    out = {}

    def put(name: str, data: bytes) -> None:
        (tmp_path / name).write_bytes(data)
        out[name] = str(tmp_path / name)

    put("images.gz", gzip.compress(_idx(images, 0x08)))
    put("labels", _idx(labels, 0x08))
    put("test_images", _idx(images[:7], 0x08))
    put("test_labels.gz", gzip.compress(_idx(labels[:7], 0x08)))
    put("floats", _idx(rng.random((40, 5, 4)).astype(np.float32), 0x0D))
    put("wide", _idx(images[:7, :, :3], 0x08))
    put("flat", _idx(images[:, 0], 0x08))
    put("labels12", _idx(labels[:12], 0x08))
    put("negative", _idx(np.arange(40) - 1, 0x0C))
    put("short.gz", gzip.compress(_idx(images, 0x08)[:-3]))
    put("short", _idx(images, 0x08)[:-3])
    put("cut.gz", gzip.compress(_idx(images, 0x08))[:-30])
    put("text", b"hello")
    put("header.gz", gzip.compress(b"\x00\x00\x08\x03\x00\x00"))

    (tmp_path / "img").mkdir()
    for i in range(9):
        (tmp_path / "img" / f"{i}.ppm").write_bytes(_ppm(rng.random((3, 12, 16))))
    (tmp_path / "img" / "small.ppm").write_bytes(_ppm(rng.random((3, 6, 6))))
    doc = {"images": [{"id": 10 + i, "file_name": f"{i}.ppm"} for i in range(9)],
           "annotations": [{"image_id": 10 + i % 9, "category_id": 7 if i % 2 else 3,
                            "bbox": [1, 2, 5, 4]} for i in range(14)],
           "categories": [{"id": 7, "name": "cat"}, {"id": 3, "name": "dog"}]}

    def coco(name: str, **changes) -> None:
        (tmp_path / name).write_text(json.dumps({**doc, **changes}))
        out[name] = str(tmp_path / name)

    out["img"] = str(tmp_path / "img")
    coco("ann.json")
    coco("sizes.json", images=[*doc["images"], {"id": 99, "file_name": "small.ppm"}])
    coco("category.json", annotations=[{"image_id": 10, "category_id": 5, "bbox": [0, 0, 1, 1]}])
    coco("twice.json", images=[*doc["images"], {"id": 10, "file_name": "1.ppm"}])
    coco("missing.json", images=[{"id": 1, "file_name": "gone.ppm"}])
    coco("empty.json", images=[], annotations=[])
    coco("bbox.json", annotations=[{"image_id": 10, "category_id": 3, "bbox": [0, 0, -1, 2]}])
    put("notjson.json", b"{images")

    np.savez(tmp_path / "arrays.npz", x=rng.random((30, 3, 2)).astype(np.float16),
             y=np.arange(30).reshape(30, 1) % 4, flags=np.arange(30) % 2 == 0,
             ids=np.arange(30, dtype=np.uint8), short=np.zeros(29), scalar=np.float32(1.0),
             names=np.array(["a"] * 30))
    np.save(tmp_path / "series.npy", np.sin(np.arange(120) / 5.0))
    np.save(tmp_path / "table.npy", rng.random((90, 3)))
    np.save(tmp_path / "cube.npy", rng.random((20, 2, 2)))
    out.update({n: str(tmp_path / n) for n in ("arrays.npz", "series.npy", "table.npy",
                                                "cube.npy")})
    put("series.csv", ("t,value\n" + "".join(f"{i},{np.cos(i / 3):.4f}\n"
                                             for i in range(70))).encode())
    put("words.csv", b"t,value\n0,1.5\n1,two\n2,3\n")
    return out


# -- the blocks and their params: (block, params), file names in {braces} ------------------

SPLITS = [{}, {"split": "random", "val_fraction": 0.3, "test_fraction": 0.1, "batch_size": 0},
          {"split": "chronological", "batch_size": 7, "val_fraction": 0.25},
          {"split": "stratified", "val_fraction": 0.15, "test_fraction": 0.15, "batch_size": 1},
          {"split": "stratified", "folds": 3, "fold": 2, "test_fraction": 0.2},
          {"split": "random", "folds": 4, "fold": 0}, {"normalize": "minmax"}]


def _splits(block_id: str, stratified: bool = True) -> list[dict]:
    """The split variants whose params the block has (stratified ones where its split
    can be)."""
    names = {p.name for p in default_registry().get(block_id).params}
    return [s for s in SPLITS if set(s) <= names
            and (stratified or s.get("split") != "stratified")]


TABLE = {"columns": ["a", "b", "c", "part"],
         "rows": [[i, i * 2.5, i % 3, ("train", "train", "val", "test")[i % 4]]
                  for i in range(19)],
         "inputs": ["a", "b"], "targets": ["c"]}

CASES = [
    *[("data.Digits", {**s, **v}) for s in _splits("data.Digits")
      for v in ({}, {"layout": "image"})],
    ("data.Digits", {"size": 28, "layout": "image", "val_fraction": 0.1}),
    ("data.Digits", {"size": 28, "split": "random", "batch_size": 0}),
    *[(b, s) for b in ("data.Iris", "data.Wine") for s in _splits(b)],
    *[("data.BreastCancer", {**s, "target": t}) for s in _splits("data.BreastCancer")
      for t in ("binary", "class")],
    *[("data.Diabetes", {**s, "scaled": sc}) for s in _splits("data.Diabetes", False)
      for sc in (True, False)],
    *[("data.Table", {**TABLE, **s}) for s in _splits("data.Table")],
    ("data.Table", {**TABLE, "targets": ["b", "c"], "split_column": "part"}),
    ("data.Table", {**TABLE, "targets": ["c"], "target_kind": "class", "split": "stratified",
                    "val_fraction": 0.3}),
    ("data.Table", {**TABLE, "targets": [], "inputs": ["c"], "batch_size": 4}),
    ("data.Table", {**TABLE, "split_column": "part", "split": "stratified"}),
    *[("data.MNIST", {"images": "{images.gz}", "labels": "{labels}", **s})
      for s in _splits("data.MNIST")],
    *[("data.MNIST", {"images": "{images.gz}", "labels": "{labels}", "layout": "image",
                      "test_images": "{test_images}", "test_labels": "{test_labels.gz}", **s})
      for s in _splits("data.MNIST")],
    ("data.MNIST", {"images": "{floats}", "labels": "{labels}", "val_fraction": 0.0}),
    *[("data.TokenText", s) for s in _splits("data.TokenText")],
    ("data.TokenText", {"text": "abcabcabd" * 7, "seq_len": 5, "stride": None,
                        "lowercase": True}),
    ("data.TokenText", {"text": "ÀBİ hello " * 9, "lowercase": True, "seq_len": 3,
                        "stride": 2, "split": "stratified", "val_fraction": 0.2}),
    ("data.TokenText", {"seq_len": 64, "stride": 1, "batch_size": 0, "test_fraction": 0.3}),
    *[("data.LagWindows", s) for s in _splits("data.LagWindows", False)],
    ("data.LagWindows", {"series": "lorenz", "n": 250, "layout": "sequence", "horizon": 3}),
    ("data.LagWindows", {"series": "random_walk", "n": 40, "window": 39, "split": "random"}),
    ("data.LagWindows", {"path": "{series.npy}", "window": 5, "horizon": 4}),
    ("data.LagWindows", {"path": "{table.npy}", "column": "-1", "normalize": "none"}),
    ("data.LagWindows", {"path": "{series.csv}", "column": "value", "layout": "sequence",
                         "folds": 3, "fold": 1}),
    *[("data.ChaoticSeries", {"n": 150, "transient": 50, **s})
      for s in _splits("data.ChaoticSeries", False)],
    ("data.ChaoticSeries", {"n": 120, "every": 2, "window": 4, "horizon": 5,
                            "layout": "sequence", "observable": "x"}),
    *[("data.Shapes", {"n": 24, "image_size": 16, "min_size": 3, "max_size": 8, **s})
      for s in _splits("data.Shapes", False)],
    ("data.Shapes", {"n": 10, "image_size": 12, "min_objects": 2, "max_objects": 4,
                     "min_size": 2, "max_size": 5, "batch_size": 0}),
    *[("data.CocoBoxes", {"path": "{ann.json}", "images": "{img}", **s})
      for s in _splits("data.CocoBoxes", False)],
    ("data.CocoBoxes", {"path": "{ann.json}", "images": "{img}", "size": 8, "grayscale": True,
                        "max_objects": 5}),
    ("data.CocoBoxes", {"path": "{sizes.json}", "images": "{img}", "size": 10,
                        "val_fraction": 0.0}),
    *[("data.KarateClub", {**s, "features": f}) for s in _splits("data.KarateClub")
      for f in ("identity", "degree")],
    ("data.KarateClub", {"val_fraction": 0.0, "test_fraction": 0.0}),
    ("data.KarateClub", {"split": "random", "test_fraction": 0.5, "val_fraction": 0.0}),
    *[("opaque.Arrays", {"path": "{arrays.npz}", **s})
      for s in _splits("opaque.Arrays", False)],
    ("opaque.Arrays", {"path": "{arrays.npz}", "x_key": "flags", "y_key": "ids",
                       "batch_size": 8}),
]

REFUSED = [
    *[(b, {"val_fraction": 0.6, "test_fraction": 0.5}) for b in
      ("data.Digits", "data.Iris", "data.Wine", "data.BreastCancer", "data.Diabetes",
       "data.KarateClub", "data.TokenText", "data.LagWindows", "data.ChaoticSeries")],
    *[(b, {"folds": 3, "fold": 3}) for b in ("data.Digits", "data.Wine", "data.KarateClub")],
    ("data.Iris", {"folds": 1}),
    ("data.Table", {**TABLE, "rows": [[1, 2, 3]]}),
    ("data.Table", {**TABLE, "rows": []}),
    ("data.Table", {**TABLE, "inputs": ["a", "z"]}),
    ("data.Table", {**TABLE, "inputs": []}),
    ("data.Table", {**TABLE, "targets": [], "split": "stratified"}),
    ("data.Table", {**TABLE, "rows": [*TABLE["rows"], [1, "x", 2, "val"]]}),
    ("data.Table", {**TABLE, "split_column": "a"}),
    ("data.Table", {**TABLE, "split_column": "part",
                    "rows": [r for r in TABLE["rows"] if r[3] != "train"]}),
    ("data.MNIST", {"images": "{images.gz}", "labels": "{nope}"}),
    ("data.MNIST", {"images": "", "labels": "{labels}"}),
    ("data.MNIST", {"images": "{text}", "labels": "{labels}"}),
    ("data.MNIST", {"images": "{short.gz}", "labels": "{labels}"}),
    ("data.MNIST", {"images": "{short}", "labels": "{labels}"}),
    ("data.MNIST", {"images": "{header.gz}", "labels": "{labels}"}),
    ("data.MNIST", {"images": "{flat}", "labels": "{labels}"}),
    ("data.MNIST", {"images": "{images.gz}", "labels": "{labels12}"}),
    ("data.MNIST", {"images": "{images.gz}", "labels": "{negative}"}),
    ("data.MNIST", {"images": "{images.gz}", "labels": "{labels}", "test_images": "{wide}",
                    "test_labels": "{test_labels.gz}"}),
    ("data.MNIST", {"images": "{images.gz}", "labels": "{labels}",
                    "test_images": "{test_images}"}),
    ("data.MNIST", {"images": "{images.gz}", "labels": "{labels}", "folds": 50, "fold": 1}),
    ("data.MNIST", {"images": "{cut.gz}", "labels": "{labels}"}),
    ("data.TokenText", {"text": "abcd", "seq_len": 4}),
    ("data.TokenText", {"text": "abcd", "seq_len": 3, "folds": 2, "fold": 0}),
    ("data.LagWindows", {"n": 12, "window": 10, "horizon": 3}),
    ("data.LagWindows", {"split": "stratified"}),
    ("data.LagWindows", {"path": "{table.npy}", "column": "3"}),
    ("data.LagWindows", {"path": "{table.npy}", "column": "value"}),
    ("data.LagWindows", {"path": "{cube.npy}"}),
    ("data.LagWindows", {"path": "{series.csv}", "column": "speed"}),
    ("data.LagWindows", {"path": "{words.csv}", "column": "value"}),
    ("data.LagWindows", {"path": "{nope.npy}"}),
    ("data.LagWindows", {"series": "lorenz", "n": 30000}),
    ("data.ChaoticSeries", {"n": 30000}),
    ("data.ChaoticSeries", {"n": 10, "window": 10}),
    ("data.Shapes", {"min_objects": 4, "max_objects": 3}),
    ("data.Shapes", {"image_size": 16, "max_size": 20}),
    ("data.Shapes", {"n": 10, "split": "stratified"}),
    ("data.CocoBoxes", {"path": "{nope.json}"}),
    ("data.CocoBoxes", {"path": "{notjson.json}"}),
    ("data.CocoBoxes", {"path": "{sizes.json}", "images": "{img}"}),
    ("data.CocoBoxes", {"path": "{category.json}", "images": "{img}"}),
    ("data.CocoBoxes", {"path": "{twice.json}", "images": "{img}"}),
    ("data.CocoBoxes", {"path": "{missing.json}", "images": "{img}"}),
    ("data.CocoBoxes", {"path": "{empty.json}", "images": "{img}"}),
    ("data.CocoBoxes", {"path": "{bbox.json}", "images": "{img}"}),
    ("data.CocoBoxes", {"path": "{ann.json}", "images": "{img}", "max_objects": 1}),
    ("opaque.Arrays", {"path": "{arrays.npz}", "y_key": "short"}),
    ("opaque.Arrays", {"path": "{arrays.npz}", "x_key": "scalar"}),
    ("opaque.Arrays", {"path": "{arrays.npz}", "y_key": "nope"}),
    ("opaque.Arrays", {"path": "{nope.npz}"}),
    ("opaque.Arrays", {"path": "{arrays.npz}", "val_fraction": 0.5, "test_fraction": 0.5}),
]


def _resolved(block_id: str, given: dict, files: dict[str, str]):
    """The spec and params, file names in braces turned into paths ({nope} one missing)."""
    def path(v):
        if isinstance(v, str) and v.startswith("{"):
            name = v[1:-1]
            return files.get(name, str(Path(files["labels"]).parent / name))
        return v

    spec = default_registry().get(block_id)
    params, problems = spec.resolve_params({k: path(v) for k, v in given.items()})
    assert not problems, problems
    return spec, params


def _label(case) -> str:
    block_id, given = case
    return f"{block_id}-" + ",".join(f"{k}={v}" for k, v in given.items()
                                     if k not in ("rows", "columns"))[:80]


def test_every_listed_block_declares_meta():
    ids = {b for b, _ in CASES}
    assert len(ids) == 14
    assert all(default_registry().get(b).meta is not None for b in ids)


@pytest.mark.parametrize("case", CASES, ids=[_label(c) for c in CASES])
def test_meta_matches_the_built_dataset(case, files):
    spec, params = _resolved(*case, files)
    meta = spec.meta(params)
    built = spec.build(params)
    assert meta is not None
    assert meta == DataMeta.of(built)
    assert meta.nbytes == footprint.dataset_bytes(built)
    assert {k: (t.shape, t.dtype) for k, t in meta.meta().items()} == \
        {k: (t.shape, t.dtype) for k, t in built.meta().items()}


@pytest.mark.parametrize("case", REFUSED, ids=[_label(c) for c in REFUSED])
def test_meta_refuses_what_the_build_refuses(case, files):
    spec, params = _resolved(*case, files)
    with pytest.raises(NodegraphError) as built:
        spec.build(params)
    with pytest.raises(NodegraphError) as described:
        spec.meta(params)
    assert type(described.value) is type(built.value)
    assert str(described.value) == str(built.value)


@pytest.mark.parametrize(("block_id", "given"), [
    ("data.Diabetes", {"split": "stratified"}),  # the strata are its 214 target values
    ("opaque.Arrays", {"path": "{arrays.npz}", "split": "stratified"}),  # y's values
    ("opaque.Arrays", {"path": "{arrays.npz}", "x_key": "names"}),  # text: the build says
])
def test_meta_declines_only_what_the_values_tell(block_id, given, files):
    """None, and validation builds, only where the split sizes depend on the values or an
    array is not numbers (the build says what it makes of it)."""
    spec, params = _resolved(block_id, given, files)
    assert spec.meta(params) is None


def test_the_known_sizes_are_those_of_the_shipped_data():
    """The class counts the bundled sets' meta relies on, against the loaded sets and the
    karate club graph networkx ships."""
    from sklearn import datasets

    from nodes.data.core import CLASS_COUNTS, DIABETES_SHAPE
    from nodes.data.graphs import KARATE_SIDES, karate_club

    for name, (features, counts) in CLASS_COUNTS.items():
        x, y = getattr(datasets, name)(return_X_y=True)
        assert x.shape == (sum(counts), features)
        assert np.bincount(y).tolist() == list(counts)
    assert datasets.load_diabetes(return_X_y=True)[0].shape == DIABETES_SHAPE
    adjacency, labels = karate_club()
    assert adjacency.shape == (34, 34) and np.bincount(labels).tolist() == list(KARATE_SIDES)


def test_a_gzipped_idx_header_is_read_without_keeping_the_values(files, monkeypatch):
    """Validation's look at an IDX file decompresses in pieces; the whole-file reader the
    build uses is not called for the images."""
    from nodes.data import _files

    read = []
    real, values = _files.read_bytes, _files.idx_values
    monkeypatch.setattr(_files, "read_bytes", lambda p, w: read.append(p) or real(p, w))
    monkeypatch.setattr(_files, "idx_values", lambda p, *a: read.append(p) or values(p, *a))
    spec, params = _resolved("data.MNIST", {"images": "{images.gz}", "labels": "{labels}"},
                             files)
    assert spec.meta(params).sizes["train"] == 36
    assert read == [files["labels"]]


def test_the_chaotic_series_does_not_diverge_at_the_largest_step():
    """ChaoticSeries' meta does not integrate, so it cannot see a diverging integration;
    dt's largest value (0.05) lies inside RK4's stability region for the Lorenz system."""
    from nodes.data.sequences import chaotic_series

    assert default_registry().get("data.ChaoticSeries").param("dt").max == 0.05
    for seed in range(3):
        assert np.isfinite(chaotic_series(400, 0.05, 5, "x", 0, seed)).all()


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_validating_an_example_builds_no_dataset(path):
    """Every data block of the examples declares its meta, so validation builds nothing
    (`report.datasets` holds what it had to build). No block is left out."""
    graph = nodegraph.load(path)
    report = nodegraph.validate(graph)
    assert report.ok, report.problems
    assert report.data  # every example has data
    assert report.datasets == {}
