"""Data blocks reading files describe them from a cheap look (a CSV's header and row
count) exactly as the built dataset: shapes, dtypes, split sizes, batches, bytes; and refuse
what the build refuses, with the same message."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from nodegraph.kinds import footprint
from nodegraph.kinds.datameta import DataMeta
from nodegraph.model.errors import NodegraphError
from nodegraph.model.spec import default_registry

CSV = "a,b,c,label\n1,2,3,cat\n4,5,6,dog\n\n7,8,9,cat\n" + "".join(
    f"{i},{i + 1},{i * 2},{'dog' if i % 3 else 'cat'}\n" for i in range(30))
NUMBERS = "1\t2\t0.5\n3\t4\t1.5\n" * 20


def _params(path, **given):
    spec = default_registry().get("data.CSV")
    params, problems = spec.resolve_params({"path": str(path), **given})
    assert not problems, problems
    return spec, params


@pytest.mark.parametrize(("text", "given"), [
    (CSV, {"targets": ["label"], "target_kind": "class"}),
    (CSV, {"targets": ["c"], "inputs": ["a", "0"], "batch_size": 5, "val_fraction": 0.3,
           "test_fraction": 0.1}),
    (CSV.replace("label", "d").replace("cat", "1").replace("dog", "2"),
     {"targets": ["c", "d"], "split": "chronological", "batch_size": 0}),
    (NUMBERS, {"header": False, "delimiter": "tab", "folds": 4, "fold": 1}),
])
def test_csv_meta_matches_the_built_dataset(tmp_path, text, given):
    path = tmp_path / "t.csv"
    path.write_text(text)
    spec, params = _params(path, **given)
    meta, built = spec.meta(params), spec.build(params)
    assert meta == DataMeta.of(built)
    assert meta.nbytes == footprint.dataset_bytes(built)
    assert {k: (t.shape, t.dtype) for k, t in meta.meta().items()} == \
        {k: (t.shape, t.dtype) for k, t in built.meta().items()}


@pytest.mark.parametrize(("text", "given"), [
    (CSV, {"targets": ["nope"]}),
    (CSV, {"targets": ["label", "c"], "target_kind": "class"}),
    (CSV, {"targets": ["c"], "inputs": ["c"]}),
    (CSV, {"targets": []}),
    ("a,b\n1,2\n3\n", {}),
    ("a,b\n", {}),
    ("", {}),
    (CSV, {"delimiter": ";;"}),
])
def test_csv_meta_refuses_what_the_build_refuses(tmp_path, text, given):
    path = tmp_path / "t.csv"
    path.write_text(text)
    spec, params = _params(path, **given)
    with pytest.raises(NodegraphError) as built:
        spec.build(params)
    with pytest.raises(NodegraphError) as meta:
        spec.meta(params)
    assert str(meta.value) == str(built.value)


def test_csv_meta_reads_no_cells_as_numbers(tmp_path, monkeypatch):
    """Validation's look at a CSV converts nothing (cells are read when compile builds)."""
    from nodes.data import _files

    path = tmp_path / "t.csv"
    path.write_text(NUMBERS)
    monkeypatch.setattr(_files, "numeric_column", lambda *a: pytest.fail("cells converted"))
    spec, params = _params(path, header=False, delimiter="tab")
    assert sum(spec.meta(params).sizes.values()) == 40


def _folder(tmp_path, colour=True, sizes=((2, 3),)):
    """cat: grey PGMs and a PBM; dog: PNGs (RGB, or grey+alpha) and a PPM."""
    from tests.test_nodes_data import _png

    root = tmp_path / "pets"
    for name in ("cat", "dog"):
        (root / name).mkdir(parents=True)
    (root / ".hidden").mkdir()
    for i in range(4):
        h, w = sizes[i % len(sizes)]
        (root / "cat" / f"{i}.pgm").write_bytes(f"P5 {w} {h} 255\n".encode() + bytes(h * w))
        rows = np.arange(h * w * (3 if colour else 2)).reshape(h, -1) % 256
        (root / "dog" / f"{i}.png").write_bytes(_png(rows, 2 if colour else 4, 8,
                                                     3 if colour else 2))
    h, w = sizes[0]
    (root / "cat" / "b.pbm").write_bytes(f"P1\n# a comment\n{w} {h}\n".encode()
                                         + b"0 " * (h * w))
    (root / "dog" / "c.ppm").write_bytes(f"P6 {w} {h} 255\n".encode() + bytes(3 * h * w))
    (root / "dog" / "notes.txt").write_text("not an image")
    return root


