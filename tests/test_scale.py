"""Cost grows with the graph, no faster: counted, not timed (benchmarks/scale.py times it).

The wire store counts the wires traversals read (`visits`) and its full rebuilds
(`reindexed`); the shape cache is checked by counting meta inferences.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import threading

import pytest

import nodegraph
from nodegraph.check.opcache import OpCache
from nodegraph.kinds import footprint, shapes
from nodegraph.model import gcpause
from nodegraph.model.graph import Graph

validation = importlib.import_module("nodegraph.check.validate")


def chain(n: int, widths=lambda i: 3) -> Graph:
    g = Graph(f"chain{n}")
    g.add("data.XOR", id="data")
    prev = ("data", "x")
    for i in range(n):
        g.add("layers.Linear", id=f"fc{i}", out_features=widths(i))
        g.connect(prev, (f"fc{i}", "input"))
        prev = (f"fc{i}", "output")
    g.add("layers.Linear", id="head", out_features=1)
    g.add("losses.MSE", id="loss")
    g.add("optimizers.Adam", id="opt")
    g.connect(prev, ("head", "input"))
    g.connect(("head", "output"), ("loss", "input"))
    g.connect(("data", "y"), ("loss", "target"))
    g.connect(("loss", "loss"), ("opt", "loss"))
    g.set_training("device", "cpu")
    return g


def test_connect_never_rebuilds_the_index_and_checks_cycles_locally():
    g = chain(400)
    assert g._wires.reindexed == 0
    # each checked connect looks downstream of its new target for a cycle: a chain built
    # in order finds nothing there, so the whole build reads a handful of wires
    assert g._wires.visits <= 10


@pytest.mark.parametrize("n", [100, 400])
def test_upstream_reads_each_wire_once(n):
    g = chain(n)
    g._wires.visits = 0
    found = g.upstream(["opt"])
    assert found == set(g.nodes)
    assert g._wires.visits == len(g.edges)


def test_validate_and_compile_traverse_in_linear_time():
    counts = {}
    for n in (100, 400):
        g = chain(n)
        nodegraph.validate(g, for_training=True)  # shapes cached: only traversals differ
        g._wires.visits = 0
        nodegraph.compile(g)
        counts[n] = g._wires.visits
    edges = {n: len(chain(n).edges) for n in (100, 400)}
    # a constant number of passes over the wires, whatever the size (a scan of every wire
    # per visited node, as upstream did, reads n**2 of them)
    assert counts[400] <= 12 * edges[400]
    assert counts[400] / counts[100] <= 1.1 * edges[400] / edges[100]


def test_optimizer_parameters_are_matched_by_identity_once_each():
    g = chain(3)
    compiled = nodegraph.compile(g)
    run = compiled.optimizers[0]
    ids = [id(p) for p in run.params]
    assert len(ids) == len(set(ids)) == len(list(compiled.module.parameters()))
    named = {id(p) for group in run.optimizer.param_groups for p in group["params"]}
    assert named == set(ids)


def test_the_shape_cache_holds_a_graph_larger_than_its_nominal_size(monkeypatch):
    """A graph with more distinct nodes than the cache's size is still inferred once: a
    second validation (the editor's, after every edit) infers nothing again. (Declared
    shape rules are set aside: they run no meta kernel and need no cache.)"""
    monkeypatch.setattr(shapes, "infer", lambda rule, params, inputs: None)
    cache = OpCache(size=8)
    inferred = []
    real = footprint.run_counted

    def counting(module, args):
        inferred.append(module)
        return real(module, args)

    monkeypatch.setattr(footprint, "run_counted", counting)
    g = chain(30, widths=lambda i: 2 + i)  # every Linear sees a new (in, out) pair
    assert nodegraph.validate(g, for_training=True, cache=cache).ok
    first = len(inferred)
    assert first >= 31
    assert nodegraph.validate(g, for_training=True, cache=cache).ok
    assert len(inferred) == first
    assert cache.size >= 2 * len(g)


def test_collection_is_paused_on_the_main_thread_and_restored(monkeypatch):
    monkeypatch.setattr(gcpause, "_tuned", True)  # as the CLI and the editor opt in
    was = gc.isenabled()
    try:
        gc.enable()
        with gcpause.paused():
            assert not gc.isenabled()
        assert gc.isenabled()
        gc.disable()
        with gcpause.paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # it was off before: it stays off
        gc.enable()
        seen = []
        thread = threading.Thread(target=lambda: seen.append(
            (gcpause.paused().__enter__(), gc.isenabled())))
        thread.start()
        thread.join()
        assert seen == [(None, True)]  # another thread leaves the process-wide switch alone
    finally:
        (gc.enable if was else gc.disable)()


def test_validation_runs_without_collections(monkeypatch):
    """No collection runs while validation works. The one that the objects made meanwhile
    may start the moment collection is back on (after the pause) is not counted: whether
    it comes depends on how many objects the installed packages' code makes."""
    monkeypatch.setattr(gcpause, "_tuned", True)  # as the CLI and the editor opt in
    collections = []
    inside = [False]
    pause = gcpause.paused

    @contextlib.contextmanager
    def watched():
        with pause():
            inside[0] = True
            try:
                yield
            finally:
                inside[0] = False

    monkeypatch.setattr(gcpause, "paused", watched)

    def note(phase, info):
        if phase == "start" and inside[0]:
            collections.append(info["generation"])

    g = chain(50)
    gc.callbacks.append(note)
    try:
        for _ in range(3):
            nodegraph.validate(g, for_training=True)
    finally:
        gc.callbacks.remove(note)
    assert collections == []


def test_a_training_step_lets_go_of_what_nothing_reads_after_it():
    """The step's plan drops intermediate outputs once the loss is finite (held through
    backward they cost the CNN page faults every step), keeps what the trainer reads — the
    losses, the metrics' inputs, the batch — and keeps everything when the loss is not
    finite, so the node where it went wrong can still be named."""
    import torch

    from nodegraph.model.events import Emitter
    from nodegraph.model.settings import resolve
    from nodegraph.runtime.train import RunControl, Trainer

    g = nodegraph.load("examples/xor.json")
    g.set_training("device", "cpu")
    compiled = nodegraph.compile(g)
    trainer = Trainer(compiled, resolve(g.training)[0], Emitter(), RunControl(), None)
    batch = next(trainer.batches("train", shuffle=False))
    run = compiled.optimizers[0]
    values = dict(batch)
    trainer.step(run, values)
    produced = {k for _, _, _, outs in run.plan for k in outs}
    kept = {run.loss_key, *(k for m in compiled.metrics for k in m.keys)}
    assert set(values) == set(batch) | (produced & kept)
    assert produced - kept  # the hidden layers' outputs were there to drop
    full = compiled.module.run(compiled.module.full_plan, dict(batch))
    assert produced <= set(full)  # other plans still give every value
    poisoned = {k: torch.full_like(v, float("nan")) if v.is_floating_point() else v
                for k, v in batch.items()}
    trainer.step(run, poisoned)
    assert produced <= set(poisoned)
