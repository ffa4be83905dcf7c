"""Hugging Face `datasets` saved to disk (`save_to_disk`), read with `load_from_disk`.

`data.HFDataset` opens a `Dataset` or a `DatasetDict` folder. Its Arrow files are
memory-mapped, not read: a sample's columns are read when asked for, so a dataset larger
than memory trains. Columns map to ports: `inputs` form x (one array column keeps its
shape; several scalar or 1-D columns are joined side by side), `targets` form y (a
ClassLabel or integer column as class indices, or values). The folder may lie in object
storage (``s3://bucket/prefix``, `nodes.data._hf_files`). A `DatasetDict`'s own splits
(train, validation, test) are kept; a single `Dataset` is split by the data params.

Streamed (`storage` stream, or more than memory holds), each DataLoader worker opens the
folder itself and reads a row per sample. Validation reads the folder's metadata
(features and row counts) and, where a list column's length is not declared, that column
of the first row.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from nodegraph.kinds import remote
from nodegraph.kinds.datameta import DataMeta, sized, with_classes
from nodegraph.kinds.dataset import DataParams, data_params, data_path, from_arrays
from nodegraph.kinds.declare import data
from nodegraph.kinds.streamed import STORAGE_PARAM, SampleError
from nodegraph.model.errors import NodegraphError
from nodegraph.model.spec import Param, Port, choice_param, str_param
from nodes.data._hf_files import load
from nodes.data._streaming import (
    held_bytes,
    in_memory,
    iterate,
    mark,
    split_rows,
    streamed,
    subsets,
)

# a DatasetDict's split names -> ours
SPLIT_NAMES = {"train": "train", "validation": "val", "valid": "val", "val": "val",
               "dev": "val", "test": "test"}


def open_disk(path: str):
    """The Dataset or DatasetDict saved in folder `path`, or an error naming the folder."""
    if not path:
        raise NodegraphError("no datasets folder given (path)")
    if remote.is_url(path):
        return _load(where_of(path), path)
    where = data_path(path)
    if not where.is_dir():
        state = "is not a folder" if where.exists() else "does not exist"
        raise NodegraphError(f"datasets folder '{path}' ({where}) {state}")
    return _load(where, path)


def where_of(path: str):
    """Where the folder is read from: a URL as given (object storage), or a local folder."""
    return remote.normal(path, "datasets folder") if remote.is_url(path) else data_path(path)


def _load(where, path: str):
    """The dataset of a folder whose JSON and files pass the file gate, built from tables
    read through it (`nodes.data._hf_files.load`): `datasets.load_from_disk` would join
    the names they hold unchecked, and open the files again by name after the check."""
    try:
        return load(where, path)
    except FileNotFoundError:
        raise NodegraphError(f"'{path}' ({where}) is not a folder written by Hugging Face "
                             "datasets' save_to_disk (no dataset_info.json / state.json, or "
                             "dataset_dict.json)") from None
    except NodegraphError:
        raise
    except Exception as e:  # corrupt Arrow files or JSON: pyarrow and json errors alike
        raise NodegraphError(f"cannot load datasets folder '{path}': {e}") from None


def parts(loaded, where: str) -> dict[str, Any]:
    """Our split name -> Dataset: a DatasetDict's recognised splits, or {"all": dataset}."""
    if not hasattr(loaded, "keys"):
        return {"all": loaded}
    found = {SPLIT_NAMES[k]: v for k, v in loaded.items() if k in SPLIT_NAMES}
    if "train" not in found:
        raise NodegraphError(f"datasets folder '{where}' holds splits {sorted(loaded)}, none "
                             "of them 'train'")
    return found


def _shape(feature, name: str, first, where: str) -> tuple[tuple[int, ...], str]:
    """A column's per-sample shape and kind ("class", "int", "float") from its feature;
    a list of undeclared length takes the length of `first()` (the first row's value)."""
    from datasets import ClassLabel, Value

    if isinstance(feature, ClassLabel):
        return (), "class"
    if isinstance(feature, Value):
        kind = feature.dtype
        if kind.startswith(("int", "uint")):
            return (), "int"
        if kind.startswith("float") or kind == "bool":
            return (), "float"
        raise NodegraphError(f"datasets folder '{where}': column '{name}' holds {kind}, not "
                             "numbers")
    shape = getattr(feature, "shape", None)  # Array2D ... Array5D
    if shape is not None:
        if any(d is None for d in shape):
            raise NodegraphError(f"datasets folder '{where}': column '{name}' has a variable "
                                 "shape")
        return tuple(shape), "float"
    inner = getattr(feature, "feature", None)  # List / Sequence
    if inner is None:
        raise NodegraphError(f"datasets folder '{where}': column '{name}' is a "
                             f"{type(feature).__name__}, not numbers")
    length = getattr(feature, "length", -1)
    if length is None or length < 0:
        value = first()
        length = len(value) if value is not None else 0
    rest, kind = _shape(inner, name, lambda: (first() or [None])[0], where)
    return (length, *rest), "float" if kind == "class" else kind


