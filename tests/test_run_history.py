"""The run history: what defines a run, the diff of two runs, the file beside the graph."""

from __future__ import annotations

import json

import pytest

import nodegraph
from nodegraph.model.errors import GraphFileError
from nodegraph.model.fileformat import save
from nodegraph.runtime.run_history import (
    STRUCTURE,
    RunHistory,
    definition,
    diff,
    history_path,
    load,
)
from tests.gui.driver import xor_graph


def test_definition_fills_defaults_so_unset_and_default_compare_equal():
    a, b = xor_graph(), xor_graph()
    b.reset_param("opt", "lr")
    default_lr = b.registry.get("optimizers.Adam").param("lr").default
    flat_b, _ = definition(b)
    assert flat_b["opt.lr"] == default_lr
    assert flat_b["training.epochs"] == 10  # the declared default
    assert flat_b["hidden.out_features"] == 4 and flat_b["hidden.type"] == "layers.Linear"
    b.set_param("opt", "lr", 0.05)
    assert definition(a) == definition(b)


def test_diff_lists_only_what_differs_and_the_wiring_when_no_param_does():
    a, b = xor_graph(), xor_graph()
    b.set_param("opt", "lr", 0.2)
    b.set_training("epochs", 7)
    history = RunHistory()
    ra = history.add(a, "2026-01-01T00:00:00Z", 1.0, [], {})
    rb = history.add(b, "2026-01-01T00:01:00Z", 1.0, [], {})
    assert (ra.number, rb.number) == (1, 2)
    assert dict(diff([ra, rb])) == {"opt.lr": [0.05, 0.2], "training.epochs": [10, 7]}
    assert diff([ra, ra]) == []
    c = xor_graph()  # same params, one wire fewer
    c.disconnect(next(e for e in c.edges if e.dst == "accuracy" and e.dst_port == "target"))
    rc = history.add(c, "2026-01-01T00:02:00Z", 1.0, [], {})
    rows = dict(diff([ra, rc]))
    assert list(rows) == [STRUCTURE] and rows[STRUCTURE] == [ra.digest, rc.digest]
    moved = xor_graph()  # positions are no part of a run's definition
    moved.set_ui("positions", {"data": [1, 2]})
    assert definition(moved)[1] == ra.digest


def test_a_trained_run_is_recorded_with_its_curves_and_survives_a_reload(tmp_path):
    g = xor_graph("xor")
    g.set_training("epochs", 5)
    path = tmp_path / "xor.json"
    save(g, path)
    before = path.read_bytes()
    result = nodegraph.train(g)
    history = RunHistory(history_path(path))
    assert history.path == tmp_path / "xor.runs.json"
    record = history.add(g, "2026-01-01T00:00:00Z", 0.5, result.history, result.final)
    xs, ys = record.series("train", "loss")
    assert xs == [1, 2, 3, 4, 5]
    assert ys == pytest.approx([e["train"]["loss"] for e in result.history])
    assert ("train", "accuracy") in record.keys() and record.status == "finished"
    assert path.read_bytes() == before  # the graph file is never touched
    again = RunHistory(history_path(path))
    assert [r.number for r in again.runs] == [1]
    assert again.runs[0] == record
    assert again.runs[0].series("train", "loss") == (xs, ys)


def test_an_unsaved_graphs_runs_move_to_its_file_when_it_gets_one(tmp_path):
    history = RunHistory()
    history.add(xor_graph(), "t0", 1.0, [], {}, cancelled=True)
    assert history.runs[0].status == "stopped"
    target = tmp_path / "named.runs.json"
    earlier = RunHistory(target)
    earlier.add(xor_graph(), "t-1", 1.0, [], {}, stopped_early=True)
    history.attach(target)
    assert [(r.number, r.started) for r in history.runs] == [(1, "t-1"), (2, "t0")]
    assert [r.started for r in load(target)] == ["t-1", "t0"]
    history.remove({1})
    assert [r.number for r in load(target)] == [2]


def test_a_broken_history_file_is_reported_with_its_name(tmp_path):
    bad = tmp_path / "g.runs.json"
    bad.write_text("{not json")
    with pytest.raises(GraphFileError, match="g.runs.json.*cannot read"):
        RunHistory(bad)
    bad.write_text(json.dumps({"format": "other"}))
    with pytest.raises(GraphFileError, match="not a run history"):
        load(bad)
    bad.write_text(json.dumps({"format": "nodegraph-runs", "runs": [{"number": 1}]}))
    with pytest.raises(GraphFileError, match=r"runs\[0\]"):
        load(bad)
    good = {"number": 1, "started": "t", "seconds": 1.0, "status": "finished", "final": {},
            "history": [], "settings": {}, "digest": "d"}
    for field, value in (("history", {"a": 1}), ("history", [3]), ("settings", [])):
        bad.write_text(json.dumps({"format": "nodegraph-runs", "runs": [{**good,
                                                                          field: value}]}))
        with pytest.raises(GraphFileError, match=rf"runs\[0\].*'{field}'"):
            load(bad)
    bad.write_text(json.dumps({"format": "nodegraph-runs", "runs": [good]}))
    assert load(bad)[0].series("train", "loss") == ([], [])


def test_history_path_sits_beside_the_graph():
    assert history_path("/a/b/model.json").as_posix() == "/a/b/model.runs.json"
    assert history_path("/a/b/model").as_posix() == "/a/b/model.runs.json"
