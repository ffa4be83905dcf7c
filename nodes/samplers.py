"""Samplers: blocks that draw random values, for generative models and stochastic units.

Noise sources (Gaussian, uniform, the latent prior) have no required input: a source
cannot know the batch size by itself, so it follows the batch of an optional `like` wire
(and takes its per-sample shape, device and dtype) or, with nothing wired, uses its
`batch_size` param. The other samplers turn a distribution's parameters into a draw:
the VAE's reparameterisation, Bernoulli and categorical units (with the straight-through
gradient), Gumbel-softmax, the DDPM forward noising q(x_t | x_0) in closed form and one
Langevin step. Randomness comes from torch's generator, which the trainer seeds.

Stochastic units draw while training and, at evaluation, return their most probable value
(the mean μ, p > 0.5, the argmax) unless `sample_in_eval` asks them to keep sampling;
noise sources, DDPM noising and Langevin steps always sample (sampling is their job).
"""

from __future__ import annotations

import math
from typing import cast

import torch
import torch.nn.functional as F
from torch import nn

from nodegraph.kinds import footprint, shapes
from nodegraph.kinds.declare import op
from nodegraph.model.errors import ParamError, PortError
from nodegraph.model.spec import (
    Param,
    Params,
    Port,
    bool_param,
    choice_param,
    float_param,
    int_param,
)
from nodes._shapes import fmt, need_float, need_index, need_same_shape

# -- noise sources -------------------------------------------------------------------------


class NoiseSource(nn.Module):
    """Draws `draw(size)` for a batch shaped like `like`, or of `batch_size` samples."""

    anchor: torch.Tensor  # a buffer

    def __init__(self, draw, shape: list[int] | None, batch_size: int | None):
        super().__init__()
        self.draw, self.shape, self.batch_size = draw, shape, batch_size
        # an empty buffer moves with the graph, so a source without inputs knows its device
        self.register_buffer("anchor", torch.zeros(0), persistent=False)

    def forward(self, like: torch.Tensor | None = None) -> torch.Tensor:
        if like is None:
            size = (self.batch_size, *cast("list[int]", self.shape))  # checked: set when no like
            device, dtype = self.anchor.device, None
        else:
            shape = like.shape[1:] if self.shape is None else self.shape
            dtype = like.dtype if like.dtype.is_floating_point else None
            size, device = (like.shape[0], *shape), like.device
        return self.draw(size, device=device, dtype=dtype)


class SourceParams(Params):
    """What every noise source declares (each one's own view adds the rest)."""

    batch_size: int | None


def _source(draw_from_params):
    """A build for a noise source; `draw_from_params(p)` returns draw(size, device, dtype)."""
    def build(p: SourceParams, x):
        _source_check(p, x)
        return NoiseSource(draw_from_params(p), _shape(p), p.maybe(BATCH_SIZE))
    return build


def _source_check(p: SourceParams, x) -> None:
    if "like" not in x:
        if p.batch_size is None:
            raise PortError("like", "cannot tell how many samples to draw: nothing is "
                            "wired into 'like' and batch_size is empty",
                            "wire the data (or any tensor with the batch) into 'like', "
                            "or set batch_size", kind="missing_input")
        if _shape(p) is None:
            raise ParamError("without a 'like' wire, 'shape' must give the shape of one "
                             "sample")


def _source_shape(draw_from_params) -> shapes.Rule:
    """A noise source draws (batch, *shape) in torch's default dtype (without `like`, or
    with an integer one), then scales and shifts it: three tensors of the output's size.
    A floating `like` must be in the graph's dtype (the source's anchor buffer is cast to
    it), which a rule does not see: the meta path checks it."""
    def rule(p: SourceParams, x):
        _source_check(p, x)
        draw_from_params(p)  # its checks
        like, shape = x.get("like"), _shape(p)
        if like is not None and like.dtype.is_floating_point:
            return None
        # without like, _source_check made sure batch_size and shape are set
        size = (cast(int, p.batch_size), *cast("list[int]", shape)) if like is None else \
            (like.shape[0], *(like.shape[1:] if shape is None else shape))
        return shapes.like(shapes.TensorMeta(tuple(size), torch.get_default_dtype()), 3)
    return rule


