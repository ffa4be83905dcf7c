"""Data sources: blocks that hand the trainer a whole dataset, split and ready to batch.

Every source outputs `x` (inputs) and `y` (targets) and shares the split, K-fold, batching
and normalisation params of `nodegraph.kinds.dataset.DATA_PARAMS`. Class targets are int64 class
indices shaped (N,) (binary 0/1 floats (N, 1) where a `target` param asks for them);
regression targets are float32 (N, 1). Three groups: real data bundled with scikit-learn,
files (CSV, NumPy, MNIST IDX; readers in `_files` and `_images`; image folders in `folders`),
and seeded synthetic generators (formulas in `_data_synthetic`).
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np
import torch

from nodegraph.kinds import footprint
from nodegraph.kinds.datameta import DataMeta, labels_counted, sized, split_sizes, with_classes
from nodegraph.kinds.dataset import DataParams, data_params, from_arrays
from nodegraph.kinds.declare import data
from nodegraph.kinds.streamed import STORAGE_PARAM
from nodegraph.model.errors import NodegraphError
from nodegraph.model.spec import (
    Param,
    Port,
    bool_param,
    choice_param,
    float_param,
    int_param,
    str_param,
)
from nodes.data import _files as files
from nodes.data import _recipes as recipes
from nodes.data import _synthetic as syn
from nodes.data._arrays import (
    MNISTParams,
    NumPyParams,
    arrays,
    arrays_meta,
    streamed_mnist,
    streamed_numpy,
)
from nodes.data._images import resize, to_layout
from nodes.data._streaming import mark

X = Port("x", doc="inputs, one row per sample")
Y = Port("y", doc="targets, one row per sample")
XY = {"outputs": [X, Y]}


def _binary_or_class(y01: np.ndarray, target: str) -> np.ndarray:
    """0/1 labels as a float column (N, 1) for BCE, or as int64 class indices (N,)."""
    return y01.astype(np.float32)[:, None] if target == "binary" else y01.astype(np.int64)


def _targets(y: np.ndarray, kind: str, where: str) -> np.ndarray:
    """Targets in the library's convention: class -> int64 (N,), value -> float32 (N, k)."""
    y = np.asarray(y)
    if y.dtype.kind not in "biuf":
        raise NodegraphError(f"{where}: targets must be numbers, not {y.dtype}")
    if kind == "value":
        return y.astype(np.float32).reshape(len(y), -1)
    if y.ndim > 1 and y.shape[1:] != (1,) * (y.ndim - 1):
        raise NodegraphError(f"{where}: class targets must be one class index per sample, "
                             f"got shape {y.shape}")
    y = y.reshape(-1)
    if y.dtype.kind == "f" and not np.all(np.isfinite(y) & (y == np.round(y))):
        raise NodegraphError(f"{where}: class targets must be whole numbers; use "
                             "target_kind 'value' for regression")
    if (y < 0).any():
        raise NodegraphError(f"{where}: class indices must be >= 0, found {y.min()}")
    return y.astype(np.int64)


def _inputs(x: np.ndarray, where: str) -> np.ndarray:
    x = np.asarray(x)
    if x.dtype.kind not in "biuf":
        raise NodegraphError(f"{where}: inputs must be numbers, not {x.dtype}")
    return x.astype(np.float32).reshape(len(x), -1) if x.ndim == 1 else x.astype(np.float32)


# -- bundled with scikit-learn -------------------------------------------------------------

@functools.cache
def _sklearn_dataset(name: str, **kwargs):
    """A dataset scikit-learn bundles, read from its file once per process: the editor
    validates as one types, and digits alone takes 30 ms to parse. Callers copy what they
    change (astype), so the arrays stay as read. scikit-learn is imported here, not at the
    top: it costs a second of start-up that a graph without its datasets never needs."""
    from sklearn import datasets

    return getattr(datasets, name)(**kwargs)


class DigitsParams(DataParams):
    size: int
    layout: str


def _digits(p: DigitsParams):
    bunch = _sklearn_dataset("load_digits")
    images = bunch.images[:, None].astype(np.float32) / 16.0  # pixel values are 0..16
    if p.size != 8:
        images = resize(images, p.size)
    return from_arrays({"x": to_layout(images, p.layout), "y": bunch.target.astype(np.int64)}, p)


def _sklearn_classes(name: str):
    def build(p):
        x, y = _sklearn_dataset(name, return_X_y=True)
        return from_arrays({"x": x.astype(np.float32), "y": y.astype(np.int64)}, p)
    return build


# what the scikit-learn sets hold, so validation need not load them: features and samples
# per class (tests/test_datameta_builtin.py holds these to the loaded data)
CLASS_COUNTS = {"load_digits": (64, (178, 182, 177, 183, 181, 182, 181, 179, 174, 180)),
                "load_iris": (4, (50, 50, 50)),
                "load_wine": (13, (59, 71, 48)),
                "load_breast_cancer": (30, (212, 357))}
DIABETES_SHAPE = (442, 10)


def _counted(name: str, ports, p):
    """The meta of bundled set `name` with these ports, split by its known class counts
    (and declaring them, where y holds class indices)."""
    counts = CLASS_COUNTS[name][1]
    meta = sized(ports, sum(counts), p, labels_counted(counts))
    return with_classes(meta, y=len(counts) if ports["y"][1] == torch.int64 else None)


def _digits_meta(p: DigitsParams):
    x = (1, p.size, p.size) if p.layout == "image" else (p.size * p.size,)
    return _counted("load_digits", {"x": (x, torch.float32), "y": ((), torch.int64)}, p)


