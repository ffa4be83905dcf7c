"""What every optimizer and schedule block shares, because the trainer relies on it.

An optimizer block minimises the loss wired into it, over the trainable parameters of the
blocks upstream of that loss — unless `scope` names the nodes it may change (a GAN's two
optimizers each own one network). `clip_grad_norm` clips that optimizer's gradients before
each step. A schedule block wired into an optimizer's `schedule` input steps after every
epoch or every batch, as its `interval` says.

Optimizer blocks receive their parameters *named* (``node.param``) and pass them through
`param_groups`, so `weight_decay` can spare biases and normalisation scales when
``decay="weights_only"`` — weight decay by parameter group, declared once for all optimizers.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from nodegraph.model.spec import Param, Params, choice_param, float_param, nodes_param

OPTIMIZER_PARAMS: tuple[Param, ...] = (
    nodes_param("scope", [], "node ids whose parameters this optimizer updates; "
                "empty means every trainable block upstream of its loss", of=("op", "group")),
    float_param("clip_grad_norm", None, "clip the total gradient norm to this value before "
                "each step; empty means no clipping", min=0, nullable=True),
    choice_param("decay", ("all", "weights_only"), "all",
                 "which parameters weight_decay applies to: all of them (torch's default), "
                 "or only weight matrices and kernels, sparing biases and norm scales"),
)


class OptimizerParams(Params):
    """The typed view of `OPTIMIZER_PARAMS`; an optimizer's view subclasses it."""

    scope: list[str]
    clip_grad_norm: float | None
    decay: str


def param_groups(named: Sequence[tuple[str, torch.nn.Parameter]], p: dict) -> list[dict[str, Any]]:
    """Torch parameter groups for `named` parameters under the block's `weight_decay`/`decay`."""
    weight_decay = p.get("weight_decay", 0.0) or 0.0
    if p.get("decay", "all") == "all" or not weight_decay:
        return [{"params": [t for _, t in named], "weight_decay": weight_decay}]
    decayed = [t for _, t in named if t.ndim > 1]
    spared = [t for _, t in named if t.ndim <= 1]
    groups = [{"params": decayed, "weight_decay": weight_decay},
              {"params": spared, "weight_decay": 0.0}]
    return [g for g in groups if g["params"]]

SCHEDULE_PARAMS: tuple[Param, ...] = (
    choice_param("interval", ("epoch", "step"), "epoch",
                 "advance the schedule after every epoch or after every batch"),
)


class ScheduleParams(Params):
    """The typed view of `SCHEDULE_PARAMS`; a schedule's view subclasses it."""

    interval: str
