"""Procedures of generative models: drawing samples from a trained generator.

A trained VAE decoder or GAN generator makes data from latent codes; a trained DDPM
denoiser makes data by running the reverse chain from pure noise. None of these is a
forward pass of the training graph, so each is a procedure block (see
nodegraph/runtime/procedure.py) that loops around the trained node or group instance named by
its `model` param and yields frames the editor can show one after the other:

- `procedures.SamplePrior`: decode codes z ~ N(0, I), one sample per frame;
- `procedures.Interpolate`: decode (1 − α)·z_a + α·z_b between the codes of two samples;
- `procedures.DDPMSample`: the reverse diffusion chain x_T → x_0 with the schedule of a
  trained `samplers.DDPMNoise` block.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import torch

from nodegraph.kinds.declare import procedure
from nodegraph.kinds.procedure_context import Procedure, ProcedureContext
from nodegraph.model.errors import NodegraphError
from nodegraph.model.spec import (
    Param,
    Params,
    choice_param,
    int_param,
    node_param,
    str_param,
)

MODEL_DOC = "the decoder or generator (a node or group instance) that maps codes to data"
SHAPE: Param[list[int]] = Param("image_shape", "ints", [],
                                "shape each sample is given in the frames (e.g. "
                                "[8, 8] for the 8x8 digits); empty: the model's output shape")


def only_port(ports: list[str], what: str, node: str) -> str:
    """The single input or output port of a model the procedure calls."""
    if len(ports) != 1:
        raise NodegraphError(f"'{node}' has {what}s {ports}; the procedure needs a model "
                             f"with exactly one {what}")
    return ports[0]


def as_image(x: torch.Tensor, shape: list[int]) -> list:
    """One sample as nested lists, reshaped for display when `shape` is given."""
    return (x.reshape(shape) if shape else x).tolist()


def input_width(ctx: ProcedureContext, node: str, port: str) -> int:
    """The feature count of what the training graph wires into `node.port`."""
    c = ctx.compiled
    for e in c.graph.edges:
        if e.target == (node, port):
            meta = c.report.outputs.get(e.source)
            if meta is not None:
                return int(meta.shape[-1])
    raise NodegraphError(f"cannot tell the code size of '{node}' from the graph: set "
                         "latent_dim")


class SamplePriorParams(Params):
    model: str
    count: int
    latent_dim: int | None
    image_shape: list[int]


class SamplePrior(Procedure):
    """Decode codes drawn from the prior N(0, I)."""

    def __init__(self, p: SamplePriorParams):
        self.p = p

    def run(self, ctx: ProcedureContext) -> Iterator[dict[str, Any]]:
        p = self.p
        decode = ctx.model()  # the bound model (`model`)
        port = only_port(decode.inputs, "input", p.model)
        out = decode.outputs[0]
        dim = p.latent_dim or input_width(ctx, p.model, port)
        z = torch.randn(p.count, dim, generator=ctx.generator).to(ctx.device)
        samples = decode(**{port: z})[out]
        for i in range(p.count):
            yield {"index": i, "z": z[i].tolist(), "image": as_image(samples[i], p.typed(SHAPE))}


class InterpolateParams(Params):
    model: str
    encoder: str
    code: str
    split: str
    index_a: int
    index_b: int
    steps: int
    image_shape: list[int]


class Interpolate(Procedure):
    """Decode points on the straight line between the codes of two samples."""

    def __init__(self, p: InterpolateParams):
        self.p = p

    def run(self, ctx: ProcedureContext) -> Iterator[dict[str, Any]]:
        p = self.p
        encode, decode = ctx.model(p.encoder), ctx.model()
        if p.code not in encode.outputs:
            raise NodegraphError(f"'{p.encoder}' has no output '{p.code}' (outputs: "
                                 f"{', '.join(encode.outputs)})")
        data = ctx.split(p.split)["x"]
        for index in (p.index_a, p.index_b):
            if not 0 <= index < len(data):
                raise NodegraphError(f"sample {index} is outside the {p.split} split "
                                     f"({len(data)} samples)")
        pair = data[[p.index_a, p.index_b]].to(ctx.device)
        codes = encode(**{only_port(encode.inputs, "input", p.encoder): pair})[p.code]
        alphas = torch.linspace(0.0, 1.0, p.steps, device=codes.device)
        line = (1 - alphas[:, None]) * codes[0] + alphas[:, None] * codes[1]
        port = only_port(decode.inputs, "input", p.model)
        frames = decode(**{port: line})[decode.outputs[0]]
        for alpha, z, image in zip(alphas.tolist(), line, frames, strict=True):
            yield {"alpha": alpha, "z": z.tolist(), "image": as_image(image, p.typed(SHAPE))}


class DDPMSampleParams(Params):
    model: str
    noise: str
    step_input: str
    count: int
    every: int
    variance: str


class DDPMSample(Procedure):
    """Ancestral sampling x_T → x_0 (Ho et al. 2020, Algorithm 2).

    x_T ~ N(0, I); for t = T..1: x_{t−1} = (x_t − β_t/√(1 − ᾱ_t)·ε_θ(x_t, t))/√α_t + σ_t z,
    z ~ N(0, I) except at the last step, with σ_t² = β_t or the posterior variance
    β̃_t = β_t(1 − ᾱ_{t−1})/(1 − ᾱ_t). Steps are indexed 0..T−1 as in DDPMNoise.
    """

    def __init__(self, p: DDPMSampleParams):
        self.p = p

    def schedule(self, ctx: ProcedureContext):
        noise = ctx.compiled.module.module_of(self.p.noise)
        if noise is None or not hasattr(noise, "alphas_cumprod"):
            raise NodegraphError(f"'{self.p.noise}' is not a samplers.DDPMNoise block; name "
                                 "the block whose schedule the model was trained with")
        return noise.betas.double().cpu(), noise.alphas_cumprod.double().cpu()

    def run(self, ctx: ProcedureContext) -> Iterator[dict[str, Any]]:
        p = self.p
        betas, abar = self.schedule(ctx)
        denoise = ctx.model()  # the bound model (`model`)
        x_port, t_port = self.ports(denoise)
        dim = input_width(ctx, p.model, x_port)
        x = torch.randn(p.count, dim, generator=ctx.generator, dtype=torch.float64)
        steps = len(betas)
        yield {"t": steps, "x": x.tolist()}
        for t in range(steps - 1, -1, -1):
            t_batch = torch.full((p.count,), t, dtype=torch.long, device=ctx.device)
            out = denoise(**{x_port: x.float().to(ctx.device), t_port: t_batch})
            eps = out[denoise.outputs[0]].double().cpu()
            x = (x - betas[t] / (1 - abar[t]).sqrt() * eps) / (1 - betas[t]).sqrt()
            if t > 0:
                var = betas[t] if p.variance == "beta" else (
                    betas[t] * (1 - abar[t - 1]) / (1 - abar[t]))
                x = x + var.sqrt() * torch.randn(x.shape, generator=ctx.generator,
                                                 dtype=torch.float64)
            if t % p.every == 0:
                yield {"t": t, "x": x.tolist()}

    def ports(self, denoise) -> tuple[str, str]:
        """The model's (x_t, t) inputs: the port named like the step is t."""
        if len(denoise.inputs) != 2:
            raise NodegraphError(f"'{self.p.model}' must take two inputs, the noisy sample "
                                 f"and the step t; it has {denoise.inputs}")
        steps = [port for port in denoise.inputs if port == self.p.step_input]
        if not steps:
            raise NodegraphError(f"'{self.p.model}' has no input '{self.p.step_input}' for "
                                 f"the step (inputs: {', '.join(denoise.inputs)})")
        (x_port,) = [port for port in denoise.inputs if port != steps[0]]
        return x_port, steps[0]