def _sklearn_classes_meta(name: str):
    def meta(p):
        return _counted(name, {"x": ((CLASS_COUNTS[name][0],), torch.float32),
                               "y": ((), torch.int64)}, p)
    return meta


class BreastCancerParams(DataParams):
    target: str


def _breast_cancer_meta(p: BreastCancerParams):
    return _counted("load_breast_cancer", {"x": ((30,), torch.float32),
                                           "y": _Y[p.target]}, p)


class DiabetesParams(DataParams):
    scaled: bool


def _diabetes_meta(p: DiabetesParams):
    """None for a stratified split: its sizes depend on how often each target value occurs,
    which only the file tells."""
    n, features = DIABETES_SHAPE
    return sized({"x": ((features,), torch.float32), "y": ((1,), torch.float32)}, n, p)


def _breast_cancer(p: BreastCancerParams):
    x, y = _sklearn_dataset("load_breast_cancer", return_X_y=True)
    return from_arrays({"x": x.astype(np.float32), "y": _binary_or_class(y, p.target)}, p)


def _diabetes(p: DiabetesParams):
    x, y = _sklearn_dataset("load_diabetes", return_X_y=True, scaled=p.scaled)
    return from_arrays({"x": x.astype(np.float32), "y": y.astype(np.float32)[:, None]}, p)


# -- files ----------------------------------------------------------------------------------

def _csv_columns(p: CSVParams, names: list[str]) -> tuple[list[int], list[int]]:
    """The input and target column indices the params name, checked."""
    if not p.targets:
        raise NodegraphError("name at least one target column")
    targets = [files.column_index(names, c, p.path) for c in p.targets]
    inputs = ([files.column_index(names, c, p.path) for c in p.inputs]
              or [i for i in range(len(names)) if i not in targets])
    both = sorted({names[i] for i in set(inputs) & set(targets)})
    if both or not inputs:
        raise NodegraphError(f"columns {both} are both inputs and targets" if both else
                             "no columns are left for the inputs")
    if p.target_kind == "class" and len(targets) > 1:
        raise NodegraphError("class targets come from one column; name only one target")
    return inputs, targets


class CSVParams(DataParams):
    path: str
    header: bool
    delimiter: str
    inputs: list[str]
    targets: list[str]
    target_kind: str


def _csv(p: CSVParams):
    names, rows = files.read_csv(p.path, p.header, p.delimiter)
    inputs, targets = _csv_columns(p, names)
    x = np.stack([files.numeric_column(rows, i, names[i], p.path) for i in inputs], axis=1)
    if p.target_kind == "class":
        y = files.class_column(rows, targets[0])[0]
    else:
        y = np.stack([files.numeric_column(rows, i, names[i], p.path) for i in targets], axis=1)
    return from_arrays({"x": x.astype(np.float32), "y": _targets(y, p.target_kind, p.path)}, p)


def _csv_meta(p: CSVParams):
    """The CSV's shapes from its header and row count; cells that are not numbers are
    found when compile reads the file."""
    names, n = files.csv_shape(p.path, p.header, p.delimiter)
    inputs, targets = _csv_columns(p, names)
    y = ((), torch.int64) if p.target_kind == "class" else ((len(targets),), torch.float32)
    meta = sized({"x": ((len(inputs),), torch.float32), "y": y}, n, p)
    return with_classes(meta, y=_csv_classes(p, targets[0]) if p.target_kind == "class"
                        else None)


def _csv_classes(p: CSVParams, column: int) -> int | None:
    """How many classes the CSV's class column numbers, as the build numbers them (text
    labels: the distinct ones; whole numbers: the largest + 1), from a pass that keeps
    that column's cells alone; None when a cell is missing (the build says where)."""
    cells: list[list[str]] = []

    def take(row: list[str]) -> None:
        cells.append([row[column]] if column < len(row) else [])

    files._csv_rows(p.path, p.header, p.delimiter, take)
    if not cells or any(not c for c in cells):
        return None
    indices, labels = files.class_column(cells, 0)
    return len(labels) if labels else int(indices.max()) + 1


def _numpy(p: NumPyParams):
    lazy = streamed_numpy(p, lambda y, where: _targets(y, p.target_kind, where))
    if lazy is not None:
        return lazy
    if p.path.lower().endswith(".npz"):
        x, y = files.read_npz(p.path, (p.x_key, p.y_key))
        where = p.path
    else:
        x = files.read_npy(p.path, "x file")
        y = files.read_npy(p.y_path, "y file (y_path)")
        where = f"{p.path} and {p.y_path}"
    if x.ndim == 0 or y.ndim == 0 or len(x) != len(y):
        raise NodegraphError(f"{where}: x and y must hold the same number of samples, got "
                             f"shapes {x.shape} and {y.shape}")
    return from_arrays({"x": _inputs(x, where), "y": _targets(y, p.target_kind, where)}, p)