class Columns:
    """What the params ask of the dataset: the input and target columns and their shapes."""

    def __init__(self, ds, p: HFDatasetParams, where: str):
        names = list(ds.column_names)
        if not p.targets:
            raise NodegraphError("name at least one target column")
        missing = [c for c in [*p.inputs, *p.targets] if c not in names]
        if missing:
            raise NodegraphError(f"datasets folder '{where}' has no column '{missing[0]}' "
                                 f"(columns: {', '.join(names)})")
        self.inputs = list(p.inputs) or [c for c in names if c not in p.targets]
        self.targets = list(p.targets)
        both = sorted(set(self.inputs) & set(self.targets))
        if both or not self.inputs:
            raise NodegraphError(f"columns {both} are both inputs and targets" if both else
                                 "no columns are left for the inputs")
        if p.target_kind == "class" and len(self.targets) > 1:
            raise NodegraphError("class targets come from one column; name only one target")
        self.shapes = {c: _shape(ds.features[c], c, lambda c=c: ds[0][c] if len(ds) else None,
                                 where) for c in [*self.inputs, *self.targets]}
        if len(self.inputs) > 1 and any(len(self.shapes[c][0]) > 1 for c in self.inputs):
            raise NodegraphError("several input columns are joined side by side: each must "
                                 "hold a number or a 1-D list (name one array column alone)")
        if p.target_kind == "class" and self.shapes[self.targets[0]][1] == "float":
            raise NodegraphError(f"class target column '{self.targets[0]}' holds floats; use "
                                 "a ClassLabel or integer column, or target_kind 'value'")

    def x_shape(self) -> tuple[int, ...]:
        if len(self.inputs) == 1:
            return self.shapes[self.inputs[0]][0] or (1,)
        return (sum(math.prod(self.shapes[c][0]) for c in self.inputs),)

    def y_port(self, kind: str) -> tuple[tuple[int, ...], torch.dtype]:
        if kind == "class":
            return (), torch.int64
        return (sum(math.prod(self.shapes[c][0]) for c in self.targets),), torch.float32


class HFDatasetParams(DataParams):
    path: str
    inputs: list[str]
    targets: list[str]
    target_kind: str
    storage: str


def hf_meta(p: HFDatasetParams) -> DataMeta | None:
    """Shapes from the features, sizes from the row counts; None for a stratified split of
    a single Dataset (its sizes follow the labels)."""
    found = parts(open_disk(p.path), p.path)
    first = next(iter(found.values()))
    cols = Columns(first, p, p.path)
    ports = {"x": (cols.x_shape(), torch.float32), "y": cols.y_port(p.target_kind)}
    if "all" in found:
        meta = mark(sized(ports, len(first), p), p)
    else:
        meta = mark(DataMeta(ports, {s: len(d) for s, d in found.items() if len(d)},
                             p.batch_size), p)
    return with_classes(meta, y=_class_count(first, cols) if p.target_kind == "class"
                        else None)


def _class_count(ds, cols: Columns) -> int | None:
    """The classes a `ClassLabel` target declares (its names); None for a plain integer
    column, which says nothing of how many there are."""
    from datasets import ClassLabel

    feature = ds.features[cols.targets[0]]
    return feature.num_classes if isinstance(feature, ClassLabel) else None


def sample_arrays(batch: dict[str, np.ndarray], cols: Columns, kind: str,
                  where: str) -> dict[str, np.ndarray]:
    """x float32 and y of a batch of rows (numpy columns, first dimension = rows)."""
    def column(name: str) -> np.ndarray:
        a = np.asarray(batch[name])
        if a.dtype == object:
            raise NodegraphError(f"datasets folder '{where}': column '{name}' holds lists of "
                                 "different lengths")
        return a

    n = len(column(cols.inputs[0]))
    x = (column(cols.inputs[0]) if len(cols.inputs) == 1 else
         np.concatenate([column(c).reshape(n, -1) for c in cols.inputs], axis=1))
    x = x.reshape(n, *cols.x_shape()).astype(np.float32)
    if kind == "class":
        y = column(cols.targets[0]).reshape(n)
        if (y < 0).any():
            raise NodegraphError(f"datasets folder '{where}': class column "
                                 f"'{cols.targets[0]}' holds negative values")
        return {"x": x, "y": y.astype(np.int64)}
    y = np.concatenate([column(c).reshape(n, -1) for c in cols.targets], axis=1)
    return {"x": x, "y": y.astype(np.float32)}


