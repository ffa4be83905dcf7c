"""Memory-mapped arrays for data.NumPy (.npy) and data.MNIST (IDX): the streamed builds.

An uncompressed .npy or IDX file is an array laid out on disk as it is in memory after a
header, so `np.memmap` (`np.load(mmap_mode="r")`) maps it without reading: a sample is read
when a DataLoader worker asks for it, and a file larger than memory trains. A gzipped IDX
file cannot be mapped; it is unpacked once into memory as its own type (MNIST's uint8
pixels, a quarter of float32) and read per sample from there.

The blocks call `streamed_numpy` / `streamed_mnist` first; they return None when the data
goes into memory as before (`storage` memory, or auto and it fits), so the in-memory path
is unchanged.
"""

from __future__ import annotations

import math
from functools import partial
from pathlib import Path

import numpy as np
import torch

from nodegraph.kinds import gate, given
from nodegraph.kinds.datameta import sized
from nodegraph.kinds.dataset import DataParams, from_arrays
from nodegraph.kinds.streamed import StreamScript
from nodegraph.model.errors import NodegraphError
from nodes.data import _files as files
from nodes.data._streaming import in_memory, iterate, split_rows, streamed, subsets


class MappedRows(torch.utils.data.Dataset):
    """Samples {"x", "y"}: row i of a memory-mapped x (float32, scaled by `scale`, reshaped
    to `shape`) and label or target i. The map opens on first use in each process."""

    def __init__(self, open_x, n: int, y: np.ndarray, shape: tuple[int, ...], scale: float = 1.0):
        self.open_x, self.n, self.y, self.shape, self.scale = open_x, n, y, shape, scale
        self._x: np.ndarray | None = None

    def __len__(self) -> int:
        return self.n

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_x": None}

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        if self._x is None:
            self._x = self.open_x()
        assert self._x is not None
        x = np.array(self._x[int(i)], dtype=np.float32)  # a copy: the map is read-only
        if self.scale != 1.0:
            x = x * np.float32(self.scale)
        return {"x": torch.from_numpy(x.reshape(self.shape)), "y": torch.as_tensor(self.y[i])}


class _NpyMap:
    """Opens the .npy file `path` memory-mapped through the file gate (in each process)."""

    def __init__(self, path: Path):
        self.path = path

    def __call__(self) -> np.ndarray:
        return gate.map_npy(self.path, "x file")


def _npy_map(path: Path):
    return _NpyMap(path)  # a class, not a lambda: a fork server's worker gets it pickled


class NumPyParams(DataParams):
    path: str
    y_path: str
    x_key: str
    y_key: str
    target_kind: str
    storage: str


def streamed_numpy(p: NumPyParams, targets):
    """data.NumPy streamed from two memory-mapped .npy files, or None for the in-memory
    build (an .npz, which cannot be mapped, always builds in memory). `targets(y, where)`
    turns the y array into the block's targets (checked as the in-memory build checks)."""
    if p.path.lower().endswith(".npz") or p.get("storage", "auto") == "memory":
        return None
    x_head = files.npy_header(p.path, "x file")
    if x_head is None or x_head[1].hasobject or not x_head[0]:
        return None  # the in-memory build says what is wrong
    shape, dtype = x_head
    if dtype.kind not in "biuf":
        return None
    y_head = files.npy_header(p.y_path, "y file (y_path)")
    if y_head is None:
        return None
    y_bytes = 8 if p.target_kind == "class" else math.prod(y_head[0][1:]) * 4
    if in_memory(p, shape[0] * (math.prod(shape[1:]) * 4 + y_bytes)):
        return None
    where = f"{p.path} and {p.y_path}"
    y = targets(files.read_npy(p.y_path, "y file (y_path)"), where)
    if len(y) != shape[0]:
        raise NodegraphError(f"{where}: x and y must hold the same number of samples, got "
                             f"shapes {shape} and {y.shape}")
    sample = shape[1:] if len(shape) > 1 else (1,)
    rows = MappedRows(_npy_map(files.resolve(p.path, "x file")), shape[0], y, sample)
    labels = y if p.split == "stratified" else None
    parts = subsets(rows, split_rows(shape[0], p, labels))
    ports = {"x": (sample, torch.float32),
             "y": (tuple(y.shape[1:]), torch.int64 if y.dtype == np.int64 else torch.float32)}
    ds = streamed(parts, ports, p, iterate(parts["train"]))
    ds.script = _MappedScript(str(files.resolve(p.path, "x file")), y,  # type: ignore[attr-defined]
                              {s: np.asarray(sub.indices, np.int64) for s, sub in parts.items()},
                              sample)
    return ds


# the script's reader (`nodegraph.interop.export.stream`): MappedRows over a .npy file
SCRIPT_READER = '''\
class MappedRows(torch.utils.data.Dataset):
    """Rows `rows` of the .npy file at `path`, memory-mapped (read when a worker asks: a file
    larger than memory trains), as float32 x shaped `shape`, with their targets from y."""

    def __init__(self, path, rows, y, shape):
        self.path, self.rows, self.y, self.shape = path, rows, y, tuple(shape)
        self.x = None  # opened on first use in each process

    def __len__(self):
        return len(self.rows)

    def __getstate__(self):
        return {**self.__dict__, "x": None}

    def __getitem__(self, i):
        if self.x is None:
            self.x = np.load(self.path, mmap_mode="r", allow_pickle=False)
        row = int(self.rows[i])
        x = np.array(self.x[row], dtype=np.float32).reshape(self.shape)
        return {"x": torch.from_numpy(x), "y": torch.as_tensor(self.y[row])}'''