def _numpy_meta(p: NumPyParams):
    """Shapes from the arrays' headers, checked as the build checks them; the values (class
    indices whole and >= 0) are read when compile builds. None when a header does not read
    as a plain numeric .npy (the build says why)."""
    if p.path.lower().endswith(".npz"):
        heads = [files.npy_header(p.path, ".npz file", k) for k in (p.x_key, p.y_key)]
        where = p.path
    else:
        x = files.npy_header(p.path, "x file")  # x first: the build reads it first
        heads = [x, x and files.npy_header(p.y_path, "y file (y_path)")]
        where = f"{p.path} and {p.y_path}"
    x_head, y_head = heads
    if x_head is None or y_head is None or any(d.hasobject for _, d in (x_head, y_head)):
        return None
    (xs, xd), (ys, yd) = x_head, y_head
    if not xs or not ys or xs[0] != ys[0]:
        raise NodegraphError(f"{where}: x and y must hold the same number of samples, got "
                             f"shapes {xs} and {ys}")
    if xd.kind not in "biuf":
        raise NodegraphError(f"{where}: inputs must be numbers, not {xd}")
    if yd.kind not in "biuf":
        raise NodegraphError(f"{where}: targets must be numbers, not {yd}")
    y: tuple[tuple[int, ...], torch.dtype]
    if p.target_kind == "value":
        y = ((math.prod(ys[1:]),), torch.float32)
    elif ys[1:] != (1,) * (len(ys) - 1):
        raise NodegraphError(f"{where}: class targets must be one class index per sample, "
                             f"got shape {ys}")
    else:
        y = ((), torch.int64)
    meta = sized({"x": (xs[1:] if len(xs) > 1 else (1,), torch.float32), "y": y}, xs[0], p)
    return mark(meta, p, can_stream=not p.path.lower().endswith(".npz"))


def _idx_pair(images_path: str, labels_path: str, part: str) -> tuple[np.ndarray, np.ndarray]:
    """Images (N, 1, H, W) in [0, 1] and int64 labels from one pair of IDX files."""
    images = files.read_idx(images_path, f"{part} images IDX file")
    labels = files.read_idx(labels_path, f"{part} labels IDX file")
    if images.ndim != 3 or labels.ndim != 1 or len(images) != len(labels):
        raise NodegraphError(f"'{images_path}' must hold images (N, height, width) and "
                             f"'{labels_path}' N labels; got {images.shape} and {labels.shape}")
    if images.dtype == np.uint8:
        images = images.astype(np.float32) / 255.0
    return images.astype(np.float32)[:, None], _targets(labels, "class", labels_path)


def _mnist(p: MNISTParams):
    lazy = streamed_mnist(p, lambda path, part: _targets(
        files.read_idx(path, f"{part} labels IDX file"), "class", path))
    if lazy is not None:
        return lazy
    images, labels = _idx_pair(p.images, p.labels, "training")
    test_rows = None
    if p.test_images or p.test_labels:
        test_x, test_y = _idx_pair(p.test_images, p.test_labels, "test")
        if test_x.shape[1:] != images.shape[1:]:
            raise NodegraphError(f"test images '{p.test_images}' {test_x.shape[2:]} and "
                                 f"training images '{p.images}' {images.shape[2:]} differ in size")
        test_rows = np.arange(len(images), len(images) + len(test_x))
        images, labels = np.concatenate([images, test_x]), np.concatenate([labels, test_y])
    return from_arrays({"x": to_layout(images, p.layout), "y": labels}, p, test_rows=test_rows)


def _idx_pair_meta(images_path: str, labels_path: str, part: str
                   ) -> tuple[tuple[int, ...], np.ndarray]:
    """The images' dims (N, height, width) from their IDX header and the labels (a small
    file, read: their values are checked as the build checks them), refused as
    `_idx_pair` refuses them."""
    dims, _ = files.idx_header(images_path, f"{part} images IDX file")
    labels = files.read_idx(labels_path, f"{part} labels IDX file")
    if len(dims) != 3 or labels.ndim != 1 or dims[0] != len(labels):
        raise NodegraphError(f"'{images_path}' must hold images (N, height, width) and "
                             f"'{labels_path}' N labels; got {dims} and {labels.shape}")
    return dims, _targets(labels, "class", labels_path)


def _mnist_meta(p: MNISTParams):
    """The images' shapes from the IDX headers; the split is that of the build (stratified
    on the labels, read), the test files, when given, forming the test split."""
    dims, labels = _idx_pair_meta(p.images, p.labels, "training")
    n_test, tested = 0, bool(p.test_images or p.test_labels)
    if tested:
        test_dims, _ = _idx_pair_meta(p.test_images, p.test_labels, "test")
        if test_dims[1:] != dims[1:]:
            raise NodegraphError(f"test images '{p.test_images}' {test_dims[1:]} and "
                                 f"training images '{p.images}' {dims[1:]} differ in size")
        n_test = test_dims[0]
    x = (1, *dims[1:]) if p.layout == "image" else (dims[1] * dims[2],)
    stratified = labels if p.split == "stratified" else None
    sizes = split_sizes(dims[0], {**p, "test_fraction": 0.0} if tested else p, stratified)
    return mark(DataMeta({"x": (x, torch.float32), "y": ((), torch.int64)},
                         {**sizes, **({"test": n_test} if n_test else {})}, p.batch_size), p)


# -- synthetic ----------------------------------------------------------------------------

# Peak bytes per generated sample: float64 draws and temporaries, the float32 copies and the
# split copies; measured at 29-88 bytes for the generators here (n = 2,000,000).
SAMPLE_BYTES = 128


class SampledParams(DataParams):
    """What every generator of `n` samples declares (each one's own view adds the rest)."""

    n: int
    noise: float
    seed: int


def need_samples(p: SampledParams, per_sample: int = SAMPLE_BYTES) -> None:
    """Refuse, before generating, `n` samples that cannot fit in memory."""
    footprint.need(p.n * per_sample, "n", p.n, "its samples")


