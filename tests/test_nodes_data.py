"""The data blocks: bundled sets equal scikit-learn's, file readers round-trip what the tests
write, generators follow their documented formulas, errors name the file, and a small
graph learns iris."""

from __future__ import annotations

import gzip
import struct
import zlib

import numpy as np
import pytest
import torch
from sklearn import datasets as skd

import nodegraph
from nodegraph.model.errors import NodegraphError
from nodes.data._synthetic import gaussian_mixture

WHOLE = {"val_fraction": 0.0, "test_fraction": 0.0, "normalize": "none", "split": "random",
         "batch_size": 0}


def build(block_id, **params):
    """The Dataset block `block_id` builds with `params` (tests.blockcheck.build would take
    the CSV block's `inputs` param for its own argument)."""
    spec = nodegraph.default_registry().get(block_id)
    values, problems = spec.resolve_params(params)
    assert not problems, problems
    return spec.build(values)


def arrays(block_id, **params):
    """x and y of every sample, in the source's order (no split, no normalisation)."""
    spec = nodegraph.default_registry().get(block_id)
    given = {k: v for k, v in WHOLE.items() if spec.param(k) is not None}
    ds = build(block_id, **{**given, **params})
    t = ds.tensors("train")
    return t["x"].numpy(), t["y"].numpy(), t


# -- bundled with scikit-learn -------------------------------------------------------------

@pytest.mark.parametrize("block_id, loader", [("data.Iris", skd.load_iris),
                                              ("data.Wine", skd.load_wine),
                                              ("data.BreastCancer", skd.load_breast_cancer)])
def test_classification_sets_equal_sklearn(block_id, loader):
    want_x, want_y = loader(return_X_y=True)
    x, y, t = arrays(block_id)
    assert t["y"].dtype == torch.int64 and y.shape == want_y.shape
    np.testing.assert_allclose(x, want_x, rtol=1e-6)
    np.testing.assert_array_equal(y, want_y)


def test_breast_cancer_binary_target_is_a_float_column_on_the_same_splits():
    want = skd.load_breast_cancer().target
    _, y, t = arrays("data.BreastCancer", target="binary")
    assert t["y"].dtype == torch.float32 and y.shape == (569, 1)
    np.testing.assert_array_equal(y[:, 0], want)  # 0 malignant, 1 benign, as scikit-learn
    binary, classes = build("data.BreastCancer", target="binary"), build("data.BreastCancer")
    for split in ("train", "val"):  # the stratified split does not depend on the target form
        np.testing.assert_array_equal(binary.tensors(split)["x"], classes.tensors(split)["x"])
        np.testing.assert_array_equal(binary.tensors(split)["y"][:, 0],
                                      classes.tensors(split)["y"])


def test_breast_cancer_binary_target_trains_a_logistic_regression(one_thread):
    g = nodegraph.Graph("cancer")
    g.add("data.BreastCancer", id="data", target="binary", batch_size=0)
    g.add("layers.Linear", id="logit", out_features=1)
    g.add("losses.BCEWithLogits", id="loss")
    g.add("optimizers.Adam", id="opt", lr=0.05)
    for edge in (("data", "x", "logit", "input"), ("logit", "output", "loss", "input"),
                 ("data", "y", "loss", "target"), ("loss", "loss", "opt", "loss")):
        g.connect(edge[:2], edge[2:])
    result = nodegraph.train(g, epochs=40, seed=0, device="cpu")
    x, y = result.compiled.datasets["data"].tensors("val").values()
    layer = result.module.blocks["logit"]
    with torch.no_grad():
        z = (x.double() @ layer.weight.double().T + layer.bias.double()).numpy()
    y = y.double().numpy()
    p = 1 / (1 + np.exp(-z))  # the loss is the mean of −y·log σ(z) − (1 − y)·log(1 − σ(z))
    bce = -np.mean(y * np.log(p) + (1 - y) * np.log(1 - p))
    assert result.final["val"]["loss"] == pytest.approx(bce, rel=1e-4)
    assert np.mean((z > 0) == (y > 0.5)) > 0.95  # the usual ~97 % of a linear model


def test_tabular_defaults_split_stratified_and_normalise_on_train():
    ds = build("data.Wine")
    assert ds.size("train") + ds.size("val") == 178
    train = ds.tensors("train")["x"]
    torch.testing.assert_close(train.mean(0), torch.zeros(13), atol=1e-5, rtol=0)
    counts = [torch.bincount(ds.tensors(s)["y"], minlength=3).float() / ds.size(s)
              for s in ("train", "val")]
    torch.testing.assert_close(counts[0], counts[1], atol=0.04, rtol=0)


