"""Schedule blocks: the learning-rate sequence against the formula or torch's scheduler."""

from __future__ import annotations

import math

import pytest
import torch

from nodegraph.model.errors import ParamError
from nodegraph.model.graph import Graph
from nodegraph.model.spec import default_registry
from nodegraph.runtime.train import train

LR0 = 0.1


def optimizer(momentum: float = 0.0) -> torch.optim.Optimizer:
    return torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=LR0, momentum=momentum)


def schedule(block_id: str, opt: torch.optim.Optimizer, **values):
    spec = default_registry().get(block_id)
    resolved, problems = spec.resolve_params(values)
    assert not problems, problems
    return spec.build(resolved, opt)


def rates(scheduler, n: int, key: str = "lr") -> list[float]:
    """The rate at t = 0..n-1, stepping as the trainer does (optimizer, then schedule)."""
    opt = scheduler.optimizer
    out = []
    for _ in range(n):
        out.append(opt.param_groups[0][key])
        opt.step()
        scheduler.step()
    return out


def lr_sequence(block_id: str, n: int, **values) -> list[float]:
    return rates(schedule(block_id, optimizer(), **values), n)


def assert_rates(got: list[float], expected: list[float]) -> None:
    assert got == pytest.approx(expected, rel=1e-9, abs=1e-15)


def test_step():
    assert_rates(lr_sequence("schedules.Step", 7, step_size=3, gamma=0.5),
                 [LR0 * 0.5 ** (t // 3) for t in range(7)])


def test_exponential_and_the_notes_form():
    assert_rates(lr_sequence("schedules.Exponential", 6, gamma=0.8),
                 [LR0 * 0.8 ** t for t in range(6)])
    s = 4  # the notes: lr₀·0.1^(t/s)
    assert_rates(lr_sequence("schedules.Exponential", 9, gamma=0.1 ** (1 / s)),
                 [LR0 * 0.1 ** (t / s) for t in range(9)])


def test_power():
    assert_rates(lr_sequence("schedules.Power", 8, decay_steps=3.0, power=0.5),
                 [LR0 / (1 + t / 3.0) ** 0.5 for t in range(8)])


def test_cosine():
    got = lr_sequence("schedules.Cosine", 11, t_max=10, eta_min=0.01)
    assert_rates(got, [0.01 + (LR0 - 0.01) * (1 + math.cos(math.pi * t / 10)) / 2
                       for t in range(11)])


def test_warm_up_then_constant():
    assert_rates(lr_sequence("schedules.WarmUp", 7, total_iters=4),
                 [0.0, 0.025, 0.05, 0.075, 0.1, 0.1, 0.1])
    assert_rates(lr_sequence("schedules.WarmUp", 4, total_iters=2, start_factor=0.5),
                 [0.05, 0.075, 0.1, 0.1])


def test_one_cycle_matches_torch_and_holds_its_last_rate():
    params = {"max_lr": 1.0, "total_steps": 20, "pct_start": 0.25, "div_factor": 10.0,
              "final_div_factor": 100.0}
    got = lr_sequence("schedules.OneCycle", 25, **params)
    reference = rates(torch.optim.lr_scheduler.OneCycleLR(optimizer(), **params), 20)
    assert_rates(got[:20], reference)
    assert got[0] == pytest.approx(0.1) and max(got) == pytest.approx(1.0)
    assert_rates(got[20:], [got[19]] * 5)  # past total_steps: no error, the last rate


def test_one_cycle_momentum():
    params = {"max_lr": 1.0, "total_steps": 10, "cycle_momentum": True}
    got = rates(schedule("schedules.OneCycle", optimizer(momentum=0.9), **params), 10,
                "momentum")
    reference = rates(torch.optim.lr_scheduler.OneCycleLR(optimizer(0.9), **params), 10,
                      "momentum")
    assert_rates(got, reference)
    assert got[0] == pytest.approx(0.95) and min(got) == pytest.approx(0.85)
    with pytest.raises(ParamError, match="momentum"):
        schedule("schedules.OneCycle", torch.optim.Adagrad([torch.nn.Parameter(
            torch.zeros(1))]), cycle_momentum=True)


def test_piecewise_sets_absolute_rates():
    assert_rates(lr_sequence("schedules.Piecewise", 8, boundaries=[2, 5],
                             values=[0.5, 0.05, 0.005]),
                 [0.5, 0.5, 0.05, 0.05, 0.05, 0.005, 0.005, 0.005])
    with pytest.raises(ParamError, match="one rate more"):
        lr_sequence("schedules.Piecewise", 1, boundaries=[2, 5], values=[0.5, 0.05])
    with pytest.raises(ParamError, match="increase"):
        lr_sequence("schedules.Piecewise", 1, boundaries=[5, 2], values=[1.0, 0.5, 0.1])


@pytest.mark.parametrize(("interval", "per_epoch"), [("epoch", 1), ("step", 4)])
def test_schedule_advances_per_epoch_or_per_step_in_training(interval, per_epoch):
    g = Graph("scheduled")
    g.add("data.NoisyLine", id="data", n=16, batch_size=4, val_fraction=0.0)
    g.add("layers.Linear", id="lin", out_features=1)
    g.add("losses.MSE", id="loss")
    g.add("optimizers.SGD", id="opt", lr=0.1)
    g.add("schedules.Exponential", id="decay", gamma=0.5, interval=interval)
    g.connect(("data", "x"), ("lin", "input"))
    g.connect(("lin", "output"), ("loss", "input"))
    g.connect(("data", "y"), ("loss", "target"))
    g.connect(("loss", "loss"), ("opt", "loss"))
    g.connect(("decay", "schedule"), ("opt", "schedule"))
    g.update_training(epochs=3, device="cpu")
    history = train(g).history
    assert_rates([h["lr"]["opt"] for h in history],
                 [0.1 * 0.5 ** (per_epoch * e) for e in (1, 2, 3)])


def test_schedules_checkpoint_as_plain_data():
    import json

    for block_id in ("schedules.Power", "schedules.WarmUp", "schedules.Piecewise",
                     "schedules.OneCycle"):
        json.dumps(schedule(block_id, optimizer()).state_dict())