def _generated(make):
    """A build function for a generator `make(p) -> (x, y)`; a `target` param, where the
    block has one, turns 0/1 labels into a BCE column or class indices. The sample count
    is checked against the memory available first."""
    def build(p: SampledParams):
        need_samples(p)
        x, y = make(p)
        if "target" in p:
            y = _binary_or_class(y, p.typed(TARGET))
        return from_arrays({"x": x, "y": y}, p)
    return build


_Y = {"value": ((1,), torch.float32), "class": ((), torch.int64),
      "binary": ((1,), torch.float32)}


def _meta(x_dims: int, y: str, refuse=None, classes=lambda p: 2):
    """`meta` of a generator of `n` samples, x float32 (N, x_dims), y a float column
    ("value"), class indices ("class") or what the `target` param asks ("target"): the
    shapes the builder makes, after the refusals it would make (`refuse(p)`); class
    indices run over `classes(p)` classes."""
    def meta(p: SampledParams):
        need_samples(p)
        if refuse is not None:
            refuse(p)
        kind = p.typed(TARGET) if y == "target" else y
        return with_classes(sized({"x": ((x_dims,), torch.float32), "y": _Y[kind]}, p.n, p),
                            y=classes(p) if kind == "class" else None)
    return meta


class RegressionParams(SampledParams):
    """What every y = f(x) + noise generator declares."""

    x_min: float
    x_max: float
    spacing: str


class PolynomialParams(RegressionParams):
    coefficients: list[float]


class SinusoidParams(RegressionParams):
    amplitude: float
    frequency: float
    phase: float


def _x_range_ok(p: RegressionParams) -> None:
    if p.x_max <= p.x_min:
        raise NodegraphError(f"x_max ({p.x_max}) must be larger than x_min ({p.x_min})")


def _line_ok(p: NoisyLineParams) -> None:  # the line's builder allows x_min == x_max (a constant x)
    if p.x_max < p.x_min:
        raise NodegraphError(f"x_max ({p.x_max}) must not be smaller than x_min ({p.x_min})")


class DiscRingParams(SampledParams):
    target: str
    inner_radius: float
    outer_radius: float


def _disc_ring(p: DiscRingParams):
    return syn.disc_ring(p.n, p.inner_radius, p.outer_radius, p.noise, p.seed)


def _ring_ok(p: DiscRingParams) -> None:
    if not 1.0 <= p.inner_radius < p.outer_radius:
        raise NodegraphError(f"the ring needs 1 <= inner_radius < outer_radius, got "
                             f"{p.inner_radius} and {p.outer_radius}")


class BlobsParams(SampledParams):
    centers: int


def _blobs_ok(p: BlobsParams) -> None:
    if p.centers > p.n:
        raise NodegraphError(f"'centers' ({p.centers:,}) cannot exceed the number of samples "
                             f"n ({p.n:,})")


class GaussianMixtureParams(SampledParams):
    n_components: int
    weights: list[float]


def _blob_count(p: BlobsParams) -> int:
    return p.centers


def _mixture_count(p: GaussianMixtureParams) -> int:
    return p.n_components


def _spiral_arms(p: SpiralsParams) -> int:
    return p.classes


def _mixture_ok(p: GaussianMixtureParams) -> None:
    footprint.need(p.n_components * 128, "n_components", p.n_components, "its components")
    if p.weights and len(p.weights) != p.n_components:
        raise NodegraphError(f"give one weight per component: {p.n_components} components, "
                             f"{len(p.weights)} weights")
    w = np.asarray(p.weights or [1.0], dtype=np.float64)
    if (w < 0).any() or w.sum() <= 0:
        raise NodegraphError("mixing weights must be >= 0 and not all zero")


def _polynomial_ok(p: PolynomialParams) -> None:
    _x_range_ok(p)
    syn.polynomial(p.coefficients)


def _regression(f):
    """Generated y = f(p)(x) + noise on the block's x range."""
    def make(p: RegressionParams):
        return syn.regression(f(p), p.n, p.x_min, p.x_max, p.spacing, p.noise, p.seed)
    return _generated(make)


def _polynomial(p: PolynomialParams):
    return syn.polynomial(p.coefficients)


def _sinusoid(p: SinusoidParams):
    return lambda x: p.amplitude * np.sin(2 * np.pi * p.frequency * x + p.phase)


def _truth_table(gate):
    def make(p: SampledParams):
        return syn.truth_table(gate, p.n, p.noise, p.seed)
    return _generated(make)


class MoonsParams(SampledParams):
    target: str


def _moons(p: MoonsParams):
    return syn.moons(p.n, p.noise, p.seed)


class CirclesParams(SampledParams):
    target: str
    factor: float


def _circles(p: CirclesParams):
    return syn.circles(p.n, p.factor, p.noise, p.seed)


class SpiralsParams(SampledParams):
    classes: int
    turns: float


def _spirals(p: SpiralsParams):
    return syn.spirals(p.n, p.classes, p.turns, p.noise, p.seed)


class NoisyLineParams(SampledParams):
    slope: float
    intercept: float
    x_min: float
    x_max: float


def _noisy_line(p: NoisyLineParams):
    need_samples(p)
    rng = np.random.default_rng(p.seed)
    x = rng.uniform(p.x_min, p.x_max, size=(p.n, 1)).astype(np.float32)
    y = p.slope * x + p.intercept + rng.normal(0.0, p.noise, size=(p.n, 1))
    return from_arrays({"x": x, "y": y.astype(np.float32)}, p)


def _blobs(p: BlobsParams):
    _blobs_ok(p)  # scikit-learn loops over the centres, most of them empty
    return syn.blobs(p.n, p.centers, p.noise, p.seed)