def test_diabetes_is_a_regression_with_float_column_targets():
    want_x, want_y = skd.load_diabetes(return_X_y=True)
    x, y, t = arrays("data.Diabetes")
    assert t["y"].dtype == torch.float32 and y.shape == (442, 1)
    np.testing.assert_allclose(x, want_x, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(y[:, 0], want_y, rtol=1e-6)
    raw = arrays("data.Diabetes", scaled=False)[0]
    np.testing.assert_allclose(raw, skd.load_diabetes(return_X_y=True, scaled=False)[0],
                               rtol=1e-6)


def test_digits_flat_and_image_layouts_hold_the_pixels_over_16():
    bunch = skd.load_digits()
    x, y, _ = arrays("data.Digits")
    assert x.shape == (1797, 64)
    np.testing.assert_allclose(x, bunch.data / 16.0, rtol=1e-6)
    np.testing.assert_array_equal(y, bunch.target)
    image = arrays("data.Digits", layout="image")[0]
    assert image.shape == (1797, 1, 8, 8)
    np.testing.assert_array_equal(image.reshape(1797, 64), x)


def _bilinear_reference(image, size):
    """Separable bilinear resampling with half-pixel centres and clamped edges."""
    src = (np.arange(size) + 0.5) * image.shape[0] / size - 0.5
    grid = np.arange(image.shape[0])
    rows = np.stack([np.interp(src, grid, r) for r in image])
    return np.stack([np.interp(src, grid, c) for c in rows.T]).T


def test_digits_upsampled_to_28_keep_labels_range_and_match_bilinear():
    bunch = skd.load_digits()
    x, y, _ = arrays("data.Digits", size=28, layout="image")
    assert x.shape == (1797, 1, 28, 28)
    np.testing.assert_array_equal(y, bunch.target)
    assert x.min() >= 0.0 and x.max() <= 1.0 and x.max() > 0.99
    for i in (0, 5, 1000):
        np.testing.assert_allclose(x[i, 0], _bilinear_reference(bunch.images[i] / 16.0, 28),
                                   atol=1e-5)
    assert arrays("data.Digits", size=28)[0].shape == (1797, 784)


# -- files: IDX, CSV, NumPy ----------------------------------------------------------------

def _idx(array, code):
    """IDX bytes written straight from the format's definition."""
    header = struct.pack(">BBBB", 0, 0, code, array.ndim)
    header += struct.pack(f">{array.ndim}I", *array.shape)
    big = {0x08: ">u1", 0x0C: ">i4", 0x0D: ">f4"}[code]
    return header + array.astype(big).tobytes()


@pytest.fixture
def idx_files(tmp_path):
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, size=(12, 5, 4), dtype=np.uint8)
    labels = rng.integers(0, 10, size=12).astype(np.uint8)
    paths = {"images": tmp_path / "train-images-idx3-ubyte.gz",
             "labels": tmp_path / "train-labels-idx1-ubyte",
             "test_images": tmp_path / "t10k-images-idx3-ubyte",
             "test_labels": tmp_path / "t10k-labels-idx1-ubyte.gz"}
    paths["images"].write_bytes(gzip.compress(_idx(images, 0x08)))
    paths["labels"].write_bytes(_idx(labels, 0x08))
    paths["test_images"].write_bytes(_idx(images[:3], 0x08))
    paths["test_labels"].write_bytes(gzip.compress(_idx(labels[:3], 0x08)))
    return images, labels, {k: str(v) for k, v in paths.items()}


def test_mnist_reads_idx_files_gzipped_or_not(idx_files):
    images, labels, paths = idx_files
    x, y, t = arrays("data.MNIST", images=paths["images"], labels=paths["labels"],
                     layout="image")
    assert x.shape == (12, 1, 5, 4) and t["y"].dtype == torch.int64
    np.testing.assert_allclose(x[:, 0], images / 255.0, rtol=1e-6)
    np.testing.assert_array_equal(y, labels)
    flat = arrays("data.MNIST", images=paths["images"], labels=paths["labels"])[0]
    assert flat.shape == (12, 20)


def test_mnist_test_files_form_the_test_split(idx_files):
    images, labels, paths = idx_files
    ds = build("data.MNIST", **paths, val_fraction=0.25, test_fraction=0.5)
    assert (ds.size("train"), ds.size("val"), ds.size("test")) == (9, 3, 3)
    np.testing.assert_array_equal(ds.tensors("test")["y"].numpy(), labels[:3])
    with pytest.raises(NodegraphError, match="no test labels IDX file given"):
        build("data.MNIST", **{**paths, "test_labels": ""})
    with pytest.raises(NodegraphError, match=r"N labels; got \(3, 5, 4\) and \(12,\)"):
        build("data.MNIST", images=paths["test_images"], labels=paths["labels"])


