"""Sizes that cannot fit are caught by validation, before anything large is allocated.

The limit is injected (`footprint.memory_limit`) so the outcome does not depend on this
machine's memory; memory bounds are measured as the growth of the process's peak RSS.
"""

from __future__ import annotations

import glob
import json
import os
import resource

import pytest
import torch

import nodegraph
from nodegraph.cli.common import EXIT_PROBLEMS
from nodegraph.cli.main import main
from nodegraph.kinds import footprint
from nodegraph.kinds.dataset import files_relative_to
from nodegraph.model.graph import Graph
from nodegraph.model.spec import default_registry

GB = 2**30
BOUND = 500 * 2**20  # the most a refused graph may add to the peak RSS


def peak_rss() -> int:
    """The process's peak resident memory in bytes, reset first where Linux allows it (so
    a higher peak of an earlier test cannot hide an allocation)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def reset_peak() -> None:
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # resets VmHWM, which ru_maxrss reports
    except OSError:
        pass


def validate_measured(graph: Graph, limit: int | None = 8 * GB):
    """The report and the growth of the peak RSS while validating under `limit`."""
    reset_peak()
    before = peak_rss()
    with footprint.memory_limit(limit):
        report = nodegraph.validate(graph, for_training=True)
    return report, peak_rss() - before


def too_large(report):
    return [(p.node, p.port) for p in report.problems if p.kind == footprint.KIND]


def test_linear_with_1e12_outputs_is_named_with_its_param():
    g = nodegraph.load("examples/xor.json")
    g.set_param("hidden", "out_features", 10**12)
    report, grown = validate_measured(g)
    assert too_large(report) == [("hidden", "out_features")]
    (p,) = [p for p in report.problems if p.kind == footprint.KIND]
    assert "layers.Linear 'hidden'" in p.message and "TB" in p.message
    assert p.hint == "lower 'out_features'"
    assert not report.ok and grown < BOUND


def test_ddpm_with_2_31_timesteps_is_refused_in_bounded_memory():
    g = nodegraph.load("examples/ddpm_digits.json")
    g.set_param("noise", "timesteps", 2**31)
    with files_relative_to("examples"):
        report, grown = validate_measured(g, limit=4 * GB)
    # the one problem: nothing downstream is reported again (no 'nothing_to_train')
    assert [(p.kind, p.node, p.port) for p in report.problems] == \
        [(footprint.KIND, "noise", "timesteps")]
    assert grown < BOUND, f"validation grew the peak RSS by {grown / 2**20:.0f} MB"


def test_ddpm_with_2_31_timesteps_allocates_nothing_under_the_machines_limit():
    """Whatever this machine's memory, validation builds the schedule on meta."""
    g = nodegraph.load("examples/ddpm_digits.json")
    g.set_param("noise", "timesteps", 2**31)
    with files_relative_to("examples"):
        _, grown = validate_measured(g, limit=None)
    assert grown < BOUND


def sized_data_blocks():
    return sorted(s.id for s in default_registry() if s.kind == "data"
                  and s.param("n") is not None)


@pytest.mark.parametrize("block", sized_data_blocks())
def test_data_block_with_1e9_samples_is_refused_before_generating(block):
    g = Graph()
    g.add(block, id="data", n=10**9)
    report, grown = validate_measured(g)
    assert ("data", "n") in too_large(report), report.problems
    assert grown < BOUND