def _gaussian_mixture(p: GaussianMixtureParams):
    # means, scales, angles and 2 x 2 rotations per component, in float64
    footprint.need(p.n_components * 128, "n_components", p.n_components, "its components")
    return syn.gaussian_mixture(p.n, p.n_components, p.weights, p.noise, p.seed)[:2]


def _table_columns(p: TableParams) -> list[str]:
    """The table's column names, after the checks of its shape and params the build makes
    before reading a value."""
    cols = list(p.columns)
    rows = p.rows
    if not rows or any(not isinstance(r, list) or len(r) != len(cols) for r in rows):
        raise NodegraphError(f"every row must be a list of {len(cols)} values ({cols})")
    missing = [c for c in [*p.inputs, *p.targets, *([p.split_column] if p.split_column else [])]
               if c not in cols]
    if missing:
        raise NodegraphError(f"columns {missing} are not in the table (columns: {cols})")
    if not p.inputs:
        raise NodegraphError("name at least one input column")
    if not p.targets and p.get("split") == "stratified":
        raise NodegraphError("a stratified split needs a target column; name one in targets "
                             "or choose another split")
    return cols


def _table_column(p: TableParams, cols: list[str], name: str, dtype) -> np.ndarray:
    try:
        with np.errstate(over="ignore"):
            column = np.array([r[cols.index(name)] for r in p.rows], dtype=dtype)
    except (TypeError, ValueError, OverflowError):
        raise NodegraphError(f"column '{name}' holds a value that is not a number") from None
    # 1e300 in a float32 column is inf: the fit or the loss would fail far from here
    if column.dtype.kind == "f" and not np.isfinite(column).all():
        raise NodegraphError(f"column '{name}' holds a value beyond what {column.dtype} "
                             f"holds (at most {np.finfo(column.dtype).max:.3g})")
    return column


def _table_targets(p: TableParams, cols: list[str]) -> np.ndarray:
    if not p.targets:  # inference only: y is empty, (N, 0), and nothing may train on it
        return np.zeros((len(p.rows), 0), dtype=np.float32)
    if p.target_kind == "class":
        return _table_column(p, cols, p.targets[0], np.float64).astype(np.int64)
    return np.stack([_table_column(p, cols, c, np.float32) for c in p.targets], axis=1)


def _table_splits(p: TableParams, cols: list[str]) -> dict[str, np.ndarray] | None:
    """The rows of each split the split column fixes; None without one."""
    if not p.split_column:
        return None
    labels = [r[cols.index(p.split_column)] for r in p.rows]
    bad = sorted({str(v) for v in labels} - {"train", "val", "test"})
    if bad:
        raise NodegraphError(f"split column values must be train, val or test, not {bad}")
    if "train" not in labels:
        raise NodegraphError(f"the split column '{p.split_column}' marks no row 'train'; "
                             "every dataset needs training rows")
    return {s: np.array([i for i, v in enumerate(labels) if v == s], dtype=np.int64)
            for s in ("train", "val", "test")}


class TableParams(DataParams):
    columns: list[str]
    rows: Any
    inputs: list[str]
    targets: list[str]
    target_kind: str
    split_column: str


def _table(p: TableParams):
    cols = _table_columns(p)
    x = np.stack([_table_column(p, cols, c, np.float32) for c in p.inputs], axis=1)
    y = _table_targets(p, cols)
    return from_arrays({"x": x, "y": y}, p, given_splits=_table_splits(p, cols))


def _table_meta(p: TableParams):
    """The table's shapes from its params; its values are checked as the build checks
    them (they are in the params already), the dataset is not made."""
    cols = _table_columns(p)
    for c in p.inputs:
        _table_column(p, cols, c, np.float32)
    y = _table_targets(p, cols)
    ports = {"x": ((len(p.inputs),), torch.float32),
             "y": (tuple(y.shape[1:]), torch.int64 if y.dtype == np.int64 else torch.float32)}
    given = _table_splits(p, cols)
    # class indices are the column's own whole numbers: as many classes as the largest + 1
    count = int(y.max()) + 1 if y.dtype == np.int64 and y.size else None
    if given is not None:
        return with_classes(DataMeta(ports, {s: len(i) for s, i in given.items()
                                             if len(i) > 0}, p.batch_size), y=count)
    return with_classes(sized(ports, len(p.rows), p, y if p.split == "stratified" else None),
                        y=count)


# -- shared params ------------------------------------------------------------------------

def target_param(default: str) -> Param:
    return choice_param("target", ("binary", "class"), default,
                        "binary: y is a float column of 0/1 (for BCE); class: y holds class "
                        "indices (for cross-entropy)")


TARGET = target_param("binary")
TARGET_KIND = choice_param("target_kind", ("value", "class"), "value",
                           "value: y is float (regression); class: y holds class indices")
LAYOUT = choice_param("layout", ("flat", "image"), "flat",
                      "flat: one row of pixels per sample (N, H*W), for Linear layers; "
                      "image: (N, channels, H, W), for convolutions")
SEED = int_param("seed", 0, "seed of the generator, fixed so runs compare", min=0)


def n_param(default: int) -> Param:
    return int_param("n", default, "number of samples", min=1)


def noise_param(default: float, of: str) -> Param:
    return float_param("noise", default, f"noise level in %: {of}; 0 gives the exact formula",
                       min=0)