def _shape(p: SourceParams) -> list[int] | None:
    return [p.typed(LATENT_DIM)] if "latent_dim" in p else p.maybe(SHAPE)


def _gaussian(mean: float, std: float):
    def draw(size, device, dtype):
        return mean + std * torch.randn(size, device=device, dtype=dtype)
    return draw


class GaussianNoiseParams(SourceParams):
    shape: list[int] | None
    mean: float
    std: float


def _gaussian_noise(p: GaussianNoiseParams):
    return _gaussian(p.mean, p.std)


class UniformNoiseParams(SourceParams):
    shape: list[int] | None
    low: float
    high: float


def _uniform(p: UniformNoiseParams):
    if p.high <= p.low:
        raise ParamError(f"'high' ({p.high}) must be above 'low' ({p.low})")

    def draw(size, device, dtype):
        return p.low + (p.high - p.low) * torch.rand(size, device=device, dtype=dtype)
    return draw


LIKE = Port("like", doc="any tensor whose batch (dim 0) the noise follows; also its "
            "per-sample shape when `shape` is empty", optional=True)
BATCH_SIZE = int_param("batch_size", None, "samples per draw when nothing is wired into "
                       "'like'; empty means follow 'like'", min=1, nullable=True)
LATENT_DIM = int_param("latent_dim", doc="size of one latent code", min=1)
SHAPE: Param[list[int]] = Param("shape", "ints", None,
                                "shape of one sample, without the batch dim; empty "
                                "means the shape of one sample of 'like'", nullable=True)

# -- stochastic units ------------------------------------------------------------------------


class Stochastic(nn.Module):
    """A unit that samples while training; at evaluation only if `sample_in_eval`."""

    def __init__(self, sample_in_eval: bool):
        super().__init__()
        self.sample_in_eval = sample_in_eval

    @property
    def sampling(self) -> bool:
        return self.training or self.sample_in_eval


class Reparameterize(Stochastic):
    """z = μ + exp(log σ² / 2)·ε with ε ~ N(0, I): a sample that gradients pass through."""

    def forward(self, mu: torch.Tensor, logvar: torch.Tensor) -> torch.Tensor:
        if not self.sampling:
            return mu
        std = torch.exp(0.5 * logvar)
        return mu + std * torch.randn_like(std)


def straight_through(sample: torch.Tensor, probs: torch.Tensor) -> torch.Tensor:
    """`sample` forward, the gradient of `probs` backward (Bengio et al. 2013)."""
    return sample + probs - probs.detach()


class Bernoulli(Stochastic):
    """0/1 draws with P(1) = p, from probabilities or logits."""

    def __init__(self, logits: bool, straight: bool, sample_in_eval: bool):
        super().__init__(sample_in_eval)
        self.logits, self.straight = logits, straight

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        p = torch.sigmoid(input) if self.logits else input
        if self.sampling:
            s = (torch.rand_like(p) < p).to(p.dtype)
        else:
            s = (p > 0.5).to(p.dtype)
        return straight_through(s, p) if self.straight else s


def gumbel(like: torch.Tensor) -> torch.Tensor:
    """Standard Gumbel noise shaped like `like`, drawn as torch's gumbel_softmax draws it."""
    return -torch.empty_like(like).exponential_().log()


