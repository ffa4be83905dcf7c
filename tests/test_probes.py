"""Probes: summaries equal direct statistics and autograd, survive in-place ops, hold no
memory, replay from a file, and stop a run at the node where NaN first appears."""

from __future__ import annotations

import gc
import time
import warnings

import pytest
import torch

import nodegraph
from nodegraph.model.errors import NodeRuntimeError
from nodegraph.model.events import Emitter
from nodegraph.model.graph import Graph
from nodegraph.model.spec import Registry, block, default_registry
from nodegraph.runtime.probes import (
    BINS,
    ProbeFrame,
    ProbeWriter,
    read_frames,
    summarize_grad,
    summarize_output,
    trace_batch,
)


def test_output_summary_equals_direct_statistics():
    x = torch.tensor([[0.0, 2.0, -1.0, 0.0], [0.0, 3.0, 5.0, 0.0]])
    s = summarize_output(x)
    assert s.shape == [2, 4]
    assert s.mean == pytest.approx(x.mean().item())
    assert s.std == pytest.approx(x.std().item())
    assert (s.min, s.max, s.absmax) == (-1.0, 5.0, 5.0)
    assert s.zero_frac == pytest.approx(4 / 8)
    assert s.dead_frac == pytest.approx(2 / 4)  # columns 0 and 3 are zero for every sample
    assert sum(s.hist.counts) == 8 and len(s.hist.counts) == BINS
    expected = torch.histc(x, BINS, -1.0, 5.0)
    assert s.hist.counts == [int(c) for c in expected]
    assert s.sample == x.flatten().tolist() and s.finite and s.thumbnail is None


def test_saturation_and_thumbnails():
    sig = torch.tensor([[0.001, 0.5, 0.999, 0.2]])
    assert summarize_output(sig).saturated_frac == pytest.approx(0.5)
    tanh = torch.tensor([[-0.995, 0.0, 0.3, 0.999]])
    assert summarize_output(tanh).saturated_frac == pytest.approx(0.5)
    img = torch.arange(2 * 1 * 4 * 4, dtype=torch.float32).reshape(2, 1, 4, 4)
    assert summarize_output(img).thumbnail == img[0, 0].tolist()
    big = torch.rand(1, 3, 64, 64)
    thumb = summarize_output(big).thumbnail
    assert len(thumb) == 28 and len(thumb[0]) == 28


def test_nonfinite_values_are_flagged_but_summarised():
    s = summarize_output(torch.tensor([1.0, float("nan"), 3.0]))
    assert not s.finite and s.mean == pytest.approx(2.0)
    g = summarize_grad(torch.tensor([3.0, 4.0]))
    assert g.norm == pytest.approx(5.0) and g.mean_abs == pytest.approx(3.5) and g.finite


def probed_run(graph, epochs=1, **training):
    graph.update_training({"probe_every": 1, "probe_budget": 1000.0, "probe_rate": 0, **training})
    events, frames = Emitter(), []
    events.subscribe(frames.append, ProbeFrame)
    result = nodegraph.train(graph, epochs=epochs, events=events)
    return result, frames


def xor() -> Graph:
    return nodegraph.load("examples/xor.json")


def test_frames_follow_forward_order_and_match_autograd():
    g = xor()
    g.set_training("epochs", 1)
    compiled = nodegraph.compile(g)
    records = {r.node: r for r in trace_batch(compiled)}  # reference: retain_grad + backward
    _, frames = probed_run(xor())
    (frame,) = frames
    assert frame.order == ["hidden", "act", "out", "loss"]
    for node in ["hidden", "act", "out"]:
        ref_out = records[node].outputs["output"]
        ref_grad = records[node].grads["output"]
        s, gs = frame.outputs[node]["output"], frame.grads[node]["output"]
        assert s.mean == pytest.approx(ref_out.mean().item(), abs=1e-6)
        assert s.absmax == pytest.approx(ref_out.abs().max().item(), abs=1e-6)
        assert gs.norm == pytest.approx(ref_grad.norm().item(), rel=1e-5)
        assert gs.mean_abs == pytest.approx(ref_grad.abs().mean().item(), rel=1e-5)
    assert frame.grads["loss"]["loss"].norm == pytest.approx(1.0)
    p = frame.params["hidden.weight"]
    assert p.grad_norm > 0 and 0 < p.update_ratio < 1


def inplace_registry() -> Registry:
    registry = Registry(default_registry())
    registry.register(block("test.InplaceReLU", "op", "ReLU that overwrites its input.",
                            lambda p, x: torch.nn.ReLU(inplace=True),
                            inputs=["input"], outputs=["output"]))
    return registry


