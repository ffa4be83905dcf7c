"""`nodegraph run --init-weights FILE.safetensors`: training starts from the file's weights
(keyed node.param, as `export --to weights` and checkpoints write them); weights that do not
fit are refused node by node before anything trains."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import save_file

import nodegraph
from nodegraph.cli.main import main

XOR = "examples/xor.json"


def run(tmp_path, name, *args) -> dict:
    out = tmp_path / f"{name}.json"
    assert main(["run", XOR, "--quiet", "--device", "cpu", "--metrics-out", str(out),
                 *args]) == 0
    return json.loads(out.read_text())


def test_a_run_starts_from_the_given_weights(tmp_path):
    trained = nodegraph.train(nodegraph.load(XOR), epochs=60, device="cpu")
    weights = tmp_path / "w.safetensors"
    save_file(trained.module.block_state(), str(weights))
    # no epochs: the run only evaluates, so its numbers are those of the trained weights
    start = run(tmp_path, "start", "--epochs", "0", "--init-weights", str(weights))
    for split, stats in trained.final.items():
        assert start["final"][split]["loss"] == pytest.approx(stats["loss"], rel=1e-6)
    fresh = run(tmp_path, "fresh", "--epochs", "0")
    assert fresh["final"]["train"]["loss"] > 2 * start["final"]["train"]["loss"]
    # training goes on from there: its first epoch is better than a fresh run's
    more = run(tmp_path, "more", "--epochs", "1", "--init-weights", str(weights))
    first = run(tmp_path, "first", "--epochs", "1")
    assert more["history"][0]["train"]["loss"] < first["history"][0]["train"]["loss"]


def test_weights_that_do_not_fit_are_named_by_node(tmp_path, capsys):
    state = dict(nodegraph.compile(nodegraph.load(XOR), device="cpu").module.block_state())
    state["hidden.weight"] = torch.zeros(3, 3)
    del state["out.bias"]
    state["extra.weight"] = torch.zeros(1)
    state["act.weight"] = torch.zeros(1)
    path = tmp_path / "bad.safetensors"
    save_file(state, str(path))
    assert main(["run", XOR, "--quiet", "--init-weights", str(path)]) == 1
    err = capsys.readouterr().err
    assert f"the weights in '{path}' do not fit this graph" in err
    assert "node 'out': bias is missing from the file" in err
    assert "node 'hidden': weight is (3, 3) in the file but (4, 2) in the graph" in err
    assert "node 'extra': weight names no node of this graph" in err
    assert "node 'act': weight is not a weight of this node" in err
    assert main(["run", XOR, "--init-weights", str(tmp_path / "none.safetensors")]) == 1
    assert "does not exist" in capsys.readouterr().err