class HFRows(torch.utils.data.Dataset):
    """The rows of one saved split as samples; the folder is opened again (memory-mapped)
    in each DataLoader worker, not pickled with it."""

    def __init__(self, path: str, where, split: str, cols: Columns, kind: str, n: int):
        self.path, self.where, self.split, self.cols, self.kind = path, where, split, cols, kind
        self.n = n
        self._ds = None

    def __len__(self) -> int:
        return self.n

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_ds": None}

    def _rows(self):
        if self._ds is None:
            loaded = _load(self.where, self.path)
            ds = loaded if self.split == "all" else loaded[_saved_name(loaded, self.split)]
            wanted = list(dict.fromkeys(self.cols.inputs + self.cols.targets))
            self._ds = ds.with_format("numpy", columns=wanted)
        return self._ds

    def __getitem__(self, i: int) -> dict:
        row = self._rows()[int(i):int(i) + 1]
        try:
            a = sample_arrays(row, self.cols, self.kind, self.path)
        except NodegraphError as e:
            raise SampleError(f"{e} (row {i} of {self.split})") from None
        return {"x": torch.from_numpy(a["x"][0]), "y": torch.as_tensor(a["y"][0])}


def _saved_name(loaded, split: str) -> str:
    """The DatasetDict key our split name came from."""
    return next(k for k in loaded if SPLIT_NAMES.get(k) == split)


def hf_dataset(p: HFDatasetParams):
    """Every split's rows: in memory (each split read at once) or streamed (a row per
    sample from the memory-mapped files), as `storage` and the size say."""
    found = parts(open_disk(p.path), p.path)
    cols = Columns(next(iter(found.values())), p, p.path)
    n = sum(len(d) for d in found.values())
    ports = {"x": (cols.x_shape(), torch.float32), "y": cols.y_port(p.target_kind)}
    stratified = "all" in found and p.split == "stratified"  # needs the labels: in memory
    if not stratified and not in_memory(p, held_bytes(ports, n)):
        where = where_of(p.path)
        sources = {s: HFRows(p.path, where, s, cols, p.target_kind, len(d))
                   for s, d in found.items()}
        if "all" in sources:
            sources = subsets(sources["all"], split_rows(len(found["all"]), p))
        return streamed(sources, ports, p, iterate(sources["train"]))
    wanted = list(dict.fromkeys(cols.inputs + cols.targets))
    arrays, rows, start = [], {}, 0
    for split, ds in found.items():
        a = sample_arrays(ds.with_format("numpy", columns=wanted)[:], cols, p.target_kind,
                          p.path)
        arrays.append(a)
        rows[split] = np.arange(start, start + len(a["x"]))
        start += len(a["x"])
    joined = {k: np.concatenate([a[k] for a in arrays]) for k in ("x", "y")}
    given = None if "all" in rows else {s: rows.get(s, np.zeros(0, np.int64))
                                        for s in ("train", "val", "test")}
    return from_arrays(joined, p, given_splits=given)


TARGET_KIND = choice_param("target_kind", ("class", "value"), "class",
                           "class: y holds class indices (a ClassLabel or integer column); "
                           "value: y is float (regression)")

BLOCKS = [
    data("data.HFDataset", "A Hugging Face `datasets` dataset saved to disk (save_to_disk).\n\n"
         "Opens the folder with load_from_disk (memory-mapped Arrow files; nothing is "
         "downloaded; a folder in object storage, s3://bucket/prefix, is copied to a "
         "temporary file first). `inputs` name the columns that form x — one array column "
         "keeps its shape, several number or list columns are joined side by side — and `targets` "
         "those that form y. A DatasetDict's train / validation / test splits are kept; a "
         "single Dataset is split by the split params.",
         hf_dataset, meta=hf_meta,
         outputs=[Port("x", doc="the input columns, float32"),
                  Port("y", doc="class indices (N,) int64, or the target columns float32")],
         params=[str_param("path", doc="the folder save_to_disk wrote"),
                 Param("inputs", "strs", [], "columns that form x; empty: every column that "
                       "is not a target"),
                 Param("targets", "strs", ["label"], "columns that form y"),
                 TARGET_KIND, STORAGE_PARAM, *data_params(val_fraction=0.0)],
         keywords=("huggingface", "hf", "datasets", "arrow", "load_from_disk", "hub",
                   "file")),
]