def test_idx_reader_handles_other_types_and_refuses_broken_files(tmp_path):
    from nodes.data._files import read_idx

    values = np.arange(24, dtype=np.float32).reshape(2, 3, 4) - 7.5
    (tmp_path / "f.idx").write_bytes(_idx(values, 0x0D))
    np.testing.assert_array_equal(read_idx(str(tmp_path / "f.idx")), values)
    ints = np.array([-5, 70000], dtype=np.int32)
    (tmp_path / "i.idx").write_bytes(_idx(ints, 0x0C))
    np.testing.assert_array_equal(read_idx(str(tmp_path / "i.idx")), ints)
    (tmp_path / "short.idx").write_bytes(_idx(values, 0x0D)[:-4])
    with pytest.raises(NodegraphError, match="short.idx.*truncated"):
        read_idx(str(tmp_path / "short.idx"))
    (tmp_path / "text.idx").write_text("hello")
    with pytest.raises(NodegraphError, match="text.idx.*not an IDX file"):
        read_idx(str(tmp_path / "text.idx"))


def test_csv_round_trip_by_names_and_indices(tmp_path):
    path = tmp_path / "plants.csv"
    path.write_text("height; width ;species;weight\n1.5;2;setosa;10\n"
                    "3;4.25;virginica;20\n-1;0;setosa;30\n")
    x, y, t = arrays("data.CSV", path=str(path), delimiter=";", inputs=["width", "0"],
                     targets=["species"], target_kind="class")
    np.testing.assert_array_equal(x, [[2, 1.5], [4.25, 3], [0, -1]])
    assert t["y"].dtype == torch.int64 and y.tolist() == [0, 1, 0]  # sorted text labels
    x, y, _ = arrays("data.CSV", path=str(path), delimiter=";", targets=["-1", "height"],
                     inputs=["width"])
    np.testing.assert_array_equal(y, [[10, 1.5], [20, 3], [30, -1]])
    assert y.dtype == np.float32


def test_csv_without_header_defaults_to_last_column_target(tmp_path):
    path = tmp_path / "xor.tsv"
    path.write_text("0\t0\t0\n0\t1\t1\n1\t0\t1\n1\t1\t0\n")
    x, y, _ = arrays("data.CSV", path=str(path), header=False, delimiter="tab")
    np.testing.assert_array_equal(x, [[0, 0], [0, 1], [1, 0], [1, 1]])
    np.testing.assert_array_equal(y, [[0], [1], [1], [0]])


def test_csv_errors_name_the_file_and_the_cell(tmp_path):
    path = tmp_path / "bad.csv"
    path.write_text("a,b\n1,2\nx,3\n")
    with pytest.raises(NodegraphError, match=r"bad.csv.*column 'a' holds 'x' \(data row 2\)"):
        build("data.CSV", path=str(path))
    with pytest.raises(NodegraphError, match="no column 'c'.*columns: a, b"):
        build("data.CSV", path=str(path), targets=["c"])


def test_numpy_npz_and_npy_pairs_round_trip(tmp_path):
    rng = np.random.default_rng(1)
    x, labels = rng.normal(size=(10, 2, 3)), rng.integers(0, 4, size=(10, 1))
    np.savez(tmp_path / "set.npz", inputs=x, classes=labels)
    got_x, got_y, t = arrays("data.NumPy", path=str(tmp_path / "set.npz"), x_key="inputs",
                             y_key="classes", target_kind="class")
    np.testing.assert_allclose(got_x, x, rtol=1e-6)
    assert got_x.dtype == np.float32 and t["y"].dtype == torch.int64
    np.testing.assert_array_equal(got_y, labels[:, 0])
    np.save(tmp_path / "x.npy", x[:, 0, 0])
    np.save(tmp_path / "y.npy", x[:, 1, 1])
    got_x, got_y, _ = arrays("data.NumPy", path=str(tmp_path / "x.npy"),
                             y_path=str(tmp_path / "y.npy"))
    assert got_x.shape == (10, 1) and got_y.shape == (10, 1)
    np.testing.assert_allclose(got_y[:, 0], x[:, 1, 1], rtol=1e-6)


def test_numpy_refuses_missing_keys_mismatched_lengths_and_fractional_classes(tmp_path):
    np.savez(tmp_path / "set.npz", x=np.zeros((4, 2)), y=np.array([0, 1.5, 2, 3]))
    with pytest.raises(NodegraphError, match="set.npz.*no array 'labels'.*arrays: x, y"):
        build("data.NumPy", path=str(tmp_path / "set.npz"), y_key="labels")
    with pytest.raises(NodegraphError, match="whole numbers"):
        build("data.NumPy", path=str(tmp_path / "set.npz"), target_kind="class")
    np.save(tmp_path / "x.npy", np.zeros(4))
    np.save(tmp_path / "y.npy", np.zeros(5))
    with pytest.raises(NodegraphError, match="same number of samples"):
        build("data.NumPy", path=str(tmp_path / "x.npy"), y_path=str(tmp_path / "y.npy"))


