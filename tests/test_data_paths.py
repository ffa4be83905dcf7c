"""Relative data paths in a graph file are read from the graph file's folder, not from the
directory the command runs in: run, validate, info, export and a graph loaded in Python (or
the editor) find the data wherever they are started, and a missing file is reported with
the path that was looked for."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import nodegraph
from nodegraph.cli.main import main
from nodegraph.kinds import confine
from nodegraph.kinds.dataset import data_path, files_relative_to
from nodegraph.model.errors import NodegraphError
from nodegraph.model.spec import default_registry
from nodes.data._files import resolve


def line_graph(csv_path: str) -> dict:
    """y = 3x - 1 from a CSV file, fitted by one Linear layer with SGD."""
    return {"format": "nodegraph", "version": 1, "name": "csv-line",
            "nodes": {"data": {"type": "data.CSV", "params": {
                          "path": csv_path, "val_fraction": 0.25, "batch_size": 8}},
                      "line": {"type": "layers.Linear", "params": {"out_features": 1}},
                      "loss": {"type": "losses.MSE", "params": {}},
                      "opt": {"type": "optimizers.SGD", "params": {"lr": 0.1}}},
            "edges": [{"from": ["data", "x"], "to": ["line", "input"]},
                      {"from": ["line", "output"], "to": ["loss", "input"]},
                      {"from": ["data", "y"], "to": ["loss", "target"]},
                      {"from": ["loss", "loss"], "to": ["opt", "loss"]}],
            "training": {"epochs": 3, "seed": 0, "device": "cpu"}}


@pytest.fixture
def project(tmp_path, monkeypatch):
    """project/graph.json reading data/line.csv by a relative path; the current directory
    is elsewhere, where no data/line.csv exists."""
    folder = tmp_path / "project"
    (folder / "data").mkdir(parents=True)
    x = np.linspace(-1, 1, 32)
    rows = "\n".join(f"{a:.6f},{3 * a - 1:.6f}" for a in x)
    (folder / "data" / "line.csv").write_text("x,y\n" + rows + "\n")
    (folder / "graph.json").write_text(json.dumps(line_graph("data/line.csv")))
    (folder / "absolute.json").write_text(json.dumps(
        line_graph(str(folder / "data" / "line.csv"))))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    return folder


def test_data_path_starts_from_the_folder_it_is_given(tmp_path):
    assert data_path("a/b.csv") == Path("a/b.csv")  # outside: the current directory
    with files_relative_to(tmp_path):
        assert data_path("a/b.csv") == tmp_path / "a" / "b.csv"
        assert data_path(str(tmp_path / "x.npy")) == tmp_path / "x.npy"  # absolute: as is
        with confine.allowing(confine.ANYWHERE):  # outside the folder: only when allowed
            assert data_path("~/x.npy") == Path.home() / "x.npy"
        with files_relative_to(tmp_path / "inner"):
            assert data_path("b.csv") == tmp_path / "inner" / "b.csv"
        assert data_path("b.csv") == tmp_path / "b.csv"
    assert data_path("a/b.csv") == Path("a/b.csv")


def test_a_missing_file_names_the_path_looked_for(tmp_path):
    with files_relative_to(tmp_path), pytest.raises(NodegraphError) as info:
        resolve("data/gone.csv", "CSV file")
    assert str(info.value) == (f"CSV file 'data/gone.csv' (looked for "
                               f"{tmp_path / 'data' / 'gone.csv'}) does not exist")


def test_run_validate_info_and_export_read_the_data_beside_the_graph(project, capsys):
    graph = str(project / "graph.json")
    assert main(["validate", graph]) == 0
    assert main(["info", graph]) == 0
    capsys.readouterr()
    assert main(["run", graph, "--quiet", "--metrics-out", "rel.json"]) == 0
    assert main(["run", str(project / "absolute.json"), "--quiet", "--metrics-out",
                 "abs.json"]) == 0
    relative, absolute = (json.loads(Path(f).read_text()) for f in ("rel.json", "abs.json"))
    assert relative["history"] == [{**e, "seconds": r["seconds"]}
                                   for e, r in zip(absolute["history"], relative["history"],
                                                   strict=True)]
    assert relative["final"] == absolute["final"]
    assert relative["final"]["val"]["loss"] < relative["history"][0]["train"]["loss"]
    assert main(["export", graph, "--to", "python", "-o", "model.py"]) == 0
    assert Path("model.py").exists()
    # the same file from the current directory does not exist: the run says where it looked
    (project / "graph.json").write_text(json.dumps(line_graph("nowhere/line.csv")))
    assert main(["validate", graph]) == 1
    err = capsys.readouterr().err
    assert str(project / "nowhere" / "line.csv") in err


def test_a_sweep_reads_the_data_beside_the_graph(project):
    from nodegraph.cli.sweep import sweep

    result = sweep(project / "graph.json", {"opt.lr": [0.1]}, "sweep", epochs=1,
                   echo=lambda line: None)
    [run] = result.runs
    assert run.status == "ok", run.error
    assert run.value is not None and run.value > 0


def test_every_file_reading_block_takes_the_folder(tmp_path):
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(10, 3)).astype(np.float32), np.arange(10) % 2
    np.savez(tmp_path / "arrays.npz", x=x, y=y)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", y)
    (tmp_path / "images" / "a").mkdir(parents=True)
    (tmp_path / "images" / "b").mkdir()
    for k, cls in enumerate("ab"):
        (tmp_path / "images" / cls / "0.pgm").write_bytes(b"P5 2 2 255\n" + bytes([k * 200] * 4))
    reg = default_registry()
    cases = [("data.NumPy", {"path": "arrays.npz"}), ("data.NumPy", {"path": "x.npy",
                                                                     "y_path": "y.npy"}),
             ("opaque.Arrays", {"path": "arrays.npz"}), ("data.ImageFolder", {"path": "images"})]
    for block_id, params in cases:
        spec = reg.get(block_id)
        resolved, problems = spec.resolve_params({**params, "val_fraction": 0.0})
        assert not problems, problems
        with pytest.raises(NodegraphError):  # not in the current directory
            spec.build(resolved)
        with files_relative_to(tmp_path):
            data = spec.build(resolved)
        got = data.tensors("train")["x"]
        if block_id == "data.ImageFolder":
            assert got.reshape(2, -1).mean(1).tolist() == pytest.approx([0.0, 200 / 255])
        else:
            assert np.allclose(got.numpy(), x)


def test_a_graph_without_a_file_reads_from_the_current_directory(project):
    graph = nodegraph.load(project / "graph.json")
    graph.folder = None  # as if built in code
    with pytest.raises(nodegraph.ValidationError, match="does not exist"):
        nodegraph.compile(graph)
    with files_relative_to(project):
        assert nodegraph.compile(graph).datasets["data"].size("train") == 24
