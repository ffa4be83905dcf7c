"""A worker's batch is stacked straight into shared memory (as torch's default_collate
does), so it is not copied once more to cross to the main process; the values are the
samples stacked."""

from __future__ import annotations

import torch
from torch.utils.data import DataLoader

from nodegraph.kinds.loading import Bad, collate


def _shared_in_worker(items: list) -> tuple[bool, torch.Tensor, list]:
    batch, bad = collate(items, ports={})
    return batch["x"].is_shared(), batch["x"], bad


def test_a_workers_batch_is_stacked_into_shared_memory():
    samples = [({"x": torch.full((2, 3), float(i)), "y": torch.tensor(i)}, i) for i in range(6)]
    samples[4] = (Bad("file 4 is damaged"), 4)
    loader = DataLoader(samples, batch_size=3, num_workers=1, collate_fn=_shared_in_worker,
                        multiprocessing_context="fork")
    got = list(loader)
    assert [shared for shared, _, _ in got] == [True, True]
    assert torch.equal(got[0][1], torch.stack([torch.full((2, 3), float(i)) for i in range(3)]))
    assert torch.equal(got[1][1][:, 0, 0], torch.tensor([3.0, 5.0]))
    assert got[1][2] == ["file 4 is damaged"]
    batch, _ = collate(samples[:2], ports={})  # in the main process: ordinary memory
    assert not batch["x"].is_shared() and batch["y"].tolist() == [0, 1]