def x_range(lo: float, hi: float, spacing: str = "random") -> list[Param]:
    return [float_param("x_min", lo, "smallest x"), float_param("x_max", hi, "largest x"),
            choice_param("spacing", ("random", "grid"), spacing,
                         "random: x uniform in [x_min, x_max]; grid: evenly spaced, both "
                         "ends included")]


SIGNAL_NOISE = "Gaussian noise with this % of the clean signal's standard deviation"
POINT_NOISE = "Gaussian jitter of each coordinate, std in % of the unit length"
TRUTH_PARAMS = [n_param(4), noise_param(0.0, POINT_NOISE + " (the side of the square)"),
                SEED]
TABULAR = data_params(val_fraction=0.2, split="stratified", normalize="zscore")

_bundled = [
    data("data.Digits",
         "scikit-learn's handwritten digits: 1797 grey 8x8 images of 0-9.\n\n"
         "Real image data that ships with scikit-learn, so nothing is downloaded; "
         "`size` 28 upsamples bilinearly to 28x28 as a stand-in for MNIST. Pixels in [0, 1].",
         _digits, **XY, meta=_digits_meta,
         params=[choice_param("size", (8, 28), 8, "image side: 8 as stored, or 28 (bilinear "
                              "upsampling, an MNIST stand-in)"),
                 LAYOUT, *data_params(batch_size=64, val_fraction=0.2, split="stratified")],
         recipe=recipes.digits,
         keywords=("mnist", "images", "handwriting", "classification", "sklearn")),
    data("data.Iris",
         "Fisher's iris flowers: 150 samples, 4 measurements, 3 species.\n\n"
         "The smallest real classification set; a linear softmax model separates it almost "
         "perfectly.",
         _sklearn_classes("load_iris"), **XY, meta=_sklearn_classes_meta("load_iris"),
         params=list(TABULAR),
         recipe=recipes.iris,
         keywords=("flowers", "classification", "tabular", "sklearn")),
    data("data.Wine",
         "Wine recognition: 178 wines, 13 chemical measurements, 3 cultivars.\n\n"
         "Features on very different scales: a case for z-score normalisation.",
         _sklearn_classes("load_wine"), **XY, meta=_sklearn_classes_meta("load_wine"),
         params=list(TABULAR),
         recipe=recipes.wine,
         keywords=("classification", "tabular", "sklearn")),
    data("data.BreastCancer",
         "Wisconsin breast cancer: 569 tumours, 30 features, malignant (0) or benign (1).\n\n"
         "A real binary classification set, for logistic regression and calibration: "
         "`target` binary gives the float (N, 1) column losses.BCEWithLogits takes, class "
         "the class indices of cross-entropy over two scores.",
         _breast_cancer, **XY, meta=_breast_cancer_meta, params=[target_param("class"), *TABULAR],
         recipe=recipes.breast_cancer,
         keywords=("binary", "classification", "tabular", "medical", "sklearn")),
    data("data.Diabetes",
         "Diabetes progression: 442 patients, 10 features, a disease measure a year later.\n\n"
         "A real regression set; y is float (N, 1), in the original units.",
         _diabetes, **XY, meta=_diabetes_meta,
         params=[bool_param("scaled", True, "features mean-centred and scaled as "
                            "scikit-learn ships them (each column has unit norm)"),
                 *data_params(val_fraction=0.2)],
         recipe=recipes.diabetes,
         keywords=("regression", "tabular", "medical", "sklearn")),
]

_files = [
    data("data.CSV",
         "A table from a CSV file: chosen columns form x, others y.\n\n"
         "Columns are named by header name or by index (0 first, -1 last). With no input "
         "columns named, every column that is not a target is an input. Class targets may "
         "be integers or text labels (numbered in sorted order).",
         _csv, **XY, meta=_csv_meta,
         params=[str_param("path", doc="the CSV file"),
                 bool_param("header", True, "the first row holds column names"),
                 str_param("delimiter", ",", "the character between cells ('tab' for tabs)"),
                 Param("inputs", "strs", [], "columns that form x (names or indices); empty: "
                       "all columns that are not targets"),
                 Param("targets", "strs", ["-1"], "columns that form y (names or indices)"),
                 TARGET_KIND, *data_params(val_fraction=0.2)],
         keywords=("file", "table", "tabular", "spreadsheet")),
    data("data.NumPy",
         "Arrays saved with NumPy: a .npz archive, or an .npy for x and one for y.\n\n"
         "x keeps its shape (images stay images) as float32; y follows target_kind. "
         "Streamed (storage stream, or more than memory holds), the x .npy is "
         "memory-mapped and read a sample at a time.",
         _numpy, **XY, meta=_numpy_meta,
         params=[str_param("path", doc="the .npz archive, or the .npy file holding x"),
                 str_param("y_path", "", "the .npy file holding y (with an .npy path)"),
                 str_param("x_key", "x", "name of the x array inside an .npz"),
                 str_param("y_key", "y", "name of the y array inside an .npz"),
                 TARGET_KIND, STORAGE_PARAM, *data_params(val_fraction=0.2)],
         keywords=("file", "npy", "npz", "arrays", "memmap")),
    data("data.Arrays",
         "Inputs declared by shape, the arrays given from Python: nodegraph.fit(g, x=X, y=Y).\n\n"
         "Like keras.Input(shape=...): x_shape is one sample's shape (without the batch "
         "dimension), y_shape one target's ([] for one class index or value per sample). "
         "The graph validates and shows its shapes from these; the data come with fit, "
         "evaluate and predict, split, scaled and batched by the params below.",
         arrays, **XY, meta=arrays_meta,
         params=[Param("x_shape", "ints", doc="the shape of one input sample, e.g. [2] "
                       "or [1, 28, 28] (required, as keras.Input's shape)"),
                 Param("y_shape", "ints", [], "the shape of one target ([] for one class "
                       "index or one value per sample)"),
                 TARGET_KIND, *data_params(val_fraction=0.0)],
         keywords=("input", "placeholder", "numpy", "arrays", "python", "keras")),
    data("data.MNIST",
         "Images and labels from IDX files, the format MNIST is distributed in.\n\n"
         "Reads the idx3-ubyte images and idx1-ubyte labels (gzipped or not) you have on "
         "disk; nothing is downloaded. Pixels are scaled to [0, 1]. Given test files form "
         "the test split, as MNIST intends. Streamed (storage stream, or more than "
         "memory holds), the images are memory-mapped (a gzipped file is unpacked once "
         "as bytes) and read a sample at a time.",
         _mnist, **XY, meta=_mnist_meta,
         params=[str_param("images", doc="IDX file of training images, e.g. "
                           "train-images-idx3-ubyte.gz"),
                 str_param("labels", doc="IDX file of their labels, e.g. "
                           "train-labels-idx1-ubyte.gz"),
                 str_param("test_images", "", "IDX file of test images (optional)"),
                 str_param("test_labels", "", "IDX file of test labels (optional)"),
                 LAYOUT, STORAGE_PARAM, *data_params(batch_size=64, val_fraction=0.1)],
         keywords=("digits", "images", "idx", "fashion-mnist", "file")),
]

