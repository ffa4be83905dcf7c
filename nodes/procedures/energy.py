"""Procedures of energy-based models: Gibbs chains of RBMs and DBMs, Langevin dynamics.

An RBM generates by alternating h ~ P(h|v) and v ~ P(v|h), a loop no forward pass of the
training graph makes, so `procedures.GibbsChain` runs it around the trained
`energy.BernoulliRBM` node named by `model` and yields the visible probabilities after
every k steps, for the editor to animate. Clamping image rows to the data while the rest
is resampled is inpainting: the chain fills the occluded rows with what the model
believes goes with the rows it sees.

The chain starts from what the training graph feeds the RBM (the data run through the
blocks before it, e.g. the binarising Step, or the RBM below in a stack), never from
the raw data, so the procedure and the training agree on what a visible unit means.

`procedures.DBMGibbs` runs the chain of a two-layer DBM (two stacked RBMs joined into one
Boltzmann machine) through both layers. `procedures.Langevin` samples a continuous
density known only through its score ∇log p (a score network) or its energy
E = −log p + const (minus the energy's gradient), by repeating `samplers.LangevinStep`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, cast

import torch
import torch.nn.functional as F

from nodegraph.kinds.declare import procedure
from nodegraph.kinds.procedure_context import Procedure, ProcedureContext
from nodegraph.model.errors import NodegraphError
from nodegraph.model.spec import (
    Param,
    Params,
    choice_param,
    float_param,
    int_param,
    node_param,
    str_param,
)
from nodes.energy import BernoulliRBM, bernoulli
from nodes.procedures.core import module_as, seeded
from nodes.procedures.generative import SHAPE, as_image
from nodes.samplers import LangevinStep


def rbm_of(ctx: ProcedureContext, node: str) -> BernoulliRBM:
    return module_as(ctx, node, BernoulliRBM, "is not an energy.BernoulliRBM node, so it "
                     "has no Gibbs chain to run")


def model_input(ctx: ProcedureContext, node: str, split: str, count: int) -> torch.Tensor:
    """`fed_input` with one flat row of units per sample."""
    fed = fed_input(ctx, node, split, count)
    return fed.reshape(len(fed), -1)


@torch.no_grad()
def fed_input(ctx: ProcedureContext, node: str, split: str, count: int) -> torch.Tensor:
    """The first `count` samples of a split as the training graph feeds them into `node`'s
    first input: the data run through every block upstream of it."""
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
        tensors = ds.tensors(ctx.checked(ds, split))
        values.update({(name, port): t[:count].to(c.device) for port, t in tensors.items()})
    c.module.eval()
    values = c.module.run(c.module.plan(needed), values)
    return values[cast("tuple[str, str]", steps[node][2][0])]


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


class GibbsChainParams(Params):
    model: str
    steps: int
    k: int
    start: str
    split: str
    count: int
    clamp_rows: list[int]
    image_shape: list[int]


class GibbsChain(Procedure):
    """Alternate h ~ P(h|v), v ~ P(v|h) from data or noise, some image rows clamped."""

    def __init__(self, p: GibbsChainParams):
        self.p = p

    def run(self, ctx: ProcedureContext) -> Iterator[dict[str, Any]]:
        p = self.p
        rbm = rbm_of(ctx, p.model)
        data = model_input(ctx, p.model, p.split, p.count)
        known = clamp_mask(list(p.clamp_rows), list(p.image_shape), data.shape[1])
        known = known.to(data.device)
        with seeded(ctx):
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


class TwoLayerBM:
    """A two-layer Boltzmann machine (a DBM) made of two stacked, layer-wise trained RBMs.

    Its energy is the sum of theirs, E(v, h1, h2) = E₁(v, h1) + E₂(h1, h2); h1 is the
    lower RBM's hidden layer and the upper one's visible layer, so it hears both:
    P(h1 | v, h2) = σ(W₁v + c₁ + W₂ᵀh2 + b₂), while P(v | h1) = σ(W₁ᵀh1 + b₁) and
    P(h2 | h1) = σ(W₂h1 + c₂). Given h1, v and h2 are independent: Gibbs sampling
    alternates the two blocks {h1} and {v, h2}, through both layers.
    """

    def __init__(self, lower: BernoulliRBM, upper: BernoulliRBM):
        if upper.weight.shape[1] != lower.weight.shape[0]:
            raise NodegraphError(f"the upper RBM has {upper.weight.shape[1]} visible units "
                                 f"but the lower one {lower.weight.shape[0]} hidden units; "
                                 "a DBM stacks them on the same layer")
        self.lower, self.upper = lower, upper

    def h1_probs(self, v: torch.Tensor, h2: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(F.linear(v, self.lower.weight, self.lower.hidden_bias)
                             + F.linear(h2, self.upper.weight.T, self.upper.visible_bias))

    def energy(self, v: torch.Tensor, h1: torch.Tensor, h2: torch.Tensor) -> torch.Tensor:
        def rbm_energy(m: BernoulliRBM, x: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
            return -x @ m.visible_bias - h @ m.hidden_bias - (F.linear(x, m.weight) * h).sum(-1)
        return rbm_energy(self.lower, v, h1) + rbm_energy(self.upper, h1, h2)

    @torch.no_grad()
    def start(self, v: torch.Tensor) -> torch.Tensor:
        """h2 drawn from a bottom-up pass, h1 = P(h1 | v) as the lower RBM sees it."""
        return bernoulli(self.upper.hidden_probs(self.lower.hidden_probs(v)))

    @torch.no_grad()
    def step(self, v: torch.Tensor, h2: torch.Tensor, known: torch.Tensor | None = None):
        """One sweep: h1 ~ P(h1 | v, h2), then v ~ P(v | h1) and h2 ~ P(h2 | h1).
        Returns (v, h2, P(v = 1 | h1)); `known` visible units keep their values."""
        h1 = bernoulli(self.h1_probs(v, h2))
        probs = self.lower.visible_probs(h1)
        v_new, h2 = bernoulli(probs), bernoulli(self.upper.hidden_probs(h1))
        if known is not None:
            v_new, probs = torch.where(known, v, v_new), torch.where(known, v, probs)
        return v_new, h2, probs


class DBMGibbsParams(GibbsChainParams):
    top: str


class DBMGibbs(GibbsChain):
    """GibbsChain through both layers of a two-layer DBM."""

    p: DBMGibbsParams

    def run(self, ctx: ProcedureContext) -> Iterator[dict[str, Any]]:
        p = self.p
        dbm = TwoLayerBM(rbm_of(ctx, p.model), rbm_of(ctx, p.top))
        data = model_input(ctx, p.model, p.split, p.count)
        known = clamp_mask(list(p.clamp_rows), list(p.image_shape), data.shape[1])
        known = known.to(data.device)
        with seeded(ctx):
            v = data
            if p.start == "noise":
                v = torch.where(known, data, bernoulli(torch.full_like(data, 0.5)))
            h2, shown = dbm.start(v), v
            for step in range(p.steps + 1):
                yield {"step": step * p.k, "visible": shown.tolist(),
                       "image": [as_image(s, list(p.image_shape)) for s in shown],
                       "top": h2.tolist(), "clamped": known.tolist(), "data": data.tolist()}
                if step < p.steps:
                    for _ in range(p.k):
                        v, h2, shown = dbm.step(v, h2, known)


def _first_node(ctx: ProcedureContext, node: str) -> str:
    """The flat node that receives a group instance's first input (the node itself for a
    plain block): where the training graph's data enters the model."""
    flat = ctx.compiled.report.flat
    if flat is not None and (node, "") in flat.inputs:
        ports = [port for (inst, port) in flat.inputs if inst == node and port]
        return flat.inputs[(node, ports[0])][0][0]
    return node


