"""What a data block will hold, known from its params without making the data.

Validation needs, of each data block, the shape and dtype of one training batch per port,
how many samples each split gets (batches per epoch) and how many bytes the data takes —
not the data. A data block that can say so from its params declares ``meta=fn`` on its
`BlockSpec`: ``fn(p)`` returns a `DataMeta` (usually through `sized`), or None when only
the data can tell (a stratified split needs the labels; a file must be read). Validation
then builds nothing; `compile` materialises the datasets. A block without ``meta`` is
built during validation as before, and its `Dataset` described by `DataMeta.of`. A block
that knows how many classes a port's indices run over (a folder's subfolders, a
`ClassLabel`) says so in `DataMeta.classes` (`with_classes`): validation checks the scores
of the losses they reach against it (`nodegraph.kinds.classes`).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import torch

from nodegraph.kinds import classes, confine
from nodegraph.kinds.augment import augmenting
from nodegraph.kinds.dataset import SPLITS, Dataset, files_relative_to, split_indices
from nodegraph.model.errors import NodegraphError, Problem, ProblemKind, ValidationError

# one sample's shape and dtype per port, e.g. {"x": ((2,), torch.float32)}
Ports = dict[str, tuple[tuple[int, ...], torch.dtype]]


@dataclass(frozen=True)
class DataMeta:
    """Shapes of one sample per port, samples per split, and the batch size."""

    ports: Ports
    sizes: dict[str, int]
    batch_size: int
    streamed: bool = False  # read per sample (`nodegraph.kinds.streamed`): holds no split
    # ports of class indices -> how many classes they run over, where the block knows: a
    # declaration `of` a built dataset cannot make, so left out of comparisons
    classes: dict[str, int] = field(default_factory=dict, compare=False)
    # what validation shows as warnings on the block (samples left out, suspect columns)
    warnings: tuple[str, ...] = field(default=(), compare=False)

    @classmethod
    def of(cls, dataset: Any) -> DataMeta:
        """The description of a dataset already built (either kind)."""
        if getattr(dataset, "streamed", False):
            return cls(dataset.sample_ports(),
                       {s: dataset.size(s) for s in SPLITS if dataset.has(s)},
                       dataset.batch_size, streamed=True)
        train = dataset.tensors("train")
        return cls({k: (tuple(t.shape[1:]), t.dtype) for k, t in train.items()},
                   {s: dataset.size(s) for s in SPLITS if dataset.has(s)},
                   dataset.batch_size)

    def has(self, split: str) -> bool:
        return self.sizes.get(split, 0) > 0

    def step_batch(self, split: str = "train") -> int:
        n = self.sizes.get(split, 0)
        return n if self.batch_size == 0 else min(self.batch_size, n)

    def num_batches(self, split: str) -> int:
        b = self.step_batch(split)
        return 0 if b == 0 else -(-self.sizes.get(split, 0) // b)

    def meta(self) -> dict[str, torch.Tensor]:
        """A meta tensor per port shaped like one training batch (`Dataset.meta`)."""
        b = self.step_batch("train")
        return {k: torch.empty((b, *shape), dtype=dtype, device="meta")
                for k, (shape, dtype) in self.ports.items()}

    @property
    def nbytes(self) -> int:
        """Bytes of every split's tensors (`footprint.dataset_bytes` of the built data);
        a streamed dataset holds a batch at a time, counted as none."""
        if self.streamed:
            return 0
        n = sum(self.sizes.values())
        return sum(n * math.prod(shape) * torch.empty((), dtype=dtype).element_size()
                   for shape, dtype in self.ports.values())


def split_sizes(n: int, p: dict, labels: np.ndarray | None = None) -> dict[str, int]:
    """Samples per non-empty split when `n` samples are split by the shared data params in
    `p` (`nodegraph.kinds.dataset.DATA_PARAMS`), as `from_arrays` splits them; raises what
    the split would (fractions leaving no training samples, a fold out of range, a
    stratified split without `labels`)."""
    idx = split_indices(n, p.get("val_fraction", 0.0), p.get("test_fraction", 0.0),
                        p.get("split", "random"), p.get("split_seed", 0), labels,
                        p.get("folds", 0), p.get("fold", 0))
    return {s: len(i) for s, i in idx.items() if len(i) > 0}


def sized(ports: Ports, n: int, p: dict, labels: np.ndarray | None = None) -> DataMeta | None:
    """The meta of `n` samples split and batched by the shared data params in `p`, as
    `from_arrays` would; None for a stratified split without the class `labels` its sizes
    depend on. Raises what the split would."""
    if p.get("split", "random") == "stratified" and labels is None:
        return None
    return DataMeta(ports, split_sizes(n, p, labels), p.get("batch_size", 32))


def with_classes(meta: DataMeta | None, **counts: int | None) -> DataMeta | None:
    """`meta` declaring how many classes each named port's indices run over (a count of
    None is left out: unknown)."""
    known = {port: int(n) for port, n in counts.items() if n is not None}
    if meta is None or not known:
        return meta
    return replace(meta, classes={**meta.classes, **known})


def labels_counted(counts: Sequence[int]) -> np.ndarray:
    """Class labels with `counts[c]` samples of class c: a stratified split's sizes depend
    on the counts alone, so a dataset whose class counts are known (a bundled one) is
    sized without reading its labels."""
    return np.repeat(np.arange(len(counts)), counts)


def materialise(report, folder=None) -> dict[str, Dataset]:
    """Every data block's dataset: the ones validation built, the rest built now (data
    paths relative to `folder`, the graph file's). A failure the params did not predict
    (a file gone since validation) is a `data_error` on its node."""
    datasets = {}
    # no folder (a graph built in code): paths as the caller's context has them, as
    # validation read them
    with (files_relative_to(folder) if folder is not None else contextlib.nullcontext(),
          confine.allowing(report.data_roots)):
        for node_id in report.data:
            dataset = report.datasets.get(node_id)
            if dataset is None:
                spec = report.specs[node_id]
                try:
                    with augmenting(report.augments.get(node_id)):
                        dataset = spec.build(report.params[node_id])
                except (NodegraphError, OSError, ValueError) as e:
                    port = spec.outputs[0].name if spec.outputs else None
                    raise ValidationError([Problem(node_id, port, ProblemKind.DATA_ERROR,
                                                   f"{spec.id} '{node_id}': {e}",
                                                   "check the data block's params and "
                                                   "files")]) from e
            datasets[node_id] = dataset
    _labels_fit(report, datasets)
    return datasets


def _labels_fit(report, datasets: dict[str, Dataset]) -> None:
    """Refuse labels held in memory that the scores of the loss they reach cannot index
    (validation knew the width, not the labels), before the run starts."""
    problems = []
    for target in getattr(report, "class_targets", {}).values():
        dataset = datasets.get(target.source[0])
        problem = None if dataset is None else classes.bad_label(target, dataset)
        if problem is not None:
            problems.append(problem)
    if problems:
        raise ValidationError(problems)
