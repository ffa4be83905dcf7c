"""Procedures: loops around a trained node or group, from Python and the command line."""

from __future__ import annotations

import json

import pytest
import torch

import nodegraph
from nodegraph.cli import main
from nodegraph.errors import NodegraphError
from nodegraph.events import Emitter
from nodegraph.groups import make_group
from nodegraph.procedure import ProcedureFrame, run_procedure


def forecaster(grouped: bool = False):
    """A line fit whose Linear maps x to 2x - 1, with a recursive forecast around it."""
    g = nodegraph.load("examples/line_fit.json")
    g.set_param("data", "noise", 0.0)
    g.set_param("opt", "lr", 0.5)
    model = "line"
    if grouped:
        model = make_group(g, ["line"], "predictor", instance="predictor_1")
    g.add("procedures.RecursiveForecast", id="forecast", model=model, steps=4, split="val")
    return g, model


@pytest.mark.parametrize("grouped", [False, True])
def test_recursive_forecast_feeds_predictions_back(grouped):
    g, model = forecaster(grouped)
    result = nodegraph.train(g, epochs=30)
    events, seen = Emitter(), []
    events.subscribe(seen.append, ProcedureFrame)
    frames = run_procedure(result.compiled, "forecast", events=events)
    assert [f["t"] for f in frames] == [1, 2, 3, 4]
    fc = result.module.module_of("line" if not grouped else "predictor_1__line")
    w, b = fc.weight.item(), fc.bias.item()
    x = result.compiled.datasets["data"].tensors("val")["x"][0].item()
    for frame in frames:  # each prediction is the map applied to the previous one
        x = w * x + b
        assert frame["prediction"][0] == pytest.approx(x, rel=1e-5)
    assert "target" in frames[0] and [e.index for e in seen] == [0, 1, 2, 3]


def test_weights_from_a_checkpoint_and_overrides(tmp_path):
    g, _ = forecaster()
    nodegraph.train(g, epochs=20, checkpoint_dir=tmp_path)
    frames = run_procedure(g, "forecast", weights=tmp_path / "last" / "model.safetensors",
                           steps=2)
    assert len(frames) == 2
    with pytest.raises(NodegraphError, match="has no param 'speed'"):
        run_procedure(g, "forecast", speed=2)
    with pytest.raises(NodegraphError, match="'opt' is not a procedure block"):
        run_procedure(g, "opt")


def test_a_procedure_must_name_a_node():
    g, _ = forecaster()
    g.set_param("forecast", "model", "ghost")
    (p,) = nodegraph.validate(g).problems
    assert (p.node, p.port, p.kind) == ("forecast", "model", "bad_param")


def test_sample_command(tmp_path, capsys):
    g, _ = forecaster()
    path, out = tmp_path / "g.json", tmp_path / "frames.json"
    nodegraph.save(g, path)
    assert main(["sample", str(path), "forecast", "--train", "--set", "steps=3",
                 "--out", str(out)]) == 0
    frames = json.loads(out.read_text())
    assert len(frames) == 3 and isinstance(frames[0]["prediction"], list)
    assert "forecast: 3 frame(s)" in capsys.readouterr().out
    assert torch.isfinite(torch.tensor(frames[-1]["prediction"])).all()


def test_an_unknown_split_is_an_error_naming_the_procedure_and_the_split():
    """line_fit has train and val only: asking for test must not quietly use train."""
    g, _ = forecaster()
    with pytest.raises(NodegraphError, match="procedure 'forecast' asks for the 'test' split, "
                       "but the data has only train, val"):
        run_procedure(g, "forecast", split="test")
    assert len(run_procedure(g, "forecast", split="train")) == 4
