"""Numbers a file gives a run, held to the machine and the data before anything starts.

`training.workers` starts that many reader processes per streamed split: a file asking for
100,000 (or 40 for four rows) would fork them all. It may not exceed `PER_CORE` per core
of this machine; more than the batches of the largest split of a streamed data block is a
warning (a worker reads whole batches: only that many start). A data block's `batch_size`
above its largest split is legal — each step takes the whole split, as 0 asks — and is
told as a warning.
The declared bounds (`nodegraph.model.settings`) come first; these need the machine and
the data's sizes, which validation has learnt by now.
"""

from __future__ import annotations

import os

from nodegraph.model.errors import Problem

PER_CORE = 4  # reader processes per core: more only switch between each other


def cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def problems(report) -> list[Problem]:
    """Problems of `report`'s resolved settings against this machine and its data."""
    found = []
    workers = report.settings.workers
    if isinstance(workers, int) and workers > PER_CORE * cores():
        n = cores()
        found.append(Problem(None, "training.workers", "bad_param", f"training.workers = "
                             f"{workers:,} is more than {PER_CORE} reader processes per core "
                             f"of this machine ({n} core{'s' if n != 1 else ''}: at most "
                             f"{PER_CORE * n})", "lower it, or leave it empty to start one "
                             "per spare core"))
    elif isinstance(workers, int) and workers > 1:
        streamed = {node: (max(data.num_batches(s) for s in data.sizes), data)
                    for node, data in report.data.items() if data.streamed and data.sizes}
        if streamed:
            node, (batches, data) = max(streamed.items(), key=lambda kv: kv[1][0])
            if workers > max(batches, 1):
                sizes = ", ".join(f"{s} {n:,}" for s, n in data.sizes.items())
                found.append(Problem(None, "training.workers", "bad_param",
                                     f"training.workers = {workers:,} is more than the "
                                     f"{batches:,} batch(es) of the largest split of '{node}' "
                                     f"({sizes} samples, batch_size {data.batch_size}): a "
                                     "worker reads whole batches, so only "
                                     f"{max(batches, 1)} start",
                                     f"set it to {max(batches, 1)} or less",
                                     severity="warning"))
    for node, data in report.data.items():
        largest = max(data.sizes.values(), default=0)
        if largest and data.batch_size > largest:
            found.append(Problem(node, "batch_size", "bad_param", f"batch_size "
                                 f"{data.batch_size:,} is more than the {largest:,} samples of "
                                 "the largest split: each step takes the whole split",
                                 "write 0 for the whole split, or a smaller batch",
                                 severity="warning"))
    return found
