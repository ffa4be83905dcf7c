"""Procedures of energy-based models: Gibbs chains of a trained RBM.

An RBM generates by alternating h ~ P(h|v) and v ~ P(v|h), a loop no forward pass of the
training graph makes, so `procedures.GibbsChain` runs it around the trained
`energy.BernoulliRBM` node named by `model` and yields the visible probabilities after
every k steps, for the editor to animate. Clamping image rows to the data while the rest
is resampled is inpainting: the chain fills the occluded rows with what the model
believes goes with the rows it sees.

The chain starts from what the training graph feeds the RBM (the data run through the
blocks before it, e.g. the binarising Step, or the RBM below in a stack), never from
the raw data, so the procedure and the training agree on what a visible unit means.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import torch

from nodegraph.errors import NodegraphError
from nodegraph.procedure import Procedure, ProcedureContext
from nodegraph.spec import Param, block, choice_param, int_param, str_param
from nodes.energy import BernoulliRBM, bernoulli
from nodes.generative_procedures import SHAPE, as_image


def rbm_of(ctx: ProcedureContext, node: str) -> BernoulliRBM:
    module = ctx.compiled.module.module_of(node)
    if not isinstance(module, BernoulliRBM):
        raise NodegraphError(f"'{node}' is not an energy.BernoulliRBM node, so it has no "
                             "Gibbs chain to run")
    return module


@torch.no_grad()
def model_input(ctx: ProcedureContext, node: str, split: str, count: int) -> torch.Tensor:
    """The first `count` samples of a split as the training graph feeds them into `node`:
    the data run through every block upstream of it."""
    c = ctx.compiled
    steps = {step[0]: step for step in c.module.full_plan}
    needed, todo = set(), [node]
    while todo:  # the blocks `node` depends on
        for key in steps[todo.pop()][2]:
            if key and key[0] in steps and key[0] not in needed:
                needed.add(key[0])
                todo.append(key[0])
    values: dict = {}
    for name, ds in c.datasets.items():
        tensors = ds.tensors(split if ds.has(split) else "train")
        values.update({(name, port): t[:count].to(c.device) for port, t in tensors.items()})
    c.module.eval()
    values = c.module.run(c.module.plan(needed), values)
    fed = values[steps[node][2][0]]
    return fed.reshape(len(fed), -1)


def clamp_mask(rows: list[int], shape: list[int], units: int) -> torch.Tensor:
    """Boolean (units,) mask of the pixels in image rows `rows` of an image of `shape`."""
    if not rows:
        return torch.zeros(units, dtype=torch.bool)
    if len(shape) < 2 or torch.Size(shape).numel() != units:
        raise NodegraphError(f"clamp_rows needs image_shape [height, width] with height × "
                             f"width = {units} visible units, got {shape}")
    height, width = shape[-2], shape[-1]
    bad = [r for r in rows if not 0 <= r < height]
    if bad:
        raise NodegraphError(f"clamp_rows {bad} are outside the image's {height} rows")
    mask = torch.zeros(height, width, dtype=torch.bool)
    mask[rows] = True
    return mask.expand(*shape).reshape(units)


class GibbsChain(Procedure):
    """Alternate h ~ P(h|v), v ~ P(v|h) from data or noise, some image rows clamped."""

    def __init__(self, p):
        self.p = p

    def run(self, ctx: ProcedureContext) -> Iterator[dict[str, Any]]:
        p = self.p
        rbm = rbm_of(ctx, p.model)
        data = model_input(ctx, p.model, p.split, p.count)
        known = clamp_mask(list(p.clamp_rows), list(p.image_shape), data.shape[1])
        known = known.to(data.device)
        seed = int(torch.randint(0, 2**31 - 1, (1,), generator=ctx.generator))
        with torch.random.fork_rng(devices=[]):  # seeded draws, the global RNG untouched
            torch.manual_seed(seed)
            v = data
            if p.start == "noise":  # fair coins, except where the rows are clamped
                v = torch.where(known, data, bernoulli(torch.full_like(data, 0.5)))
            shown = v
            for step in range(p.steps + 1):
                yield {"step": step * p.k, "visible": shown.tolist(),
                       "image": [as_image(s, list(p.image_shape)) for s in shown],
                       "clamped": known.tolist(), "data": data.tolist()}
                if step < p.steps:
                    for _ in range(p.k):
                        v, shown = rbm.gibbs_step(v, known)


BLOCKS = [
    block("procedures.GibbsChain", "procedure",
          "Run a Gibbs chain of a trained RBM: sample, or fill in occluded rows."
          "\n\nStarts `count` chains at samples of a split (as the graph feeds them to the "
          "RBM) or at random 0/1 units, and alternates h ~ P(h|v), v ~ P(v|h); every k "
          "steps a frame shows P(v = 1 | h). Units in `clamp_rows` of the image keep their "
          "data values: start from noise with some rows clamped and the chain inpaints "
          "the others. A well-trained RBM's chains drift towards digit-like images; an "
          "untrained one's stay noise.",
          lambda p: GibbsChain(p),
          params=[str_param("model", doc="the energy.BernoulliRBM node to sample"),
                  int_param("steps", 20, "frames after the start", min=1),
                  int_param("k", 1, "Gibbs steps between frames", min=1),
                  choice_param("start", ("data", "noise"), "data",
                               "data: the chains start at samples; noise: at random 0/1 "
                               "units (clamped rows keep the data's values)"),
                  choice_param("split", ("train", "val", "test"), "test",
                               "the split the starting (and clamped) samples come from"),
                  int_param("count", 8, "number of chains (samples of the split)", min=1),
                  Param("clamp_rows", "ints", [], "image rows kept fixed at the data's "
                        "values, e.g. [0, 1, 2, 3] to inpaint the lower half of an 8x8 "
                        "image; needs image_shape"),
                  SHAPE],
          binds="model", keywords=("rbm", "sampling", "inpainting", "mcmc", "boltzmann",
                                   "generate")),
]