@pytest.mark.parametrize(("colour", "given"), [
    (True, {}),
    (False, {"layout": "flat", "split": "random", "batch_size": 3}),
    (True, {"grayscale": True, "val_fraction": 0.3, "test_fraction": 0.2}),
    (True, {"size": 5, "split": "chronological"}),
])
def test_image_folder_meta_matches_the_built_dataset(tmp_path, colour, given):
    spec = default_registry().get("data.ImageFolder")
    params, problems = spec.resolve_params({"path": str(_folder(tmp_path, colour)), **given})
    assert not problems
    meta, built = spec.meta(params), spec.build(params)
    assert meta == DataMeta.of(built)
    assert meta.nbytes == footprint.dataset_bytes(built)


def test_image_folder_meta_refuses_what_the_build_refuses(tmp_path):
    spec = default_registry().get("data.ImageFolder")
    mixed = _folder(tmp_path, sizes=((2, 3), (3, 2)))
    (tmp_path / "pets2" / "a").mkdir(parents=True)
    (tmp_path / "pets2" / "a" / "x.png").write_bytes(b"\xff\xd8\xff\xe0 not really")
    for path in (mixed, tmp_path / "pets2", tmp_path / "missing", tmp_path / "pets2" / "a"):
        params, _ = spec.resolve_params({"path": str(path)})
        with pytest.raises(NodegraphError) as built:
            spec.build(params)
        with pytest.raises(NodegraphError) as meta:
            spec.meta(params)
        assert str(meta.value) == str(built.value)


def test_image_folder_meta_decodes_no_pixels(tmp_path, monkeypatch):
    from PIL import ImageFile

    from nodes.data import _images

    monkeypatch.setattr(_images, "decode", lambda path: pytest.fail("decoded"))
    monkeypatch.setattr(ImageFile.ImageFile, "load", lambda self: pytest.fail("decoded"))
    spec = default_registry().get("data.ImageFolder")
    params, _ = spec.resolve_params({"path": str(_folder(tmp_path))})
    assert spec.meta(params).ports["x"] == ((3, 2, 3), torch.float32)


def _npy_block(tmp_path, x, y, npz=False, **given):
    if npz:
        path = tmp_path / "d.npz"
        np.savez(path, x=x, y=y)
        given = {"path": str(path), **given}
    else:
        np.save(tmp_path / "x.npy", x)
        np.save(tmp_path / "y.npy", y)
        given = {"path": str(tmp_path / "x.npy"), "y_path": str(tmp_path / "y.npy"), **given}
    spec = default_registry().get("data.NumPy")
    params, problems = spec.resolve_params(given)
    assert not problems
    return spec, params


R = np.random.default_rng(0)


@pytest.mark.parametrize(("x", "y", "npz", "given"), [
    (R.normal(size=(20, 3)), R.normal(size=20), False, {}),
    (R.normal(size=(20, 1, 4, 4)).astype(np.float16), R.integers(0, 3, (20, 1)), True,
     {"target_kind": "class", "batch_size": 6}),
    (np.arange(30), np.arange(60).reshape(30, 2, 1), False, {"val_fraction": 0.0}),
    (R.integers(0, 9, (25, 2), dtype=np.uint8), R.integers(0, 2, 25), True,
     {"target_kind": "class", "split": "chronological", "test_fraction": 0.2}),
])
def test_numpy_meta_matches_the_built_dataset(tmp_path, x, y, npz, given):
    spec, params = _npy_block(tmp_path, x, y, npz, **given)
    meta, built = spec.meta(params), spec.build(params)
    assert meta == DataMeta.of(built)
    assert meta.nbytes == footprint.dataset_bytes(built)


@pytest.mark.parametrize(("x", "y", "given"), [
    (np.zeros((5, 2)), np.zeros(4), {}),
    (np.zeros(()), np.zeros(4), {}),
    (np.array([["a", "b"]] * 4), np.zeros(4), {}),
    (np.zeros((4, 2)), np.array(["x"] * 4), {}),
    (np.zeros((4, 2)), np.zeros((4, 2)), {"target_kind": "class"}),
])
def test_numpy_meta_refuses_what_the_build_refuses(tmp_path, x, y, given):
    for npz in (False, True):
        spec, params = _npy_block(tmp_path, x, y, npz, **given)
        with pytest.raises(NodegraphError) as built:
            spec.build(params)
        with pytest.raises(NodegraphError) as meta:
            spec.meta(params)
        assert str(meta.value) == str(built.value)


def test_numpy_meta_leaves_unusual_files_to_the_build(tmp_path):
    spec, params = _npy_block(tmp_path, np.zeros((4, 2)), np.zeros(4), npz=True,
                              y_key="labels")
    assert spec.meta(params) is None  # no such array: the build names the arrays there are
    (tmp_path / "x.npy").write_bytes(b"not numpy")
    spec, params = _npy_block(tmp_path, np.zeros((4, 2)), np.zeros(4))
    (tmp_path / "x.npy").write_bytes(b"not numpy")
    assert spec.meta(params) is None
    (tmp_path / "x.npy").unlink()
    with pytest.raises(NodegraphError, match="x file '.*x.npy'.* does not exist"):
        spec.meta(params)