MODEL = node_param("model", doc=MODEL_DOC, of=("op", "group"))
COUNT = int_param("count", 16, "how many samples to draw", min=1)

BLOCKS = [
    procedure("procedures.SamplePrior",
              "Generate data by decoding codes drawn from the prior z ~ N(0, I).\n\n"
              "What a trained VAE decoder (or GAN generator) makes of random codes: one frame "
              "per sample, holding its code and the decoded sample. A VAE whose KL term did "
              "its job decodes most codes into plausible data; an autoencoder without it does "
              "not.",
              SamplePrior,
              params=[MODEL, COUNT, int_param("latent_dim", None, "code size; empty: the width "
                                              "of what the graph wires into the model",
                                              min=1, nullable=True), SHAPE],
              binds="model", keywords=("VAE", "generate", "decoder", "prior", "latent")),
    procedure("procedures.Interpolate",
              "Decode (1 − α)·z_a + α·z_b for α from 0 to 1 between the codes of two samples.\n\n"
              "Encodes samples `index_a` and `index_b` of a split and walks the straight line "
              "between their codes, one frame per α. A smooth path of plausible data says the "
              "latent space is organised (the notes' VAE digits morph into each other).",
              Interpolate,
              params=[MODEL, node_param("encoder", doc="the encoder (node or group instance) "
                                        "that gives each sample its code", of=("op", "group")),
                      str_param("code", "mu", "the encoder output used as the code (a VAE's "
                                "mean μ)"),
                      choice_param("split", ("train", "val", "test"), "test",
                                   "the split the two samples come from"),
                      int_param("index_a", 0, "index of the first sample", min=0),
                      int_param("index_b", 1, "index of the second sample", min=0),
                      int_param("steps", 9, "frames from α = 0 to α = 1", min=2), SHAPE],
              binds="model", keywords=("VAE", "latent", "interpolation", "morph")),
    procedure("procedures.DDPMSample",
              "Sample a trained diffusion model: the reverse chain x_T → x_0 from pure noise.\n\n"
              "Starts from x_T ~ N(0, I) and removes the predicted noise ε_θ(x_t, t) one step "
              "at a time with the schedule of the `noise` block (Ho et al. 2020, Algorithm 2); "
              "a frame every `every` steps shows the samples condensing onto the data.",
              DDPMSample,
              params=[node_param("model", doc="the denoiser (node or group instance) taking the "
                                 "noisy sample and the step, giving the predicted noise ε",
                                 of=("op", "group")),
                      node_param("noise", "noise", "the samplers.DDPMNoise block whose schedule "
                                 "the model was trained with", of=("op",)),
                      str_param("step_input", "t", "the denoiser's input port for the step t"),
                      COUNT, int_param("every", 10, "yield a frame every this many steps",
                                       min=1),
                      choice_param("variance", ("beta", "posterior"), "beta",
                                   "σ_t² of each reverse step: β_t, or the posterior "
                                   "β̃_t = β_t(1 − ᾱ_{t−1})/(1 − ᾱ_t)")],
              binds="model", keywords=("diffusion", "DDPM", "reverse process", "denoising")),
]
