"""The learning-rate range test on a noisy line fitted by SGD."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest

from nodegraph.model import fileformat
from nodegraph.model.errors import NodegraphError
from nodegraph.model.graph import Graph
from nodegraph.runtime.lrfind import lr_range_test


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
    g.update_training(device="cpu", seed=3)
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


def imported_modules(module: str, root: Path, seen: set[str]) -> set[str]:
    """Every module `module` imports, following the project's own modules (even imports
    inside functions) through their source files."""
    path = root / (module.replace(".", "/") + ".py")
    if not path.exists():
        path = root / module.replace(".", "/") / "__init__.py"
    if module in seen or not path.exists():
        return seen
    seen.add(module)
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:  # `from x import y`: x.y too
            names = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
        else:
            names = []
        for name in names:
            if name.split(".")[0] in ("nodegraph", "nodes"):
                imported_modules(name, root, seen)
            elif isinstance(node, ast.Import) or name == node.module:
                seen.add(name)
    return seen


def test_imports_nothing_from_qt():
    modules = imported_modules("nodegraph.runtime.lrfind", Path(__file__).parents[1], set())
    assert "nodegraph.runtime.train" in modules and "torch" in modules
    qt = {"PySide6", "PyQt5", "PyQt6", "pyqtgraph", "shiboken6"}
    assert not [m for m in modules if m.split(".")[0] in qt or m.startswith("nodegraph.gui")]


def test_lr_find_command_prints_a_chart_and_writes_csv_and_graph(tmp_path, capsys):
    import csv as csv_module

    from nodegraph.cli.main import main
    from nodegraph.model import fileformat

    out_csv, out_graph = tmp_path / "lr.csv", tmp_path / "tuned.json"
    assert main(["lr-find", "examples/line_fit.json", "--steps", "60", "--csv", str(out_csv),
                 "--write", str(out_graph)]) == 0
    printed = capsys.readouterr().out
    assert "suggested lr:" in printed and "#" in printed
    rows = list(csv_module.reader(out_csv.open()))
    assert rows[0] == ["lr", "loss", "smoothed"] and len(rows) > 10
    suggested = float(printed.split("suggested lr:")[1].split()[0])
    assert fileformat.load(out_graph).node("opt").params["lr"] == suggested
    assert main(["lr-find", "examples/line_fit.json", "--start", "1", "--end", "0.1"]) == 1
    assert "0 < start < end" in capsys.readouterr().err
