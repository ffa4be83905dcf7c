"""Class indices and the scores they index: what validation checks, and what a run names.

A data block that knows its classes (a folder's subfolders, CIFAR's ten, a `ClassLabel`)
declares their count per port in its `DataMeta.classes`; validation carries the count along
the wire. A block that takes class indices on a port (cross-entropy, the multi-class hinge,
accuracy over several scores) says so from its shape check with `takes_indices`, naming the
port whose last dimension holds the scores: validation then compares the two numbers before
anything runs, and `compile` checks the labels of in-memory data against the width once.
At run time a label torch refuses (an IndexError on the CPU) becomes a `LabelError` naming
the value, the class count and the wire it came on.
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass

import torch

from nodegraph.kinds.dataset import SPLITS
from nodegraph.model.errors import NodegraphError, Problem, ProblemKind


@dataclass(frozen=True)
class Indices:
    """Input `port` holds class indices into the last dimension of input `scores`, of
    `width` classes; `ignore` is an index the block skips (cross-entropy's -100)."""

    port: str
    scores: str
    width: int
    ignore: int | None = None


_declared: ContextVar[list[Indices] | None] = ContextVar("nodegraph_class_indices",
                                                         default=None)


def takes_indices(port: str, scores: str, width: int, ignore: int | None = None) -> None:
    """Declare, from a block's shape check, that `port` takes class indices into `width`
    scores on `scores`; outside validation this does nothing."""
    found = _declared.get()
    if found is not None:
        found.append(Indices(port, scores, int(width), ignore))


class declared:  # noqa: N801  (used as a function: `with classes.declared() as found`)
    """Collect what the checks run inside this block declare (validation's side). A class,
    not a @contextmanager: validation enters one per node, and a generator's set-up costs
    several times this on a graph of thousands of nodes."""

    __slots__ = ("_found", "_token")

    def __enter__(self) -> list[Indices]:
        self._found: list[Indices] = []
        self._token = _declared.set(self._found)
        return self._found

    def __exit__(self, *exc: object) -> None:
        _declared.reset(self._token)


class LabelError(NodegraphError):
    """A class index outside [0, classes) met at run time; `position` is the argument of
    the block's forward that carried it (the runtime names the wire feeding it)."""

    def __init__(self, port: str, position: int, message: str, hint: str = ""):
        self.port, self.position, self.hint = port, position, hint
        super().__init__(message)


def first_bad(labels: torch.Tensor, classes: int, ignore: int | None = None
              ) -> tuple[int, int] | None:
    """The position (flat, in row order) and value of the first label outside
    [0, classes) (`ignore` allowed), or None when all fit."""
    flat = labels.detach().reshape(-1)
    bad = (flat < 0) | (flat >= classes)
    if ignore is not None:
        bad &= flat != ignore
    if not bool(bad.any()):
        return None
    i = int(bad.nonzero()[0, 0])
    return i, int(flat[i])


def out_of_range(labels: torch.Tensor, classes: int, port: str, position: int,
                 ignore: int | None = None) -> LabelError | None:
    """The `LabelError` for a batch of `labels` holding an index outside [0, classes), or
    None when every label fits (the failure was something else)."""
    found = first_bad(labels, classes, ignore)
    if found is None:
        return None
    row, value = found
    return LabelError(port, position,
                      f"class index {value} (sample {row} of this batch) is outside "
                      f"[0, {classes}): the scores have {classes} classes",
                      f"give the scores at least {value + 1} classes, or fix the labels")


def name_label(module: torch.nn.Module, args: list) -> LabelError | None:
    """The `LabelError` of a failed call `module(*args)` when the module declares a port
    of class indices (`class_indices = (port, argument, scores argument)`) and one of its
    labels is out of range; None otherwise (the failure was something else)."""
    declared = getattr(module, "class_indices", None)
    if declared is None:
        return None
    port, at, scores_at = declared
    labels, scores = args[at], args[scores_at]
    if not (isinstance(labels, torch.Tensor) and isinstance(scores, torch.Tensor)) or \
            labels.is_floating_point() or labels.is_complex() or scores.ndim < 2:
        return None
    return out_of_range(labels, scores.shape[-1], port, at, getattr(module, "ignore_index", None))


@dataclass(frozen=True)
class Labels:
    """Class indices on a wire: made by data port `source` (node, port) of block type
    `block`, over `count` classes (None: the block does not say how many)."""

    source: tuple[str, str]
    block: str
    count: int | None = None


@dataclass(frozen=True)
class Target:
    """A port validation found taking class indices: node `node`'s `port`, fed (directly
    or through reshaping blocks) by data port `source` (node, port) of block type `block`,
    with scores of `width` classes."""

    node: str
    port: str
    source: tuple[str, str]
    block: str
    width: int
    ignore: int | None = None


def bad_label(target: Target, dataset) -> Problem | None:
    """The problem of the first label of `dataset` (built by the source's data block) that
    `target`'s scores cannot index, split by split, naming the sample's index in its split;
    None when all fit. Data held in memory is checked (once, before a run); streamed data
    is met a batch at a time (`out_of_range`)."""
    if getattr(dataset, "streamed", False):
        return None
    data_node, port = target.source
    for split in SPLITS:
        if not dataset.has(split):
            continue
        labels = dataset.tensors(split).get(port)
        if labels is None or labels.is_floating_point() or labels.is_complex():
            return None
        found = first_bad(labels.reshape(len(labels), -1), target.width, target.ignore)
        if found is None:
            continue
        at, value = found
        sample = at // max(1, labels[0].numel())
        rows = getattr(dataset, "rows", {}).get(split)
        row = f"row {int(rows[sample])} of its data, " if rows is not None else ""
        return Problem(target.node, target.port, ProblemKind.DATA_ERROR,
                       f"class index {value} of {target.block} '{data_node}' ({row}sample "
                       f"{sample} of its {split} split) is outside [0, {target.width}): "
                       f"'{target.node}' gets {target.width} scores per sample",
                       f"give the scores at least {value + 1} classes, or fix the labels "
                       f"of '{data_node}'")
    return None
