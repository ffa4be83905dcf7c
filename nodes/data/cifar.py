"""CIFAR-10 and CIFAR-100 in their binary distribution format, read in place.

The binary versions (`cifar-10-batches-bin`, `cifar-100-binary`) are flat files of fixed-size
records: CIFAR-10's `data_batch_1.bin` … `data_batch_5.bin` and `test_batch.bin` hold
records of one label byte and 3,072 pixel bytes (1,024 red, then green, then blue, rows of
32); CIFAR-100's `train.bin` and `test.bin` hold a coarse-label byte, a fine-label byte and
the same pixels. A file's record count is its size over the record size, so validation
knows every shape and split size from the folder listing and the files' sizes, and refuses
a file of the wrong length before anything reads it.

`CifarRecords` is the per-sample reader: the files memory-mapped (opened again in each
DataLoader worker, never pickled with their pages), one record decoded per index; a
dataset larger than `storage` auto keeps in memory (or storage stream) is read so. The
in-memory build reads the same records at once.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import torch

from nodegraph.kinds import gate
from nodegraph.kinds.datameta import DataMeta, split_sizes, with_classes
from nodegraph.kinds.dataset import DataParams, data_params, data_path, from_arrays
from nodegraph.kinds.declare import data
from nodegraph.kinds.streamed import STORAGE_PARAM, StreamScript
from nodegraph.model.errors import NodegraphError
from nodegraph.model.spec import Port, bool_param, choice_param, str_param
from nodes.data._streaming import in_memory, iterate, mark, split_rows, streamed, subsets
from nodes.data.core import LAYOUT

PIXELS = 3 * 32 * 32
SHAPE = (3, 32, 32)


@dataclass(frozen=True)
class Layout:
    """Which files of a CIFAR folder hold what, and where a record keeps its label."""

    variant: str  # "cifar10" or "cifar100"
    train: tuple[Path, ...]
    test: Path | None
    label_bytes: int  # bytes before the pixels: 1 (CIFAR-10) or 2 (coarse, fine)

    @property
    def record(self) -> int:
        return self.label_bytes + PIXELS

    def label_offset(self, label: str) -> int:
        """The byte of a record that holds the label asked for (CIFAR-100: coarse 0, fine 1)."""
        return 1 if self.variant == "cifar100" and label == "fine" else 0


def _batch_number(path: Path) -> int:
    found = re.search(r"(\d+)", path.stem)
    return int(found.group(1)) if found else 0


def layout(folder: str, variant: str) -> Layout:
    """The training and test files of the CIFAR folder `folder`, found by their names;
    `variant` auto picks CIFAR-10 where data_batch_*.bin files exist, else CIFAR-100."""
    if not folder:
        raise NodegraphError("no CIFAR folder given (path)")
    root = data_path(folder)
    if not root.is_dir():
        state = "is not a folder" if root.exists() else "does not exist"
        raise NodegraphError(f"CIFAR folder '{folder}' ({root}) {state}")
    batches = sorted(gate.listing(root, "CIFAR file",
                                  lambda n: fnmatch.fnmatchcase(n, "data_batch_*.bin")),
                     key=_batch_number)
    if variant == "auto":
        variant = "cifar10" if batches else "cifar100"
    if variant == "cifar10":
        if not batches:
            raise NodegraphError(f"CIFAR-10 folder '{folder}' holds no data_batch_*.bin files "
                                 "(the binary version, cifar-10-batches-bin)")
        test = root / "test_batch.bin"
        return Layout("cifar10", tuple(batches), test if test.is_file() else None, 1)
    train = root / "train.bin"
    if not train.is_file():
        raise NodegraphError(f"CIFAR folder '{folder}' holds neither data_batch_*.bin "
                             "(CIFAR-10) nor train.bin (CIFAR-100, cifar-100-binary)")
    test = root / "test.bin"
    return Layout("cifar100", (train,), test if test.is_file() else None, 2)


def record_count(path: Path, record: int) -> int:
    """Records in a file of fixed `record`-byte records; refuses a size that is not a
    whole number of records (a truncated download, or a file of the other variant)."""
    size = gate.check(path, "CIFAR file").stat().st_size
    if size == 0 or size % record:
        raise NodegraphError(f"CIFAR file '{path}' is {size:,} bytes, not a whole number of "
                             f"{record:,}-byte records: truncated, or not this CIFAR variant")
    return size // record


class CifarRecords(torch.utils.data.Dataset):
    """Samples {"x": float32 (3, 32, 32) in [0, 1], "y": int64} of memory-mapped CIFAR files,
    numbered across the files in order. The maps open on first use in each process."""

    def __init__(self, files: tuple[Path, ...], record: int, offset: int, flat: bool = False):
        self.files, self.record, self.offset, self.flat = files, record, offset, flat
        self.counts = [record_count(f, record) for f in files]
        self.starts = np.cumsum([0, *self.counts])
        self._maps: list[np.memmap] | None = None

    def __len__(self) -> int:
        return int(self.starts[-1])

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["_maps"] = None  # a worker maps the files itself
        return state

    def _records(self) -> list[np.memmap]:
        if self._maps is None:
            self._maps = [gate.memmap(f, "CIFAR file", np.uint8, 0, (n, self.record))
                          for f, n in zip(self.files, self.counts, strict=True)]
        return self._maps

    def raw(self, i: int) -> tuple[np.ndarray, int]:
        """Record `i`'s pixels (3, 32, 32) uint8 and its label."""
        if not 0 <= i < len(self):
            raise IndexError(i)
        f = int(np.searchsorted(self.starts, i, side="right")) - 1
        row = self._records()[f][i - self.starts[f]]
        return row[-PIXELS:].reshape(SHAPE), int(row[self.offset])

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        pixels, label = self.raw(int(i))
        x = torch.from_numpy(pixels.astype(np.float32) / 255.0)
        return {"x": x.reshape(-1) if self.flat else x,
                "y": torch.tensor(label, dtype=torch.int64)}

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """Every record at once: pixels (N, 3, 32, 32) uint8 and labels (N,) int64."""
        rows = np.concatenate([np.asarray(m) for m in self._records()])
        return rows[:, -PIXELS:].reshape(-1, *SHAPE), rows[:, self.offset].astype(np.int64)

    def labels(self) -> np.ndarray:
        """The labels alone (one strided byte per record), for a stratified split."""
        return np.concatenate([np.asarray(m[:, self.offset]) for m in self._records()]
                              ).astype(np.int64)