def score_function(ctx: ProcedureContext, node: str, kind: str, output: str
                   ) -> Callable[[torch.Tensor], tuple[torch.Tensor, torch.Tensor | None]]:
    """x -> (∇log p(x), energy per sample or None) for the model `node`.

    kind "score": the model's output is the score. kind "energy": the score is −∇E, by
    autograd through the block (an energy.BernoulliRBM contributes its free energy F(v));
    samples are independent, so the gradient of the batch's summed energy is each
    sample's own gradient.
    """
    module = ctx.compiled.module.module_of(node)
    if kind == "score" or module is None:  # a group's energy: its output, with gradients
        call = ctx.model(node, grad=kind == "energy")
        port = output or call.outputs[0]
        if port not in call.outputs:
            raise NodegraphError(f"'{node}' has no output '{port}' (outputs: "
                                 f"{', '.join(call.outputs)})")

        def out(x: torch.Tensor) -> torch.Tensor:
            return call(**{call.inputs[0]: x})[port]

        if kind == "score":
            return lambda x: (out(x), None)
        return _score_of(lambda x: _per_sample(out(x), len(x)), lambda: None)
    spec = ctx.compiled.report.specs[node]
    ports = [p.name for p in spec.outputs]
    index = ports.index(output) if output in ports else 0
    if output and output not in ports:
        raise NodegraphError(f"'{node}' has no output '{output}' (outputs: {', '.join(ports)})")

    def energy(x: torch.Tensor) -> torch.Tensor:
        if isinstance(module, BernoulliRBM):
            return module.free_energy(x)
        out = module(x, *[None] * (len(spec.inputs) - 1))
        return _per_sample(out[index] if isinstance(out, tuple) else out, len(x))

    return _score_of(energy, module.eval)


