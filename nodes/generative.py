"""Generative models' pieces: VAE, GAN and diffusion objectives, time embeddings, flows.

The losses here are the objectives of generative models as one block each: the VAE's
negative ELBO (with its two parts as extra outputs to watch), the GAN's discriminator and
generator losses, DDPM's ε-prediction error and a normalising flow's negative
log-likelihood. `TimestepEmbedding` turns a diffusion step into a vector a network can
condition on; `AffineCoupling` is one RealNVP layer with its exact inverse and
log-determinant. The samplers they pair with (Reparameterize, PriorSample, DDPMNoise) are
in `nodes.samplers`.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from nodegraph.kinds import shapes
from nodegraph.kinds.declare import op
from nodegraph.kinds.dtypes import DTYPE_PARAM
from nodegraph.model.errors import ParamError, PortError
from nodegraph.model.spec import (
    LOSS_OUT,
    Params,
    Port,
    bool_param,
    choice_param,
    float_param,
    int_param,
)
from nodes._shapes import fmt, need_float, need_ndim, need_same_shape
from nodes.losses import BATCH_REDUCTION, REDUCTION


def per_sample(values: torch.Tensor) -> torch.Tensor:
    """Sum over every dim but the batch: one number per sample."""
    return values.reshape(values.shape[0], -1).sum(1)


def reduce(values: torch.Tensor, reduction: str) -> torch.Tensor:
    """Per-sample values averaged over the batch, or summed."""
    return values.sum() if reduction == "sum" else values.mean()


# -- VAE -----------------------------------------------------------------------------------


def gaussian_kl(mu: torch.Tensor, logvar: torch.Tensor) -> torch.Tensor:
    """KL(N(μ, σ²) ‖ N(0, I)) per sample, in closed form: ½Σ(σ² + μ² − 1 − log σ²)."""
    return per_sample(0.5 * (torch.exp(logvar) + mu**2 - 1.0 - logvar))


RECONSTRUCTIONS = {
    "bce": lambda r, x: F.binary_cross_entropy(r, x, reduction="none"),
    "bce_logits": lambda r, x: F.binary_cross_entropy_with_logits(r, x, reduction="none"),
    "mse": lambda r, x: (r - x) ** 2,
}


class ELBO(nn.Module):
    """−ELBO = reconstruction NLL + β·KL(q(z|x) ‖ N(0, I)), both summed per sample."""

    def __init__(self, reconstruction: str, beta: float, reduction: str):
        super().__init__()
        self.nll = RECONSTRUCTIONS[reconstruction]
        self.beta, self.reduction = beta, reduction

    def forward(self, recon, target, mu, logvar):
        rec = reduce(per_sample(self.nll(recon, target)), self.reduction)
        kl = reduce(gaussian_kl(mu, logvar), self.reduction)
        return rec + self.beta * kl, rec, kl


class ELBOParams(Params):
    reconstruction: str
    beta: float
    reduction: str


def _elbo(p: ELBOParams, x):
    for port in ("recon", "target", "mu", "logvar"):
        need_float(x, port)
    need_same_shape(x, "recon", "target")
    need_same_shape(x, "mu", "logvar")
    if x["recon"].shape[0] != x["mu"].shape[0]:
        raise PortError("mu", f"has {fmt(x['mu'].shape)} codes for {fmt(x['recon'].shape)} "
                        "reconstructions; one code per sample", "wire the encoder of the "
                        "same batch")
    return ELBO(p.reconstruction, p.beta, "sum" if p.reduction == "sum" else "mean")


def _elbo_shape(p: ELBOParams, x):
    """The reconstruction NLL per element (bce: one kernel; mse: the difference and its
    square), summed per sample and reduced; the KL's six element-wise steps, summed per
    sample and reduced; β·KL and the total: three scalars out."""
    _elbo(p, x)  # its checks; the module holds no tensors
    dtype = shapes.same_dtype(x)
    if dtype is None:
        return None  # mixed dtypes promote: the meta path tells
    recon, mu = x["recon"], x["mu"]
    n = recon.shape[0]
    made = recon.nbytes * (2 if p.reconstruction == "mse" else 1) + 6 * mu.nbytes \
        + (2 * n + 4) * dtype.itemsize
    return shapes.Inferred(tuple(((), dtype) for _ in range(3)), work=made)


# -- GAN -----------------------------------------------------------------------------------


class DiscriminatorLoss(nn.Module):
    """−E log D(x) − E log(1 − D(G(z))), from the discriminator's logits."""

    def __init__(self, real_label: float):
        super().__init__()
        self.real_label = real_label

    def forward(self, real_logits, fake_logits):
        real = F.binary_cross_entropy_with_logits(
            real_logits, torch.full_like(real_logits, self.real_label))
        fake = F.binary_cross_entropy_with_logits(fake_logits, torch.zeros_like(fake_logits))
        return real + fake