class Categorical(Stochastic):
    """One class per row drawn from softmax(logits / temperature), as one-hot and index."""

    def __init__(self, temperature: float, straight: bool, sample_in_eval: bool):
        super().__init__(sample_in_eval)
        self.temperature, self.straight = temperature, straight

    def forward(self, input: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        scores = input / self.temperature
        # Gumbel-max: argmax(scores + Gumbel) is an exact draw, without a host sync
        index = (scores + gumbel(scores) if self.sampling else scores).argmax(-1)
        one_hot = F.one_hot(index, input.shape[-1]).to(input.dtype)
        if self.straight:
            one_hot = straight_through(one_hot, torch.softmax(scores, -1))
        return one_hot, index


class GumbelSoftmax(Stochastic):
    """softmax((logits + Gumbel) / τ): a differentiable relaxation of a categorical draw."""

    def __init__(self, tau: float, hard: bool, sample_in_eval: bool):
        super().__init__(sample_in_eval)
        self.tau, self.hard = tau, hard

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        if self.sampling:
            return F.gumbel_softmax(input, tau=self.tau, hard=self.hard, dim=-1)
        soft = torch.softmax(input / self.tau, -1)
        if not self.hard:
            return soft
        return straight_through(F.one_hot(soft.argmax(-1), input.shape[-1]).to(soft.dtype), soft)


def _logits_input(p, x):
    need_float(x, "input")
    if x["input"].ndim < 1 or x["input"].shape[-1] < 2:
        raise PortError("input", f"needs one score per class in the last dim, got "
                        f"{fmt(x['input'].shape)}", "feed a Linear with out_features = "
                        "number of classes")


class CategoricalParams(Params):
    temperature: float
    straight_through: bool
    sample_in_eval: bool


def _categorical(p: CategoricalParams, x):
    _logits_input(p, x)
    return Categorical(p.temperature, p.straight_through, p.sample_in_eval)


class GumbelSoftmaxParams(Params):
    tau: float
    hard: bool
    sample_in_eval: bool


def _gumbel_softmax(p: GumbelSoftmaxParams, x):
    _logits_input(p, x)
    return GumbelSoftmax(p.tau, p.hard, p.sample_in_eval)


class ReparameterizeParams(Params):
    sample_in_eval: bool


def _reparameterize(p: ReparameterizeParams, x):
    need_float(x, "mu")
    need_float(x, "logvar")
    need_same_shape(x, "mu", "logvar")
    return Reparameterize(p.sample_in_eval)


def _reparameterize_shape(p: ReparameterizeParams, x):
    """Training mode: ½·log σ², its exp, ε, σ·ε and the sum."""
    _reparameterize(p, x)
    return None if shapes.same_dtype(x) is None else shapes.like(x["mu"], 5)


class BernoulliParams(Params):
    input_kind: str
    straight_through: bool
    sample_in_eval: bool


def _bernoulli(p: BernoulliParams, x):
    need_float(x, "input")
    return Bernoulli(p.input_kind == "logits", p.straight_through, p.sample_in_eval)


SAMPLE_IN_EVAL = bool_param("sample_in_eval", False, "keep drawing at evaluation; off "
                            "returns the most probable value there, so val numbers repeat")
STRAIGHT = bool_param("straight_through", False, "backward passes the gradient of the "
                      "probabilities through the discrete draw (straight-through estimator); "
                      "off: the draw has no gradient")

# -- diffusion -----------------------------------------------------------------------------


def ddpm_betas(timesteps: int, schedule: str, beta_start: float = 1e-4,
               beta_end: float = 0.02, s: float = 0.008) -> torch.Tensor:
    """β_1..β_T in float64: linear (Ho et al. 2020) or cosine (Nichol & Dhariwal 2021).

    The cosine schedule sets ᾱ(t) = f(t)/f(0) with f(t) = cos²((t/T + s)/(1 + s)·π/2) and
    β_t = 1 − ᾱ(t)/ᾱ(t−1), capped at 0.999 as in the paper (the last steps would reach 1).
    """
    if schedule == "linear":
        return torch.linspace(beta_start, beta_end, timesteps, dtype=torch.float64,
                              device="cpu")
    steps = torch.arange(timesteps + 1, dtype=torch.float64, device="cpu") / timesteps
    f = torch.cos((steps + s) / (1 + s) * math.pi / 2) ** 2
    return (1 - f[1:] / f[:-1]).clamp(max=0.999)


class DDPMNoise(nn.Module):
    """x_t = √ᾱ_t·x_0 + √(1 − ᾱ_t)·ε: a draw from q(x_t | x_0) in one step.

    Index t = 0 is the first noising step (ᾱ_0 = 1 − β_1), t = T − 1 the last, the
    convention of the `diffusers` library. The schedule's tensors are buffers, so a
    reverse-sampling procedure can read `betas` and `alphas_cumprod` from the block.
    """

    betas: torch.Tensor  # buffers
    alphas_cumprod: torch.Tensor

    def __init__(self, betas: torch.Tensor):
        super().__init__()
        device = torch.get_default_device()  # meta while the graph is validated
        self.register_buffer("betas", betas.to(device, torch.float32), persistent=False)
        # on meta only the shape counts (meta's cumprod builds a T x T mask)
        abar = torch.empty_like(betas) if betas.is_meta else torch.cumprod(1 - betas, 0)
        self.register_buffer("alphas_cumprod", abar.to(device, torch.float32),
                             persistent=False)

    @property
    def timesteps(self) -> int:
        return self.betas.shape[0]

    def q_sample(self, x0: torch.Tensor, t: torch.Tensor, eps: torch.Tensor) -> torch.Tensor:
        abar = self.alphas_cumprod[t].reshape(-1, *[1] * (x0.ndim - 1)).to(x0.dtype)
        return abar.sqrt() * x0 + (1 - abar).sqrt() * eps

    def forward(self, x0: torch.Tensor, t: torch.Tensor | None = None):
        if t is None:
            t = torch.randint(0, self.timesteps, (x0.shape[0],), device=x0.device)
        else:
            t = t.reshape(-1).long()
        eps = torch.randn_like(x0)
        return self.q_sample(x0, t, eps), eps, t


class DDPMNoiseParams(Params):
    timesteps: int
    schedule: str
    beta_start: float
    beta_end: float
    s: float


def _ddpm(p: DDPMNoiseParams, x):
    need_float(x, "x0")
    if "t" in x:
        need_index(x, "t", "diffusion steps")
        n, t = x["x0"].shape[0], x["t"]
        if t.numel() != n:
            raise PortError("t", f"needs one step index per sample ({n}), got {fmt(t.shape)}",
                            "t is (N,) or (N, 1) integers in [0, timesteps)")
    if p.schedule == "linear" and p.beta_end <= p.beta_start:
        raise ParamError(f"beta_end ({p.beta_end}) must be above beta_start ({p.beta_start})")
    # float64 betas, steps and products, then two float32 buffers
    footprint.need(p.timesteps * 40, "timesteps", p.timesteps, "its noise schedule")
    if footprint.on_meta():  # validation: the schedule's shape, not its T values
        return DDPMNoise(torch.empty(p.timesteps, dtype=torch.float64))
    return DDPMNoise(ddpm_betas(p.timesteps, p.schedule, p.beta_start, p.beta_end, p.s))


class LangevinStep(nn.Module):
    """x + (ε/2)·∇log p(x) + √ε·noise_scale·z, z ~ N(0, I): one step of Langevin dynamics."""

    def __init__(self, step_size: float, noise_scale: float):
        super().__init__()
        self.step_size, self.noise_scale = step_size, noise_scale

    def forward(self, input: torch.Tensor, score: torch.Tensor) -> torch.Tensor:
        noise = torch.randn_like(input) * (math.sqrt(self.step_size) * self.noise_scale)
        return input + 0.5 * self.step_size * score + noise


class LangevinStepParams(Params):
    step_size: float
    noise_scale: float


def _langevin(p: LangevinStepParams, x):
    need_float(x, "input")
    need_float(x, "score")
    need_same_shape(x, "input", "score")
    return LangevinStep(p.step_size, p.noise_scale)


def _langevin_shape(p: LangevinStepParams, x):
    """The noise, scaled; the scaled score; the two sums."""
    _langevin(p, x)
    return None if shapes.same_dtype(x) is None else shapes.like(x["input"], 5)


# -- declarations --------------------------------------------------------------------------

BLOCKS = [
    op("samplers.GaussianNoise",
       "Gaussian noise N(mean, std²), one draw per sample of the batch.\n\n"
       "Wire any tensor into 'like' to follow its batch size (and, with `shape` empty, "
       "its per-sample shape): the generator's input z of a GAN, the noise of a "
       "denoising autoencoder. With nothing wired, it draws batch_size samples.",
       _source(_gaussian_noise), inputs=[LIKE], outputs=["output"],
       shape=_source_shape(_gaussian_noise),
       params=[SHAPE, float_param("mean", 0.0, "mean of every value"),
               float_param("std", 1.0, "standard deviation of every value", min=0),
               BATCH_SIZE],
       keywords=("random", "normal", "latent", "z", "noise")),
    op("samplers.UniformNoise",
       "Uniform noise U(low, high), one draw per sample of the batch.\n\n"
       "Batch and shape follow 'like' as for GaussianNoise, or come from the params.",
       _source(_uniform), inputs=[LIKE], outputs=["output"],
       shape=_source_shape(_uniform),
       params=[SHAPE, float_param("low", 0.0, "lower bound (included)"),
               float_param("high", 1.0, "upper bound (excluded)"), BATCH_SIZE],
       keywords=("random", "uniform", "noise")),
    op("samplers.PriorSample",
       "Latent codes z ~ N(0, I) of latent_dim values, one per sample of the batch.\n\n"
       "The prior p(z) of a VAE or the input noise of a GAN's generator: wire the data "
       "into 'like' so the batch of codes matches the batch of images.",
       _source(lambda p: _gaussian(0.0, 1.0)), inputs=[LIKE], outputs=["output"],
       shape=_source_shape(lambda p: _gaussian(0.0, 1.0)),
       params=[LATENT_DIM, BATCH_SIZE],
       keywords=("prior", "latent", "z", "vae", "gan", "generate")),
    op("samplers.Reparameterize",
       "z = μ + exp(log σ²/2)·ε with ε ~ N(0, I): the VAE's sampling step.\n\n"
       "Writing the draw as a function of μ and log σ² lets gradients reach the "
       "encoder (the reparameterisation trick). At evaluation it returns μ, unless "
       "sample_in_eval.",
       _reparameterize,
       inputs=[Port("mu", doc="means μ of q(z|x)"),
               Port("logvar", doc="log-variances log σ², shaped like mu")],
       outputs=[Port("z", doc="the latent sample")], params=[SAMPLE_IN_EVAL],
       shape=_reparameterize_shape,
       keywords=("vae", "reparameterization trick", "latent", "gaussian")),
    op("samplers.Bernoulli",
       "0/1 draws with P(1) = p, element by element.\n\n"
       "Stochastic binary units (an RBM's or a sigmoid belief net's). The draw itself "
       "has no gradient; straight_through passes the probabilities' gradient instead. "
       "At evaluation it returns 1 where p > 0.5, unless sample_in_eval.",
       _bernoulli, inputs=[Port("input", doc="probabilities p, or logits (input_kind)")],
       outputs=["output"],
       params=[choice_param("input_kind", ("probs", "logits"), "probs",
                            "probs: values in [0, 1]; logits: raw scores, sigmoid built in"),
               STRAIGHT, SAMPLE_IN_EVAL],
       keywords=("binary", "stochastic", "coin", "straight-through")),
    op("samplers.Categorical",
       "One class per row drawn from softmax(logits / temperature), one-hot and index."
       "\n\nSamples the last dim (drawn by the Gumbel-max trick, exact). Temperature "
       "below 1 sharpens the distribution, above 1 flattens it. At evaluation it "
       "returns the argmax, unless sample_in_eval.",
       _categorical, inputs=[Port("input", doc="class scores (logits), classes last")],
       outputs=[Port("output", doc="the draw as a one-hot row"),
                Port("index", doc="the drawn class index (integer)")],
       params=[float_param("temperature", 1.0, "divides the logits before the softmax",
                           min=1e-6),
               STRAIGHT, SAMPLE_IN_EVAL],
       keywords=("multinomial", "softmax", "sample", "discrete", "temperature")),
    op("samplers.GumbelSoftmax",
       "softmax((logits + g)/τ) with Gumbel noise g: a differentiable categorical draw."
       "\n\nAs τ → 0 it approaches a one-hot draw; `hard` gives the one-hot forward and "
       "the soft gradient backward (torch's gumbel_softmax). At evaluation, without "
       "sample_in_eval, it drops the noise: softmax(logits/τ), or its argmax when hard.",
       _gumbel_softmax, inputs=[Port("input", doc="class scores (logits), classes last")],
       outputs=["output"],
       params=[float_param("tau", 1.0, "temperature τ of the relaxation", min=1e-6),
               bool_param("hard", False, "one-hot forward, soft gradient backward"),
               SAMPLE_IN_EVAL],
       keywords=("concrete", "relaxation", "discrete", "categorical")),
    op("samplers.DDPMNoise",
       "DDPM forward noising: x_t = √ᾱ_t·x_0 + √(1 − ᾱ_t)·ε, a draw from q(x_t | x_0)."
       "\n\nᾱ_t = Π(1 − β_s) over the schedule's first t + 1 steps, so x_t is reached "
       "in one step instead of t. Outputs x_t, the noise ε (the target of an ε-"
       "predicting network) and t; with 't' unwired, t is drawn uniformly in [0, "
       "timesteps) per sample. Linear: β from beta_start to beta_end (Ho et al.); "
       "cosine: Nichol & Dhariwal's schedule with offset s.",
       _ddpm,
       inputs=[Port("x0", doc="clean data x_0"),
               Port("t", doc="step index per sample, integers in [0, timesteps)",
                    optional=True)],
       outputs=[Port("x_t", doc="the noised data"), Port("eps", doc="the noise ε drawn"),
                Port("t", doc="the step index used, (N,) integers")],
       params=[int_param("timesteps", 1000, "number of diffusion steps T", min=1),
               choice_param("schedule", ("linear", "cosine"), "linear",
                            "how β_t grows over the steps"),
               float_param("beta_start", 1e-4, "β_1 of the linear schedule", min=0, max=1),
               float_param("beta_end", 0.02, "β_T of the linear schedule", min=0, max=1),
               float_param("s", 0.008, "offset of the cosine schedule (keeps β_1 from "
                           "being tiny)", min=0)],
       keywords=("diffusion", "ddpm", "noise schedule", "forward process")),
    op("samplers.LangevinStep",
       "One Langevin step x + (ε/2)·∇log p(x) + √ε·z with z ~ N(0, I).\n\n"
       "Repeated, it samples from p given only its score ∇log p (from a score network, "
       "or minus an energy's gradient); noise_scale 0 makes it gradient ascent on "
       "log p. The step's bias shrinks with ε.",
       _langevin,
       inputs=[Port("input", doc="the current samples x"),
               Port("score", doc="∇ₓ log p(x) at x, shaped like x")],
       outputs=["output"],
       params=[float_param("step_size", 0.01, "step ε", min=0),
               float_param("noise_scale", 1.0, "multiplies the noise; 0 for none", min=0)],
       keywords=("score", "mcmc", "sampling", "energy", "sgld"),
       shape=_langevin_shape),
]