# the script's reader (`nodegraph.interop.export.stream`): the same records, mapped
SCRIPT_READER = '''\
class CifarRecords(torch.utils.data.Dataset):
    """Records `rows` of CIFAR binary files (`record` bytes each: label bytes, then 3 x 32 x 32
    pixels), memory-mapped, as x float32 in [0, 1] and y the label byte at `offset`."""

    def __init__(self, files, rows, record, offset, flat):
        self.files, self.rows, self.record, self.offset = files, rows, record, offset
        self.flat = flat
        self.counts = [Path(f).stat().st_size // record for f in files]
        self.starts = np.cumsum([0, *self.counts])
        self.maps = None  # opened on first use in each process

    def __len__(self):
        return len(self.rows)

    def __getstate__(self):
        return {**self.__dict__, "maps": None}

    def __getitem__(self, i):
        if self.maps is None:
            self.maps = [np.memmap(f, np.uint8, "r", shape=(n, self.record))
                         for f, n in zip(self.files, self.counts, strict=True)]
        j = int(self.rows[i])
        f = int(np.searchsorted(self.starts, j, side="right")) - 1
        row = self.maps[f][j - self.starts[f]]
        x = torch.from_numpy(row[-3072:].reshape(3, 32, 32).astype(np.float32) / 255.0)
        return {"x": x.reshape(-1) if self.flat else x,
                "y": torch.tensor(int(row[self.offset]), dtype=torch.int64)}'''


class _Script:
    """data.CIFAR streamed, as code (`StreamScript`): each split's record numbers go to the
    .npz beside the script, which maps the same binary files."""

    def __init__(self, parts: dict):
        self.parts = parts

    def __call__(self, node: str) -> StreamScript:
        arrays, readers = {}, {}
        for split, part in self.parts.items():
            if isinstance(part, torch.utils.data.Subset):
                records: CifarRecords = part.dataset  # type: ignore[assignment]
                rows = np.asarray(part.indices, np.int64)
            else:
                records, rows = part, np.arange(len(part), dtype=np.int64)
            arrays[f"{node}/{split}/rows"] = rows
            files = "[" + ", ".join(repr(str(f)) for f in records.files) + "]"
            readers[split] = ("CifarRecords", [files, f'arrays["{node}/{split}/rows"]',
                                               str(records.record), str(records.offset),
                                               str(records.flat)])
        return StreamScript(readers, arrays, [SCRIPT_READER])


def sources(p: CIFARParams) -> tuple[CifarRecords, CifarRecords | None]:
    """The training and (with `use_test`, where the folder has one) test records."""
    lay = layout(p.path, p.variant)
    offset = lay.label_offset(p.label)
    flat = p.layout == "flat"
    train = CifarRecords(lay.train, lay.record, offset, flat)
    test = (CifarRecords((lay.test,), lay.record, offset, flat)
            if p.use_test and lay.test is not None else None)
    return train, test


def _split_params(p, tested: bool) -> dict:
    """The split params with test_fraction unused where the test file forms the test split."""
    return {**p, "test_fraction": 0.0} if tested else dict(p)


