"""Learning-rate schedules: wire one into an optimizer's `schedule` input.

A schedule sets the learning rate as a function of t, the number of epochs (or steps, with
``interval="step"``) done so far; lr₀ is the rate set on the optimizer. Each block builds a
torch scheduler, so it is checkpointed with the run and resumes where it stopped; the
closed forms are written with `LambdaLR` so the formula in the doc is the code.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable
from typing import Any, Literal, TypeVar

import torch
from torch.optim.lr_scheduler import LambdaLR, LRScheduler, OneCycleLR

from nodegraph.kinds.declare import family
from nodegraph.kinds.optim import SCHEDULE_PARAMS, ScheduleParams
from nodegraph.model.errors import ParamError
from nodegraph.model.spec import (
    SCHEDULE_OUT,
    Param,
    Params,
    Search,
    bool_param,
    choice_param,
    float_param,
    int_param,
)

_schedule = family("schedules", "schedule", outputs=[SCHEDULE_OUT],
                   shared_params=SCHEDULE_PARAMS, shared_keywords=("lr",))


V = TypeVar("V", bound=Params)


def _factor(f: Callable[[V, int], float]) -> Callable[[V, Any], LambdaLR]:
    """A build for lr(t) = lr₀·f(p, t), as a LambdaLR."""
    return lambda p, opt: LambdaLR(opt, lambda t: f(p, t))


class WarmUpParams(ScheduleParams):
    total_iters: int
    start_factor: float


def _warm_up(p: WarmUpParams, t: int) -> float:
    if t >= p.total_iters:
        return 1.0
    return p.start_factor + (1.0 - p.start_factor) * t / p.total_iters


class PiecewiseLR(LRScheduler):
    """lr = values[i] while boundaries[i-1] <= t < boundaries[i]: absolute rates, not factors."""

    def __init__(self, optimizer, boundaries: list[int], values: list[float],
                 last_epoch: int = -1):
        self.boundaries, self.values = list(boundaries), list(values)
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float | torch.Tensor]:
        value = self.values[bisect.bisect_right(self.boundaries, self.last_epoch)]
        return [value for _ in self.optimizer.param_groups]


class PiecewiseParams(ScheduleParams):
    boundaries: list[int]
    values: list[float]  # type: ignore[assignment]  # the param, not dict.values


def _piecewise(p: PiecewiseParams, opt):
    if len(p["values"]) != len(p.boundaries) + 1:
        raise ParamError(f"values needs one rate more than boundaries: {len(p.boundaries)} "
                         f"boundaries give {len(p.boundaries) + 1} pieces, got "
                         f"{len(p['values'])} values")
    if any(b >= c for b, c in zip(p.boundaries, p.boundaries[1:], strict=False)):
        raise ParamError(f"boundaries must increase, got {p.boundaries}")
    return PiecewiseLR(opt, p.boundaries, p["values"])  # p.values is dict.values


class OneCycle(OneCycleLR):
    """torch's one-cycle policy that holds its final rate after `total_steps` instead of
    stopping the run with an error when the schedule is shorter than the training."""

    def get_lr(self) -> list[float | torch.Tensor]:
        t = self.last_epoch
        self.last_epoch = min(t, self.total_steps - 1)
        try:
            return super().get_lr()
        finally:
            self.last_epoch = t


class OneCycleParams(ScheduleParams):
    max_lr: float
    total_steps: int
    pct_start: float
    anneal_strategy: Literal["cos", "linear"]
    div_factor: float
    final_div_factor: float
    three_phase: bool
    cycle_momentum: bool


def _one_cycle(p: OneCycleParams, opt):
    has_momentum = "momentum" in opt.defaults or "betas" in opt.defaults
    if p.cycle_momentum and not has_momentum:
        raise ParamError(f"cycle_momentum needs an optimizer with momentum or betas; "
                         f"{type(opt).__name__} has neither")
    return OneCycle(opt, max_lr=p.max_lr, total_steps=p.total_steps, pct_start=p.pct_start,
                    anneal_strategy=p.anneal_strategy, div_factor=p.div_factor,
                    final_div_factor=p.final_div_factor, three_phase=p.three_phase,
                    cycle_momentum=p.cycle_momentum)


class StepParams(ScheduleParams):
    step_size: int
    gamma: float


def _step(p: StepParams, opt) -> LRScheduler:
    return torch.optim.lr_scheduler.StepLR(opt, p.step_size, p.gamma)


class ExponentialParams(ScheduleParams):
    gamma: float


def _exponential(p: ExponentialParams, opt) -> LRScheduler:
    return torch.optim.lr_scheduler.ExponentialLR(opt, p.gamma)


class PowerParams(ScheduleParams):
    decay_steps: float
    power: float


def _power(p: PowerParams, t: int) -> float:
    return (1.0 + t / p.decay_steps) ** -p.power


class CosineParams(ScheduleParams):
    t_max: int
    eta_min: float


def _cosine(p: CosineParams, opt) -> LRScheduler:
    return torch.optim.lr_scheduler.CosineAnnealingLR(opt, p.t_max, p.eta_min)


class Plateau(torch.optim.lr_scheduler.ReduceLROnPlateau):
    """torch's ReduceLROnPlateau, told which of the epoch's numbers it watches: the trainer
    steps it with that number (`monitor`; empty: the run's monitored number)."""

    def __init__(self, optimizer, monitor: str, **kwargs: Any):
        super().__init__(optimizer, **kwargs)
        self.monitor = monitor


class PlateauParams(ScheduleParams):
    monitor: str
    mode: Literal["min", "max"]
    factor: float
    patience: int
    cooldown: int
    min_lr: float
    threshold: float
    threshold_mode: Literal["rel", "abs"]


def _plateau(p: PlateauParams, opt) -> Plateau:
    if p.interval != "epoch":
        raise ParamError("ReduceLROnPlateau watches a number computed once per epoch: set "
                         "interval to epoch")
    if p.monitor and p.monitor.partition(".")[0] not in ("train", "val"):
        raise ParamError(f"monitor names a number as split.name (val.loss, "
                         f"train.accuracy), got {p.monitor!r}")
    return Plateau(opt, p.monitor, mode=p.mode, factor=p.factor, patience=p.patience,
                   cooldown=p.cooldown, min_lr=p.min_lr, threshold=p.threshold,
                   threshold_mode=p.threshold_mode)


BLOCKS = [
    _schedule("Step",
              "Multiply the learning rate by `gamma` every `step_size` epochs (or steps).",
              _step,
              [int_param("step_size", 10, "epochs (or steps) between decays", min=1),
               float_param("gamma", 0.1, "factor applied at each decay", min=0)],
              keywords=("decay",),
              search=Search(words=(("lr", 1),))),
    _schedule("Exponential",
              "Exponential decay lr = lr₀·gammaᵗ.\n\n"
              "The notes' form lr₀·0.1^(t/s) (divide by 10 every s epochs) is gamma = "
              "0.1^(1/s).",
              _exponential,
              [float_param("gamma", 0.95, "factor applied every epoch (or step)", min=0,
                           max=1)],
              keywords=("decay", "exponential decay")),
    _schedule("Power",
              "Power decay lr = lr₀/(1 + t/decay_steps)^power.\n\n"
              "Falls fast at first, then slowly (the notes' power schedule with s = "
              "decay_steps and c = power); power 1 is the 1/t decay of classical SGD theory.",
              _factor(_power),
              [float_param("decay_steps", 10.0, "s: after s epochs (or steps) lr is "
                           "lr₀/2^power", min=1e-12),
               float_param("power", 1.0, "c: the exponent of the decay", min=0)],
              keywords=("decay", "inverse time", "polynomial")),
    _schedule("Cosine",
              "Cosine annealing from the optimizer's rate down to `eta_min` over `t_max` "
              "epochs (or steps).",
              _cosine,
              [int_param("t_max", 100, "epochs (or steps) of one half cosine", min=1),
               float_param("eta_min", 0.0, "smallest learning rate", min=0)],
              keywords=("annealing",),
              search=Search(words=("lr",))),
    _schedule("WarmUp",
              "Linear warm-up from start_factor·lr₀ to lr₀ over `total_iters`, then constant.\n\n"
              "lr = lr₀·(start_factor + (1 − start_factor)·t/total_iters) until t = "
              "total_iters. Large early steps on fresh weights can spike the loss (Adam, "
              "transformers); warm-up avoids them. For warm-up followed by decay use "
              "OneCycle.",
              _factor(_warm_up),
              [int_param("total_iters", 5, "epochs (or steps) of warm-up", min=1),
               float_param("start_factor", 0.0, "the first rate as a share of lr₀", min=0,
                           max=1)],
              keywords=("warmup", "ramp", "linear"),
              search=Search(words=(("lr", 2),))),
    _schedule("OneCycle",
              "One-cycle policy: rise from max_lr/div_factor to max_lr, then anneal far below.\n\n"
              "torch's OneCycleLR: the rate rises for the first pct_start of total_steps, then "
              "falls to max_lr/(div_factor·final_div_factor). Pick max_lr with the "
              "learning-rate range test; the notes start at max_lr/10 (div_factor 10). "
              "`total_steps` counts epochs, or batches with interval = step; past it the "
              "rate stays at its last value. The optimizer's own lr is replaced.",
              _one_cycle,
              [float_param("max_lr", 0.1, "the peak learning rate", min=0),
               int_param("total_steps", 100, "length of the cycle in epochs (or steps)",
                         min=2),
               float_param("pct_start", 0.3, "share of the cycle spent rising", min=0, max=1),
               choice_param("anneal_strategy", ("cos", "linear"), "cos",
                            "shape of the rise and fall"),
               float_param("div_factor", 25.0, "the first rate is max_lr/div_factor", min=1),
               float_param("final_div_factor", 1e4, "the last rate is the first divided by "
                           "this", min=1),
               bool_param("three_phase", False, "fall back to the first rate before the "
                          "final annealing (symmetric cycle)"),
               bool_param("cycle_momentum", False, "also cycle momentum (or Adam's beta1) "
                          "inversely between 0.95 and 0.85; overrides the optimizer's "
                          "momentum (torch's default is on)")],
              keywords=("one cycle", "1cycle", "super-convergence", "warmup", "annealing")),
    _schedule("Piecewise",
              "Piecewise-constant learning rate: values[i] between boundaries.\n\n"
              "values[0] before boundaries[0], values[1] until boundaries[1], and so on; the "
              "values are rates, and replace the optimizer's lr. The notes' recipe: 0.1 for "
              "some epochs, then 0.01 (boundaries [30], values [0.1, 0.01]).",
              _piecewise,
              [Param("boundaries", "ints", [30], "epochs (or steps) where the rate changes, "
                     "increasing", min=1),
               Param("values", "floats", [0.1, 0.01], "the rates, one more than boundaries",
                     min=0)],
              keywords=("piecewise constant", "multistep", "decay")),
    _schedule("ReduceLROnPlateau",
              "Multiply the learning rate by `factor` when a number stops improving.\n\n"
              "torch's ReduceLROnPlateau, stepped after each epoch's validation with the "
              "number `monitor` names (val.loss, val.accuracy, ...; empty: the run's "
              "monitored number, training.monitor or val.loss). After `patience` epochs "
              "without an improvement beyond `threshold` the rate drops, then waits "
              "`cooldown` epochs before watching again; it never goes below `min_lr`.",
              _plateau,
              [Param("monitor", "str", "", "the number watched, split.name; empty: the "
                     "run's monitored number"),
               choice_param("mode", ("min", "max"), "min",
                            "min: lower is better (a loss); max: higher (an accuracy)"),
               float_param("factor", 0.1, "the rate is multiplied by this on a plateau",
                           min=0, max=1),
               int_param("patience", 10, "epochs without improvement before a drop", min=0),
               int_param("cooldown", 0, "epochs to wait after a drop", min=0),
               float_param("min_lr", 0.0, "the lowest rate", min=0),
               float_param("threshold", 1e-4, "the least change that counts as an "
                           "improvement", min=0),
               choice_param("threshold_mode", ("rel", "abs"), "rel",
                            "threshold relative to the best value, or absolute")],
              keywords=("plateau", "reduce on plateau", "adaptive", "decay"),
              search=Search(words=("plateau", "reducelronplateau"))),
]