class GeneratorLoss(nn.Module):
    """−E log D(G(z)) (non-saturating) or E log(1 − D(G(z))) (minimax), from D's logits."""

    def __init__(self, form: str):
        super().__init__()
        self.form = form

    def forward(self, fake_logits):
        if self.form == "minimax":  # log(1 − σ(l)) = −softplus(l), stable for any l
            return -F.softplus(fake_logits).mean()
        return F.softplus(-fake_logits).mean()  # −log σ(l) = softplus(−l)


def need_one_per_sample(x: dict, port: str, what: str, hint: str, n: int | None = None) -> None:
    """`port` holds one value per sample: (N,) or (N, 1), with N = `n` when given."""
    shape = x[port].shape
    if len(shape) == 0 or math.prod(shape) != shape[0] or n not in (None, shape[0]):
        count = "" if n is None else f" ({n})"
        raise PortError(port, f"needs one {what} per sample{count}, (N,) or (N, 1), got "
                        f"{fmt(shape)}", hint)


def _need_logits(x: dict, *ports: str) -> None:
    for port in ports:
        need_float(x, port)
        need_one_per_sample(x, port, "logit", "end the discriminator with a Linear of "
                            "out_features 1 and no sigmoid")


class GANDiscriminatorLossParams(Params):
    real_label: float


def _discriminator_loss(p: GANDiscriminatorLossParams, x):
    _need_logits(x, "real_logits", "fake_logits")
    return DiscriminatorLoss(p.real_label)


class GANGeneratorLossParams(Params):
    form: str


def _generator_loss(p: GANGeneratorLossParams, x):
    _need_logits(x, "fake_logits")
    return GeneratorLoss(p.form)


def _discriminator_loss_shape(p: GANDiscriminatorLossParams, x):
    """The targets (full, zeros) like each logits, a BCE scalar for each and their sum."""
    _discriminator_loss(p, x)
    dtype = shapes.same_dtype(x)
    if dtype is None:
        return None
    made = x["real_logits"].nbytes + x["fake_logits"].nbytes + 3 * dtype.itemsize
    return shapes.Inferred((((), dtype),), work=made)


def _generator_loss_shape(p: GANGeneratorLossParams, x):
    """Non-saturating: −l, its softplus, the mean; minimax: the softplus, the mean, −."""
    _generator_loss(p, x)
    t = x["fake_logits"]
    s = t.dtype.itemsize
    made = 2 * t.nbytes + s if p.form == "non_saturating" else t.nbytes + 2 * s
    return shapes.Inferred((((), t.dtype),), work=made)


# -- diffusion -------------------------------------------------------------------------------


class EpsLoss(nn.Module):
    def __init__(self, reduction: str):
        super().__init__()
        self.reduction = reduction

    def forward(self, eps_pred, eps):
        return F.mse_loss(eps_pred, eps, reduction=self.reduction)


class DiffusionEpsLossParams(Params):
    reduction: str


def _eps_loss(p: DiffusionEpsLossParams, x):
    need_float(x, "eps_pred")
    need_float(x, "eps")
    need_same_shape(x, "eps_pred", "eps")
    return EpsLoss(p.reduction)


