"""Convolution, pooling and resizing: the blocks that slide a window over a signal.

1-D and 2-D convolutions (learnable, or with a fixed edge filter from the notes), the
transposed convolution, max / average / min pooling, global pooling and upsampling. Input
is (N, C, L) or (N, C, H, W) as in PyTorch, checked in `build` so a flat input is told to
insert a Reshape; window sizes are written as one integer or one per dim. The learnable
convolutions start their kernels as `nodes.layers.dense.weight_params` says (init, hand-set
kernels, frozen), the same params as a Linear. Block ids stay in the `layers` family.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, overload

import torch
from torch import nn
from torch.nn import functional as F

from nodegraph.kinds import shapes
from nodegraph.kinds.dtypes import DTYPE_PARAM
from nodegraph.model.errors import ParamError, PortError
from nodegraph.model.spec import (
    Param,
    Params,
    Search,
    TorchEquivalent,
    bool_param,
    choice_param,
    float_param,
    int_param,
)
from nodes._shapes import fmt, need_float, need_ndim
from nodes.layers.dense import Fn, WeightParams, check_given, layer_op, start_weights, weight_params

# -- window sizes -------------------------------------------------------------------------


@dataclass(frozen=True)
class Sizes(Param):
    """One size per spatial dim (kernel, stride, padding...), written as one integer for all
    dims or a list with one per dim; padding may also be one of `words` ('same', 'valid')."""

    dims: int = 2
    words: tuple[str, ...] = ()

    def check(self, value: Any) -> Any:
        if value is None or (isinstance(value, str) and value in self.words):
            return super().check(value) if value is None else value
        if isinstance(value, int) and not isinstance(value, bool):
            value = [value]
        try:
            values = Param(self.name, "ints", min=self.min, max=self.max).check(value)
        except ParamError:
            raise ParamError(f"'{self.name}' must be {self.describe()}, got {value!r}") from None
        if len(values) not in (1, self.dims):
            raise ParamError(f"'{self.name}' needs one value or {self.dims}, got {values}")
        return values

    def describe(self) -> str:
        text = "an integer" + (f" >= {self.min:g}" if self.min is not None else "")
        if self.dims > 1:
            text += f", or a list of {self.dims} (one per dim)"
        if self.words:
            text += ", or " + " / ".join(repr(w) for w in self.words)
        return text + (" or null" if self.nullable else "")


def sizes(name: str, default: Any, doc: str, dims: int, min: int = 1,
          words: tuple[str, ...] = (), nullable: bool = False) -> Sizes:
    return Sizes(name, "json" if words else "ints", default, doc, min=min, dims=dims,
                 words=words, nullable=nullable)


@overload
def per_dim(value: str, dims: int) -> str: ...
@overload
def per_dim(value: Sequence[int], dims: int) -> tuple[int, ...]: ...
def per_dim(value: Sequence[int] | str, dims: int) -> tuple[int, ...] | str:
    """A Sizes value as torch takes it: one entry per dim (strings pass through)."""
    if isinstance(value, str):
        return value
    return tuple(value) * dims if len(value) == 1 else tuple(value)


# -- inputs -------------------------------------------------------------------------------


LAYOUT = {1: "(N, C, L)", 2: "(N, C, H, W)"}


def _signal(x: dict, dims: int, port: str = "input") -> torch.Tensor:
    """The input of a conv or pool: batch, channels and `dims` spatial dims, real numbers."""
    t = need_ndim(x, port, (dims + 2,), LAYOUT[dims])
    need_float(x, port)
    return t


def _need_fits(t: torch.Tensor, window: tuple, dilation: tuple, padding: tuple | str,
               what: str) -> None:
    """A window must fit inside the (padded) input, else the output would be empty."""
    if padding == "same":
        return
    pads = (0,) * len(window) if padding == "valid" else padding
    for size, k, d, pad in zip(t.shape[2:], window, dilation, pads, strict=True):
        span = d * (k - 1) + 1
        if span > size + 2 * pad:
            raise PortError("input", f"receives {fmt(t.shape)}: a spatial size of {size} is "
                            f"smaller than the {what} ({span}) even with padding {pad}",
                            "use a smaller kernel, add padding, or downsample less before it")


# -- convolution and pooling --------------------------------------------------------------


KERNEL_LAYOUT = {1: "(out_channels, in_channels/groups, kernel)",
                 2: "(out_channels, in_channels/groups, kernel_h, kernel_w)"}
TRANSPOSED_LAYOUT = "(in_channels, out_channels/groups, kernel_h, kernel_w)"


def _conv_params(dims: int) -> list[Param]:
    return [int_param("out_channels", doc="number of filters (output channels)", min=1),
            sizes("kernel_size", [3], "filter size", dims),
            sizes("stride", [1], "step between filter positions", dims),
            sizes("padding", [0], "zeros added on each side; 'same' keeps the size "
                  "(stride 1), 'valid' adds none", dims, min=0, words=("same", "valid")),
            sizes("dilation", [1], "spacing between filter taps", dims),
            int_param("groups", 1, "split channels into this many independent groups "
                      "(in_channels for a depthwise conv)", min=1),
            bool_param("bias", True, "learn one additive bias per filter"),
            choice_param("padding_mode", ("zeros", "reflect", "replicate", "circular"),
                         "zeros", "what the padding is filled with")]


def _need_groups(c: int, out: int, groups: int) -> None:
    if c % groups or out % groups:
        raise PortError("input", f"has {c} channels: groups={groups} must divide both "
                        f"in_channels ({c}) and out_channels ({out})",
                        "choose groups that divides both (1 = ordinary convolution)")


class ConvParams(WeightParams):
    """Conv1d's and Conv2d's (weights, dtype and the kernel's geometry)."""

    out_channels: int
    kernel_size: list[int]
    stride: list[int]
    padding: Any  # sizes or "same" / "valid"
    dilation: list[int]
    groups: int
    bias: bool
    padding_mode: Literal["zeros", "reflect", "replicate", "circular"]
    dtype: str


def _conv_geometry(p: ConvParams, x, dims: int) -> tuple[Any, tuple, tuple, Any, tuple]:
    """The input, kernel, stride, padding and dilation of a convolution, checked."""
    t = _signal(x, dims)
    _need_groups(t.shape[1], p.out_channels, p.groups)
    kernel, stride, dilation = (per_dim(v, dims) for v in (p.kernel_size, p.stride,
                                                             p.dilation))
    padding = per_dim(p.padding, dims)
    if padding == "same" and set(stride) != {1}:
        raise ParamError("padding 'same' needs stride 1; give the padding as a number")
    _need_fits(t, kernel, dilation, padding, "dilated kernel")
    return t, kernel, stride, padding, dilation


def _conv(dims: int, cls: type[nn.Module]):
    def build(p: ConvParams, x):
        t, kernel, stride, padding, dilation = _conv_geometry(p, x, dims)
        conv = cls(t.shape[1], p.out_channels, kernel, stride, padding, dilation, p.groups,
                   p.bias, p.padding_mode)
        return start_weights(conv, p, KERNEL_LAYOUT[dims])
    return build


def _window_out(size: int, k: int, s: int, pad: int, d: int, ceil: bool = False) -> int:
    """Output length of a sliding window (torch's formula; a ceil-mode window must start
    inside the input or its left padding)."""
    span = size + 2 * pad - d * (k - 1) - 1
    out = (-(-span // s) if ceil else span // s) + 1
    return out - 1 if ceil and (out - 1) * s >= size + pad else out


def _pad_sides(padding: tuple | str, kernel: tuple, dilation: tuple) -> list[tuple[int, int]]:
    """Zeros (or copies) added before and after each spatial dim, as torch pads: 'same'
    puts the odd one of d·(k-1) after."""
    if padding == "valid":
        return [(0, 0)] * len(kernel)
    if padding == "same":
        return [(d * (k - 1) // 2, d * (k - 1) - d * (k - 1) // 2)
                for k, d in zip(kernel, dilation, strict=True)]
    return [(int(pad), int(pad)) for pad in padding]


def _conv_shape(dims: int):
    def rule(p: ConvParams, x):
        t, kernel, stride, padding, dilation = _conv_geometry(p, x, dims)
        c_in = t.shape[1] // p.groups
        check_given(p, (p.out_channels, c_in, *kernel), p.out_channels if p.bias else None,
                    KERNEL_LAYOUT[dims])
        dtype = shapes.layer_dtype(p)
        sides = _pad_sides(padding, kernel, dilation)
        if t.dtype != dtype or (p.padding_mode != "zeros" and any(
                max(s) >= size for s, size in zip(sides, t.shape[2:], strict=True))):
            return None  # mixed dtypes; padding copies more than the input holds
        spatial = tuple((size + a + b - d * (k - 1) - 1) // s + 1 for size, k, s, d, (a, b)
                        in zip(t.shape[2:], kernel, stride, dilation, sides, strict=True))
        out = (t.shape[0], p.out_channels, *spatial)
        # a padded copy of the input is made first: by F.pad for a padding mode other than
        # zeros, by the convolution for an uneven 'same' (only the odd one extra)
        if p.padding_mode != "zeros":
            padded = tuple(size + a + b for size, (a, b) in zip(t.shape[2:], sides,
                                                              strict=True))
        elif padding == "same" and any((a + b) % 2 for a, b in sides):
            padded = tuple(size + (a + b) % 2 for size, (a, b) in zip(t.shape[2:], sides,
                                                                      strict=True))
        else:
            padded = None
        work = shapes.nbytes(out, dtype) + (
            0 if padded is None else shapes.nbytes((*t.shape[:2], *padded), dtype))
        weights = p.out_channels * (c_in * math.prod(kernel) + p.bias)
        return shapes.weighted([(out, dtype)], weights, dtype, p.trainable, work=work)
    return rule


def _conv_transpose_geometry(p: ConvTranspose2dParams, x
                             ) -> tuple[Any, tuple, tuple, tuple, tuple, tuple]:
    """The input, kernel, stride, padding, output padding and dilation, checked."""
    t = _signal(x, 2)
    _need_groups(t.shape[1], p.out_channels, p.groups)
    kernel, stride, padding, output_padding, dilation = (
        per_dim(v, 2) for v in (p.kernel_size, p.stride, p.padding, p.output_padding,
                                p.dilation))
    if any(o >= max(s, d) for o, s, d in zip(output_padding, stride, dilation, strict=True)):
        raise ParamError("output_padding must be smaller than the stride or the dilation")
    return t, kernel, stride, padding, output_padding, dilation


class ConvTranspose2dParams(WeightParams):
    out_channels: int
    kernel_size: list[int]
    stride: list[int]
    padding: list[int]
    output_padding: list[int]
    dilation: list[int]
    groups: int
    bias: bool
    dtype: str


def _conv_transpose(p: ConvTranspose2dParams, x):
    t, kernel, stride, padding, output_padding, dilation = _conv_transpose_geometry(p, x)
    conv = nn.ConvTranspose2d(t.shape[1], p.out_channels, kernel, stride, padding,
                              output_padding, p.groups, p.bias, dilation)
    return start_weights(conv, p, TRANSPOSED_LAYOUT)


def _conv_transpose_shape(p: ConvTranspose2dParams, x):
    t, kernel, stride, padding, output_padding, dilation = _conv_transpose_geometry(p, x)
    c_in, c_out = t.shape[1], p.out_channels // p.groups
    check_given(p, (c_in, c_out, *kernel), p.out_channels if p.bias else None,
                TRANSPOSED_LAYOUT)
    dtype = shapes.layer_dtype(p)
    spatial = tuple((size - 1) * s - 2 * pad + d * (k - 1) + o + 1 for size, k, s, pad, o, d
                    in zip(t.shape[2:], kernel, stride, padding, output_padding, dilation,
                           strict=True))
    if t.dtype != dtype or min(spatial) < 1:
        return None  # mixed dtypes; padding that removes everything: torch says how
    weights = c_in * c_out * math.prod(kernel) + p.out_channels * p.bias
    return shapes.weighted([((t.shape[0], p.out_channels, *spatial), dtype)], weights, dtype,
                           p.trainable)


class MinPool1d(nn.MaxPool1d):
    """Min pooling as -maxpool(-x): the darkest value in each window."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return -super().forward(-x)


class MinPool2d(nn.MaxPool2d):
    """Min pooling as -maxpool(-x): the darkest value in each window."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return -super().forward(-x)


POOLS = {("Max", 1): nn.MaxPool1d, ("Avg", 1): nn.AvgPool1d, ("Min", 1): MinPool1d,
         ("Max", 2): nn.MaxPool2d, ("Avg", 2): nn.AvgPool2d, ("Min", 2): MinPool2d}


class PoolParams(Params):
    """What every 1-D and 2-D pool declares (each kind's view adds the rest)."""

    kernel_size: list[int]
    stride: list[int] | None
    padding: list[int]
    ceil_mode: bool


class MaxPoolParams(PoolParams):
    """MaxPool's and MinPool's."""

    dilation: list[int]


class AvgPoolParams(PoolParams):
    count_include_pad: bool


def _pool_geometry(p: PoolParams, x, dims: int) -> tuple[Any, tuple, tuple, tuple, tuple]:
    """The input, window, stride, padding and dilation of a pooling, checked."""
    t = _signal(x, dims)
    kernel, padding = per_dim(p.kernel_size, dims), per_dim(p.padding, dims)
    stride = kernel if p.stride is None else per_dim(p.stride, dims)
    if any(2 * pad > k for pad, k in zip(padding, kernel, strict=True)):
        raise ParamError(f"padding {list(padding)} must be at most half the kernel size "
                         f"{list(kernel)}")
    dilation: tuple[int, ...] = (1,) * dims
    if "dilation" in p:  # max and min pools
        dilation = per_dim(p.typed(POOL_DILATION[dims]), dims)
    _need_fits(t, kernel, dilation, padding, "pooling window")
    return t, kernel, stride, padding, dilation


def _pool_shape(kind: str, dims: int):
    def rule(p: PoolParams, x):
        t, kernel, stride, padding, dilation = _pool_geometry(p, x, dims)
        spatial = tuple(_window_out(*a, p.ceil_mode) for a in zip(
            t.shape[2:], kernel, stride, padding, dilation, strict=True))
        out = (*t.shape[:2], *spatial)
        size = math.prod(out) * t.dtype.itemsize
        if kind == "Avg":
            return shapes.Inferred(((out, t.dtype),), work=size)  # one kernel
        # the maxima, and the int64 index of each kept for backward; a min pool negates
        # the input before and the maxima after
        made = size + math.prod(out) * torch.int64.itemsize
        if kind == "Min":
            made += t.nbytes + size
        return shapes.Inferred(((out, t.dtype),), work=made)
    return rule


def _pool(kind: str, dims: int):
    def avg(p: AvgPoolParams, x):
        _, kernel, stride, padding, _ = _pool_geometry(p, x, dims)
        return POOLS[kind, dims](kernel, stride, padding, ceil_mode=p.ceil_mode,
                                 count_include_pad=p.count_include_pad)

    def max_(p: MaxPoolParams, x):
        _, kernel, stride, padding, dilation = _pool_geometry(p, x, dims)
        return POOLS[kind, dims](kernel, stride, padding, ceil_mode=p.ceil_mode,
                                 dilation=dilation)
    return avg if kind == "Avg" else max_


def _pool_params(kind: str, dims: int) -> list[Param]:
    params = [sizes("kernel_size", [2], "window size", dims),
              sizes("stride", None, "step between windows; empty means the window size",
                    dims, nullable=True),
              sizes("padding", [0], "implicit padding on each side (at most half the window)",
                    dims, min=0),
              bool_param("ceil_mode", False, "round the output size up, keeping a partial "
                         "window at the edge")]
    if kind == "Avg":
        return [*params, bool_param("count_include_pad", True,
                                    "count padded zeros in the average")]
    return [*params, POOL_DILATION[dims]]


POOL_DILATION: dict[int, Param[list[int]]] = {
    dims: sizes("dilation", [1], "spacing between window taps", dims) for dims in (1, 2)}


def _global_input(x: dict) -> Any:
    return need_ndim(x, "input", range(3, 6), "(N, C, ...spatial)",
                     "global pooling reduces the spatial dims of a conv output; this input "
                     "has none")


def _global_pool(reduce: Callable[[torch.Tensor], torch.Tensor], name: str):
    def build(p, x):
        _global_input(x)
        return Fn(lambda t: reduce(t.flatten(2)), name)
    return build


def _global_pool_shape(p, x):
    t = _global_input(x)
    if not t.dtype.is_floating_point:
        return None  # torch refuses the mean of integers; the meta path says how
    return shapes.like(shapes.TensorMeta(t.shape[:2], t.dtype))  # one reduction


def _adaptive_check(p: AdaptiveAvgPool2dParams, x) -> Any:
    t = need_ndim(x, "input", (4,), "(N, C, H, W)",
                  "adaptive pooling here is 2-D, over images")
    if len(p.output_size) != 2:
        raise ParamError(f"output_size must hold 2 sizes (height, width), got {p.output_size}")
    return t


class AdaptiveAvgPool2dParams(Params):
    output_size: list[int]


def _adaptive_avg_pool(p: AdaptiveAvgPool2dParams, x):
    _adaptive_check(p, x)
    return nn.AdaptiveAvgPool2d(tuple(p.output_size))


def _adaptive_avg_pool_shape(p: AdaptiveAvgPool2dParams, x):
    t = _adaptive_check(p, x)
    if not t.dtype.is_floating_point:
        return None  # torch refuses the mean of integers; the meta path says how
    return shapes.like(shapes.TensorMeta((*t.shape[:2], *p.output_size), t.dtype))


UPSAMPLE_DIMS = {"nearest": (3, 4, 5), "linear": (3,), "bilinear": (4,), "bicubic": (4,),
                 "trilinear": (5,)}


def _upsample_input(p: UpsampleParams, x) -> Any:
    layouts = {3: "(N, C, L)", 4: "(N, C, H, W)", 5: "(N, C, D, H, W)"}
    ndims = UPSAMPLE_DIMS[p.mode]
    t = need_ndim(x, "input", ndims, " or ".join(layouts[n] for n in ndims),
                  "choose a mode that matches the input: linear for (N, C, L), bilinear or "
                  "bicubic for images, trilinear for volumes")
    need_float(x, "input")
    return t


class UpsampleParams(Params):
    scale_factor: float
    mode: str
    align_corners: bool


def _upsample(p: UpsampleParams, x):
    _upsample_input(p, x)
    corners = None if p.mode == "nearest" else p.align_corners
    return nn.Upsample(scale_factor=p.scale_factor, mode=p.mode, align_corners=corners)


def _upsample_shape(p: UpsampleParams, x):
    """One interpolation kernel; each size is the product with the scale factor, rounded
    down (as torch computes it when given a factor)."""
    t = _upsample_input(p, x)
    spatial = tuple(math.floor(float(size) * p.scale_factor) for size in t.shape[2:])
    if min(spatial) < 1:
        return None  # torch refuses an empty output; the meta path says how
    return shapes.like(shapes.TensorMeta((*t.shape[:2], *spatial), t.dtype))


FILTERS = {
    "vertical_edge": [[1, 0, -1], [1, 0, -1], [1, 0, -1]],
    "sobel_x": [[1, 0, -1], [2, 0, -2], [1, 0, -1]],
    "scharr_x": [[3, 0, -3], [10, 0, -10], [3, 0, -3]],
    "difference_x": [[1, -1]],
    "laplacian": [[0, 1, 0], [1, -4, 1], [0, 1, 0]],
}


def _transposed(kernel: list[list[int]]) -> list[list[int]]:
    return [list(col) for col in zip(*kernel, strict=True)]


# the horizontal-edge (_y) filters are the transposes of the vertical-edge (_x) ones
FILTERS.update({"horizontal_edge": _transposed(FILTERS["vertical_edge"]),
                **{k.replace("_x", "_y"): _transposed(v) for k, v in list(FILTERS.items())
                   if k.endswith("_x")}})


class FixedConv2d(nn.Module):
    """One fixed filter applied to every channel separately (a depthwise convolution)."""

    weight: torch.Tensor  # a buffer

    def __init__(self, kernel: list[list[float]], channels: int, stride: tuple, padding):
        super().__init__()
        k = torch.tensor(kernel, dtype=torch.float32)
        # a buffer, not a Parameter: no optimizer moves it and it is not a weight to count
        self.register_buffer("weight", k.expand(channels, 1, *k.shape).clone(),
                             persistent=False)
        self.stride, self.padding, self.groups = stride, padding, channels

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.conv2d(x, self.weight.to(x.dtype), None, self.stride, self.padding,
                        groups=self.groups)


class FixedConv2dParams(Params):
    filter: str
    stride: list[int]
    padding: Any
    dtype: str


def _fixed_conv(p: FixedConv2dParams, x):
    t = _signal(x, 2)
    kernel = FILTERS[p.filter]
    padding = per_dim(p.padding, 2)
    _need_fits(t, (len(kernel), len(kernel[0])), (1, 1), padding, "filter")
    if padding == "same" and per_dim(p.stride, 2) != (1, 1):
        raise ParamError("padding 'same' needs stride 1; give the padding as a number")
    return FixedConv2d([[float(v) for v in row] for row in kernel], t.shape[1],
                       per_dim(p.stride, 2), padding)


def _conv_doc(dims: int) -> str:
    return (f"{dims}-D convolution (cross-correlation) with learnable filters.\n\n"
            f"Input {LAYOUT[dims]}; in_channels is inferred from C. Each of out_channels "
            "filters slides over the input and sums products with it, plus a bias: "
            "parameters out_channels x (in_channels/groups x kernel + 1). The kernels "
            "start as `init` says or as set by hand in `weight`; trainable false freezes "
            "them.")


# -- what each block computes in PyTorch (`nodegraph import` reads these) ------------------


def _sizes(v: Any) -> list[int] | str:
    return v if isinstance(v, str) else list(v) if isinstance(v, tuple | list) else [v]


def _conv_of(m: nn.Module) -> dict:
    return {"out_channels": m.out_channels, "kernel_size": _sizes(m.kernel_size),
            "stride": _sizes(m.stride), "padding": _sizes(m.padding),
            "dilation": _sizes(m.dilation), "groups": m.groups, "bias": m.bias is not None,
            "padding_mode": m.padding_mode}


def _pool_of(m: nn.Module) -> dict | None:
    if getattr(m, "return_indices", False) or getattr(m, "divisor_override", None):
        return None
    out = {"kernel_size": _sizes(m.kernel_size), "padding": _sizes(m.padding),
           "ceil_mode": m.ceil_mode,
           "stride": _sizes(m.stride) if m.stride is not None else None}
    if hasattr(m, "count_include_pad"):
        out["count_include_pad"] = m.count_include_pad
    if hasattr(m, "dilation"):
        out["dilation"] = _sizes(m.dilation)
    return out


def _adaptive_of(size: Any) -> dict | None:
    size = [size, size] if isinstance(size, int) else list(size)
    return {"output_size": size} if len(size) == 2 and all(
        isinstance(s, int) for s in size) else None


# -- declarations -------------------------------------------------------------------------


def _pool_block(kind: str, dims: int):
    what = {"Max": "largest", "Avg": "mean", "Min": "smallest"}[kind]
    return layer_op(f"{kind}Pool{dims}d",
                    f"{dims}-D {kind.lower()} pooling: the {what} value in each window.\n\n"
                    f"Input {LAYOUT[dims]}, pooled per channel; shrinks the spatial size "
                    "(by the stride, which defaults to the window) and adds no weights.",
                    _pool(kind, dims), _pool_params(kind, dims),
                    keywords=("pool", "downsample", "subsample"),
                    shape=_pool_shape(kind, dims),
                    torch=TorchEquivalent((getattr(nn, f"{kind}Pool{dims}d"),), _pool_of)
                    if kind in ("Max", "Avg") else None,
                    search=POOL_SEARCH.get((kind, dims), Search()))


# what people type for a pooling layer: "pool" is 2-D max pooling first, then average
POOL_SEARCH = {("Max", 2): Search(words=("pool",), popularity=2.0),
               ("Avg", 2): Search(words=(("pool", 1),))}


BLOCKS = [
    layer_op("Conv1d", _conv_doc(1), _conv(1, nn.Conv1d),
             [*_conv_params(1), *weight_params(KERNEL_LAYOUT[1]), DTYPE_PARAM],
             keywords=("convolution", "filter", "sequence", "temporal"), shape=_conv_shape(1),
             torch=TorchEquivalent((nn.Conv1d,), _conv_of),
             search=Search(words=(("conv", 1), ("convolution", 1)),
                           follows=("activations", "norm", "layers"))),
    layer_op("Conv2d", _conv_doc(2), _conv(2, nn.Conv2d),
             [*_conv_params(2), *weight_params(KERNEL_LAYOUT[2]), DTYPE_PARAM],
             keywords=("convolution", "filter", "cnn", "image", "feature map"),
             shape=_conv_shape(2),
             torch=TorchEquivalent((nn.Conv2d,), _conv_of),
             search=Search(words=("conv", "cnn", "convolution"), popularity=3.0,
                           follows=("activations", "norm", "layers"))),
    layer_op("ConvTranspose2d",
             "Transposed 2-D convolution: a learnable upsampling (a deconvolution).\n\n"
             "Input (N, C, H, W); each input pixel stamps a weighted copy of the filters onto a "
             "larger output (size (H-1)·stride - 2·padding + dilation·(k-1) + output_padding + 1). "
             "The generator side of DCGANs and U-Nets.",
             _conv_transpose,
             [*[q for q in _conv_params(2) if q.name in ("out_channels", "kernel_size", "stride")],
              sizes("padding", [0], "removed from each side of the output", 2, min=0),
              sizes("output_padding", [0], "extra size on one side of the output, to reach an "
                    "exact size when stride > 1", 2, min=0),
              *[q for q in _conv_params(2) if q.name in ("groups", "bias", "dilation")],
              *weight_params(TRANSPOSED_LAYOUT), DTYPE_PARAM],
             keywords=("deconvolution", "upsample", "transposed", "generator"),
             shape=_conv_transpose_shape,
             torch=TorchEquivalent((nn.ConvTranspose2d,), lambda m: {
                 **{k: v for k, v in _conv_of(m).items() if k != "padding_mode"},
                 "output_padding": _sizes(m.output_padding)}
             if m.padding_mode == "zeros" else None),
             search=Search(words=("deconv", "upconv"))),
    layer_op("Upsample",
             "Upsampling by a scale factor, without weights.\n\nnearest copies pixels; linear, "
             "bilinear, bicubic and trilinear interpolate (for (N, C, L), images and volumes).",
             _upsample,
             [float_param("scale_factor", 2.0, "multiplier of every spatial size", min=1e-3),
              choice_param("mode", tuple(UPSAMPLE_DIMS), "nearest", "how new values are made"),
              bool_param("align_corners", False, "interpolating modes: align the corner pixels "
                         "of input and output")],
             keywords=("resize", "interpolate", "zoom"), shape=_upsample_shape),
    *[_pool_block(kind, dims) for dims in (1, 2) for kind in ("Max", "Avg", "Min")],
    layer_op("GlobalAvgPool",
             "Mean over all spatial dims: (N, C, ...) -> (N, C).\n\nReplaces Flatten + a big "
             "Linear at the end of a CNN, and works for any input size.",
             _global_pool(lambda t: t.mean(-1), "global mean"),
             keywords=("global average pooling", "gap", "pool"), shape=_global_pool_shape,
             search=Search(words=("gap",))),
    layer_op("AdaptiveAvgPool2d",
             "Average pooling to a fixed output size (H_out, W_out), whatever the input "
             "size.\n\nInput (N, C, H, W); window i covers rows floor(i·H/H_out) to "
             "ceil((i+1)·H/H_out). (1, 1) is global average pooling kept 4-D, as torchvision's "
             "classifiers end.",
             _adaptive_avg_pool,
             [Param("output_size", "ints", [1, 1], "output height and width", min=1)],
             keywords=("adaptive", "pool", "global average pooling", "resize"),
             shape=_adaptive_avg_pool_shape,
             torch=TorchEquivalent(
                 (nn.AdaptiveAvgPool2d,), lambda m: _adaptive_of(m.output_size),
                 (F.adaptive_avg_pool2d,),
                 lambda a, k: _adaptive_of(k.get("output_size", a[0] if a else None))
                 if len(a) + len(k) == 1 else None)),
    layer_op("GlobalMaxPool",
             "Maximum over all spatial dims: (N, C, ...) -> (N, C).\n\nAsks of each channel "
             "whether its feature occurs anywhere in the input.",
             _global_pool(lambda t: t.amax(-1), "global max"), keywords=("pool", "global"),
             shape=_global_pool_shape),
    layer_op("FixedConv2d",
             "Convolution with a fixed, hand-made filter, applied to each channel separately.\n\n"
             "Edge detectors from the notes: vertical_edge [[1,0,-1]]x3, Sobel and Scharr "
             "(positive where brightness falls from left to right, or top to bottom for _y), the "
             "difference (1, -1) and the Laplacian. Nothing is learned; output channels = input "
             "channels.",
             _fixed_conv,
             [choice_param("filter", tuple(sorted(FILTERS)), "sobel_x", "which filter"),
              sizes("stride", [1], "step between filter positions", 2),
              sizes("padding", [0], "zeros added on each side; 'same' keeps the size", 2, min=0,
                    words=("same", "valid")), DTYPE_PARAM],
             keywords=("sobel", "scharr", "edge detection", "laplacian", "filter", "kernel")),
]

