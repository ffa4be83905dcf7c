"""The trainer's side of the two kinds of dataset: batches in, per rank, for training and eval.

In-memory datasets are batched by slicing (`Dataset.batches`), and under data-parallel
training every rank walks the same global batches and slices its share (`Group.shard`).
A streamed dataset (`nodegraph.kinds.streamed`) reads only this rank's share in its
workers, so its batches arrive already sharded; the loss scale then comes from the global
batch's size, which the dataset knows. This module sets streamed datasets up for a run
(loader options from ``training.*``, the rank's share, skipped-sample reports routed to
the run's events), checks every rank sees the same sizes, and yields the batches.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import torch

from nodegraph.kinds.loading import LoaderOptions
from nodegraph.kinds.streamed import is_streamed
from nodegraph.model.errors import NodegraphError

Key = tuple[str, str]


def prepare(datasets: dict[str, Any], opts: Any, device: torch.device, group: Any,
            say: Callable[[str], None]) -> None:
    """Configure every streamed dataset for this run (and this rank's share under DDP);
    under DDP, refuse a dataset whose split sizes differ between ranks."""
    options = LoaderOptions.of(opts, device)
    for node, ds in datasets.items():
        if not is_streamed(ds):
            continue
        ds.configure(options)
        ds.node = ds.node or node
        ds.report = say
        if group is not None:
            ds.shard(group.rank, group.world)
    if group is not None:
        sizes = {node: {s: ds.size(s) for s in ("train", "val", "test")}
                 for node, ds in datasets.items()}
        for rank, theirs in enumerate(group.gather(sizes)):
            for node, mine in sizes.items():
                if theirs.get(node) != mine:
                    raise NodegraphError(
                        f"data block '{node}' has split sizes {mine} on rank {group.rank} but "
                        f"{theirs.get(node)} on rank {rank}: every rank must read the same "
                        "files (the same folder, unchanged while the run starts)")


def take_skipped(datasets: dict[str, Any]) -> list[dict[str, str]]:
    """The files each data block skipped (on_error = skip) since the last call, as
    {"node", "file", "reason", "split"} entries: one epoch's, for its history entry. A
    block held in memory left its files out once, when it was read: they are in every
    epoch's entry, as a streamed block's are counted every epoch."""
    out: list[dict[str, str]] = []
    for node, ds in datasets.items():
        take = getattr(ds, "take_skipped", None)
        found = take() if take is not None else list(getattr(ds, "skips", []))
        out += [{"node": node, **entry} for entry in found]
    return out


def any_streamed(datasets: dict[str, Any]) -> bool:
    return any(is_streamed(ds) for ds in datasets.values())


def shard(datasets: dict[str, Any], values: dict[Key, torch.Tensor], step: int,
          group: Any) -> tuple[dict[Key, torch.Tensor], float]:
    """This rank's part of global batch `step` (from 1) and its loss scale. Streamed data
    arrives as this rank's part already; in-memory data is sliced here."""
    streamed = [nid for nid, ds in datasets.items() if is_streamed(ds)]
    if not streamed:
        return group.shard(values)
    first = datasets[streamed[0]]
    mine = next(iter(v.shape[0] for k, v in values.items() if k[0] == streamed[0]))
    n = first.global_batch("train", step)
    if len(streamed) < len(datasets):
        kept = {k: v for k, v in values.items() if k[0] in streamed}
        sliced, _ = group.shard({k: v for k, v in values.items() if k[0] not in streamed})
        values = {**kept, **sliced}
    return values, (mine * group.world / n) if n else 1.0


def eval_batches(datasets: dict[str, Any], split: str, size: int,
                 plain: bool = False) -> Iterator[dict[Key, torch.Tensor]]:
    """Batches of `size` samples of `split` from every data block, zipped, in order; with
    `plain`, streamed data without random augmentation (the training split too)."""
    if not any_streamed(datasets):
        tensors = {nid: ds.tensors(split) for nid, ds in datasets.items()}
        n = min(len(next(iter(t.values()))) for t in tensors.values())
        for i in range(0, n, size):
            yield {(nid, k): v[i:i + size] for nid, part in tensors.items()
                   for k, v in part.items()}
        return
    # streamed data is evaluated in its training batches, not eval_batch_size's (1024 by
    # default): what one training batch needs in memory, evaluation then needs too
    size = min([size, *(max(1, ds.step_batch("train")) for ds in datasets.values()
                        if is_streamed(ds))])
    streams = [_eval_stream(nid, ds, split, size, plain) for nid, ds in datasets.items()]
    for parts in zip(*streams, strict=False):
        yield {k: v for part in parts for k, v in part.items()}


def _eval_stream(nid: str, ds: Any, split: str, size: int, plain: bool) -> Iterator[dict]:
    if not is_streamed(ds):
        part = ds.tensors(split)
        n = len(next(iter(part.values())))
        for i in range(0, n, size):
            yield {(nid, k): v[i:i + size] for k, v in part.items()}
        return
    # every rank evaluates the whole split, as with in-memory data: the same numbers
    # everywhere, so every rank makes the same early-stopping choice
    rank, world = ds.rank, ds.world
    ds.shard(0, 1)
    try:
        yield from ds.batches(split, node=nid, batch_size=size, plain=plain)
    finally:
        ds.shard(rank, world)