def _eps_loss_shape(p: DiffusionEpsLossParams, x):
    _eps_loss(p, x)
    dtype = shapes.same_dtype(x)  # torch's fused MSE makes only the reduced scalar
    return None if dtype is None else shapes.Inferred((((), dtype),), work=dtype.itemsize)


def sinusoidal(t: torch.Tensor, dim: int, max_period: float,
               dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """[sin ω₀t, cos ω₀t, sin ω₁t, cos ω₁t, ...] with ω_k = max_period^(−2k/dim)."""
    k = torch.arange(dim // 2, device=t.device, dtype=dtype)
    omega = max_period ** (-2.0 * k / dim)
    angles = t.reshape(-1, 1).to(dtype) * omega
    return torch.stack([angles.sin(), angles.cos()], -1).flatten(1)


class TimestepEmbedding(nn.Module):
    """A sinusoidal embedding of the step t, optionally followed by Linear–SiLU–Linear."""

    dtype_of: torch.Tensor  # a buffer

    def __init__(self, dim: int, max_period: float, mlp_features: int | None):
        super().__init__()
        self.dim, self.max_period = dim, max_period
        # carries the block's dtype (a graph in float64 or bfloat16 casts it): the embedding
        # is made in it, so the layers after it get what they hold their weights in
        self.register_buffer("dtype_of", torch.zeros(()), persistent=False)
        self.mlp = None if mlp_features is None else nn.Sequential(
            nn.Linear(dim, mlp_features), nn.SiLU(), nn.Linear(mlp_features, mlp_features))

    def forward(self, t: torch.Tensor) -> torch.Tensor:
        dtype = self.dtype_of.dtype
        if dtype == torch.float64:
            emb = sinusoidal(t.double(), self.dim, self.max_period, torch.float64)
        else:  # float32, and bfloat16 from float32's angles (t up to thousands)
            emb = sinusoidal(t, self.dim, self.max_period).to(dtype)
        return emb if self.mlp is None else self.mlp(emb)


def _timestep_check(p: TimestepEmbeddingParams, x) -> None:
    need_one_per_sample(x, "input", "step", "wire DDPMNoise's t output")
    if p.embedding_dim % 2:
        raise ParamError(f"'embedding_dim' must be even (sine and cosine pairs), got "
                         f"{p.embedding_dim}")


class TimestepEmbeddingParams(Params):
    embedding_dim: int
    max_period: float
    mlp_features: int | None
    dtype: str


def _timestep_embedding(p: TimestepEmbeddingParams, x):
    _timestep_check(p, x)
    return TimestepEmbedding(p.embedding_dim, p.max_period, p.mlp_features)


def _timestep_shape(p: TimestepEmbeddingParams, x):
    """`sinusoidal` in float64 (a float64 block) or float32: the steps cast to it, four
    tensors of frequencies, the angles, sines, cosines and the stacked code, cast to the
    block's dtype (bfloat16); then the MLP's Linear, SiLU and Linear."""
    _timestep_check(p, x)
    t, dtype, d = x["input"], shapes.layer_dtype(p), p.embedding_dim
    if t.dtype.is_floating_point and t.dtype != dtype:
        return None  # mixed dtypes: the meta path refuses them
    n, half = t.numel(), d // 2
    code = torch.float64 if dtype == torch.float64 else torch.float32
    made = (n * (t.dtype != code) + 4 * half + 3 * n * half + n * d) * code.itemsize
    if dtype != code:
        made += n * d * dtype.itemsize
    out, weights = (n, d), 0
    if p.mlp_features is not None:
        m = p.mlp_features
        out, weights = (n, m), d * m + m + m * m + m
        made += 3 * n * m * dtype.itemsize
    return shapes.Inferred(((out, dtype),), weights, weights * dtype.itemsize,
                           dtype.itemsize, made)


# -- normalising flows ---------------------------------------------------------------------


def coupling_mask(features: int, pattern: str, flip: bool) -> torch.Tensor:
    """1 marks the features that pass through unchanged and condition the others."""
    index = torch.arange(features)  # on meta while the graph is validated
    mask = (index % 2 == 0) if pattern == "alternate" else (index < (features + 1) // 2)
    return (mask != flip).float()


def _mlp(features: int, hidden: int) -> nn.Sequential:
    return nn.Sequential(nn.Linear(features, hidden), nn.ReLU(), nn.Linear(hidden, hidden),
                         nn.ReLU(), nn.Linear(hidden, features))


class AffineCoupling(nn.Module):
    """RealNVP coupling: y = m⊙x + (1−m)⊙(x⊙exp(s(m⊙x)) + t(m⊙x)), log|det J| = Σ(1−m)⊙s.

    The masked half passes through and conditions the scale s and shift t of the other,
    so the Jacobian is triangular and the inverse needs no inverse of s or t.
    """

    mask: torch.Tensor  # a buffer

    def __init__(self, features: int, hidden: int, mask: torch.Tensor, tanh_scale: bool):
        super().__init__()
        self.register_buffer("mask", mask.to(torch.get_default_device()), persistent=False)
        self.scale_net, self.shift_net = _mlp(features, hidden), _mlp(features, hidden)
        self.tanh_scale = tanh_scale

    def scale_shift(self, kept: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        s = self.scale_net(kept)
        if self.tanh_scale:  # bounded scales keep exp(s) from overflowing early in training
            s = torch.tanh(s)
        free = 1 - self.mask
        return s * free, self.shift_net(kept) * free

    def forward(self, input: torch.Tensor, log_det: torch.Tensor | None = None):
        kept = input * self.mask
        s, t = self.scale_shift(kept)
        y = kept + (1 - self.mask) * input * torch.exp(s) + t
        total = s.sum(1) if log_det is None else log_det.reshape(-1) + s.sum(1)
        return y, total

    def inverse(self, y: torch.Tensor) -> torch.Tensor:
        kept = y * self.mask
        s, t = self.scale_shift(kept)
        return kept + (1 - self.mask) * (y - t) * torch.exp(-s)


def _log_det_input(x: dict, n: int, port: str = "log_det") -> None:
    if port in x:
        need_float(x, port)
        need_one_per_sample(x, port, "log-determinant", "wire the log_det output of the "
                            "flow layer before", n)


def _coupling_input(p, x):
    t = need_ndim(x, "input", (2,), "(N, features)",
                  "insert layers.Flatten before it: the coupling works on flat vectors")
    need_float(x, "input")
    if t.shape[1] < 2:
        raise PortError("input", f"needs at least 2 features to split, got {fmt(t.shape)}")
    _log_det_input(x, t.shape[0])
    return t


class AffineCouplingParams(Params):
    mask: str
    flip: bool
    hidden_features: int
    tanh_scale: bool
    dtype: str


def _coupling_shape(p: AffineCouplingParams, x):
    """The masked input, each MLP's three Linears and two ReLUs, tanh of the scale, 1 − m
    (twice), the masked scale and shift, and y's product, exp, product and two sums; the
    log-determinant summed per sample (plus the incoming one)."""
    t, dtype = _coupling_input(p, x), shapes.layer_dtype(p)
    if any(v.dtype != dtype for v in x.values()):
        return None  # mixed dtypes: the meta path refuses them
    (n, f), h = t.shape, p.hidden_features
    elements = (10 + p.tanh_scale) * n * f + 8 * n * h + 2 * f + n * (1 + ("log_det" in x))
    weights = 2 * (2 * f * h + h * h + 2 * h + f)
    return shapes.Inferred((((n, f), dtype), ((n,), dtype)), weights, weights * dtype.itemsize,
                           f * dtype.itemsize, elements * dtype.itemsize)


def _coupling(p: AffineCouplingParams, x):
    t = _coupling_input(p, x)
    return AffineCoupling(t.shape[1], p.hidden_features,
                          coupling_mask(t.shape[1], p.mask, p.flip), p.tanh_scale)


class FlowNLL(nn.Module):
    """−log p(x) = ½‖z‖² + (D/2)·log 2π − log|det ∂z/∂x| under a standard normal base."""

    def __init__(self, reduction: str):
        super().__init__()
        self.reduction = reduction

    def forward(self, z, log_det):
        dims = z[0].numel()
        nll = 0.5 * per_sample(z**2) + 0.5 * dims * math.log(2 * math.pi) - log_det.reshape(-1)
        return reduce(nll, self.reduction)


class FlowNLLParams(Params):
    reduction: str


def _flow_nll(p: FlowNLLParams, x):
    need_float(x, "z")
    _log_det_input(x, x["z"].shape[0])
    return FlowNLL(p.reduction)


def _flow_nll_shape(p: FlowNLLParams, x):
    """z², summed per sample, halved, plus the constant, minus log|det|, reduced."""
    _flow_nll(p, x)
    dtype = shapes.same_dtype(x)
    if dtype is None or "log_det" not in x:
        return None  # mixed dtypes promote; without log_det the forward fails
    z = x["z"]
    return shapes.Inferred((((), dtype),), work=z.nbytes + (4 * z.shape[0] + 1) * dtype.itemsize)


# -- declarations --------------------------------------------------------------------------

SCALAR = "a scalar for reporting (wire it to a viewer); the loss output is what trains"

BLOCKS = [
    op("generative.ELBO",
       "The VAE's loss −ELBO = reconstruction NLL + β·KL(q(z|x) ‖ N(0, I)).\n\n"
       "Both terms are summed over each sample's dims, then averaged over the batch "
       "(reduction batchmean) or summed. reconstruction: bce for decoder probabilities "
       "(a Bernoulli decoder, after a Sigmoid), bce_logits for raw decoder scores, mse "
       "for a Gaussian decoder (the squared error, the NLL up to scale and a constant). "
       "β > 1 is the β-VAE. The two terms are also outputs, to watch them trade off.",
       _elbo, shape=_elbo_shape,
       inputs=[Port("recon", doc="the decoder's output x̂"),
               Port("target", doc="the input x it reconstructs"),
               Port("mu", doc="encoder means μ"),
               Port("logvar", doc="encoder log-variances log σ², shaped like mu")],
       outputs=[LOSS_OUT, Port("nll", doc="the reconstruction term: " + SCALAR),
                Port("kl", doc="the KL term (before β): " + SCALAR)],
       params=[choice_param("reconstruction", tuple(RECONSTRUCTIONS), "bce",
                            "the decoder's likelihood: bce (probabilities), bce_logits, "
                            "mse"),
               float_param("beta", 1.0, "weight of the KL term", min=0),
               BATCH_REDUCTION],
       keywords=("vae", "variational", "kl", "evidence lower bound", "beta-vae")),
    op("generative.GANDiscriminatorLoss",
       "The discriminator's loss −E log D(x) − E log(1 − D(G(z))), from logits.\n\n"
       "Minimising it maximises the minimax value V(D, G) over D. Feed D's logits on "
       "real data and on generated data (through layers.StopGradient, so this loss does "
       "not reach G). real_label below 1 is one-sided label smoothing.",
       _discriminator_loss, shape=_discriminator_loss_shape,
       inputs=[Port("real_logits", doc="D's logits on real samples"),
               Port("fake_logits", doc="D's logits on generated samples")],
       outputs=[LOSS_OUT],
       params=[float_param("real_label", 1.0, "target for real samples; 0.9 is one-sided "
                           "label smoothing", min=0, max=1)],
       keywords=("gan", "adversarial", "discriminator", "minimax")),
    op("generative.GANGeneratorLoss",
       "The generator's loss from D's logits on generated samples.\n\n"
       "non_saturating: −E log D(G(z)), the usual choice: strong gradients while D "
       "rejects the fakes. minimax: E log(1 − D(G(z))), the game's own value, whose "
       "gradient vanishes exactly then (Goodfellow et al. 2014). Give its optimizer "
       "the generator's nodes as scope.",
       _generator_loss, inputs=[Port("fake_logits", doc="D's logits on generated samples")],
       shape=_generator_loss_shape,
       outputs=[LOSS_OUT],
       params=[choice_param("form", ("non_saturating", "minimax"), "non_saturating",
                            "which generator objective")],
       keywords=("gan", "adversarial", "generator", "non-saturating")),
    op("generative.DiffusionEpsLoss",
       "DDPM's simple loss ‖ε − ε_θ(x_t, t)‖²: the error of the predicted noise.\n\n"
       "Wire DDPMNoise's eps as the target and the network's prediction from x_t "
       "(and t) as eps_pred; averaged over every element (Ho et al.'s L_simple).",
       _eps_loss, shape=_eps_loss_shape,
       inputs=[Port("eps_pred", doc="the network's noise prediction"),
               Port("eps", doc="the noise that was added")],
       outputs=[LOSS_OUT], params=[REDUCTION],
       keywords=("diffusion", "ddpm", "denoising", "noise prediction")),
    op("generative.TimestepEmbedding",
       "Sinusoidal embedding of a step t: [sin ω₀t, cos ω₀t, ...], ω_k = P^(−2k/d).\n\n"
       "The transformer's positional encoding applied to diffusion steps, so a network "
       "can condition on t; mlp_features adds Linear–SiLU–Linear after it, as in DDPM.",
       _timestep_embedding, shape=_timestep_shape,
       inputs=[Port("input", doc="the step t per sample, (N,) or (N, 1)")],
       outputs=["output"],
       params=[int_param("embedding_dim", 32, "size d of the sinusoidal code (even)",
                         min=2),
               float_param("max_period", 10000.0, "P: the slowest wave's period is 2πP",
                           min=1),
               int_param("mlp_features", None, "width of the MLP after the code; empty "
                         "for none", min=1, nullable=True), DTYPE_PARAM],
       keywords=("diffusion", "positional encoding", "sinusoidal", "time")),
    op("generative.AffineCoupling",
       "A RealNVP affine coupling layer: invertible, with a cheap exact log-determinant."
       "\n\nThe features the mask keeps pass through and set a scale s and shift t "
       "(two small MLPs) for the others: y = x⊙exp(s) + t there. log_det adds "
       "Σs to the incoming log_det, so stacked layers accumulate it; alternate `flip` "
       "between layers so every feature gets transformed.",
       _coupling,
       inputs=[Port("input", doc="flat samples (N, features)"),
               Port("log_det", doc="log-determinant so far, from the layer before",
                    optional=True)],
       outputs=["output", Port("log_det", doc="log|det ∂y/∂x| plus the incoming one, (N,)")],
       params=[choice_param("mask", ("alternate", "half"), "alternate",
                            "which features pass through: even positions, or the "
                            "first half"),
               bool_param("flip", False, "swap the roles of the two groups"),
               int_param("hidden_features", 64, "width of the scale and shift MLPs", min=1),
               bool_param("tanh_scale", True, "bound the log-scale s to (−1, 1) with tanh"),
               DTYPE_PARAM],
       keywords=("normalizing flow", "realnvp", "invertible", "density", "bijection"),
       shape=_coupling_shape),
    op("generative.FlowNLL",
       "Negative log-likelihood of a normalising flow with a standard normal base.\n\n"
       "−log p(x) = ½‖z‖² + (D/2)·log 2π − log|det ∂z/∂x| (change of variables), per "
       "sample, averaged over the batch (or summed). Wire the flow's output z and its "
       "accumulated log_det.",
       _flow_nll,
       inputs=[Port("z", doc="the flow's output z = f(x)"),
               Port("log_det", doc="Σ log|det| of the flow's layers, (N,)")],
       outputs=[LOSS_OUT], params=[REDUCTION],
       keywords=("normalizing flow", "likelihood", "density", "nll", "change of variables"),
       shape=_flow_nll_shape),
]

