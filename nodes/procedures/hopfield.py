"""Recall of a Hopfield network, step by step: `nodegraph sample GRAPH recall`.

The recall block runs its whole iteration inside one forward pass and outputs the
trajectory; this procedure runs the same update, x ← f(Wx + b), from starts it chooses —
the data as the graph feeds the block, or uniform random states in [−1, 1]^units — and
yields one frame per iteration, so the editor animates it (each chain a row of unit
values) and the command line prints the energy falling and the chains settling.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import torch

from nodegraph.kinds.declare import procedure
from nodegraph.kinds.procedure_context import Procedure, ProcedureContext
from nodegraph.model.spec import (
    Params,
    bool_param,
    choice_param,
    float_param,
    int_param,
    node_param,
)
from nodes.energy import HopfieldRecall
from nodes.procedures.core import module_as, seeded
from nodes.procedures.energy import model_input


def hopfield_of(ctx: ProcedureContext, node: str) -> HopfieldRecall:
    return module_as(ctx, node, HopfieldRecall, "is not an energy.HopfieldNewhop or "
                     "HopfieldHebbian node, so it has no recall to run")


class HopfieldRecallParams(Params):
    model: str
    start: str
    count: int
    split: str
    steps: int
    tol: float
    stop: bool


class Recall(Procedure):
    """Iterate the network's update from data or uniform starts, one frame per step."""

    def __init__(self, p: HopfieldRecallParams):
        self.p = p

    @torch.no_grad()
    def run(self, ctx: ProcedureContext) -> Iterator[dict[str, Any]]:
        p = self.p
        net = hopfield_of(ctx, p.model)
        steps = p.steps or net.steps
        with seeded(ctx):
            if p.start == "data":
                x = model_input(ctx, p.model, p.split, p.count).to(net.weight.dtype)
            else:
                x = (torch.rand(p.count, net.weight.shape[0], device=net.weight.device)
                     * 2 - 1).to(net.weight.dtype)
            moved = None
            for step in range(steps + 1):
                yield _frame(net, step, x, moved, p.tol)
                if step == steps or (p.stop and moved is not None
                                     and bool(moved.le(p.tol).all())):
                    break
                new = net.step(x)
                moved, x = (new - x).abs().amax(-1), new


def _frame(net: HopfieldRecall, step: int, x: torch.Tensor, moved: torch.Tensor | None,
           tol: float) -> dict[str, Any]:
    energy = net.energy(x)
    return {"step": step, "mean_energy": float(energy.mean()),
            "settled": 0 if moved is None else int(moved.le(tol).sum()),
            "x": x.tolist(), "energy": energy.tolist(),
            "image": [[row.tolist()] for row in x]}  # a chain: one row of unit values


BLOCKS = [
    procedure("procedures.HopfieldRecall",
              "Run a Hopfield network's recall one step at a time, from data or random starts."
              "\n\nStarts `count` chains at samples of a split (as the graph feeds them to the "
              "network) or at uniform random states in [−1, 1]^units, and iterates the "
              "network's own update x ← f(Wx + b) with its saved W and b. Each frame holds the "
              "states, their energies E = −½xᵀWx − bᵀx, the mean energy and how many chains "
              "moved no unit by more than tol in that step; a chain that settles stays put.",
              Recall,
              params=[node_param("model", doc="the energy.HopfieldNewhop or HopfieldHebbian "
                                 "node to run", of=("op",)),
                      choice_param("start", ("uniform", "data"), "uniform",
                                   "uniform random states in [−1, 1], or samples of `split`"),
                      int_param("count", 8, "how many chains", min=1, max=4096),
                      choice_param("split", ("train", "val", "test"), "train",
                                   "the split `start: data` draws from"),
                      int_param("steps", 0, "iterations at most; 0: the network's own `steps`",
                                min=0, max=10000),
                      float_param("tol", 1e-6, "a chain whose units all moved less than this "
                                  "has settled", min=0),
                      bool_param("stop", True, "stop once every chain has settled")],
              binds="model", keywords=("hopfield", "recall", "attractor", "associative memory",
                                       "energy")),
]
