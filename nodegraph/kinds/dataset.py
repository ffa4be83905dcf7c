"""Datasets as the trainer sees them: whole tensors in memory, split once, batched fast.

A data block builds a `Dataset`: one tensor per output port (first dimension = samples)
and index sets for the splits ``train``, ``val`` and ``test``. Splitting and normalisation
happen here once, normalisation fitted on the training split only, so every data block
behaves the same and no statistics leak from the test set. K-fold cross-validation is a
split too: the samples outside the test split are cut into `folds` parts once (the cut does
not depend on `fold`), and `fold` picks the one that validates. Batching slices tensors that
already live on the training device — the same thing a hand-written loop does — so the
data path adds no per-step overhead.

Data files named by a relative path are found relative to the graph file's folder, not the
current directory, so a graph and its data move together: whoever loads a graph from a file
runs its validation and training inside `files_relative_to(folder)`, and the readers turn
a param into a file with `data_path`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from nodegraph.kinds import confine
from nodegraph.kinds.dtypes import DTYPE_PARAM
from nodegraph.model.errors import NodegraphError
from nodegraph.model.spec import Param, Params, bool_param, choice_param, float_param, int_param

SPLITS = ("train", "val", "test")

DATA_PARAMS: tuple[Param, ...] = (
    int_param("batch_size", 32, "samples per step; 0 means the whole split (full-batch GD)",
              min=0),
    bool_param("shuffle", True, "reshuffle the training split every epoch"),
    float_param("val_fraction", 0.0, "share of samples held out for validation", min=0, max=0.9),
    float_param("test_fraction", 0.0, "share of samples held out for the final test",
                min=0, max=0.9),
    choice_param("split", ("random", "stratified", "chronological"), "random",
                 "how samples are assigned to splits: random, stratified by the target "
                 "class, or in order (chronological, for time series)"),
    int_param("split_seed", 0, "seed of the random split, fixed so runs compare", min=0,
              max=2**31 - 1),
    int_param("folds", 0, "K-fold cross-validation: cut the samples outside the test split "
              "into this many folds (val_fraction is then unused); 0 means off", min=0),
    int_param("fold", 0, "with folds on: which fold (0 to folds-1) validates while the others "
              "train; chronological folds train only on the folds before it", min=0),
    choice_param("normalize", ("none", "zscore", "minmax"), "none",
                 "scale the inputs with statistics of the training split only"),
    DTYPE_PARAM,
)


class DataParams(Params):
    """The typed view of `DATA_PARAMS`: a data block's view subclasses it and adds its own
    params (`nodegraph.model.spec.Params`)."""

    batch_size: int
    shuffle: bool
    val_fraction: float
    test_fraction: float
    split: str
    split_seed: int
    folds: int
    fold: int
    normalize: str
    dtype: str


# the folder relative data paths start from; None: the current directory
_files_folder: ContextVar[Path | None] = ContextVar("nodegraph_files_folder", default=None)


@contextmanager
def files_relative_to(folder: str | Path | None) -> Iterator[None]:
    """Within this block, relative data paths start from `folder` (a graph file's folder)."""
    token = _files_folder.set(None if folder is None else Path(folder).expanduser().absolute())
    try:
        yield
    finally:
        _files_folder.reset(token)


def data_path(path: str) -> Path:
    """The file a data param names: ``~`` expanded, a relative path taken from the folder
    set by `files_relative_to` (the current directory outside one), and inside that folder
    or one the user allowed (`nodegraph.kinds.confine`), else an error naming `path`."""
    p = Path(path).expanduser()
    folder = _files_folder.get()
    return confine.inside(path, p if p.is_absolute() or folder is None else folder / p, folder)


def data_folder() -> Path | None:
    """The folder relative data paths start from now (None outside `files_relative_to`)."""
    return _files_folder.get()


def data_params(**defaults: object) -> tuple[Param, ...]:
    """DATA_PARAMS with some defaults changed for one block (XOR wants batch_size 4)."""
    unknown = set(defaults) - {p.name for p in DATA_PARAMS}
    if unknown:
        raise ValueError(f"not data params: {sorted(unknown)}")
    return tuple(replace(p, default=defaults[p.name]) if p.name in defaults else p
                 for p in DATA_PARAMS)


class Dataset:
    """A dataset held as tensors, with its splits and batch size."""

    # a text dataset's vocabulary, for decoding generated ids: characters in token-id order
    # (data.TokenText) or a view of a subword tokenizer (data.TokenizedText)
    vocab: Any = None
    # a table's numbering of its text values per column (data.Parquet), for predictions
    categories: dict[str, Any] | None = None

    def __init__(self, tensors: dict[str, torch.Tensor], splits: dict[str, torch.Tensor],
                 batch_size: int = 32, shuffle: bool = True):
        sizes = {len(t) for t in tensors.values()}
        if len(sizes) != 1:
            raise NodegraphError(f"data ports have different sample counts: "
                                 f"{ {k: len(t) for k, t in tensors.items()} }")
        self.batch_size = batch_size
        self.shuffle = shuffle
        # the normalisation fitted on the training split, per port: {"centre", "scale"}
        # tensors such that the port holds (raw - centre) / scale; empty when none
        self.normalization: dict[str, dict[str, torch.Tensor]] = {}
        self._split = {name: {k: t[idx] for k, t in tensors.items()}
                       for name, idx in splits.items() if len(idx) > 0}
        # each split's samples as rows of the data given (a bad label names its row)
        self.rows = {name: idx for name, idx in splits.items() if len(idx) > 0}

    @property
    def ports(self) -> list[str]:
        return list(next(iter(self._split.values())).keys())

    def has(self, split: str) -> bool:
        return split in self._split

    def size(self, split: str) -> int:
        part = self._split.get(split)
        return 0 if part is None else len(next(iter(part.values())))

    def tensors(self, split: str) -> dict[str, torch.Tensor]:
        return self._split[split]

    def normalization_state(self) -> dict[str, torch.Tensor]:
        """The fitted normalisation as flat tensors keyed `port.centre` / `port.scale`, the
        form weights are saved in."""
        return {f"{port}.{k}": v for port, st in self.normalization.items()
                for k, v in st.items()}

    def normalize_raw(self, port: str, raw: torch.Tensor) -> torch.Tensor:
        """Raw values of `port` scaled as this dataset scaled its own (identity if it did
        not), so a prediction on new raw inputs sees what training saw."""
        st = self.normalization.get(port)
        if st is None:
            return raw
        return (raw - st["centre"].to(raw.device)) / st["scale"].to(raw.device)

    def renormalize(self, port: str, centre: torch.Tensor, scale: torch.Tensor) -> None:
        """Scale `port` with other statistics (a trained model's, from its weights file)
        instead of those fitted here: the raw values are recovered and scaled anew."""
        old = self.normalization[port]
        for part in self._split.values():
            t = part[port]
            raw = t * old["scale"].to(t.device) + old["centre"].to(t.device)
            part[port] = ((raw - centre.to(t.device)) / scale.to(t.device)).to(t.dtype)
        self.normalization[port] = {"centre": centre.detach().cpu(),
                                    "scale": scale.detach().cpu()}

    def step_batch(self, split: str = "train") -> int:
        n = self.size(split)
        return n if self.batch_size == 0 else min(self.batch_size, n)

    def meta(self) -> dict[str, torch.Tensor]:
        """A meta tensor per port shaped like one training batch, for shape inference."""
        b = self.step_batch("train")
        return {k: torch.empty((b, *t.shape[1:]), dtype=t.dtype, device="meta")
                for k, t in self._split["train"].items()}

    def to(self, device: torch.device | str) -> Dataset:
        self._split = {s: {k: t.to(device) for k, t in part.items()}
                       for s, part in self._split.items()}
        return self

    def astype(self, dtype: torch.dtype) -> Dataset:
        """Floating ports in `dtype` (labels and indices keep their integer type)."""
        self._split = {s: {k: t.to(dtype) if t.is_floating_point() else t
                           for k, t in part.items()} for s, part in self._split.items()}
        return self

    def num_batches(self, split: str) -> int:
        b = self.step_batch(split)
        return 0 if b == 0 else -(-self.size(split) // b)

    def batches(self, split: str, shuffle: bool = False, generator: torch.Generator | None = None,
                node: str | None = None) -> Iterator[dict]:
        """Yield batches of `split` as dicts port -> tensor, or (node, port) -> tensor when
        `node` is given (the trainer's keys, so no step re-keys a batch)."""
        part = self._split.get(split)
        if part is None:
            return
        items = [((node, k) if node is not None else k, t) for k, t in part.items()]
        n, b = self.size(split), self.step_batch(split)
        if shuffle and n > 1:
            device = items[0][1].device
            order = torch.randperm(n, generator=generator).to(device)
            for i in range(0, n, b):
                idx = order[i:i + b]
                yield {k: t[idx] for k, t in items}
        else:
            for i in range(0, n, b):
                yield {k: t[i:i + b] for k, t in items}


def split_indices(n: int, val_fraction: float, test_fraction: float, mode: str = "random",
                  seed: int = 0, labels: np.ndarray | None = None, folds: int = 0,
                  fold: int = 0) -> dict[str, np.ndarray]:
    """Indices of the train/val/test splits; stratified splits keep class proportions.

    With `folds` > 0 the test split is held out as usual and the rest is cut into folds,
    fold `fold` validating (see `kfold_indices`); `val_fraction` is then unused.
    """
    if folds:
        rest = split_indices(n, 0.0, test_fraction, mode, seed, labels)
        train, val = kfold_indices(rest["train"], folds, fold, mode, seed, labels)
        return {"train": train, "val": val, "test": rest["test"]}
    if val_fraction + test_fraction >= 1:
        raise NodegraphError("val_fraction + test_fraction must leave samples to train on")
    n_test, n_val = round(n * test_fraction), round(n * val_fraction)
    if mode != "stratified" and n - n_val - n_test < 1:
        raise NodegraphError(f"the split leaves no samples to train on: {n} samples, {n_val} "
                             f"to val and {n_test} to test; use more samples or lower "
                             "val_fraction / test_fraction")
    if mode == "chronological":
        order = np.arange(n)
        return {"train": order[:n - n_val - n_test], "val": order[n - n_val - n_test:n - n_test],
                "test": order[n - n_test:]}
    rng = np.random.default_rng(seed)
    if mode == "stratified":
        return _stratified(_class_labels(labels, n), val_fraction, test_fraction, rng)
    order = rng.permutation(n)
    return {"test": np.sort(order[:n_test]), "val": np.sort(order[n_test:n_test + n_val]),
            "train": np.sort(order[n_test + n_val:])}


def kfold_indices(rows: np.ndarray, folds: int, fold: int, mode: str = "random", seed: int = 0,
                  labels: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(train, val) rows of fold `fold` when `rows` are cut into `folds` folds.

    random: shuffled, then cut into near-equal parts. stratified: every fold gets each
    class's share (counts differ by at most one). chronological: forward chaining for time
    series — the rows in order are cut into folds + 1 blocks and fold k trains on blocks
    0..k and validates on block k+1, so no future sample trains a model judged on the past.
    """
    rows = np.asarray(rows)
    if folds < 2:
        raise NodegraphError(f"K-fold needs at least 2 folds, got folds = {folds} "
                             "(0 switches K-fold off)")
    if not 0 <= fold < folds:
        raise NodegraphError(f"fold {fold} does not exist: with {folds} folds they are "
                             f"numbered 0 to {folds - 1}")
    parts = folds + 1 if mode == "chronological" else folds
    if len(rows) < parts:
        raise NodegraphError(f"{len(rows)} samples cannot be cut into {parts} folds")
    if mode == "chronological":
        blocks = np.array_split(rows, parts)
        return np.concatenate(blocks[:fold + 1]), blocks[fold + 1]
    # a stream of its own, so the cut is the same whichever fold is asked for
    rng = np.random.default_rng([seed, 1])
    if mode == "stratified":
        classes = _class_labels(labels, None)[rows]
        dealt = np.concatenate([rng.permutation(rows[classes == c]) for c in np.unique(classes)])
        member = np.arange(len(rows)) % folds  # deal class by class, round robin
    else:
        dealt = rng.permutation(rows)
        member = np.repeat(np.arange(folds), [len(p) for p in np.array_split(dealt, folds)])
    return np.sort(dealt[member != fold]), np.sort(dealt[member == fold])


def _class_labels(labels: np.ndarray | None, n: int | None) -> np.ndarray:
    """One class label per sample (the first column of `labels`), for stratification."""
    if labels is None:
        raise NodegraphError("a stratified split needs class labels on port 'y'")
    labels = np.asarray(labels)
    return labels.reshape(len(labels) if n is None else n, -1)[:, 0]


def _stratified(labels: np.ndarray, val_fraction: float, test_fraction: float,
                rng: np.random.Generator) -> dict[str, np.ndarray]:
    out: dict[str, list[np.ndarray]] = {s: [] for s in SPLITS}
    for cls in np.unique(labels):
        idx = rng.permutation(np.flatnonzero(labels == cls))
        n_test, n_val = round(len(idx) * test_fraction), round(len(idx) * val_fraction)
        out["test"].append(idx[:n_test])
        out["val"].append(idx[n_test:n_test + n_val])
        out["train"].append(idx[n_test + n_val:])
    return {s: np.sort(np.concatenate(parts)) for s, parts in out.items()}


def fit_normalisation(arrays: dict[str, np.ndarray], train_idx: np.ndarray, how: str,
                      ports: Sequence[str] = ("x",)) -> dict[str, dict[str, np.ndarray]]:
    """Per port, the `centre` and `scale` (z-score: mean and std; min-max: min and range)
    of the training rows, a scale of 0 read as 1: what a prediction on raw inputs must
    apply as (raw - centre) / scale."""
    if how == "none":
        return {}
    stats = {}
    for port in ports:
        if port not in arrays:
            continue
        train = arrays[port].astype(np.float32)[train_idx]
        if how == "zscore":
            centre, scale = train.mean(axis=0), train.std(axis=0)
        else:
            centre, scale = train.min(axis=0), train.max(axis=0) - train.min(axis=0)
        stats[port] = {"centre": centre, "scale": np.where(scale > 0, scale, 1.0)}
    return stats


def normalise(arrays: dict[str, np.ndarray], train_idx: np.ndarray, how: str,
              ports: Sequence[str] = ("x",),
              stats: dict[str, dict[str, np.ndarray]] | None = None) -> dict[str, np.ndarray]:
    """Scale `ports` with statistics of the training rows only (z-score or min-max), or
    with `stats` from `fit_normalisation` when given."""
    stats = fit_normalisation(arrays, train_idx, how, ports) if stats is None else stats
    out = dict(arrays)
    for port, st in stats.items():
        out[port] = (arrays[port].astype(np.float32) - st["centre"]) / st["scale"]
    return out


def from_arrays(arrays: dict[str, np.ndarray], p: dict, stratify: str = "y",
                normalize_ports: Sequence[str] = ("x",),
                given_splits: dict[str, np.ndarray] | None = None,
                test_rows: np.ndarray | None = None) -> Dataset:
    """Build a Dataset from numpy arrays using the shared DATA_PARAMS in `p`.

    `given_splits` (indices per split) overrides the split params when the data fixes them.
    `test_rows` fixes only the test split (a dataset shipped with its own test files); the
    other rows are split into train and val by the params, `test_fraction` unused.
    """
    n = len(next(iter(arrays.values())))
    labels = arrays.get(stratify) if p.get("split") == "stratified" else None
    if given_splits is not None:
        idx = given_splits
    elif test_rows is not None:
        idx = _split_around(n, np.asarray(test_rows, dtype=np.int64), p, labels)
    else:
        idx = _split(n, p, labels, p.get("test_fraction", 0.0))
    how = p.get("normalize", "none")
    stats = fit_normalisation(arrays, idx["train"], how, normalize_ports)
    arrays = normalise(arrays, idx["train"], how, normalize_ports, stats)
    tensors = {k: _to_tensor(v) for k, v in arrays.items()}
    splits = {k: torch.as_tensor(v, dtype=torch.long) for k, v in idx.items()}
    data = Dataset(tensors, splits, p.get("batch_size", 32), p.get("shuffle", True))
    data.normalization = {port: {k: torch.as_tensor(v) for k, v in st.items()}
                          for port, st in stats.items()}
    return data


def _split(n: int, p: dict, labels: np.ndarray | None,
           test_fraction: float) -> dict[str, np.ndarray]:
    return split_indices(n, p.get("val_fraction", 0.0), test_fraction, p.get("split", "random"),
                         p.get("split_seed", 0), labels, p.get("folds", 0), p.get("fold", 0))


def _split_around(n: int, test_rows: np.ndarray, p: dict,
                  labels: np.ndarray | None) -> dict[str, np.ndarray]:
    """Splits with the test rows fixed: the remaining rows go to train and val."""
    rest = np.setdiff1d(np.arange(n), test_rows)
    idx = _split(len(rest), p, None if labels is None else np.asarray(labels)[rest], 0.0)
    return {"train": rest[idx["train"]], "val": rest[idx["val"]], "test": np.sort(test_rows)}


def _to_tensor(a: np.ndarray) -> torch.Tensor:
    a = np.asarray(a)
    if np.issubdtype(a.dtype, np.integer):
        return torch.as_tensor(a, dtype=torch.long)
    return torch.as_tensor(a, dtype=torch.float32)  # bools and floats alike