_regressions = [
    data("data.NoisyLine",
         "Points on a straight line y = slope*x + intercept with Gaussian noise.\n\n"
         "For checking that a regression recovers known parameters.",
         _noisy_line, **XY, meta=_meta(1, "value", _line_ok),
         params=[float_param("slope", 2.0, "slope of the true line"),
                 float_param("intercept", -1.0, "intercept of the true line"),
                 float_param("noise", 0.1, "standard deviation of the added noise", min=0),
                 int_param("n", 200, "number of samples", min=2),
                 float_param("x_min", -1.0, "smallest x"), float_param("x_max", 1.0, "largest x"),
                 int_param("seed", 0, "seed of the generator", min=0),
                 *data_params(val_fraction=0.2)],
         recipe=recipes.noisy_line,
         keywords=("regression", "synthetic", "linear")),
    data("data.Polynomial",
         "A noisy polynomial y = c0 + c1 x + c2 x² + ... + noise.\n\n"
         "For polynomial regression and the bias-variance trade-off; the default is the "
         "cubic 0.5x³ + 0.3x² - 0.25x + 1.",
         _regression(_polynomial), **XY,
         meta=_meta(1, "value", _polynomial_ok),
         params=[Param("coefficients", "floats", [1.0, -0.25, 0.3, 0.5],
                       "c0, c1, c2, ...: lowest order first"),
                 *x_range(-2.0, 2.0), n_param(200), noise_param(10.0, SIGNAL_NOISE), SEED,
                 *data_params(val_fraction=0.2)],
         recipe=recipes.polynomial,
         keywords=("regression", "synthetic", "cubic", "quadratic", "bias variance")),
    data("data.Sinusoid",
         "A noisy sine wave y = amplitude * sin(2π frequency x + phase) + noise.\n\n"
         "A smooth non-linear target for small MLPs and basis expansions.",
         _regression(_sinusoid), **XY, meta=_meta(1, "value", _x_range_ok),
         params=[float_param("amplitude", 1.0, "peak value of the wave"),
                 float_param("frequency", 1.0, "periods per unit of x"),
                 float_param("phase", 0.0, "shift in radians"),
                 *x_range(0.0, 1.0), n_param(200), noise_param(10.0, SIGNAL_NOISE), SEED,
                 *data_params(val_fraction=0.2)],
         recipe=recipes.sinusoid,
         keywords=("regression", "synthetic", "sine", "wave")),
    data("data.SinSquared",
         "The course's regression toy y = sin(x²) + noise on [0, 3π].\n\n"
         "Its frequency rises with x, so it tells optimizers and network sizes apart; the "
         "defaults give the 189 evenly spaced points of x = 0:0.05:3π's range.",
         _regression(lambda p: lambda x: np.sin(x ** 2)), **XY,
         meta=_meta(1, "value", _x_range_ok),
         params=[*x_range(0.0, 3 * math.pi, "grid"), n_param(189),
                 noise_param(10.0, SIGNAL_NOISE), SEED, *data_params(val_fraction=0.2)],
         recipe=recipes.sin_squared,
         keywords=("regression", "synthetic", "chirp", "optimizer race")),
]

