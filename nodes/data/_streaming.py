"""What the file-format blocks share to hand over a streamed dataset (`nodegraph.kinds.streamed`).

Each format block has two builds: the in-memory one (the whole file read at once, as
vectorised numpy, through `from_arrays`) and the streamed one (a per-sample or per-shard
reader, read by DataLoader workers). `in_memory` chooses between them from the block's
`storage` param and the estimated size, as `choose_storage` does, so small data keeps the
fast path and exactly its splits.

A streamed split is the same rows the in-memory build would give it: `split_rows` draws
them with the shared split params, a map-style source takes them as a `Subset`, a shard
source as a `Rows` selection (the rows of each shard that belong to the split). A block
that normalises fits the statistics on the training rows in one pass (`fit_streamed`),
as `fit_normalisation` fits them on arrays.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import numpy as np
import torch

from nodegraph.kinds.datameta import DataMeta
from nodegraph.kinds.dataset import split_indices
from nodegraph.kinds.streamed import StreamedDataset, streams

SPLITS = ("train", "val", "test")


def in_memory(p, nbytes: int) -> bool:
    """Whether a block builds the in-memory kind: storage memory, or auto and it fits
    (`nodegraph.kinds.streamed.streams`, the rule validation sizes the data by)."""
    return not streams(p.get("storage", "auto"), False, nbytes)


def held_bytes(ports: dict, n: int) -> int:
    """Bytes `n` samples of these ports take as tensors (what `DataMeta.nbytes` counts):
    the size the storage choice goes by, in a block's meta and its build alike."""
    return n * sum(math.prod(shape) * torch.empty((), dtype=dtype).element_size()
                   for shape, dtype in ports.values())


def mark(meta: DataMeta | None, p, can_stream: bool = True) -> DataMeta | None:
    """A block's meta marked streamed when its build will stream (`in_memory` is false for
    its size), so validation counts no memory for data read a batch at a time."""
    if meta is None or not can_stream:
        return meta
    return replace(meta, streamed=not in_memory(p, meta.nbytes))


def split_rows(n: int, p, labels: np.ndarray | None = None,
               fixed_test: bool = False) -> dict[str, np.ndarray]:
    """The rows of each split of `n` samples, drawn as `from_arrays` draws them; with
    `fixed_test` the test split comes from elsewhere (its own file) and test_fraction is
    unused."""
    test = 0.0 if fixed_test else p.get("test_fraction", 0.0)
    return split_indices(n, p.get("val_fraction", 0.0), test, p.get("split", "random"),
                         p.get("split_seed", 0), labels, p.get("folds", 0), p.get("fold", 0))


def subsets(source: Any, rows: dict[str, np.ndarray]) -> dict[str, Any]:
    """A map-style source cut into its non-empty splits."""
    return {s: torch.utils.data.Subset(source, r.tolist()) for s, r in rows.items() if len(r)}


class Rows:
    """The rows of one split in a source read shard by shard: `counts[k]` of them in shard
    k, and which (`pick(k, start)`, positions within the shard's rows)."""

    def __init__(self, rows: np.ndarray, shard_sizes: list[int]):
        self.rows = np.sort(np.asarray(rows, dtype=np.int64))
        self.starts = np.concatenate([[0], np.cumsum(shard_sizes)]).astype(np.int64)
        cut = np.searchsorted(self.rows, self.starts)
        self.counts = [int(c) for c in np.diff(cut)]
        self._cut = cut

    def pick(self, k: int) -> np.ndarray:
        """Positions within shard k of the rows that belong to the split."""
        return self.rows[self._cut[k]:self._cut[k + 1]] - self.starts[k]


def everything(shard_sizes: list[int]) -> Rows:
    return Rows(np.arange(sum(shard_sizes)), shard_sizes)


def fit_streamed(samples: Iterator[dict[str, torch.Tensor]], how: str,
                 ports: tuple[str, ...] = ("x",)) -> dict[str, dict[str, torch.Tensor]]:
    """Per port, `centre` and `scale` of the samples (z-score: mean and population std;
    min-max: min and range; a scale of 0 read as 1), accumulated in float64 in one pass —
    what `nodegraph.kinds.dataset.fit_normalisation` gives on the same rows."""
    if how == "none":
        return {}
    acc: dict[str, list] = {}
    for sample in samples:
        for port in ports:
            v = torch.as_tensor(sample[port]).double()
            if port not in acc:
                acc[port] = [0, torch.zeros_like(v), torch.zeros_like(v), v.clone(), v.clone()]
            a = acc[port]
            a[0] += 1
            a[1] += v
            a[2] += v * v
            a[3] = torch.minimum(a[3], v)
            a[4] = torch.maximum(a[4], v)
    stats = {}
    for port, (n, s, sq, lo, hi) in acc.items():
        if how == "zscore":
            centre = s / n
            scale = (sq / n - centre * centre).clamp_min(0).sqrt()
        else:
            centre, scale = lo, hi - lo
        stats[port] = {"centre": centre.float(),
                       "scale": torch.where(scale > 0, scale, torch.ones_like(scale)).float()}
    return stats


def streamed(sources: dict[str, Any], ports: dict, p, fit: Iterator[dict] | None = None
             ) -> StreamedDataset:
    """The streamed dataset of the block's params, normalised (z-score or min-max, when the
    block's `normalize` asks) with statistics of the training samples `fit` yields."""
    ds = StreamedDataset(sources, ports, p.get("batch_size", 32), p.get("shuffle", True))
    how = p.get("normalize", "none")
    if how != "none" and fit is not None:
        ds.normalization = fit_streamed(fit, how)
    return ds


def iterate(source: Any) -> Iterator[dict]:
    """Every sample of a map-style source, in order, in this process."""
    for i in range(len(source)):
        yield source[i]