def test_a_missing_file_is_a_data_error_on_the_node_naming_the_path(tmp_path):
    missing = str(tmp_path / "nowhere" / "cholesterol.csv")
    g = nodegraph.Graph()
    g.add("data.CSV", id="table", path=missing)
    g.add("layers.Linear", id="fit", out_features=1)
    g.connect(("table", "x"), ("fit", "input"))
    report = nodegraph.validate(g)
    [problem] = report.for_node("table")
    assert problem.kind == "data_error" and problem.port == "x"
    assert missing in problem.message and "does not exist" in problem.message
    assert "table" in problem.message
    assert report.for_node("fit") == []  # downstream of a failed node: skipped, not repeated


# -- files: image folders ------------------------------------------------------------------

def _paeth(a, b, c):
    p = a + b - c
    pa, pb, pc = np.abs(p - a), np.abs(p - b), np.abs(p - c)
    return np.where((pa <= pb) & (pa <= pc), a, np.where(pb <= pc, b, c))


def _png(rows: np.ndarray, colour: int, depth: int, step: int, palette=None) -> bytes:
    """A PNG written from the specification: row r uses filter r % 5 (None, Sub, Up,
    Average, Paeth), each computed from the raw bytes so decoding must undo it exactly."""
    raw = rows.astype(np.int64)
    height, width = raw.shape
    up = np.vstack([np.zeros((1, width), np.int64), raw[:-1]])
    shift = lambda a: np.hstack([np.zeros((len(a), step), np.int64), a[:, :-step]])  # noqa: E731
    left, corner = shift(raw), shift(up)
    predictors = [0 * raw, left, up, (left + up) // 2, _paeth(left, up, corner)]
    body = b"".join(bytes([r % 5]) + ((raw[r] - predictors[r % 5][r]) % 256)
                    .astype(np.uint8).tobytes() for r in range(height))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (struct.pack(">I", len(data)) + kind + data
                + struct.pack(">I", zlib.crc32(kind + data)))

    pixels_wide = width * 8 // (depth * {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}[colour])
    header = struct.pack(">IIBBBBB", pixels_wide, height, depth, colour, 0, 0, 0)
    extra = chunk(b"PLTE", palette.astype(np.uint8).tobytes()) if palette is not None else b""
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + extra
            + chunk(b"IDAT", zlib.compress(body)) + chunk(b"IEND", b""))


def test_pngs_of_every_filter_and_colour_type_decode_through_pillow(tmp_path):
    from nodes.data._images import read_image

    rng = np.random.default_rng(0)
    rgba = rng.integers(0, 256, size=(7, 5, 4))
    cases = {  # name: (PNG bytes, expected (C, H, W) in [0, 1])
        "rgb": (_png(rgba[..., :3].reshape(7, 15), 2, 8, 3), rgba[..., :3] / 255),
        "rgba": (_png(rgba.reshape(7, 20), 6, 8, 4), rgba[..., :3] / 255),
    }
    wide = rgba[..., :2] * 256 + rgba[..., 2:]  # 16-bit grey and alpha
    # Pillow reads 16-bit grey + alpha as 8-bit RGBA: grey in three channels, 8 bits
    cases["grey_alpha16"] = (_png(wide.astype(">u2").view(np.uint8).reshape(7, 20), 4, 16, 4),
                             np.repeat(wide[..., :1] / 65535, 3, axis=-1))
    bits = rng.integers(0, 2, size=(7, 16))
    cases["grey1"] = (_png(np.packbits(bits.astype(np.uint8), axis=1), 0, 1, 1),
                      bits[..., None])
    palette = rng.integers(0, 256, size=(4, 3))
    index = rng.integers(0, 4, size=(7, 5))
    cases["palette"] = (_png(index, 3, 8, 1, palette), palette[index] / 255)
    for name, (data, want) in cases.items():
        (tmp_path / f"{name}.png").write_bytes(data)
        got = read_image(tmp_path / f"{name}.png")
        np.testing.assert_allclose(got, want.transpose(2, 0, 1),
                                   atol=1 / 255 if name == "grey_alpha16" else 1e-6,
                                   err_msg=name)


