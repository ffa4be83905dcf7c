"""The streaming kind of dataset (`nodegraph.kinds.streamed`, `nodegraph.kinds.loading`).

A toy map-style source whose every sample is known checks that a `StreamedDataset` batches
as the in-memory `Dataset` does, that shuffling and random transforms reproduce from the
seed whatever the number of workers, that ranks read their shares of each global batch,
that unreadable samples stop or are skipped by the param, and that a graph trains through
`nodegraph.train` on either kind with the same result.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

import nodegraph
from nodegraph.kinds import declare
from nodegraph.kinds.datameta import sized
from nodegraph.kinds.dataset import DATA_PARAMS, Dataset
from nodegraph.kinds.loading import LoaderOptions, ShardSource
from nodegraph.kinds.streamed import (
    STORAGE_PARAM,
    SampleError,
    StreamedDataset,
    choose_storage,
)
from nodegraph.model.graph import Graph
from nodegraph.model.spec import LOSS_IN, LOSS_OUT, Registry, float_param, int_param

PORTS = {"x": ((3,), torch.float32), "y": ((1,), torch.float32)}


class Rows(torch.utils.data.Dataset):
    """Rows i of a table: x = (i, 2i, 3i) / n, y = the row sum; `bad` rows fail to read."""

    def __init__(self, rows, n, bad=()):
        self.rows, self.n, self.bad = list(rows), n, set(bad)

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, i):
        r = self.rows[i]
        if r in self.bad:
            raise SampleError(f"row{r}.bin: not a row")
        x = np.array([r, 2 * r, 3 * r], dtype=np.float32) / self.n
        return {"x": x, "y": x.sum(keepdims=True)}


def streamed(n=10, batch_size=4, shuffle=True, bad=(), on_error="stop", transforms=None,
             val=0):
    sources = {"train": Rows(range(n - val), n, bad)}
    if val:
        sources["val"] = Rows(range(n - val, n), n)
    return StreamedDataset(sources, PORTS, batch_size, shuffle, transforms=transforms,
                           node="rows", on_error=on_error)


def jitter(sample):
    return {**sample, "x": sample["x"] + torch.rand(3)}


def test_batches_follow_the_in_memory_kind():
    lazy = streamed(10, 4)
    assert lazy.size("train") == 10 and lazy.num_batches("train") == 3 and not lazy.has("test")
    assert lazy.meta()["x"].shape == (4, 3) and lazy.meta()["x"].device.type == "meta"
    memory = choose_storage(lazy, "memory")
    assert isinstance(memory, Dataset)
    for a, b in zip(lazy.batches("train"), memory.batches("train"), strict=True):
        assert torch.equal(a["x"], b["x"]) and torch.equal(a["y"], b["y"])
    assert torch.equal(lazy.tensors("train")["x"][7], torch.tensor([7., 14., 21.]) / 10)


def test_storage_auto_keeps_small_unaugmented_data_in_memory():
    assert isinstance(choose_storage(streamed()), Dataset)
    assert isinstance(choose_storage(streamed(), "stream"), StreamedDataset)
    assert isinstance(choose_storage(streamed(), limit=10), StreamedDataset)  # too large
    augmented = streamed(transforms={"train": jitter})
    augmented.augmented = True
    assert choose_storage(augmented) is augmented
    with pytest.raises(Exception, match="augmentation"):
        choose_storage(augmented, "memory")


def _epoch(ds, seed, workers):
    ds.configure(LoaderOptions(workers=workers))
    return list(ds.batches("train", True, torch.Generator().manual_seed(seed)))


@pytest.mark.parametrize("workers", [0, 2])
def test_shuffle_and_augmentation_reproduce_from_the_seed_whatever_the_workers(workers):
    one = _epoch(streamed(12, 5, transforms={"train": jitter}), 3, 0)
    other = _epoch(streamed(12, 5, transforms={"train": jitter}), 3, workers)
    assert [b["x"].shape[0] for b in one] == [5, 5, 2]
    for a, b in zip(one, other, strict=True):
        assert torch.equal(a["x"], b["x"]) and torch.equal(a["y"], b["y"])
    # every sample once; x jittered by [0, 1) around its row, a new draw next seed
    rows = torch.cat([b["y"] for b in one]).flatten() * 12 / 6
    assert sorted(rows.round().tolist()) == list(range(12))
    again = _epoch(streamed(12, 5, transforms={"train": jitter}), 4, 0)
    assert not torch.equal(torch.cat([b["x"] for b in one]), torch.cat([b["x"] for b in again]))


def test_the_main_process_random_stream_is_left_alone():
    torch.manual_seed(0)
    expected = torch.rand(2)
    torch.manual_seed(0)
    _epoch(streamed(6, 2, transforms={"train": jitter}), 1, 0)
    assert torch.equal(torch.rand(2), expected)


def test_ranks_read_their_share_of_each_global_batch():
    whole = _epoch(streamed(11, 4), 5, 0)
    shares = [_epoch(streamed(11, 4).shard(r, 3), 5, 0) for r in range(3)]
    for step, batch in enumerate(whole):
        parts = [s[step]["x"] for s in shares]
        assert torch.equal(torch.cat(parts), batch["x"])
        assert [len(p) for p in parts] == [len(t) for t in batch["x"].tensor_split(3)]
    assert streamed(11, 4).global_batch("train", 3) == 3


def test_an_unreadable_sample_stops_naming_file_and_block():
    with pytest.raises(SampleError, match=r"rows: row3\.bin: not a row.*on_error = skip"):
        list(streamed(8, 4, bad={3}).batches("train"))


@pytest.mark.parametrize("workers", [0, 2])
def test_skip_leaves_bad_samples_out_and_reports_the_count(workers):
    ds = streamed(8, 4, bad={3, 5}, on_error="skip")
    ds.configure(LoaderOptions(workers=workers))
    said = []
    ds.report = said.append
    sizes = [len(b["x"]) for b in ds.batches("train")]
    assert sizes == [3, 3]
    assert said == ["rows: skipped 2 unreadable samples of the train split (first: row3.bin: "
                    "not a row); also row5.bin"]
    assert [(e["file"], e["split"]) for e in ds.take_skipped()] == [("row3.bin", "train"),
                                                                  ("row5.bin", "train")]
    assert ds.take_skipped() == []  # taken once, for one epoch's history


# -- through the trainer -------------------------------------------------------------------


def _rows(p):
    n = p.n
    ds = StreamedDataset({"train": Rows(range(n - 4), n), "val": Rows(range(n - 4, n), n)},
                         PORTS, p.batch_size, p.shuffle)
    return choose_storage(ds, p.storage)


class Mse(nn.Module):
    def forward(self, a, b):
        return ((a - b) ** 2).mean()


SPECS = [
    declare.data("stub.StreamRows", "n rows; y the row sums; the last 4 validate.", _rows,
               outputs=["x", "y"], params=[int_param("n", 24, min=5), STORAGE_PARAM,
                                           *DATA_PARAMS],
               meta=lambda p: sized(PORTS, p.n, {**p, "val_fraction": 4 / p.n})),
    declare.op("stub.Dense", "A linear layer to one output.",
             lambda p, x: nn.Linear(x["input"].shape[-1], 1), inputs=["input"],
             outputs=["output"]),
    declare.op("stub.Mse", "Mean squared error.", lambda p, x: Mse(), inputs=["a", "b"],
             outputs=[LOSS_OUT]),
    declare.optimizer("stub.Sgd", "Plain SGD.", lambda p, named: torch.optim.SGD(
        [q for _, q in named], lr=p.lr), inputs=[LOSS_IN], params=[float_param("lr", 0.05)]),
]


def graph(storage: str, shuffle: bool, **training) -> Graph:
    g = Graph("stream", Registry(SPECS))
    g.add("stub.StreamRows", id="rows", batch_size=5, storage=storage, shuffle=shuffle)
    g.add("stub.Dense", id="dense")
    g.add("stub.Mse", id="mse")
    g.add("stub.Sgd", id="sgd")
    g.connect(("rows", "x"), ("dense", "input"))
    g.connect(("dense", "output"), ("mse", "a"))
    g.connect(("rows", "y"), ("mse", "b"))
    g.connect(("mse", "loss"), ("sgd", "loss"))
    g.update_training({"epochs": 3, "seed": 1, **training})
    return g


def _weights(result):
    return [p.detach().clone() for p in result.compiled.module.parameters()]


def test_a_graph_trains_the_same_on_either_kind():
    memory = nodegraph.train(graph("memory", False))
    stream = nodegraph.train(graph("stream", False))
    assert isinstance(stream.compiled.datasets["rows"], StreamedDataset)
    assert isinstance(memory.compiled.datasets["rows"], Dataset)
    for a, b in zip(_weights(memory), _weights(stream), strict=True):
        assert torch.allclose(a, b, atol=1e-6)
    assert stream.history[-1]["val"]["loss"] == pytest.approx(memory.history[-1]["val"]["loss"],
                                                              rel=1e-5)


def test_a_shuffled_streamed_run_reproduces_with_workers():
    a = nodegraph.train(graph("stream", True, workers=0))
    b = nodegraph.train(graph("stream", True, workers=2))
    for x, y in zip(_weights(a), _weights(b), strict=True):
        assert torch.equal(x, y)
    assert a.history[-1]["train"]["loss"] < a.history[0]["train"]["loss"]


# -- iterable shards -------------------------------------------------------------------------


class Chunks(ShardSource):
    """Shards of rows: shard s holds rows s*4 .. s*4+3; shard `bad` is corrupt."""

    def __init__(self, shards, bad=None):
        super().__init__(list(shards), [4] * len(shards))
        self.bad = bad

    def read(self, shard):
        if shard == self.bad:
            raise SampleError(f"shard-{shard}.tar: truncated")
        for r in range(shard * 4, shard * 4 + 4):
            yield {"x": np.full(3, r, np.float32), "y": np.array([r], np.float32)}


def _rows(ds, seed=0):
    return sorted(int(v) for b in ds.batches("train", True, torch.Generator().manual_seed(seed))
                  for v in b["y"].flatten())


@pytest.mark.parametrize("workers", [0, 2])
def test_shards_are_split_between_ranks_and_workers_and_read_once(workers):
    def make():
        ds = StreamedDataset({"train": Chunks(range(6))}, PORTS, 4, True, node="tars")
        return ds.configure(LoaderOptions(workers=workers))
    assert _rows(make()) == list(range(24))
    ranks = [_rows(make().shard(r, 2)) for r in range(2)]
    assert sorted(ranks[0] + ranks[1]) == list(range(24)) and not set(ranks[0]) & set(ranks[1])
    order = [float(b["y"][0]) for b in make().batches("train", True,
                                                      torch.Generator().manual_seed(1))]
    again = [float(b["y"][0]) for b in make().batches("train", True,
                                                      torch.Generator().manual_seed(1))]
    assert order == again


def test_a_corrupt_shard_stops_naming_it():
    ds = StreamedDataset({"train": Chunks(range(3), bad=1)}, PORTS, 4, False, node="tars")
    with pytest.raises(SampleError, match=r"tars: shard-1\.tar: truncated"):
        list(ds.batches("train"))


def test_evaluation_workers_end_after_the_pass_and_training_workers_stay():
    # issue #37: each split kept its own persistent workers (4 processes for 2 workers)
    import multiprocessing

    from nodegraph.kinds.loading import release_workers

    ds = streamed(n=40, batch_size=4, val=12)
    ds.configure(LoaderOptions(workers=2))
    before = set(multiprocessing.active_children())
    try:
        for _ in ds.batches("train", shuffle=True):
            pass
        training = set(multiprocessing.active_children()) - before
        assert len(training) == 2  # kept for the next epoch
        for _ in ds.batches("val", shuffle=False):
            pass
        for p in set(multiprocessing.active_children()) - before - training:
            p.join(20)  # an evaluation worker, ending
        assert set(multiprocessing.active_children()) - before == training
    finally:
        release_workers([ds])