class _MappedScript:
    """data.NumPy streamed, as code: the rows of each split and the targets go to the
    .npz beside the script, x stays in its .npy file, mapped (`StreamScript`)."""

    def __init__(self, path: str, y: np.ndarray, rows: dict[str, np.ndarray],
                 shape: tuple[int, ...]):
        self.path, self.y, self.rows, self.shape = path, y, rows, shape

    def __call__(self, node: str) -> StreamScript:
        arrays = {f"{node}/y": self.y, **{f"{node}/{s}/rows": r for s, r in self.rows.items()}}
        readers = {s: ("MappedRows", [repr(self.path), f'arrays["{node}/{s}/rows"]',
                                      f'arrays["{node}/y"]', repr(tuple(self.shape))])
                   for s in self.rows}
        return StreamScript(readers, arrays, [SCRIPT_READER])


def _idx_map(path: str, what: str):
    """A function opening an IDX file's values: memory-mapped, or unpacked when gzipped."""
    dims, dtype = files.idx_header(path, what)
    p = files.resolve(path, what)
    with files.open_file(path, what) as f:
        zipped = f.read(2) == b"\x1f\x8b"
    start = 4 + 4 * len(dims)
    if zipped:  # partials, not closures: a worker started from a fork server gets them pickled
        return dims, dtype, partial(_unpack_idx, str(p), what, dtype, dims)
    return dims, dtype, partial(gate.memmap, p, what, dtype, start, dims)


def _unpack_idx(p: str, what: str, dtype, dims) -> np.ndarray:
    # through the gate, unpacked, only the values the header promised
    return files.idx_values(p, what, dims, dtype).reshape(dims)


class MNISTParams(DataParams):
    images: str
    labels: str
    test_images: str
    test_labels: str
    layout: str
    storage: str


def streamed_mnist(p: MNISTParams, read_labels):
    """data.MNIST streamed from memory-mapped IDX files, or None for the in-memory build.
    `read_labels(path, part)` reads and checks a labels file as the in-memory build does."""
    if p.get("storage", "auto") == "memory":
        return None
    dims, dtype, open_x = _idx_map(p.images, "training images IDX file")
    tested = bool(p.test_images or p.test_labels)
    n_all = dims[0] + (files.idx_header(p.test_images, "test images IDX file")[0][0]
                       if tested else 0)
    if in_memory(p, n_all * (math.prod(dims[1:]) * 4 + 8)):
        return None
    shape = (1, *dims[1:]) if p.layout == "image" else (math.prod(dims[1:]),)
    scale = 1 / 255 if dtype == np.dtype(">u1") else 1.0

    def rows(images: str, labels: str, part: str) -> MappedRows:
        d, _, opened = _idx_map(images, f"{part} images IDX file")
        y = read_labels(labels, part)
        if len(d) != 3 or len(y) != d[0]:
            raise NodegraphError(f"'{images}' must hold images (N, height, width) and "
                                 f"'{labels}' N labels; got {d} and {y.shape}")
        if d[1:] != dims[1:]:
            raise NodegraphError(f"test images {d[1:]} and training images {dims[1:]} "
                                 "differ in size")
        return MappedRows(opened, d[0], y, shape, scale)

    train = rows(p.images, p.labels, "training")
    labels = train.y if p.split == "stratified" else None
    parts = subsets(train, split_rows(len(train), p, labels, tested))
    if tested:
        parts["test"] = rows(p.test_images, p.test_labels, "test")
    ports = {"x": (shape, torch.float32), "y": ((), torch.int64)}
    return streamed(parts, ports, p, iterate(parts["train"]))


# -- data.Arrays: inputs declared by shape, the arrays handed in from Python ---------------

class ArraysParams(DataParams):
    x_shape: list[int]
    y_shape: list[int]
    target_kind: str


def arrays_ports(p: ArraysParams) -> dict[str, tuple[tuple[int, ...], torch.dtype]]:
    """The ports' sample shapes and dtypes as the params declare them."""
    bad = [d for d in (*p.x_shape, *p.y_shape) if d < 1]
    if not p.x_shape or bad:
        raise NodegraphError("x_shape must give the size of each dimension of one sample "
                             f"(at least one, each >= 1), got {list(p.x_shape)}")
    y = torch.int64 if p.target_kind == "class" else torch.float32
    return {"x": (tuple(p.x_shape), torch.float32), "y": (tuple(p.y_shape), y)}


_NUMPY = {torch.float32: np.float32, torch.int64: np.int64}


def arrays(p: ArraysParams):
    """Without arrays handed in there is nothing to read: the graph's data come from
    `nodegraph.fit(graph, x=..., y=...)` (`nodegraph.kinds.given`)."""
    ports = arrays_ports(p)
    if given.placeholders_wanted():  # a saved model loading: its shapes, no data
        return from_arrays({k: np.zeros((2, *shape), _NUMPY[dtype])
                            for k, (shape, dtype) in ports.items()},
                           dict(p, val_fraction=0.0, test_fraction=0.0, folds=0,
                                split="random"))
    raise NodegraphError("data.Arrays holds no data of its own: it takes arrays from Python, "
                         "nodegraph.fit(graph, x=..., y=...) (or give the graph a data block "
                         "that reads files to run it from the command line)")


def arrays_meta(p: ArraysParams):
    """Shapes from the params, like keras.Input(shape=...): one batch of samples, so the
    graph validates (and shows its shapes in the editor) before any array is given."""
    return sized(arrays_ports(p), max(p.batch_size, 1) * 4, p)
