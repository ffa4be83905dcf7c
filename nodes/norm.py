"""Normalisation layers and weight penalties (regularisers).

BatchNorm, LayerNorm and InstanceNorm rescale activations; their sizes are inferred from
the wire. BatchNorm differs between training (statistics of the batch, running averages
updated) and evaluation (the running averages), which the trainer switches.

L1Penalty and L2Penalty have no inputs: they act on the weights of other blocks, bound to
them at compile time (``binds="nodes"``, see nodegraph.model.spec), and output a loss term to add
to the data loss. Biases are not penalised, as in the notes' lasso and ridge.
Weight decay by parameter group and gradient clipping are optimizer settings, not blocks.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import torch
from torch import nn

from nodegraph.kinds import shapes
from nodegraph.kinds.declare import op
from nodegraph.kinds.dtypes import DTYPE_PARAM
from nodegraph.model.errors import PortError
from nodegraph.model.spec import (
    LOSS_OUT,
    Param,
    Params,
    Search,
    TorchEquivalent,
    bool_param,
    float_param,
    int_param,
    nodes_param,
)
from nodes._shapes import fmt, need_float, need_ndim

EPS = float_param("eps", 1e-5, "added to the variance so it is never divided by zero",
                  min=0)


def _momentum(default: float = 0.1) -> Param:
    return float_param("momentum", default, "weight of the newest batch in the running "
                       "averages; empty means a plain cumulative average", min=0, max=1,
                       nullable=True)


def _stats_params(affine: bool, track: bool) -> list[Param]:
    return [EPS, _momentum(),
            bool_param("affine", affine, "learn a scale γ and shift β per channel"),
            bool_param("track_running_stats", track, "keep running mean and variance for "
                       "evaluation; off uses batch statistics in evaluation too")]


class BatchNormParams(Params):
    """What the batch norms (and InstanceNorm2d, built the same way) read."""

    eps: float
    momentum: float | None
    affine: bool
    track_running_stats: bool


def _batch_norm(ndims: tuple[int, ...], layout: str, cls: type[nn.Module], hint: str):
    def build(p: BatchNormParams, x):
        t = need_ndim(x, "input", ndims, layout, hint)
        need_float(x, "input")
        return cls(t.shape[1], p.eps, p.momentum, p.affine, p.track_running_stats)
    return build


def _batch_norm_shape(ndims: tuple[int, ...], layout: str, hint: str) -> shapes.Rule:
    """Training mode on a batch: the output, and the batch mean and inverse std per channel
    the kernel keeps for backward; γ and β trained, running mean and variance and the
    batch counter (int64) as buffers."""
    def rule(p: BatchNormParams, x):
        t = need_ndim(x, "input", ndims, layout, hint)
        need_float(x, "input")
        dtype, c = t.dtype, t.shape[1]
        if dtype != torch.get_default_dtype() or t.shape[0] == 1 or p.momentum is None \
                or not p.track_running_stats:
            return None  # another dtype, one sample (eval), cumulative or no statistics
        made = t.nbytes + 2 * c * dtype.itemsize
        return shapes.Inferred(((t.shape, dtype),), 2 * c * p.affine,
                               2 * c * p.affine * dtype.itemsize,
                               2 * c * dtype.itemsize + torch.int64.itemsize, made)
    return rule


class InstanceNorm2dParams(Params):
    eps: float
    momentum: float | None
    affine: bool
    track_running_stats: bool
    dtype: str


def _instance_norm_shape(p: InstanceNorm2dParams, x):
    """Each (sample, channel) as one channel of a batch norm: the output, and the mean and
    inverse std of each it keeps for backward; γ and β are repeated per sample first."""
    t = need_ndim(x, "input", (4,), "(N, C, H, W)",
                  "InstanceNorm2d normalises images; for features use LayerNorm")
    need_float(x, "input")
    if p.track_running_stats or t.dtype not in (torch.float32, torch.float64) or \
            (p.affine and t.dtype != shapes.layer_dtype(p)) or t.shape[2] * t.shape[3] == 1:
        return None  # running statistics, another or mixed dtype, nothing to normalise over
    per = t.shape[0] * t.shape[1] * t.dtype.itemsize  # one value per (sample, channel)
    c = t.shape[1] * p.affine
    return shapes.Inferred(((t.shape, t.dtype),), 2 * c, 2 * c * t.dtype.itemsize,
                           work=t.nbytes + 2 * per * (1 + p.affine))


def _layer_norm_dims(p: LayerNormParams, x):
    t = x["input"]
    need_float(x, "input")
    if p.dims >= t.ndim:
        raise PortError("input", f"cannot normalise the last {p.dims} dims of "
                        f"{fmt(t.shape)}: that would include the batch dim",
                        f"dims must be at most {t.ndim - 1}")
    return tuple(t.shape[-p.dims:])


class LayerNormParams(Params):
    dims: int
    eps: float
    elementwise_affine: bool
    bias: bool
    dtype: str


def _layer_norm(p: LayerNormParams, x):
    return nn.LayerNorm(_layer_norm_dims(p, x), p.eps, p.elementwise_affine, p.bias)


def _layer_norm_shape(p: LayerNormParams, x):
    """The output, and the mean and inverse std of each normalised slice kept for
    backward; γ (and β) shaped like the normalised dims."""
    normalised, t = _layer_norm_dims(p, x), x["input"]
    if t.dtype not in (torch.float32, torch.float64) or \
            (p.elementwise_affine and t.dtype != shapes.layer_dtype(p)):
        return None  # another or mixed dtype: the meta path tells
    slices = math.prod(t.shape[:-p.dims]) * t.dtype.itemsize
    weights = math.prod(normalised) * (1 + p.bias) * p.elementwise_affine
    return shapes.weighted([(t.shape, t.dtype)], weights, t.dtype,
                           work=t.nbytes + 2 * slices)


class Penalty(nn.Module):
    """weight · Σ|w|^power over the weights of the bound blocks, biases excluded."""

    weight: float  # the factor, not a parameter
    zero: torch.Tensor  # a buffer

    def __init__(self, weight: float, power: int):
        super().__init__()
        self.weight, self.power = weight, power
        # the zero a sum starts from, on the graph's device, and the result when nothing
        # is bound (during shape inference)
        self.register_buffer("zero", torch.zeros(()), persistent=False)
        self.bound: tuple[nn.Module, ...] = ()  # a tuple is not registered: no duplicates

    def bind(self, modules: dict[str, nn.Module]) -> None:
        self.bound = tuple(modules.values())

    def penalised(self) -> Iterator[torch.Tensor]:
        """The weight tensors the penalty covers: no biases, gains or other vectors."""
        seen = set()
        for module in self.bound:
            for name, w in module.named_parameters():
                if w.ndim > 1 and "bias" not in name and id(w) not in seen:
                    seen.add(id(w))  # a shared weight is penalised once
                    yield w

    def forward(self) -> torch.Tensor:
        total = self.zero
        for w in self.penalised():
            total = total + (w.abs().sum() if self.power == 1 else w.pow(2).sum())
        return self.weight * total

    def extra_repr(self) -> str:
        return f"weight={self.weight}, power={self.power}"


def _penalty(power: int):
    def build(p: PenaltyParams, x) -> Penalty:
        return Penalty(p.weight, power)
    return build


class PenaltyParams(Params):
    weight: float
    nodes: list[str]
    dtype: str


def _penalty_shape(p: PenaltyParams, x):
    """Validation binds nothing: the loss is weight times the zero buffer, a scalar in the
    block's dtype (the graph's unless set; the rule sees it through the `dtype` param)."""
    dtype = shapes.layer_dtype(p)
    return shapes.Inferred((((), dtype),), buffer_bytes=dtype.itemsize, work=dtype.itemsize)


PENALTY_PARAMS = [
    float_param("weight", 1e-4, "the factor λ in front of the sum (the notes suggest "
                "around 1e-4)", min=0),
    nodes_param("nodes", [], "ids of the blocks whose weights are penalised; empty means "
                "every block with weights", of=("op",)),
]

def _stats(m: nn.Module) -> dict:
    return {"eps": m.eps, "momentum": m.momentum, "affine": m.affine,
            "track_running_stats": m.track_running_stats}
# the penalties hold a zero buffer their loss is made in: the dtype param (default: the
# graph's) lets their shape rule see it


BLOCKS = [
    op("norm.BatchNorm1d",
       "Batch normalisation of features: each channel to zero mean and unit variance "
       "over the batch, then γ·x̂ + β.\n\nInput (N, C) or (N, C, L). Training uses the "
       "batch's statistics and updates running averages; evaluation uses the averages. "
       "Put it between a Linear and its activation.",
       _batch_norm((2, 3), "(N, C) or (N, C, L)", nn.BatchNorm1d,
                   "for images (N, C, H, W) use BatchNorm2d"),
       shape=_batch_norm_shape((2, 3), "(N, C) or (N, C, L)",
                               "for images (N, C, H, W) use BatchNorm2d"),
       inputs=["input"], outputs=["output"], params=[*_stats_params(True, True), DTYPE_PARAM],
       keywords=("batchnorm", "bn", "normalize", "standardize"),
       torch=TorchEquivalent((nn.BatchNorm1d,), _stats),
       search=Search(words=(("bn", 1), ("batchnorm", 1), ("norm", 2)))),
    op("norm.BatchNorm2d",
       "Batch normalisation of image channels: each channel to zero mean and unit "
       "variance over batch and pixels, then γ·x̂ + β.\n\nInput (N, C, H, W). Training "
       "uses batch statistics and updates running averages; evaluation uses the "
       "averages. Adds 2·C weights and 2·C running statistics.",
       _batch_norm((4,), "(N, C, H, W)", nn.BatchNorm2d,
                   "for features (N, C) use BatchNorm1d"),
       shape=_batch_norm_shape((4,), "(N, C, H, W)", "for features (N, C) use BatchNorm1d"),
       inputs=["input"], outputs=["output"], params=[*_stats_params(True, True), DTYPE_PARAM],
       keywords=("batchnorm", "bn", "normalize", "cnn"),
       torch=TorchEquivalent((nn.BatchNorm2d,), _stats),
       search=Search(words=("bn", "batchnorm", ("norm", 1)), popularity=2.0)),
    op("norm.LayerNorm",
       "Layer normalisation: each sample to zero mean and unit variance over its last "
       "`dims` dims, then γ·x̂ + β.\n\nNo batch statistics, so training and evaluation "
       "agree; the normalisation of transformers.",
       _layer_norm, inputs=["input"], outputs=["output"], shape=_layer_norm_shape,
       params=[int_param("dims", 1, "how many trailing dims form normalized_shape", min=1),
               EPS,
               bool_param("elementwise_affine", True, "learn γ and β per element"),
               bool_param("bias", True, "learn β (with elementwise_affine)"), DTYPE_PARAM],
       keywords=("layernorm", "ln", "transformer", "normalize"),
       torch=TorchEquivalent((nn.LayerNorm,), lambda m: {
           "dims": len(m.normalized_shape), "eps": m.eps,
           "elementwise_affine": m.elementwise_affine, "bias": m.bias is not None}),
       search=Search(words=("ln", "norm"), popularity=2.0)),
    op("norm.InstanceNorm2d",
       "Instance normalisation: each channel of each image to zero mean and unit "
       "variance over its pixels.\n\nInput (N, C, H, W). Removes per-image contrast; "
       "style transfer and AdaIN build on it.",
       _batch_norm((4,), "(N, C, H, W)", nn.InstanceNorm2d,
                   "InstanceNorm2d normalises images; for features use LayerNorm"),
       inputs=["input"], outputs=["output"], params=[*_stats_params(False, False), DTYPE_PARAM],
       replaces=("norm.InstanceNorm",), shape=_instance_norm_shape,
       keywords=("instancenorm", "style", "contrast", "normalize"),
       torch=TorchEquivalent((nn.InstanceNorm2d,), _stats),
       search=Search(words=("in",))),
    op("norm.L1Penalty",
       "L1 (lasso) weight penalty λ·Σ|w| over other blocks' weights, biases excluded.\n\n"
       "Add its loss to the data loss (losses.WeightedSum): it pushes weights to "
       "exactly zero, selecting features.",
       _penalty(1), outputs=[LOSS_OUT], params=[*PENALTY_PARAMS, DTYPE_PARAM], binds="nodes",
       shape=_penalty_shape,
       keywords=("lasso", "l1", "regularization", "sparsity"),
       search=Search(words=(("l1", 1),))),
    op("norm.L2Penalty",
       "L2 (ridge) weight penalty λ·Σw² over other blocks' weights, biases excluded.\n\n"
       "Add its loss to the data loss (losses.WeightedSum): it shrinks all weights "
       "towards zero (weight decay in loss form).",
       _penalty(2), outputs=[LOSS_OUT], params=[*PENALTY_PARAMS, DTYPE_PARAM], binds="nodes",
       shape=_penalty_shape,
       keywords=("ridge", "l2", "regularization", "weight decay", "tikhonov"),
       search=Search(words=(("l2", 1),))),
]

