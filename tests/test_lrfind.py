"""The learning-rate range test on a noisy line fitted by SGD."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from nodegraph import fileformat
from nodegraph.errors import NodegraphError
from nodegraph.graph import Graph
from nodegraph.lrfind import lr_range_test


def line_fit(optimizers: tuple[str, ...] = ("opt",)) -> Graph:
    g = Graph("line")
    g.add("data.NoisyLine", id="data", n=128, batch_size=16)
    g.add("layers.Linear", id="lin", out_features=1)
    g.add("losses.MSE", id="loss")
    g.connect(("data", "x"), ("lin", "input"))
    g.connect(("lin", "output"), ("loss", "input"))
    g.connect(("data", "y"), ("loss", "target"))
    for name in optimizers:
        g.add("optimizers.SGD", id=name, lr=0.05)
        g.connect(("loss", "loss"), (name, "loss"))
    g.add("schedules.Exponential", id="decay", gamma=0.0, interval="step")
    g.connect(("decay", "schedule"), (optimizers[0], "schedule"))
    g.training.update(device="cpu", seed=3)
    return g


@pytest.fixture(scope="module")
def curve():
    graph = line_fit()
    before = fileformat.dumps(graph)
    result = lr_range_test(graph, start=1e-5, end=10.0, steps=100)
    assert fileformat.dumps(graph) == before  # the graph is not modified
    return result


def test_rates_grow_geometrically_from_start(curve):
    lrs = np.array(curve.lrs)
    assert lrs[0] == pytest.approx(1e-5)
    ratios = lrs[1:] / lrs[:-1]
    assert np.allclose(ratios, (10.0 / 1e-5) ** (1 / 99))


def test_the_curve_falls_then_rises_and_stops_on_divergence(curve):
    smoothed = np.array(curve.smoothed)
    lowest = int(np.argmin(smoothed))
    assert smoothed[lowest] < 0.25 * smoothed[0]  # it learns ...
    assert curve.diverged and curve.divergence_lr is not None
    assert smoothed[-1] > 4 * smoothed[lowest] * 0.999  # ... then blows up, and stops
    assert len(curve.lrs) < 100
    # SGD on this MSE is unstable above lr = 2/λmax = 1 (x uniform in [-1, 1], bias)
    assert 0.5 < curve.divergence_lr < 10
    assert len(curve.rows()) == len(curve.lrs)


def test_suggestions_are_in_a_sane_range(curve):
    assert curve.suggested_lr == curve.steepest_lr
    assert 1e-3 < curve.steepest_lr < 1.0
    assert curve.steepest_lr < curve.min_loss_lr < curve.divergence_lr


def test_suggestion_rules_and_determinism():
    graph = line_fit()
    other = lr_range_test(graph, start=1e-5, end=10.0, steps=100, suggest="min_loss")
    again = lr_range_test(graph, start=1e-5, end=10.0, steps=100, suggest="divergence")
    assert other.losses == again.losses  # same seed, same curve
    assert other.suggested_lr == pytest.approx(other.min_loss_lr / 10)
    assert again.suggested_lr == pytest.approx(again.divergence_lr / 10)


def test_unsmoothed_curve_records_the_raw_loss():
    result = lr_range_test(line_fit(), start=1e-4, end=1e-2, steps=5, smoothing=0.0)
    assert result.smoothed == result.losses and not result.diverged
    assert len(result.lrs) == 5


def test_choosing_the_optimizer():
    graph = line_fit(("opt_a", "opt_b"))
    with pytest.raises(NodegraphError, match="name the one"):
        lr_range_test(graph, steps=3)
    with pytest.raises(NodegraphError, match="not an optimizer"):
        lr_range_test(graph, optimizer_node="lin", steps=3)
    assert lr_range_test(graph, optimizer_node="opt_b", steps=3).optimizer == "opt_b"


@pytest.mark.parametrize("bad", [{"start": 1.0, "end": 0.1}, {"steps": 1},
                                 {"smoothing": 1.0}, {"diverge": 1.0}, {"suggest": "best"}])
def test_bad_arguments(bad):
    with pytest.raises(NodegraphError):
        lr_range_test(line_fit(), **bad)


def test_runs_without_qt():
    from tests.test_no_qt import BLOCK_QT

    code = BLOCK_QT + """
import nodegraph
from nodegraph.lrfind import lr_range_test
result = lr_range_test(nodegraph.load('examples/line_fit.json'), steps=5, device='cpu')
assert len(result.lrs) == 5
assert not any(m.split('.')[0] in {'PySide6', 'pyqtgraph'} for m in sys.modules)
print('ok')
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ok"