def x_shape(p: CIFARParams) -> tuple[int, ...]:
    return SHAPE if p.layout == "image" else (PIXELS,)


class CIFARParams(DataParams):
    path: str
    variant: str
    label: str
    use_test: bool
    layout: str
    storage: str


def cifar_meta(p: CIFARParams) -> DataMeta | None:
    """Shapes and split sizes from the folder listing and the files' sizes; a stratified
    split reads the label bytes alone (memory-mapped)."""
    train, test = sources(p)
    labels = train.labels() if p.split == "stratified" else None
    sizes = split_sizes(len(train), _split_params(p, test is not None), labels)
    if test is not None:
        sizes["test"] = len(test)
    meta = mark(DataMeta({"x": (x_shape(p), torch.float32), "y": ((), torch.int64)}, sizes,
                         p.batch_size), p)
    return with_classes(meta, y=class_count(p))


def class_count(p: CIFARParams) -> int:
    """CIFAR-10's 10 classes, CIFAR-100's 100 fine ones or 20 coarse superclasses."""
    if layout(p.path, p.variant).variant == "cifar10":
        return 10
    return 100 if p.label == "fine" else 20


def cifar_dataset(p: CIFARParams):
    """The records split by the params, the test file as the test split: in memory (read at
    once) or streamed (memory-mapped, a record per sample), as `storage` and the size say."""
    train, test = sources(p)
    n = len(train) + (len(test) if test is not None else 0)
    if not in_memory(p, n * (PIXELS * 4 + 8)):
        labels = train.labels() if p.split == "stratified" else None
        parts = subsets(train, split_rows(len(train), p, labels, test is not None))
        if test is not None:
            parts["test"] = test
        ports = {"x": (x_shape(p), torch.float32), "y": ((), torch.int64)}
        ds = streamed(parts, ports, p, iterate(parts["train"]))
        ds.script = _Script(parts)  # type: ignore[attr-defined]
        return ds
    x, y = train.arrays()
    test_rows = None
    if test is not None:
        tx, ty = test.arrays()
        test_rows = np.arange(len(x), len(x) + len(tx))
        x, y = np.concatenate([x, tx]), np.concatenate([y, ty])
    x = x.astype(np.float32) / 255.0
    if p.layout == "flat":
        x = x.reshape(len(x), -1)
    return from_arrays({"x": x, "y": y}, p, test_rows=test_rows)


def write_cifar(path: str | Path, images: np.ndarray, labels: np.ndarray,
                coarse: np.ndarray | None = None) -> None:
    """Write records in the binary format: images (N, 3, 32, 32) uint8, labels (N,) < 256;
    with `coarse`, CIFAR-100 records (coarse, fine). For examples and tests."""
    images = np.asarray(images, dtype=np.uint8).reshape(len(images), PIXELS)
    heads = [np.asarray(labels, dtype=np.uint8)[:, None]]
    if coarse is not None:
        heads.insert(0, np.asarray(coarse, dtype=np.uint8)[:, None])
    Path(path).write_bytes(np.concatenate([*heads, images], axis=1).tobytes())


BLOCKS = [
    data("data.CIFAR", "CIFAR-10 or CIFAR-100 from the binary distribution files.\n\n"
         "`path` is the folder the archive unpacks to: cifar-10-batches-bin "
         "(data_batch_1.bin … data_batch_5.bin, test_batch.bin) or cifar-100-binary "
         "(train.bin, test.bin); nothing is downloaded. x holds the 32x32 colour images "
         "(N, 3, 32, 32) in [0, 1]; y the class (CIFAR-100: the fine or coarse label). The "
         "test file, when there, forms the test split. Validation reads only the folder "
         "listing and file sizes.",
         cifar_dataset, meta=cifar_meta,
         outputs=[Port("x", doc="images (N, 3, 32, 32) in [0, 1], or (N, 3072) with layout "
                       "flat"), Port("y", doc="class indices (N,), int64")],
         params=[str_param("path", doc="the folder holding the .bin files"),
                 choice_param("variant", ("auto", "cifar10", "cifar100"), "auto",
                              "which format: auto finds data_batch_*.bin (CIFAR-10) or "
                              "train.bin (CIFAR-100)"),
                 choice_param("label", ("fine", "coarse"), "fine",
                              "CIFAR-100's 100 fine classes or 20 coarse superclasses"),
                 bool_param("use_test", True, "the test file (test_batch.bin / test.bin) "
                            "forms the test split; test_fraction is then unused"),
                 replace(LAYOUT, default="image"), STORAGE_PARAM,
                 *data_params(batch_size=64, val_fraction=0.1)],
         keywords=("cifar", "cifar10", "cifar100", "images", "binary", "file")),
]
