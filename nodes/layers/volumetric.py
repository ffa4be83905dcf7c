"""Volumes and clips: the 3-D convolution, batch norm and pooling video models are made of.

Input is (N, C, D, H, W) as in PyTorch (D is time for a clip, depth for a scan). The
blocks are the 2-D ones with one more spatial dim: `layers.Conv3d` (learnable filters,
started as `nodes.layers.dense.weight_params` says), `norm.BatchNorm3d` (per channel, over
batch and voxels; declared here beside the other volumetric blocks), max and average
pooling and adaptive average pooling to a fixed (D, H, W). Each declares the torch module
it computes, so `nodegraph import` turns torchvision's r3d / mc3 / s3d pieces into blocks,
and a shape rule that follows torch's formulas.
"""

from __future__ import annotations

import math
from typing import Any, Literal

import torch
from torch import nn

from nodegraph.kinds import shapes
from nodegraph.kinds.declare import op
from nodegraph.kinds.dtypes import DTYPE_PARAM
from nodegraph.model.errors import ParamError, PortError
from nodegraph.model.spec import (
    Param,
    Params,
    TorchEquivalent,
    bool_param,
    choice_param,
    int_param,
)
from nodes._shapes import need_float, need_ndim
from nodes.layers.conv import _pad_sides, _window_out, per_dim, sizes
from nodes.layers.dense import WeightParams, check_given, layer_op, start_weights, weight_params
from nodes.norm import _batch_norm, _batch_norm_shape, _stats, _stats_params

LAYOUT = "(N, C, D, H, W)"
KERNEL_LAYOUT = "(out_channels, in_channels/groups, kernel_d, kernel_h, kernel_w)"


def _volume(x: dict) -> torch.Tensor:
    t = need_ndim(x, "input", (5,), LAYOUT, "a volume or a clip: batch, channels, depth "
                  "(or time), height, width; for images use the 2-D blocks")
    need_float(x, "input")
    return t


# -- convolution ----------------------------------------------------------------------------


def _conv_geometry(p: Conv3dParams, x):
    t = _volume(x)
    if t.shape[1] % p.groups or p.out_channels % p.groups:
        raise PortError("input", f"has {t.shape[1]} channels: groups={p.groups} must divide "
                        f"both in_channels and out_channels ({p.out_channels})",
                        "choose groups that divides both (1 = ordinary convolution)")
    kernel, stride, dilation = (per_dim(v, 3) for v in (p.kernel_size, p.stride, p.dilation))
    padding = per_dim(p.padding, 3)
    if padding == "same" and any(s != 1 for s in stride):
        raise ParamError("padding 'same' needs stride 1")
    sides = _pad_sides(padding, kernel, dilation)
    for size, k, d, (a, b) in zip(t.shape[2:], kernel, dilation, sides, strict=True):
        if d * (k - 1) + 1 > size + a + b:
            raise PortError("input", f"receives {tuple(t.shape)}: a spatial size of {size} is "
                            f"smaller than the filter ({d * (k - 1) + 1}) even with padding",
                            "use a smaller kernel, add padding, or downsample less before it")
    return t, kernel, stride, padding, dilation, sides


class Conv3dParams(WeightParams):
    out_channels: int
    kernel_size: list[int]
    stride: list[int]
    padding: Any
    dilation: list[int]
    groups: int
    bias: bool
    padding_mode: Literal["zeros", "reflect", "replicate", "circular"]
    dtype: str


def _conv3d(p: Conv3dParams, x):
    t, kernel, stride, padding, dilation, _ = _conv_geometry(p, x)
    conv = nn.Conv3d(t.shape[1], p.out_channels, kernel, stride, padding, dilation, p.groups,
                     p.bias, p.padding_mode)
    return start_weights(conv, p, KERNEL_LAYOUT)