def test_every_image_format_pillow_writes_reads_back(tmp_path):
    from PIL import Image

    from nodes.data._images import image_header, read_image

    rng = np.random.default_rng(1)
    rgb = rng.integers(0, 256, size=(6, 9, 3)).astype(np.uint8)
    for suffix in ("png", "bmp", "tiff", "webp", "ppm"):
        path = tmp_path / f"a.{suffix}"
        Image.fromarray(rgb).save(path, **({"lossless": True} if suffix == "webp" else {}))
        assert image_header(path) == (3, 6, 9)
        np.testing.assert_allclose(read_image(path), rgb.transpose(2, 0, 1) / 255, atol=1e-6,
                                   err_msg=suffix)
    smooth = np.repeat(np.linspace(0, 255, 16, dtype=np.uint8)[None, :, None], 16, 0)
    Image.fromarray(np.repeat(smooth, 3, axis=2)).save(tmp_path / "b.jpg", quality=95)
    np.testing.assert_allclose(read_image(tmp_path / "b.jpg"),
                               np.repeat(smooth.transpose(2, 0, 1), 3, 0) / 255, atol=0.03)
    grey = rgb[..., 0]
    Image.fromarray(grey).save(tmp_path / "c.png")
    assert image_header(tmp_path / "c.png") == (1, 6, 9)
    np.testing.assert_allclose(read_image(tmp_path / "c.png")[0], grey / 255, atol=1e-6)
    rgba = np.dstack([rgb, np.full((6, 9), 7, np.uint8)])
    Image.fromarray(rgba).save(tmp_path / "d.png")  # alpha dropped
    np.testing.assert_allclose(read_image(tmp_path / "d.png"), rgb.transpose(2, 0, 1) / 255,
                               atol=1e-6)
    Image.fromarray(rgb).convert("P").save(tmp_path / "e.gif")
    assert read_image(tmp_path / "e.gif").shape == (3, 6, 9)