_point_sets = [
    data("data.XOR",
         "The four points of the XOR truth table.\n\nThe classic problem a single linear "
         "layer cannot solve: y = x1 XOR x2. More than 4 samples repeat the table; noise "
         "jitters the inputs.",
         _truth_table(np.not_equal), **XY, meta=_meta(2, "target"),
         params=[TARGET, *TRUTH_PARAMS, *data_params(batch_size=4)],
         recipe=recipes.xor,
         keywords=("logic", "truth table", "toy")),
    data("data.NAND",
         "The four points of the NAND truth table: y = NOT (x1 AND x2).\n\n"
         "Linearly separable: one threshold unit computes it. More than 4 samples repeat "
         "the table; noise jitters the inputs.",
         _truth_table(lambda a, b: ~(a & b)), **XY, meta=_meta(2, "target"),
         params=[TARGET, *TRUTH_PARAMS, *data_params(batch_size=4)],
         recipe=recipes.nand,
         keywords=("logic", "truth table", "perceptron", "tlu", "toy")),
    data("data.Moons",
         "Two interleaving half circles of radius 1 (scikit-learn's make_moons).\n\n"
         "Class 0 on (cos t, sin t), class 1 on (1 - cos t, 0.5 - sin t): a curved "
         "boundary a linear model cannot draw.",
         _generated(_moons), **XY,
         meta=_meta(2, "target"),
         params=[target_param("class"), n_param(200), noise_param(10.0, POINT_NOISE), SEED,
                 *data_params(val_fraction=0.2)],
         recipe=recipes.moons,
         keywords=("classification", "synthetic", "2d", "toy")),
    data("data.Circles",
         "Two concentric circles (scikit-learn's make_circles).\n\n"
         "Class 0 on the circle of radius 1, class 1 on the one of radius `factor`: "
         "separable by the radius only.",
         _generated(_circles), **XY,
         meta=_meta(2, "target"),
         params=[target_param("class"), n_param(200),
                 float_param("factor", 0.5, "radius of the inner circle (outer is 1)",
                             min=0, max=0.999),
                 noise_param(5.0, POINT_NOISE), SEED, *data_params(val_fraction=0.2)],
         recipe=recipes.circles,
         keywords=("classification", "synthetic", "2d", "toy", "radial")),
    data("data.DiscRing",
         "Points in the unit disc (class 0) against points in a ring around it (class 1).\n\n"
         "The non-linearly separable set of the notes: the feature x1² + x2² separates it, "
         "no straight line does. Points are uniform in area, half in each class.",
         _generated(_disc_ring), **XY,
         meta=_meta(2, "target", _ring_ok),
         params=[target_param("class"), n_param(200),
                 float_param("inner_radius", 1.0, "inner radius of the ring (>= 1, the "
                             "disc's radius)", min=1),
                 float_param("outer_radius", 1.5, "outer radius of the ring", min=1),
                 noise_param(0.0, POINT_NOISE), SEED, *data_params(val_fraction=0.2)],
         keywords=("classification", "synthetic", "2d", "radial", "feature map")),
    data("data.Spirals",
         "Interleaved spiral arms, one class per arm.\n\n"
         "Arm c holds r (cos a, sin a) with r in (0, 1] and a = 2π (turns r + c / classes): "
         "hard for shallow models, the classic test of depth.",
         _generated(_spirals), **XY,
         meta=_meta(2, "class", classes=_spiral_arms),
         params=[int_param("classes", 2, "number of arms (classes)", min=2),
                 float_param("turns", 1.5, "turns of each arm", min=0),
                 n_param(300), noise_param(3.0, POINT_NOISE), SEED,
                 *data_params(val_fraction=0.2)],
         keywords=("classification", "synthetic", "2d", "toy", "swiss roll")),
    data("data.Blobs",
         "Round Gaussian clusters, one class each (scikit-learn's make_blobs).\n\n"
         "The centres sit evenly on the unit circle; `noise` is each cluster's standard "
         "deviation in % of that radius, so it sets how much the classes overlap.",
         _generated(_blobs), **XY, meta=_meta(2, "class", _blobs_ok, _blob_count),
         params=[int_param("centers", 3, "number of clusters (classes)", min=1),
                 n_param(200), noise_param(20.0, "each cluster's standard deviation in % "
                                           "of the unit radius"), SEED,
                 *data_params(val_fraction=0.2)],
         recipe=recipes.blobs,
         keywords=("classification", "synthetic", "2d", "clusters", "multiclass")),
    data("data.GaussianMixture",
         "Samples of a random 2-D Gaussian mixture; y is the component.\n\n"
         "Means uniform in [-1, 1]², elongated and rotated covariances whose axes are "
         "0.5-1.5 x noise %; a density to fit with a VAE or GAN, or classes to separate.",
         _generated(_gaussian_mixture), **XY,
         meta=_meta(2, "class", _mixture_ok, _mixture_count),
         params=[int_param("n_components", 3, "number of Gaussian components", min=1),
                 Param("weights", "floats", [], "mixing weights, one per component "
                       "(normalised); empty means equal", min=0),
                 n_param(500), noise_param(15.0, "typical standard deviation of a "
                                           "component in % of the unit length"), SEED,
                 *data_params(val_fraction=0.2)],
         keywords=("density", "synthetic", "2d", "gan", "vae", "clusters")),
]

_inline = [
    data("data.Table",
         "A small table typed into the graph file: named columns, rows of numbers.\n\n"
         "`inputs` name the columns that form x, `targets` those that form y. With no "
         "targets (a table to predict on) y is empty, (N, 0). An optional "
         "split column holding train/val/test fixes the split by hand.",
         _table, **XY, meta=_table_meta,
         params=[Param("columns", "strs", doc="column names, in row order"),
                 Param("rows", "json", doc="the rows: a list of lists of values"),
                 Param("inputs", "strs", doc="columns that form the input x"),
                 Param("targets", "strs", [], "columns that form the target y; empty "
                       "for inference only (y is then empty, (N, 0))"),
                 TARGET_KIND,
                 str_param("split_column", "", "a column of train/val/test labels; empty "
                           "means split by the split params"),
                 *data_params(batch_size=0, shuffle=False)],
         keywords=("inline", "csv", "tabular")),
]

BLOCKS = [*_bundled, *_files, *_regressions, *_point_sets, *_inline]
