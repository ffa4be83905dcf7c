"""The trainer's side of data-parallel training (`nodegraph.runtime.distributed` starts the ranks).

Each rank runs the forward through DistributedDataParallel, trains on its share of every
global batch with the loss scaled by that share, and at the end of an epoch the losses are
summed over the ranks (exact) and metrics averaged weighted by samples, so every rank
reports — and decides early stopping on — the same numbers.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from nodegraph.runtime import distributed


class DataParallel:
    """One rank's part: the DDP forward, its share of each batch, the epoch's numbers."""

    def __init__(self, group: distributed.Group):
        self.group = group

    @property
    def writes(self) -> bool:
        """Whether this rank writes checkpoints (rank 0 only)."""
        return self.group.main

    def wrap(self, compiled) -> Callable:
        """The compiled module's `run(plan, values)` under DDP."""
        ddp = distributed.wrap(compiled.module, compiled.device, partial_plans(compiled))
        return lambda plan, values: ddp(values, plan)

    def shard(self, values: dict) -> tuple[dict, float]:
        """This rank's part of a global batch and its loss scale."""
        return self.group.shard(values)

    def reduce(self, sums, metrics: dict[str, Any]) -> dict[str, Any]:
        """The epoch's numbers over all ranks from this rank's loss `sums` (a `_Sums`,
        summed in place) and `metrics`: losses exactly, metrics weighted by samples (exact
        for shares like accuracy, a close average for the rest)."""
        totals = self.group.sum([float(v) for v in sums.sums.values()] + [sums.count])
        sums.sums, sums.count = dict(zip(sums.sums, totals[:-1], strict=True)), int(totals[-1])
        stats = sums.means()
        parts = self.group.gather((sums.count, metrics))
        total = sum(n for n, _ in parts) or 1
        for key, value in parts[0][1].items():
            if isinstance(value, int | float) and not isinstance(value, bool):
                stats[key] = sum(n * p[key] for n, p in parts) / total
            else:
                stats[key] = value
        return stats


def partial_plans(c) -> bool:
    """True when some optimizer's forward leaves parameters unused (DDP must look for them)."""
    all_params = {id(p) for p in c.module.parameters() if p.requires_grad}
    for o in c.optimizers:
        used = {id(p) for _, block, _, _ in o.plan for p in block.parameters()}
        if all_params - used:
            return True
    return False
