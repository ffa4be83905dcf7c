"""Training stages: phases with their own optimizers, frozen nodes and epochs
(`training.stages`; one stage of every optimizer when none are declared).

Entering a stage activates its optimizers — the last one's forward is widened to feed
every loss and metric, so the epoch's numbers are complete — and freezes its frozen nodes:
their parameters stop asking for gradients and their modules stay in eval mode, so
batch-norm statistics and dropout stay fixed too. The run's end unfreezes everything.
"""

from __future__ import annotations

from dataclasses import replace

import torch

from nodegraph.model.events import Message
from nodegraph.runtime.callbacks.base import Callback, Stage


def stages_of(declared: list[dict], optimizers: list[str], epochs: int) -> list[Stage]:
    """The stages of `training.stages`, or the one stage of every optimizer for `epochs`."""
    if not declared:
        return [Stage("train", epochs, list(optimizers), [])]
    return [Stage(d.get("name", f"stage {i + 1}"), d["epochs"],
                  d.get("optimizers") or list(optimizers), d.get("frozen", []))
            for i, d in enumerate(declared)]


class StageSchedule(Callback):
    """Switches optimizers and frozen nodes as the loop enters each stage."""

    def __init__(self) -> None:
        self.frozen: list[torch.nn.Parameter] = []
        self.frozen_modules: list[torch.nn.Module] = []

    def on_stage_start(self, trainer, fresh: bool) -> None:
        c, s = trainer.c, trainer.state
        self.unfreeze()
        stage = s.stages[s.stage]
        runs = [o for o in c.optimizers if o.node in stage.optimizers]
        if runs:  # the last active optimizer's forward also feeds every loss and metric
            needed = {step[0] for step in runs[-1].plan} | {step[0] for step in c.eval_plan}
            runs[-1] = replace(runs[-1], plan=c.module.plan(needed))
        trainer.active = runs
        self.frozen_modules = members(c, stage.frozen)
        self.frozen = [p for m in self.frozen_modules for p in m.parameters() if p.requires_grad]
        for p in self.frozen:
            p.requires_grad_(False)
        if len(s.stages) > 1:
            trainer.events.emit(Message(
                f"stage {s.stage + 1}/{len(s.stages)} '{stage.name}': {stage.epochs} epochs, "
                f"optimizers {', '.join(stage.optimizers)}"
                + (f", frozen {', '.join(stage.frozen)}" if stage.frozen else "")))

    def on_epoch_start(self, trainer) -> None:
        for m in self.frozen_modules:  # frozen blocks keep their statistics too
            m.eval()

    def on_run_end(self, trainer) -> None:
        self.unfreeze()

    def unfreeze(self) -> None:
        for p in self.frozen:
            p.requires_grad_(True)
        self.frozen = []


def members(c, nodes: list[str]) -> list[torch.nn.Module]:
    """The modules of `nodes` in compiled graph `c` (a group instance stands for its inner
    nodes)."""
    flat = c.report.flat
    ids = [m for n in nodes for m in ((flat.members(n) if flat else None) or [n])]
    return [m for m in (c.module.module_of(n) for n in ids) if m is not None]
