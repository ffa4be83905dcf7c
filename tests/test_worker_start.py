"""DataLoader workers beside threads (issue #32): they start, whatever another thread holds;
a stopped run ends them; killing the training process takes them with it.

The bug: the editor's training process forked its workers while its message-reader thread
sat in ``pickle.load(sys.stdin.buffer)`` holding that buffer's lock; each worker then
waited for the lock forever (multiprocessing closes sys.stdin first thing in a child)."""

from __future__ import annotations

import os
import shutil
import sys
import threading
import time
import uuid
from pathlib import Path

import numpy as np
import pytest
import torch

from nodegraph.kinds import loading
from nodegraph.kinds.loading import LoaderOptions, release_workers
from nodegraph.kinds.streamed import is_streamed
from nodegraph.model.events import StepEnded
from nodegraph.model.fileformat import load
from nodegraph.model.graph import Graph
from nodegraph.runtime.compile import compile_graph
from tests import proc_tree

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "jpeg_folder.json"


def wait_for(predicate, timeout: float) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.02)
    return predicate()


def test_workers_fork_only_where_no_other_thread_runs(monkeypatch):
    release = threading.Event()
    other = threading.Thread(target=release.wait, daemon=True)
    other.start()
    try:
        assert loading.start_method() == "forkserver"
    finally:
        release.set()
        other.join()
    # a persistent loader's queue feeder (its locks are made anew in a forked child) does
    # not count: the CLI's validation loader forks beside the training loader's workers
    feeder = threading.Thread(target=release.wait, name="QueueFeederThread", daemon=True)
    here = threading.current_thread()
    monkeypatch.setattr(threading, "enumerate", lambda: [here, feeder])  # nothing else runs
    assert loading.start_method() == "fork"


def test_workers_start_while_another_thread_holds_stdins_lock(monkeypatch):
    """What the training process did: a thread blocked reading sys.stdin (holding its
    buffer's lock) while the run starts its workers. Before the fix no batch ever came."""
    graph = load(EXAMPLE)
    data = next(iter(compile_graph(graph, device="cpu", seed=0).datasets.values()))
    data.configure(LoaderOptions(workers=2))
    r, w = os.pipe()
    monkeypatch.setattr(sys, "stdin", open(r))  # noqa: SIM115 — closed below
    reader = threading.Thread(target=sys.stdin.buffer.read, args=(1,), daemon=True)
    reader.start()
    wait_for(lambda: False, 0.2)  # the reader is in read(), holding the lock
    got: list = []
    before = set(proc_tree.descendants(os.getpid()))
    first = threading.Thread(daemon=True, target=lambda: got.append(
        next(data.batches("train", True, torch.Generator().manual_seed(0)))))
    first.start()
    first.join(300)  # generous: two workers start on a loaded machine in seconds
    try:
        assert got, "no batch from the workers: they hang on a lock held at the fork"
        assert got[0]["x"].shape == (32, 3, 32, 32)
    finally:
        release_workers([data])
        os.write(w, b"x")
        reader.join(5)
        sys.stdin.close()
        os.close(w)
        if not got:  # the hung workers of the old code: not left to the next test
            for pid in set(proc_tree.descendants(os.getpid())) - before:
                if not proc_tree.servers(os.getpid()) & {pid}:
                    os.kill(pid, 9)


