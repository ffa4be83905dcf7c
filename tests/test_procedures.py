"""Procedures: loops around a trained node or group, from Python and the command line."""

from __future__ import annotations

import json

import pytest
import torch

import nodegraph
from nodegraph.cli.main import main
from nodegraph.model.errors import NodegraphError
from nodegraph.model.events import Emitter
from nodegraph.model.groups import make_group
from nodegraph.runtime.procedure import ProcedureContext, ProcedureFrame, run_procedure
from nodes.procedures.core import (
    LotteryTicket,
    effective,
    magnitude_masks,
    trained_state,
)


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
    (tmp_path / "file.txt").write_text("x")  # --out under a file: refused before training
    assert main(["sample", str(path), "forecast", "--train", "--out",
                 str(tmp_path / "file.txt" / "frames.json")]) == 1
    err = capsys.readouterr()
    assert "file.txt is a file, not a folder" in err.err and "epoch" not in err.out


def test_an_unknown_split_is_an_error_naming_the_procedure_and_the_split():
    """line_fit has train and val only: asking for test must not quietly use train."""
    g, _ = forecaster()
    with pytest.raises(NodegraphError, match="procedure 'forecast' asks for the 'test' split, "
                       "but the data has only train, val"):
        run_procedure(g, "forecast", split="test")
    assert len(run_procedure(g, "forecast", split="train")) == 4


# -- lottery tickets -------------------------------------------------------------------------


def test_magnitude_pruning_per_layer_and_global():
    """rate 0.5: each tensor loses its smallest half (layer), or the smallest half of all
    weights goes wherever it is (global); a second round prunes only the survivors."""
    w = {"a.weight": torch.tensor([[0.1, -0.5], [0.3, 2.0]]),
         "b.weight": torch.tensor([[1.0, 0.9, -0.8, 0.7]])}
    ones = {k: torch.ones_like(v) for k, v in w.items()}
    layer = magnitude_masks(w, ones, 0.5, "layer")
    assert layer["a.weight"].tolist() == [[0, 1], [0, 1]]
    assert layer["b.weight"].tolist() == [[1, 1, 0, 0]]
    overall = magnitude_masks(w, ones, 0.5, "global")  # 0.1, 0.3, 0.5, 0.7 go
    assert overall["a.weight"].tolist() == [[0, 0], [0, 1]]
    assert overall["b.weight"].tolist() == [[1, 1, 1, 0]]
    again = magnitude_masks(w, layer, 0.5, "layer")
    assert again["a.weight"].tolist() == [[0, 0], [0, 1]]
    assert again["b.weight"].tolist() == [[1, 0, 0, 0]]


def digits_classifier() -> nodegraph.Graph:
    g = nodegraph.Graph("pruned")
    g.add("data.Digits", id="data", val_fraction=0.2, batch_size=64)
    g.add("layers.Linear", id="fc", out_features=10)
    g.add("losses.CrossEntropy", id="loss")
    g.add("optimizers.Adam", id="opt", lr=0.01, weight_decay=0.1)
    g.add("metrics.Accuracy", id="accuracy")
    g.connect(("data", "x"), ("fc", "input"))
    g.connect(("fc", "output"), ("loss", "input"))
    g.connect(("data", "y"), ("loss", "target"))
    g.connect(("loss", "loss"), ("opt", "loss"))
    g.connect(("fc", "output"), ("accuracy", "input"))
    g.connect(("data", "y"), ("accuracy", "target"))
    g.add("procedures.LotteryTicket", id="lottery", model="fc", rounds=1, epochs=2)
    g.update_training(epochs=2, seed=0)
    return g


def test_pruned_weights_stay_zero_while_retraining_with_momentum_and_decay():
    """The ticket starts at θ₀ × mask; Adam's momentum and weight decay move weight_orig
    everywhere, but the block computes with weight_orig × mask: pruned weights stay 0."""
    g = digits_classifier()
    lottery = LotteryTicket(nodegraph.validate(g).params["lottery"])
    lottery.ctx = ProcedureContext(nodegraph.compile(g, device="cpu"))
    init = nodegraph.compile(g, device="cpu").module.block_state()
    mask = (torch.rand(10, 64, generator=torch.Generator().manual_seed(0)) < 0.3).float()
    c = lottery.fresh(0, init, {"fc.weight": mask})
    fc = c.module.module_of("fc")
    start = effective(c, "fc.weight")
    assert torch.equal(start, init["fc.weight"] * mask)  # rewound survivors, zeros
    lottery.train(c)
    after = effective(c, "fc.weight")
    assert torch.equal(after[mask == 0], torch.zeros(int((mask == 0).sum())))
    assert not torch.allclose(after[mask == 1], start[mask == 1])  # survivors learnt
    assert (fc.weight_orig[mask == 0] != init["fc.weight"][mask == 0]).any()  # decay acted
    x = torch.randn(3, 64)
    assert torch.allclose(fc(x), x @ after.T + fc.bias)  # the forward uses the mask
    assert trained_state(c)["fc.weight"].equal(after) and "fc.weight_mask" not in \
        trained_state(c)
    # late rewinding: the weights after epoch 1 of 2, neither θ₀ nor the final ones
    dense = lottery.fresh(0)
    early = lottery.train(dense, snapshot_epoch=1)["fc.weight"]
    final = dense.module.module_of("fc").weight
    assert not torch.equal(early, init["fc.weight"]) and not torch.equal(early, final)


def test_a_lottery_round_prunes_and_reports_both_tracks():
    frames = run_procedure(digits_classifier(), "lottery", rate=0.75, control="continue")
    assert [f["round"] for f in frames] == [0, 1]
    assert frames[0]["sparsity"] == 0 and frames[1]["sparsity"] == 0.75
    assert frames[1]["weights_left"] == 640 // 4
    assert frames[0]["val_rewind"] == frames[0]["val_continue"] > 0.8  # the dense run
    assert {"val_rewind", "val_continue"} <= set(frames[1])
    assert frames[1]["layer_sparsity"] == {"fc.weight": 0.75}
    with pytest.raises(NodegraphError, match="rewind_epoch 5 is after"):
        run_procedure(digits_classifier(), "lottery", rewind_epoch=5)
    with pytest.raises(NodegraphError, match="metric 'acc' is not a metric block"):
        run_procedure(digits_classifier(), "lottery", metric="acc")
