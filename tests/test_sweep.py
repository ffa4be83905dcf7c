"""Sweeps: every combination of a grid trained in its own process, one metrics file per run,
a summary table with the best run marked by the metric's direction."""

from __future__ import annotations

import csv
import json

import pytest

from nodegraph.cli.main import main
from nodegraph.cli.sweep import Run, _mark_best, combinations, metric_of
from nodegraph.cli.sweep_grid import parse_grid
from nodegraph.model.errors import NodegraphError


def test_a_2x2_grid_on_line_fit(tmp_path, capsys):
    out = tmp_path / "sweep"
    code = main(["sweep", "examples/line_fit.json", "--grid", "opt.lr=0.1,0.001",
                 "--grid", "data.batch_size=20,200", "--epochs", "3", "--jobs", "2",
                 "-o", str(out)])
    assert code == 0, capsys.readouterr().err
    printed = capsys.readouterr().out
    rows = list(csv.DictReader(open(out / "summary.csv")))
    assert [r["run"] for r in rows] == ["run-01", "run-02", "run-03", "run-04"]
    assert [(r["opt.lr"], r["data.batch_size"]) for r in rows] == [
        ("0.1", "20"), ("0.1", "200"), ("0.001", "20"), ("0.001", "200")]
    values = {}
    for row in rows:
        metrics = json.loads((out / row["metrics"]).read_text())
        assert len(metrics["history"]) == 3 and row["status"] == "ok"
        assert float(row["val.loss"]) == metrics["final"]["val"]["loss"]
        assert metrics["history"][0]["lr"]["opt"] == float(row["opt.lr"])
        values[row["run"]] = float(row["val.loss"])
    best = [r["run"] for r in rows if r["best"] == "*"]
    assert best == [min(values, key=values.get)]
    # the big learning rate with small batches takes the most steps and gets furthest
    assert best == ["run-01"]
    assert "best: run-01" in printed and "summary.csv" in printed


def test_grid_values_and_their_mistakes():
    grid = parse_grid(["opt.lr=0.1,0.01", "hidden.out_features=[4, 8]", "opt.nesterov=true"])
    assert grid == {"opt.lr": [0.1, 0.01], "hidden.out_features": [4, 8],
                    "opt.nesterov": [True]}
    assert len(combinations(grid)) == 4
    with pytest.raises(NodegraphError, match="NODE.PARAM=v1,v2"):
        parse_grid(["lr=0.1"])
    with pytest.raises(NodegraphError, match="at least one"):
        parse_grid([])


def test_best_follows_the_metrics_direction(tmp_path):
    runs = [Run(f"r{i}", {}, tmp_path / "m", tmp_path / "l", value=v)
            for i, v in enumerate([0.5, 0.9, 0.7])]
    _mark_best(runs, "val.accuracy")
    assert [r.best for r in runs] == [False, True, False]
    for r in runs:
        r.best = False
    _mark_best(runs, "val.loss")
    assert [r.best for r in runs] == [True, False, False]
    result = {"final": {"val": {"loss": 0.25}}, "history": [{"train": {"loss": 1.0}}]}
    assert metric_of(result, "val.loss") == 0.25 and metric_of(result, "train.loss") == 1.0
    assert metric_of(result, "test.loss") is None


def test_a_bad_param_fails_before_any_run(tmp_path, capsys):
    code = main(["sweep", "examples/line_fit.json", "--grid", "opt.nope=1,2", "-o",
                 str(tmp_path / "s")])
    assert code == 1
    assert "has no param 'nope'" in capsys.readouterr().err
    assert not (tmp_path / "s").exists()