def _per_sample(out: torch.Tensor, n: int) -> torch.Tensor:
    """An energy output as one value per sample (a scalar is shared out evenly)."""
    return out.reshape(n, -1).sum(-1) if out.ndim else out.expand(n) / n


def _score_of(energy: Callable[[torch.Tensor], torch.Tensor], prepare: Callable[[], object]
              ) -> Callable[[torch.Tensor], tuple[torch.Tensor, torch.Tensor]]:
    """x -> (−∇E(x), E(x)) by autograd; `prepare` runs first (eval mode)."""

    def score(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        prepare()
        with torch.enable_grad():
            x = x.detach().requires_grad_()
            e = energy(x)
            (grad,) = torch.autograd.grad(e.sum(), x)
        return -grad, e.detach()

    return score


class LangevinParams(Params):
    model: str
    kind: str
    output: str
    steps: int
    step_size: float
    noise_scale: float
    every: int
    start: str
    init_std: float
    count: int
    split: str


class Langevin(Procedure):
    """x ← x + (ε/2)·∇log p(x) + √ε·z, from noise or data, a frame every `every` steps."""

    def __init__(self, p: LangevinParams):
        self.p = p

    def run(self, ctx: ProcedureContext) -> Iterator[dict[str, Any]]:
        p = self.p
        score = score_function(ctx, p.model, p.kind, p.output)
        data = fed_input(ctx, _first_node(ctx, p.model), p.split, p.count).float()
        step = LangevinStep(p.step_size, p.noise_scale)
        with seeded(ctx):
            x = data
            if p.start == "noise":
                x = p.init_std * torch.randn(p.count, *data.shape[1:], device=data.device)
            for t in range(p.steps + 1):
                grad, energy = score(x)
                if t % p.every == 0 or t == p.steps:
                    yield self.frame(t, x, energy)
                if t < p.steps:
                    x = step(x, grad)

    def frame(self, t: int, x: torch.Tensor, energy: torch.Tensor | None) -> dict[str, Any]:
        flat = x.reshape(len(x), -1)
        frame = {"step": t, "samples": x.tolist(), "mean": flat.mean(0).tolist(),
                 "var": flat.var(0).tolist()}
        if energy is not None:
            frame["energy"] = energy.mean().item()
        return frame


GIBBS_PARAMS = [
    int_param("steps", 20, "frames after the start", min=1),
    int_param("k", 1, "Gibbs steps between frames", min=1),
    choice_param("start", ("data", "noise"), "data",
                 "data: the chains start at samples; noise: at random 0/1 units (clamped "
                 "rows keep the data's values)"),
    choice_param("split", ("train", "val", "test"), "test",
                 "the split the starting (and clamped) samples come from"),
    int_param("count", 8, "number of chains (samples of the split)", min=1),
    Param("clamp_rows", "ints", [], "image rows kept fixed at the data's values, e.g. "
          "[0, 1, 2, 3] to inpaint the lower half of an 8x8 image; needs image_shape"),
    SHAPE,
]

BLOCKS = [
    procedure("procedures.GibbsChain",
              "Run a Gibbs chain of a trained RBM: sample, or fill in occluded rows."
              "\n\nStarts `count` chains at samples of a split (as the graph feeds them to the "
              "RBM) or at random 0/1 units, and alternates h ~ P(h|v), v ~ P(v|h); every k "
              "steps a frame shows P(v = 1 | h). Units in `clamp_rows` of the image keep their "
              "data values: start from noise with some rows clamped and the chain inpaints "
              "the others. A well-trained RBM's chains drift towards digit-like images; an "
              "untrained one's stay noise.",
              GibbsChain,
              params=[node_param("model", doc="the energy.BernoulliRBM node to sample", of=("op",)),
                      *GIBBS_PARAMS],
              binds="model", keywords=("rbm", "sampling", "inpainting", "mcmc", "boltzmann",
                                       "generate")),
    procedure("procedures.DBMGibbs",
              "Gibbs sampling through both layers of a two-layer deep Boltzmann machine."
              "\n\nThe DBM is two stacked, layer-wise trained RBMs (`model` on the pixels, "
              "`top` on its hidden units) joined into one model whose energy is the sum of "
              "theirs: the middle layer h1 hears the pixels and the top layer at once, "
              "P(h1 | v, h2) = σ(W₁v + c₁ + W₂ᵀh2 + b₂), and a sweep draws h1, then v and h2 "
              "given h1. Chains start at data or noise (h2 from a bottom-up pass); every k "
              "sweeps a frame shows P(v = 1 | h1) and the top units. Clamped rows inpaint as "
              "in GibbsChain. No joint fine-tuning: the layers are as pre-training left them "
              "(Salakhutdinov & Hinton halve pre-trained weights to avoid counting h1's "
              "evidence twice; here both RBMs keep their own).",
              DBMGibbs,
              params=[node_param("model", doc="the lower energy.BernoulliRBM (on the pixels)",
                                 of=("op",)),
                      node_param("top", doc="the upper energy.BernoulliRBM, fed the lower "
                                 "one's hidden units", of=("op",)),
                      *GIBBS_PARAMS],
              binds="model", keywords=("dbm", "deep boltzmann", "sampling", "inpainting",
                                       "mcmc", "generate")),

    procedure("procedures.Langevin",
              "Sample a density from its score or energy by Langevin dynamics."
              "\n\nRepeats x ← x + (ε/2)·∇log p(x) + √ε·z (samplers.LangevinStep) on `count` "
              "chains started from N(0, init_std²) noise or from samples of a split, with "
              "∇log p the output of a score model (kind score) or −∇E of an energy model "
              "(kind energy: a block or group instance whose output is the energy, or an "
              "energy.BernoulliRBM's free energy). Every `every` steps a frame holds the "
              "samples, their mean and variance (and mean energy). As ε → 0 and steps → ∞ "
              "the samples follow p; a finite ε adds a bias: on a Gaussian with precision P "
              "the chains settle at covariance (P − (ε/4)·P²)⁻¹ instead of P⁻¹.",
              Langevin,
              params=[node_param("model", doc="the score or energy model: a node or a "
                                 "group instance", of=("op", "group")),
                      choice_param("kind", ("score", "energy"), "score",
                                   "score: the output is ∇ₓ log p(x); energy: the output is "
                                   "E(x) = −log p(x) + const"),
                      str_param("output", "", "the output port to use; empty: the first"),
                      int_param("steps", 500, "Langevin steps", min=1),
                      float_param("step_size", 0.01, "step ε", min=0),
                      float_param("noise_scale", 1.0, "multiplies the noise; 0 turns the chain "
                                  "into gradient ascent on log p", min=0),
                      int_param("every", 50, "steps between frames", min=1),
                      choice_param("start", ("noise", "data"), "noise",
                                   "noise: N(0, init_std²) shaped like the model's input; data: "
                                   "samples of the split as the graph feeds them to the model"),
                      float_param("init_std", 1.0, "std of the starting noise", min=0),
                      int_param("count", 256, "number of chains", min=1),
                      choice_param("split", ("train", "val", "test"), "train",
                                   "the split that gives the starting samples (and their shape)")],
              binds="model", keywords=("langevin", "score", "energy", "mcmc", "sgld", "sampling",
                                       "generate")),
]