def _conv3d_shape(p: Conv3dParams, x):
    t, kernel, stride, padding, dilation, sides = _conv_geometry(p, x)
    check_given(p, (p.out_channels, t.shape[1] // p.groups, *kernel),
                p.out_channels if p.bias else None, KERNEL_LAYOUT)
    dtype = shapes.layer_dtype(p)
    if t.dtype != dtype or p.padding_mode != "zeros" or padding == "same":
        return None  # mixed dtypes, padded copies: the meta path measures them
    spatial = tuple((size + a + b - d * (k - 1) - 1) // s + 1 for size, k, s, d, (a, b)
                    in zip(t.shape[2:], kernel, stride, dilation, sides, strict=True))
    out = (t.shape[0], p.out_channels, *spatial)
    weights = p.out_channels * (t.shape[1] // p.groups) * math.prod(kernel) + \
        (p.out_channels if p.bias else 0)
    return shapes.Inferred(((out, dtype),), weights, weights * dtype.itemsize, 0,
                           shapes.nbytes(out, dtype))


def _conv_of(m: nn.Module) -> dict:
    def listed(v):
        return v if isinstance(v, str) else list(v)
    return {"out_channels": m.out_channels, "kernel_size": listed(m.kernel_size),
            "stride": listed(m.stride), "padding": listed(m.padding),
            "dilation": listed(m.dilation), "groups": m.groups, "bias": m.bias is not None,
            "padding_mode": m.padding_mode}


CONV_PARAMS = [
    int_param("out_channels", doc="number of filters (output channels)", min=1),
    sizes("kernel_size", [3], "filter size (one, or depth, height, width)", 3),
    sizes("stride", [1], "step between filter positions", 3),
    sizes("padding", [0], "zeros added on each side; 'same' keeps the size (stride 1), "
          "'valid' adds none", 3, min=0, words=("same", "valid")),
    sizes("dilation", [1], "spacing between filter taps", 3),
    int_param("groups", 1, "split channels into this many independent groups", min=1),
    bool_param("bias", True, "learn one additive bias per filter"),
    choice_param("padding_mode", ("zeros", "reflect", "replicate", "circular"), "zeros",
                 "what the padding is filled with"),
    *weight_params(KERNEL_LAYOUT), DTYPE_PARAM]


# -- pooling -------------------------------------------------------------------------------


class Pool3dParams(Params):
    """What both 3-D pools declare (each one's own view adds the rest)."""

    kernel_size: list[int]
    stride: list[int] | None
    padding: list[int]
    ceil_mode: bool


class MaxPool3dParams(Pool3dParams):
    dilation: list[int]


class AvgPool3dParams(Pool3dParams):
    count_include_pad: bool


def _pool_geometry(p: Pool3dParams, x):
    t = _volume(x)
    kernel, padding = per_dim(p.kernel_size, 3), per_dim(p.padding, 3)
    stride = kernel if p.stride is None else per_dim(p.stride, 3)
    if any(2 * pad > k for pad, k in zip(padding, kernel, strict=True)):
        raise ParamError(f"padding {list(padding)} must be at most half the kernel size "
                         f"{list(kernel)}")
    dilation: tuple[int, ...] = (1, 1, 1)
    if "dilation" in p:  # max pools
        dilation = per_dim(p.typed(POOL_DILATION), 3)
    for size, k, d, pad in zip(t.shape[2:], kernel, dilation, padding, strict=True):
        if d * (k - 1) + 1 > size + 2 * pad:
            raise PortError("input", f"receives {tuple(t.shape)}: a spatial size of {size} is "
                            "smaller than the pooling window even with padding",
                            "use a smaller window or downsample less before it")
    return t, kernel, stride, padding, dilation


def _pool(kind: str):
    def avg(p: AvgPool3dParams, x):
        _, kernel, stride, padding, _ = _pool_geometry(p, x)
        return nn.AvgPool3d(kernel, stride, padding, p.ceil_mode, p.count_include_pad)

    def max_(p: MaxPool3dParams, x):
        _, kernel, stride, padding, dilation = _pool_geometry(p, x)
        return nn.MaxPool3d(kernel, stride, padding, dilation, ceil_mode=p.ceil_mode)
    return avg if kind == "Avg" else max_


def _pool_shape(kind: str):
    def rule(p: Pool3dParams, x):
        t, kernel, stride, padding, dilation = _pool_geometry(p, x)
        spatial = tuple(_window_out(*a, p.ceil_mode) for a in zip(
            t.shape[2:], kernel, stride, padding, dilation, strict=True))
        out = (*t.shape[:2], *spatial)
        size = math.prod(out) * t.dtype.itemsize
        # a max pool keeps the int64 index of each maximum for backward
        made = size if kind == "Avg" else size + math.prod(out) * torch.int64.itemsize
        return shapes.Inferred(((out, t.dtype),), work=made)
    return rule


def _pool_params(kind: str) -> list[Param]:
    params = [sizes("kernel_size", [2], "window size (one, or depth, height, width)", 3),
              sizes("stride", None, "step between windows; empty means the window size", 3,
                    nullable=True),
              sizes("padding", [0], "implicit padding on each side (at most half the window)",
                    3, min=0),
              bool_param("ceil_mode", False, "round the output size up, keeping a partial "
                         "window at the edge")]
    if kind == "Avg":
        return [*params, bool_param("count_include_pad", True,
                                    "count padded zeros in the average")]
    return [*params, POOL_DILATION]


POOL_DILATION: Param[list[int]] = sizes("dilation", [1], "spacing between window taps", 3)


def _pool_of(m: nn.Module) -> dict | None:
    if getattr(m, "return_indices", False) or getattr(m, "divisor_override", None):
        return None
    out = {"kernel_size": per_list(m.kernel_size), "padding": per_list(m.padding),
           "ceil_mode": m.ceil_mode,
           "stride": per_list(m.stride) if m.stride is not None else None}
    if hasattr(m, "count_include_pad"):
        out["count_include_pad"] = m.count_include_pad
    if hasattr(m, "dilation"):
        out["dilation"] = per_list(m.dilation)
    return out


def per_list(v) -> list[int]:
    return list(v) if isinstance(v, tuple | list) else [v]


def _adaptive_size(p: AdaptiveAvgPool3dParams) -> tuple[int, int, int]:
    size = p.output_size
    if len(size) == 1:
        size = size * 3
    if len(size) != 3:
        raise ParamError(f"'output_size' needs one value or 3 (depth, height, width), got "
                         f"{list(p.output_size)}")
    return tuple(size)  # type: ignore[return-value]


class AdaptiveAvgPool3dParams(Params):
    output_size: list[int]


def _adaptive(p: AdaptiveAvgPool3dParams, x):
    _volume(x)
    return nn.AdaptiveAvgPool3d(_adaptive_size(p))


def _adaptive_shape(p: AdaptiveAvgPool3dParams, x):
    t = _volume(x)
    return shapes.like(shapes.TensorMeta((*t.shape[:2], *_adaptive_size(p)), t.dtype))


def _adaptive_of(m: nn.Module) -> dict | None:
    size = per_list(m.output_size)
    return {"output_size": size} if all(isinstance(s, int) for s in size) else None


BLOCKS = [
    layer_op("Conv3d",
             "3-D convolution with learnable filters, over depth (or time), height and "
             f"width.\n\nInput {LAYOUT}; in_channels is inferred from C. Parameters "
             "out_channels x (in_channels/groups x kd·kh·kw + 1). The building block of "
             "video networks (r3d, mc3) and of volumetric scans.",
             _conv3d, CONV_PARAMS,
             keywords=("convolution", "video", "volume", "3d", "clip", "temporal"),
             shape=_conv3d_shape, torch=TorchEquivalent((nn.Conv3d,), _conv_of)),
    op("norm.BatchNorm3d",
       "Batch normalisation of volume channels: each channel to zero mean and unit "
       "variance over batch and voxels, then γ·x̂ + β.\n\nInput (N, C, D, H, W). Training "
       "uses batch statistics and updates running averages; evaluation uses the "
       "averages.",
       _batch_norm((5,), LAYOUT, nn.BatchNorm3d, "for images (N, C, H, W) use BatchNorm2d"),
       shape=_batch_norm_shape((5,), LAYOUT, "for images (N, C, H, W) use BatchNorm2d"),
       inputs=["input"], outputs=["output"], params=[*_stats_params(True, True),
                                                     DTYPE_PARAM],
       keywords=("batchnorm", "bn", "normalize", "video", "3d"),
       torch=TorchEquivalent((nn.BatchNorm3d,), _stats)),
    layer_op("MaxPool3d",
             f"3-D max pooling: the largest value in each window.\n\nInput {LAYOUT}, pooled "
             "per channel; shrinks depth, height and width by the stride (default: the "
             "window).", _pool("Max"), _pool_params("Max"),
             keywords=("pool", "downsample", "video", "3d"), shape=_pool_shape("Max"),
             torch=TorchEquivalent((nn.MaxPool3d,), _pool_of)),
    layer_op("AvgPool3d",
             f"3-D average pooling: the mean of each window.\n\nInput {LAYOUT}, pooled per "
             "channel; shrinks depth, height and width by the stride (default: the window).",
             _pool("Avg"), _pool_params("Avg"),
             keywords=("pool", "downsample", "video", "3d"), shape=_pool_shape("Avg"),
             torch=TorchEquivalent((nn.AvgPool3d,), _pool_of)),
    layer_op("AdaptiveAvgPool3d",
             "Average pooling to a fixed output size (D_out, H_out, W_out), whatever the "
             f"input size.\n\nInput {LAYOUT}; (1, 1, 1) is the global average that ends "
             "torchvision's video classifiers.",
             _adaptive, [Param("output_size", "ints", [1, 1, 1],
                               "output depth, height and width (or one for all)", min=1)],
             keywords=("adaptive", "pool", "global average pooling", "video", "3d"),
             shape=_adaptive_shape, torch=TorchEquivalent((nn.AdaptiveAvgPool3d,),
                                                          _adaptive_of)),
]