@pytest.mark.parametrize("block, params, param", [
    ("data.Blobs", {"centers": 10**9, "n": 10**9}, "n"),
    ("data.GaussianMixture", {"n_components": 10**9}, "n_components"),
    ("data.ChaoticSeries", {"every": 10**9}, "every"),
    ("data.LagWindows", {"n": 10**6, "window": 5 * 10**5}, "window"),
    ("data.TokenText", {"text": "ab" * 5000, "seq_len": 5000, "stride": 1}, "stride"),
])
def test_other_data_sizes_are_refused_naming_their_param(block, params, param):
    g = Graph()
    g.add(block, id="data", **params)
    report, grown = validate_measured(g, limit=GB // 8)
    assert ("data", param) in too_large(report), report.problems
    assert grown < BOUND


def test_hopfield_recall_steps_are_checked_on_meta():
    g = nodegraph.load("examples/hopfield_2d.json")
    g.set_param("hopfield", "steps", 10**9)
    with files_relative_to("examples"):
        report, grown = validate_measured(g)
    assert too_large(report) == [("hopfield", "steps")]
    assert grown < BOUND


def test_a_size_list_entry_is_blamed_too():
    g = Graph()
    g.add("layers.Parameter", id="w", shape=[10**6, 10**6])
    report, _ = validate_measured(g)
    assert too_large(report) == [("w", "shape")]


def test_estimate_matches_parameters_activations_and_data_on_a_small_graph():
    g = Graph()
    g.add("data.Table", id="t", columns=["a", "b", "c", "y"], rows=[[1, 2, 3, 4]] * 5,
          inputs=["a", "b", "c"], targets=["y"])
    g.add("layers.Linear", id="fc1", out_features=7)
    g.add("activations.Tanh", id="act")
    g.add("layers.Linear", id="fc2", out_features=1)
    g.connect(("t", "x"), ("fc1", "input"))
    g.connect(("fc1", "output"), ("act", "input"))
    g.connect(("act", "output"), ("fc2", "input"))
    report = nodegraph.validate(g)
    assert report.ok, report.problems
    fp = report.memory
    batch = 5  # data.Table's batch_size 0: the whole table
    params = (3 * 7 + 7) + (7 * 1 + 1)
    assert sum(report.param_counts.values()) == params
    assert fp.parameters == params * 4 and fp.buffers == 0
    # float32 outputs: data x (N, 3) and y (N, 1), fc1 and act (N, 7), fc2 (N, 1)
    assert fp.activations == batch * (3 + 1 + 7 + 7 + 1) * 4
    assert fp.data == batch * (3 + 1) * 4  # all rows train: one copy of x and y
    assert fp.total == fp.parameters + fp.activations + fp.data
    assert fp.nodes["fc1"] == (3 * 7 + 7) * 4 + batch * 7 * 4


def test_total_over_the_limit_is_reported_on_the_largest_node():
    g = nodegraph.load("examples/cnn_digits.json")
    report = nodegraph.validate(g, for_training=True)
    fp = report.memory
    largest = max(fp.nodes.values())
    assert fp.total > 2 * largest  # so a limit fits every node but not the graph
    with footprint.memory_limit((largest + fp.total) // 2):
        refused = nodegraph.validate(g, for_training=True)
    (p,) = [p for p in refused.problems if p.kind == footprint.KIND]
    assert p.node == max(fp.nodes, key=fp.nodes.get) and p.port is None
    assert "the graph needs about" in p.message and "more than the" in p.message and p.hint


def test_a_node_inside_a_group_is_reported_on_its_instance():
    g = nodegraph.load("examples/ddpm_digits.json")
    g.groups["denoiser"].body.set_param("image", "shape", [1, 8, 8])
    g.set_param("noise", "timesteps", 100)
    flat = nodegraph.validate(g, for_training=True)
    assert flat.ok, flat.problems
    # a block inside the instance 'denoiser' that alone needs more than the limit
    inner = max(n for n in flat.memory.nodes if n.startswith("denoiser"))
    with footprint.memory_limit(flat.memory.nodes[inner] - 1):
        report = nodegraph.validate(g, for_training=True)
    assert any(p.node == "denoiser" and p.kind == footprint.KIND and "inside, at" in p.message
               for p in report.problems), report.problems


@pytest.mark.parametrize("path", sorted(glob.glob("examples/*.json")))
def test_every_example_fits_and_has_an_estimate(path):
    g = nodegraph.load(path)
    with files_relative_to("examples"):
        report = nodegraph.validate(g, for_training=True)
    assert not too_large(report), report.problems
    assert report.memory is not None and report.memory.total > 0


def test_run_never_starts_on_a_graph_that_cannot_fit(tmp_path, capsys):
    doc = json.loads(open("examples/xor.json").read())
    doc["nodes"]["hidden"]["params"]["out_features"] = 10**12
    path = tmp_path / "huge.json"
    path.write_text(json.dumps(doc))
    metrics = tmp_path / "m.json"
    code = main(["run", str(path), "--quiet", "--metrics-out", str(metrics)])
    err = capsys.readouterr().err
    assert code == EXIT_PROBLEMS and "hidden.out_features" in err and "lower" in err
    assert not metrics.exists()


def test_info_prints_the_estimate(capsys):
    assert main(["info", "examples/xor.json"]) == 0
    assert "memory: about" in capsys.readouterr().out


def test_limit_comes_from_the_context_then_the_environment(monkeypatch):
    monkeypatch.setenv("NODEGRAPH_MEMORY_LIMIT", "1.5G")
    assert footprint.limit_bytes() == int(1.5 * GB)
    with footprint.memory_limit(123):
        assert footprint.limit_bytes() == 123
    monkeypatch.setenv("NODEGRAPH_MEMORY_LIMIT", "2048")
    assert footprint.limit_bytes() == 2048


@pytest.mark.skipif(not os.path.exists("/proc/meminfo"), reason="reads /proc/meminfo")
def test_available_memory_is_read_from_the_machine():
    available = footprint.available_bytes()
    assert available is not None and 0 < available <= os.sysconf("SC_PAGE_SIZE") * \
        os.sysconf("SC_PHYS_PAGES")


def test_ddpm_on_meta_has_the_real_buffers_shapes():
    spec = default_registry().get("samplers.DDPMNoise")
    params, _ = spec.resolve_params({"timesteps": 50, "schedule": "cosine"})
    x = {"x0": torch.zeros(4, 3)}
    real = spec.build(params, x)
    with torch.device("meta"):
        meta = spec.build(params, {"x0": torch.empty(4, 3, device="meta")})
    assert {k: (v.shape, v.dtype) for k, v in real.named_buffers()} == \
        {k: (v.shape, v.dtype) for k, v in meta.named_buffers()}


def test_hopfield_meta_forward_gives_the_real_shapes():
    spec = default_registry().get("energy.HopfieldHebbian")
    params, bad = spec.resolve_params({"patterns": [[1, -1, 1], [-1, 1, 1]], "steps": 7})
    assert not bad
    x = torch.tensor([[1.0, 1.0, -1.0], [1.0, -1.0, 1.0]])
    real = spec.build(params, {"input": x})(x)
    with torch.device("meta"):
        module = spec.build(params, {"input": x.to("meta")})
    meta = module(x.to("meta"))
    assert [(t.shape, t.dtype) for t in real] == [(t.shape, t.dtype) for t in meta]


@pytest.mark.parametrize("method", ["cd", "pcd"])
def test_rbm_with_a_billion_gibbs_steps_takes_one_on_meta(method, monkeypatch):
    """A meta step has the shapes of every step: validation must not loop k times."""
    from nodes.energy import BernoulliRBM

    spec = default_registry().get("energy.BernoulliRBM")
    params, bad = spec.resolve_params({"n_components": 4, "k": 10**9, "method": method})
    assert not bad
    x = torch.empty(8, 6, device="meta")
    with torch.device("meta"):
        module = spec.build(params, {"input": x})
    calls = []
    real = BernoulliRBM.visible_probs

    def counted(self, h):
        calls.append(1)
        assert len(calls) <= 10, "the meta forward loops over the Gibbs steps"
        return real(self, h)

    monkeypatch.setattr(BernoulliRBM, "visible_probs", counted)
    loss, hidden, visible, pl = module(x)
    assert len(calls) <= 2 and hidden.shape == (8, 4) and visible.shape == (8, 6)