def test_probes_survive_inplace_ops():
    plain = xor()
    text = nodegraph.model.fileformat.dumps(plain)
    g = nodegraph.loads(text, inplace_registry())
    g.node("act").type = "test.InplaceReLU"
    ref = nodegraph.loads(text)
    ref.node("act").type = "activations.ReLU"
    _, frames = probed_run(g)
    _, ref_frames = probed_run(ref)
    got, want = frames[0], ref_frames[0]
    for node in ["hidden", "act", "out"]:
        assert got.outputs[node]["output"].mean == pytest.approx(
            want.outputs[node]["output"].mean, abs=1e-6), node
        assert got.grads[node]["output"].norm == pytest.approx(
            want.grads[node]["output"].norm, rel=1e-5), node
    # the Linear's output was overwritten by the ReLU, but its summary is of what it produced
    assert got.outputs["hidden"]["output"].min < 0


def live_tensors() -> int:
    gc.collect()
    with warnings.catch_warnings():  # isinstance on torch's deprecated aliases warns
        warnings.simplefilter("ignore")
        return sum(1 for o in gc.get_objects() if isinstance(o, torch.Tensor))


def test_memory_stays_flat_over_a_thousand_probed_steps():
    g = nodegraph.load("examples/line_fit.json")
    g.set_param("data", "batch_size", 16)  # 10 steps per epoch
    result, frames = probed_run(g, epochs=5)
    base = live_tensors()
    result, frames = probed_run(g, epochs=100)
    assert len(frames) == 1000
    del frames, result
    assert live_tensors() <= base + 10
    assert all(not m._forward_hooks for m in nodegraph.compile(g).module.modules())


def test_frames_replay_from_a_file(tmp_path):
    path = tmp_path / "frames.jsonl"
    writer = ProbeWriter(path)
    events = Emitter()
    events.subscribe(writer, ProbeFrame)
    g = xor()
    g.update_training({"probe_every": 5, "probe_budget": 1000.0, "probe_rate": 0})
    nodegraph.train(g, epochs=20, events=events)
    writer.close()
    frames = list(read_frames(path))
    assert [f.step for f in frames] == [1, 6, 11, 16]
    assert frames[0].outputs["hidden"]["output"].shape == [4, 4]


def test_budget_stretches_the_interval():
    g = nodegraph.load("examples/line_fit.json")
    g.update_training({"probe_every": 1, "probe_budget": 0.001, "probe_rate": 0})
    events, frames = Emitter(), []
    events.subscribe(frames.append, ProbeFrame)
    nodegraph.train(g, epochs=10, events=events)  # 80 steps
    assert 1 <= len(frames) < 40


def test_rate_caps_frames_per_second():
    g = xor()
    g.update_training({"probe_every": 1, "probe_budget": 1000.0, "probe_rate": 20})
    events, frames = Emitter(), []
    events.subscribe(frames.append, ProbeFrame)
    began = time.perf_counter()
    nodegraph.train(g, epochs=400, events=events)  # a step takes about a millisecond
    seconds = time.perf_counter() - began
    assert 1 <= len(frames) <= 20 * seconds + 1
    assert frames[0].step == 1 and len(frames) < 200


def test_nan_stops_the_run_at_the_first_nonfinite_node():
    g = nodegraph.load("examples/line_fit.json")
    g.set_param("opt", "lr", 1e12)
    g.update_training({"probe_every": 1, "probe_budget": 1000.0, "probe_rate": 0})
    events, frames = Emitter(), []
    events.subscribe(frames.append, ProbeFrame)
    with pytest.raises(NodeRuntimeError) as err:
        nodegraph.train(g, epochs=5, events=events)
    last = frames[-1]
    assert last.nonfinite == err.value.node
    first_bad = next(n for n in last.order if not last.outputs[n]["output" if n == "line"
                                                                else "loss"].finite)
    assert err.value.node == first_bad
    assert all(s.finite for f in frames[:-1] for ports in f.outputs.values()
               for s in ports.values())


def test_trace_inputs_are_keyed_by_the_blocks_own_ports():
    g = xor()
    g.add("layers.Add", id="sum")
    g.connect(("hidden", "output"), ("sum", "a"))
    g.connect(("act", "output"), ("sum", "b"))
    records = {r.node: r for r in trace_batch(nodegraph.compile(g))}
    assert set(records["sum"].inputs) == {"a", "b"}
    assert torch.equal(records["sum"].inputs["a"], records["hidden"].outputs["output"])
    assert set(records["hidden"].inputs) == {"input"}
