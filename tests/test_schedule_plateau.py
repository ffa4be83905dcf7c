"""schedules.ReduceLROnPlateau: step by step equal to torch's ReduceLROnPlateau, stepped by
the trainer with the number it watches."""

from __future__ import annotations

import json

import pytest
import torch

from nodegraph.model.errors import NodegraphError, ParamError
from nodegraph.model.graph import Graph
from nodegraph.model.spec import default_registry
from nodegraph.runtime.train import train

VALUES = [1.0, 0.9, 0.9, 0.95, 0.9, 0.8999, 0.91, 0.7, 0.7, 0.7, 0.7, 0.71, 0.69, 0.69,
          0.69, 0.69, 0.69, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5]


def opt():
    return torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.1)


def block(o, **values):
    spec = default_registry().get("schedules.ReduceLROnPlateau")
    resolved, problems = spec.resolve_params(values)
    assert not problems, problems
    return spec.build(resolved, o)


@pytest.mark.parametrize("settings", [
    {},
    {"patience": 1, "factor": 0.5},
    {"patience": 2, "factor": 0.5, "cooldown": 2, "min_lr": 0.01},
    {"patience": 0, "factor": 0.3, "threshold": 0.05, "threshold_mode": "abs"},
    {"mode": "max", "patience": 1, "factor": 0.5},
])
def test_step_by_step_equal_to_torch(settings):
    ours_opt, ref_opt = opt(), opt()
    ours = block(ours_opt, **settings)
    ref = torch.optim.lr_scheduler.ReduceLROnPlateau(ref_opt, **{
        "mode": "min", "factor": 0.1, "patience": 10, "cooldown": 0, "min_lr": 0.0,
        "threshold": 1e-4, "threshold_mode": "rel", **settings})
    values = VALUES * 3 if not settings else VALUES
    for v in values:
        ours.step(v)
        ref.step(v)
        assert ours_opt.param_groups[0]["lr"] == ref_opt.param_groups[0]["lr"]
    assert ours.state_dict()["num_bad_epochs"] == ref.state_dict()["num_bad_epochs"]
    json.dumps(ours.state_dict())  # a checkpoint keeps it as plain data


def test_refuses_a_per_step_interval_and_a_bad_monitor():
    with pytest.raises(ParamError, match="once per epoch"):
        block(opt(), interval="step")
    with pytest.raises(ParamError, match="split.name"):
        block(opt(), monitor="loss")


def graph(**plateau) -> Graph:
    g = Graph("plateau")
    g.add("data.NoisyLine", id="data", n=32, batch_size=8, val_fraction=0.25)
    g.add("layers.Linear", id="lin", out_features=1)
    g.add("losses.MSE", id="loss")
    g.add("optimizers.SGD", id="opt", lr=0.05)
    g.add("schedules.ReduceLROnPlateau", id="plateau", **plateau)
    g.connect(("data", "x"), ("lin", "input"))
    g.connect(("lin", "output"), ("loss", "input"))
    g.connect(("data", "y"), ("loss", "target"))
    g.connect(("loss", "loss"), ("opt", "loss"))
    g.connect(("plateau", "schedule"), ("opt", "schedule"))
    g.update_training(epochs=6, device="cpu", seed=1)
    return g


@pytest.mark.parametrize(("monitor", "split", "mode"), [("", "val", "min"),
                                                        ("train.loss", "train", "max")])
def test_training_steps_it_with_the_watched_number(monitor, split, mode):
    # mode max on a falling loss: no epoch improves, the rate drops every other epoch
    history = train(graph(monitor=monitor, mode=mode, patience=1, factor=0.5)).history
    ref_opt = opt()
    ref_opt.param_groups[0]["lr"] = 0.05
    ref = torch.optim.lr_scheduler.ReduceLROnPlateau(ref_opt, mode=mode, factor=0.5,
                                                     patience=1)
    for entry in history:
        ref.step(entry[split]["loss"])
        assert entry["lr"]["opt"] == ref_opt.param_groups[0]["lr"]
    if mode == "max":
        assert history[-1]["lr"]["opt"] < 0.05


def test_a_number_the_run_does_not_report_is_said():
    with pytest.raises(NodegraphError, match="'plateau' watches val.accuracy.*val.loss"):
        train(graph(monitor="val.accuracy"))