def test_stop_ends_the_runs_workers_and_a_kill_takes_them_along(tmp_path, monkeypatch):
    """A training process, as the editor drives it: Stop leaves only the process (and the
    fork server it keeps); killing it mid-run (the editor does, when a run does not stop)
    leaves no process at all, orphans included."""
    from nodegraph.runtime import train_process

    mark = uuid.uuid4().hex
    monkeypatch.setenv("NODEGRAPH_TEST_MARK", mark)  # every descendant carries it
    shutil.copytree(EXAMPLE.parent / "data" / "shapes_sample", tmp_path / "data" / "shapes_sample")
    shutil.copy(EXAMPLE, tmp_path / EXAMPLE.name)
    graph = load(tmp_path / EXAMPLE.name)
    process = train_process.TrainingProcess()
    try:
        assert process.ready.wait(300)
        for round_ in ("stop", "kill"):
            messages: list = []

            def read(messages=messages):
                while (m := process.receive()) is not None:
                    messages.append(m)
                    if m[0] == "done":
                        return

            assert process.train(graph, {"epochs": 500})
            reader = threading.Thread(target=read, daemon=True)
            reader.start()
            def stepped(messages=messages) -> bool:
                return any(isinstance(e, StepEnded) for m in messages if m[0] == "events"
                           for e in m[1])

            assert wait_for(stepped, 300), messages
            pid = process.popen.pid
            workers = set(proc_tree.descendants(pid)) - proc_tree.servers(pid)
            assert len(workers) >= 2, proc_tree.descendants(pid)  # two DataLoader workers
            if round_ == "stop":
                began = time.monotonic()
                process.send("stop")
                reader.join(60)
                assert messages[-1][0] == "done" and messages[-1][1]["cancelled"]
                # "done" comes after the workers ended: nothing left but the servers
                assert set(proc_tree.descendants(pid)) == proc_tree.servers(pid)
                print(f"Stop to no worker: {time.monotonic() - began:.2f} s")
            else:
                began = time.monotonic()
                process.kill()
                assert wait_for(lambda: not proc_tree.marked("NODEGRAPH_TEST_MARK", mark), 20), \
                    [(p, proc_tree.command(p)) for p in proc_tree.marked("NODEGRAPH_TEST_MARK",
                                                                          mark)]
                print(f"kill to no process: {time.monotonic() - began:.2f} s")
    finally:
        if process.alive:
            process.kill()


def _epoch(data, workers: int, method: str, monkeypatch) -> list[dict]:
    monkeypatch.setattr(loading, "start_method", lambda: method)
    data.configure(LoaderOptions(workers=workers))
    try:
        return list(data.batches("train", True, torch.Generator().manual_seed(3)))
    finally:
        release_workers([data])


def _streamed_graph(fmt: str, folder: Path) -> Graph:
    """A graph whose data block streams `fmt`: a shipped example's, or a file written here."""
    if fmt == "npy":
        rng = np.random.default_rng(5)
        np.save(folder / "x.npy", rng.normal(size=(50, 2, 3)).astype(np.float32))
        np.save(folder / "y.npy", rng.integers(0, 3, 50))
        g = Graph("npy")
        g.add("data.NumPy", "data", path=str(folder / "x.npy"), y_path=str(folder / "y.npy"),
              target_kind="class", storage="stream")
        return g
    if fmt == "idx":
        rng = np.random.default_rng(4)
        for name, shape in (("im", (60, 6, 5)), ("lb", (60,))):
            a = rng.integers(0, 256 if name == "im" else 10, shape)
            (folder / name).write_bytes(bytes([0, 0, 8, a.ndim]) + np.array(a.shape, ">u4")
                                        .tobytes() + a.astype(np.uint8).tobytes())
        g = Graph("idx")
        g.add("data.MNIST", "data", images=str(folder / "im"), labels=str(folder / "lb"),
              storage="stream")
        return g
    g = load(EXAMPLE.parent / f"{fmt}.json")
    for node in g:
        if node.type.startswith("data.") and any(
                p.name == "storage" for p in g.registry.get(node.type).params):
            g.set_param(node.id, "storage", "stream")
    return g


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["jpeg_folder", "cifar_cnn", "parquet_churn", "hf_signals",
                                 "webdataset_signals", "bpe_transformer", "npy", "idx"])
def test_every_streamed_format_reads_the_same_from_a_fork_server(fmt, tmp_path, monkeypatch):
    """Workers from a fork server get the dataset pickled (forked ones inherit it): every
    streamed format gives them the same batches as forked workers, and the samples one
    process reads (map-style sources: in the same order)."""
    graph = _streamed_graph(fmt, tmp_path)
    compiled = compile_graph(graph, device="cpu", seed=0, for_training=False)
    (data,) = [d for d in compiled.datasets.values() if is_streamed(d)]
    alone = _epoch(data, 0, "fork", monkeypatch)
    forked = _epoch(data, 2, "fork", monkeypatch)
    served = _epoch(data, 2, "forkserver", monkeypatch)

    def same(a: list[dict], b: list[dict]) -> bool:
        return len(a) == len(b) and all(torch.equal(x[k], y[k]) for x, y in zip(a, b, strict=True)
                                        for k in x)

    def rows(batches: list[dict]) -> list:
        return sorted(tuple(r.flatten().tolist()) for b in batches for r in b["x"])

    assert same(forked, served)
    if isinstance(data.sources["train"], loading.ShardSource):  # workers take turns by shard
        assert rows(alone) == rows(served)
    else:
        assert same(alone, served)