def test_damaged_truncated_and_bomb_images_are_refused_naming_the_file(tmp_path):
    from PIL import Image

    from nodes.data._images import image_header, read_image

    rgb = np.random.default_rng(2).integers(0, 256, size=(64, 64, 3)).astype(np.uint8)
    Image.fromarray(rgb).save(tmp_path / "whole.jpg")
    raw = (tmp_path / "whole.jpg").read_bytes()
    (tmp_path / "cut.jpg").write_bytes(raw[:len(raw) // 2])
    with pytest.raises(NodegraphError, match=r"cut\.jpg' is damaged or truncated"):
        read_image(tmp_path / "cut.jpg")
    (tmp_path / "junk.png").write_bytes(b"\x89PNG not an image at all")
    with pytest.raises(NodegraphError, match=r"cannot read image '.*junk\.png'"):
        read_image(tmp_path / "junk.png")
    # a header claiming 100,000 x 100,000 pixels is refused before anything is allocated
    header = struct.pack(">IIBBBBB", 100_000, 100_000, 8, 2, 0, 0, 0)
    bomb = (b"\x89PNG\r\n\x1a\n" + struct.pack(">I", 13) + b"IHDR" + header
            + struct.pack(">I", zlib.crc32(b"IHDR" + header)))
    (tmp_path / "bomb.png").write_bytes(bomb)
    with pytest.raises(Exception, match=r"bomb\.png"):
        image_header(tmp_path / "bomb.png")


def test_netpbm_reader_plain_and_binary(tmp_path):
    from nodes.data._images import read_image

    (tmp_path / "a.pgm").write_bytes(b"P2\n# a comment\n3 2\n10\n0 5 10\n10 5 0\n")
    # Pillow scales a maxval of 10 to 8 bits: 5 / 10 becomes 128 / 255
    np.testing.assert_allclose(read_image(tmp_path / "a.pgm")[0], [[0, .5, 1], [1, .5, 0]],
                               atol=1 / 255)
    wide = np.array([[0, 1000], [65535, 300]], dtype=">u2")
    (tmp_path / "b.pgm").write_bytes(b"P5 2 2 65535\n" + wide.tobytes())
    np.testing.assert_allclose(read_image(tmp_path / "b.pgm")[0], wide / 65535.0, rtol=1e-6)
    rgb = np.arange(18, dtype=np.uint8).reshape(2, 3, 3) * 10
    (tmp_path / "c.ppm").write_bytes(b"P6\n3 2\n255\n" + rgb.tobytes())
    np.testing.assert_allclose(read_image(tmp_path / "c.ppm"), rgb.transpose(2, 0, 1) / 255,
                               rtol=1e-6)
    (tmp_path / "d.pbm").write_bytes(b"P4\n10 1\n" + bytes([0b10000000, 0b01000000]))
    np.testing.assert_array_equal(read_image(tmp_path / "d.pbm")[0, 0],
                                  [0, 1, 1, 1, 1, 1, 1, 1, 1, 0])  # 1 is black
    (tmp_path / "e.pbm").write_bytes(b"P1\n3 1\n010\n")
    np.testing.assert_array_equal(read_image(tmp_path / "e.pbm")[0, 0], [1, 0, 1])


def _image_folder(tmp_path):
    """Two classes of 2x3 images: 'cat' in grey PGM, 'dog' in RGB PNG (all filters)."""
    rng = np.random.default_rng(2)
    root = tmp_path / "pets"
    (root / "cat").mkdir(parents=True)
    (root / "dog").mkdir()
    (root / ".hidden").mkdir()
    grey = rng.integers(0, 256, size=(2, 2, 3), dtype=np.uint8)
    colour = rng.integers(0, 256, size=(3, 2, 3, 3))
    for i, g in enumerate(grey):
        (root / "cat" / f"{i}.pgm").write_bytes(b"P5 3 2 255\n" + g.tobytes())
    for i, c in enumerate(colour):
        (root / "dog" / f"{i}.png").write_bytes(_png(c.reshape(2, 9), 2, 8, 3))
    (root / "dog" / "notes.txt").write_text("not an image")
    return root, grey / 255.0, colour.transpose(0, 3, 1, 2) / 255.0


def test_image_folder_labels_by_sorted_folder_and_mixes_grey_into_rgb(tmp_path):
    root, grey, colour = _image_folder(tmp_path)
    x, y, _ = arrays("data.ImageFolder", path=str(root))
    assert x.shape == (5, 3, 2, 3) and y.tolist() == [0, 0, 1, 1, 1]
    np.testing.assert_allclose(x[:2], np.repeat(grey[:, None], 3, axis=1), atol=1e-6)
    np.testing.assert_allclose(x[2:], colour, atol=1e-6)
    x, _, _ = arrays("data.ImageFolder", path=str(root), grayscale=True, layout="flat")
    luminance = (colour * np.array([0.299, 0.587, 0.114])[:, None, None]).sum(1)
    np.testing.assert_allclose(x[2:], luminance.reshape(3, 6), atol=1e-6)
    x, _, _ = arrays("data.ImageFolder", path=str(root), size=4)
    assert x.shape == (5, 3, 4, 4) and 0 <= x.min() and x.max() <= 1


def test_image_folder_errors_name_the_path(tmp_path):
    root, _, _ = _image_folder(tmp_path)
    (root / "dog" / "photo.jpg").write_bytes(b"\xff\xd8\xff\xe0 not really")
    with pytest.raises(NodegraphError, match=r"cannot read image '.*photo\.jpg'.*on_error = skip"):
        build("data.ImageFolder", path=str(root))
    x, y, _ = arrays("data.ImageFolder", path=str(root), on_error="skip")
    assert x.shape == (5, 3, 2, 3) and y.tolist() == [0, 0, 1, 1, 1]
    (tmp_path / "flat").mkdir()
    next((root / "cat").iterdir()).rename(tmp_path / "flat" / "cat.png")  # no class folder
    with pytest.raises(NodegraphError, match="'.*flat' has no class subfolders"):
        build("data.ImageFolder", path=str(tmp_path / "flat"))
    with pytest.raises(NodegraphError, match="'.*missing' does not exist"):
        build("data.ImageFolder", path=str(tmp_path / "missing"))


# -- synthetic regressions ----------------------------------------------------------------

def test_polynomial_without_noise_is_the_formula():
    x, y, _ = arrays("data.Polynomial", coefficients=[1.0, -0.25, 0.3, 0.5], noise=0.0, n=50)
    np.testing.assert_allclose(y, 0.5 * x ** 3 + 0.3 * x ** 2 - 0.25 * x + 1, rtol=1e-5)
    assert -2 <= x.min() and x.max() <= 2 and len(np.unique(x)) == 50


@pytest.mark.parametrize("percent", [10.0, 100.0])
def test_polynomial_noise_is_the_percentage_of_the_signal_std(percent):
    x, y, _ = arrays("data.Polynomial", coefficients=[0.0, 2.0, -1.0], noise=percent, n=20000)
    clean = 2 * x - x ** 2
    ratio = (y - clean).std() / clean.std()
    assert ratio == pytest.approx(percent / 100, rel=0.03)
    assert abs((y - clean).mean()) < 0.03 * clean.std() * percent / 100 * 3


def test_sinusoid_and_sin_squared_follow_their_formulas():
    x, y, _ = arrays("data.Sinusoid", amplitude=2.0, frequency=3.0, phase=0.5, noise=0.0,
                     spacing="grid", n=11)
    np.testing.assert_allclose(x[:, 0], np.linspace(0, 1, 11), atol=1e-7)
    np.testing.assert_allclose(y, 2 * np.sin(2 * np.pi * 3 * x + 0.5), atol=1e-5)
    x, y, _ = arrays("data.SinSquared", noise=0.0)
    assert x.shape == (189, 1) and x[0, 0] == 0 and x[-1, 0] == pytest.approx(3 * np.pi)
    np.testing.assert_allclose(y, np.sin(x.astype(np.float64) ** 2), atol=1e-5)
    noisy = arrays("data.SinSquared", noise=25.0, n=5000, seed=3)
    residual = noisy[1] - np.sin(noisy[0].astype(np.float64) ** 2)
    assert residual.std() / np.sin(noisy[0].astype(np.float64) ** 2).std() == \
        pytest.approx(0.25, rel=0.05)


# -- synthetic point sets -----------------------------------------------------------------

def test_truth_tables_and_input_jitter():
    x, y, _ = arrays("data.NAND")
    np.testing.assert_array_equal(x, [[0, 0], [0, 1], [1, 0], [1, 1]])
    np.testing.assert_array_equal(y, [[1], [1], [1], [0]])
    assert arrays("data.NAND", target="class")[1].tolist() == [1, 1, 1, 0]
    x, y, _ = arrays("data.XOR", target="class", n=8)
    assert y.tolist() == [0, 1, 1, 0] * 2
    x, y, _ = arrays("data.XOR", n=4000, noise=5.0, seed=1)
    corners = np.round(x)
    assert np.array_equal(y[:, 0], (corners[:, 0] != corners[:, 1]).astype(np.float32))
    assert (x - corners).std() == pytest.approx(0.05, rel=0.05)


def test_moons_lie_on_their_half_circles():
    x, y, t = arrays("data.Moons", noise=0.0, n=101)
    assert t["y"].dtype == torch.int64 and np.bincount(y).tolist() == [50, 51]
    upper, lower = x[y == 0], x[y == 1]
    np.testing.assert_allclose(np.hypot(*upper.T), 1.0, atol=1e-6)
    assert (upper[:, 1] >= -1e-6).all()
    np.testing.assert_allclose(np.hypot(lower[:, 0] - 1, lower[:, 1] - 0.5), 1.0, atol=1e-6)
    assert (lower[:, 1] <= 0.5 + 1e-6).all()
    noisy, labels, _ = arrays("data.Moons", noise=10.0, n=4000, seed=2)
    clean, _, _ = arrays("data.Moons", noise=0.0, n=4000, seed=2)
    assert np.array_equal(labels, arrays("data.Moons", noise=0.0, n=4000, seed=2)[1])
    assert (noisy - clean).std() == pytest.approx(0.1, rel=0.05)


def test_circles_and_disc_ring_radii():
    x, y, _ = arrays("data.Circles", noise=0.0, factor=0.3, n=200)
    r = np.hypot(*x.T)
    np.testing.assert_allclose(r[y == 0], 1.0, atol=1e-6)
    np.testing.assert_allclose(r[y == 1], 0.3, atol=1e-6)
    x, y, _ = arrays("data.DiscRing", n=20001, inner_radius=1.2, outer_radius=2.0)
    r2 = (x.astype(np.float64) ** 2).sum(1)
    assert np.bincount(y).tolist() == [10001, 10000]
    assert r2[y == 0].max() < 1 and (r2[y == 1] >= 1.44 - 1e-5).all() and r2.max() <= 4 + 1e-5
    # uniform in area: r² is uniform, with mean 0.5 in the disc and (1.44 + 4) / 2 in the ring
    assert r2[y == 0].mean() == pytest.approx(0.5, abs=0.01)
    assert r2[y == 1].mean() == pytest.approx(2.72, abs=0.02)
    with pytest.raises(NodegraphError, match="inner_radius < outer_radius"):
        build("data.DiscRing", inner_radius=2.0, outer_radius=1.5)


def test_spiral_arms_follow_the_documented_angle():
    x, y, _ = arrays("data.Spirals", classes=3, turns=1.25, noise=0.0, n=300)
    assert np.bincount(y).tolist() == [100, 100, 100]
    r = np.hypot(*x.T)
    angle = np.arctan2(x[:, 1], x[:, 0])
    expected = 2 * np.pi * (1.25 * r + y / 3)
    wrapped = np.angle(np.exp(1j * (angle - expected)))
    np.testing.assert_allclose(wrapped, 0.0, atol=1e-4)
    assert 0 < r.min() and r.max() <= 1 + 1e-6


def test_blobs_sit_on_the_unit_circle_with_noise_as_spread():
    x, y, _ = arrays("data.Blobs", centers=4, noise=20.0, n=8000, seed=1)
    for k in range(4):
        centre = [np.cos(k * np.pi / 2), np.sin(k * np.pi / 2)]
        np.testing.assert_allclose(x[y == k].mean(0), centre, atol=0.02)
        np.testing.assert_allclose(x[y == k].std(0), 0.2, rtol=0.06)


def test_gaussian_mixture_samples_its_components():
    x, y, (means, covs, weights) = gaussian_mixture(30000, 3, [1.0, 2.0, 1.0], 20.0, seed=4)
    np.testing.assert_allclose(weights, [0.25, 0.5, 0.25])
    np.testing.assert_allclose(np.bincount(y) / len(y), weights, atol=0.01)
    for k in range(3):
        part = x[y == k].astype(np.float64)
        np.testing.assert_allclose(part.mean(0), means[k], atol=0.01)
        np.testing.assert_allclose(np.cov(part.T), covs[k], atol=0.003)
        axes = np.sqrt(np.linalg.eigvalsh(covs[k]))
        assert (axes >= 0.1 - 1e-9).all() and (axes <= 0.3 + 1e-9).all()
    block_x, block_y, _ = arrays("data.GaussianMixture", n_components=3, weights=[1, 2, 1],
                                 noise=20.0, n=30000, seed=4)
    np.testing.assert_array_equal(block_x, x)
    np.testing.assert_array_equal(block_y, y)
    exact, _, _ = arrays("data.GaussianMixture", noise=0.0, n=50)
    assert len(np.unique(exact, axis=0)) <= 3
    with pytest.raises(NodegraphError, match="one weight per component"):
        build("data.GaussianMixture", n_components=2, weights=[1.0])


def test_generators_are_seeded():
    for block_id in ("data.Spirals", "data.Moons", "data.Polynomial", "data.DiscRing"):
        a, b = arrays(block_id, seed=5)[0], arrays(block_id, seed=5)[0]
        np.testing.assert_array_equal(a, b)
        assert not np.array_equal(a, arrays(block_id, seed=6)[0]), block_id


def test_kfold_on_a_block_partitions_its_samples():
    vals = [build("data.Iris", folds=5, fold=k, split="stratified") for k in range(5)]
    assert [v.size("val") for v in vals] == [30] * 5 and all(v.size("train") == 120
                                                             for v in vals)
    for v in vals:
        assert torch.bincount(v.tensors("val")["y"]).tolist() == [10, 10, 10]


# -- end to end ---------------------------------------------------------------------------

@pytest.fixture
def one_thread():
    """Tiny models train many times faster on one thread when the cores are busy."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def test_softmax_regression_learns_iris_under_5_fold_cross_validation(one_thread):
    g = nodegraph.Graph("iris")
    g.add("data.Iris", id="iris", batch_size=16, folds=5)
    g.add("layers.Linear", id="scores", out_features=3)
    g.add("losses.CrossEntropy", id="loss")
    g.add("optimizers.Adam", id="opt", lr=0.05)
    g.add("metrics.Accuracy", id="acc")
    g.connect(("iris", "x"), ("scores", "input"))
    g.connect(("scores", "output"), ("loss", "input"))
    g.connect(("iris", "y"), ("loss", "target"))
    g.connect(("loss", "loss"), ("opt", "loss"))
    g.connect(("scores", "output"), ("acc", "input"))
    g.connect(("iris", "y"), ("acc", "target"))
    accuracy = []
    for fold in range(5):  # one 30-sample split is luck; five folds judge the model
        g.set_param("iris", "fold", fold)
        result = nodegraph.train(g, epochs=30, seed=0, device="cpu")
        assert len(result.history) == 30 and result.final["train"]["acc"] > 0.9
        accuracy.append(result.final["val"]["acc"])
    assert min(accuracy) > 0.8 and np.mean(accuracy) > 0.9, accuracy


# -- data.Table without targets (inference) ---------------------------------------------

def _inference_table(**params):
    from nodegraph.model.graph import Graph

    g = Graph("predict")
    g.add("data.Table", id="t", columns=["a", "b"], rows=[[1, 2], [3, 4], [5, 6]],
          inputs=["a", "b"], **params)
    g.add("layers.Linear", id="fc", out_features=1)
    g.connect(("t", "x"), ("fc", "input"))
    return g


def test_table_without_targets_has_an_empty_y_and_runs_forward():
    g = _inference_table()
    report = nodegraph.validate(g)
    assert report.ok, [str(p) for p in report.errors]
    assert report.shape("t", "y") == (3, 0)
    out = nodegraph.forward(g)
    x = out[("t", "x")]
    assert torch.equal(x, torch.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]))
    assert out[("t", "y")].shape == (3, 0)
    fc = nodegraph.compile(g, for_training=False).module.module_of("fc")
    assert torch.allclose(out[("fc", "output")], fc(x))


def test_table_without_targets_refuses_a_loss_and_a_stratified_split():
    g = _inference_table()
    g.add("losses.MSE", id="mse")
    g.connect(("fc", "output"), ("mse", "input"))
    g.connect(("t", "y"), ("mse", "target"))
    problems = nodegraph.validate(g).errors
    assert any(p.node == "mse" and p.port == "target" for p in problems), problems
    report = nodegraph.validate(_inference_table(split="stratified"))
    assert any(p.node == "t" and "target" in p.message for p in report.errors), report.errors
