"""Layers and tensor operations: the blocks that carry weights or reshape values.

Dense and basis-expansion layers, convolution and pooling, tensor plumbing (reshape,
concat, split, arithmetic), embeddings, dropout and fixed tensors. Every block infers its
input sizes from the wire (`in_features`, `in_channels`, `num_features`) and checks the
incoming shape in `build`, so a wrong wire is reported before anything runs, by port, with
what to insert. Tensors are batch-first; image blocks use PyTorch's (N, C, H, W) layout.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

from nodegraph.errors import ParamError, PortError
from nodegraph.spec import (
    Param,
    Port,
    block,
    bool_param,
    choice_param,
    float_param,
    int_param,
)
from nodes._shapes import dim_index, fmt, need_broadcast, need_float, need_index, need_ndim

# -- shared pieces -----------------------------------------------------------------------


class Fn(nn.Module):
    """A weightless op as a module, so it runs in the compiled graph like any other block."""

    def __init__(self, fn: Callable[..., Any], name: str = ""):
        super().__init__()
        self.fn = fn
        self.name = name or getattr(fn, "__name__", "fn")

    def forward(self, *args: torch.Tensor) -> Any:
        return self.fn(*args)

    def extra_repr(self) -> str:
        return self.name


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


def per_dim(value: Sequence[int] | str, dims: int) -> tuple[int, ...] | str:
    """A Sizes value as torch takes it: one entry per dim (strings pass through)."""
    if isinstance(value, str):
        return value
    return tuple(value) * dims if len(value) == 1 else tuple(value)


def init_values(w: torch.Tensor, init: Callable[[torch.Tensor], Any]) -> None:
    """Fill `w` in place, except on the meta device: shape inference needs no values, and
    torch's meta random normal costs seconds the first time."""
    if not w.is_meta:
        with torch.no_grad():
            init(w)


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


# -- dense layers and basis expansions ----------------------------------------------------


def _linear(p, x):
    shape = x["input"].shape
    if len(shape) < 2:
        raise PortError("input", f"Linear needs at least (N, features), got {fmt(shape)}")
    if p.in_features is not None and shape[-1] != p.in_features:
        raise PortError("input", f"expects (N, {p.in_features}) but receives {fmt(shape)}",
                        "clear in_features to infer it, or insert Flatten / check the layer "
                        "before")
    if not x["input"].dtype.is_floating_point:
        raise PortError("input", f"Linear needs real numbers, got {x['input'].dtype}",
                        "class indices go through Embedding, not Linear", kind="dtype_mismatch")
    return nn.Linear(shape[-1], p.out_features, bias=p.bias)


def _features(x: dict) -> int:
    """Width of the last dim of a (N, ..., features) real input."""
    t = need_ndim(x, "input", range(2, 9), "(N, features)")
    need_float(x, "input")
    return t.shape[-1]


class PolynomialFeatures(nn.Module):
    """[1,] x, x², ..., x^degree of every feature, concatenated power by power."""

    def __init__(self, degree: int, include_bias: bool):
        super().__init__()
        self.degree, self.include_bias = degree, include_bias

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        powers = [x**k for k in range(1, self.degree + 1)]
        if self.include_bias:
            powers.insert(0, torch.ones_like(x[..., :1]))
        return torch.cat(powers, -1)


class FourierFeatures(nn.Module):
    """sin(k·ω·x) for k = 1..n and every feature, then the cosines in the same order."""

    def __init__(self, num_frequencies: int, frequency: float):
        super().__init__()
        omega = frequency * torch.arange(1, num_frequencies + 1, dtype=torch.float32)
        self.register_buffer("omega", omega, persistent=False)  # fixed by the params

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        z = (x.unsqueeze(-1) * self.omega).flatten(-2)  # feature-major: x1ω1..x1ωn, x2ω1..
        return torch.cat([z.sin(), z.cos()], -1)


class RBF(nn.Module):
    """Gaussian bumps exp(-‖x - c_j‖² / (2σ_j²)) with learnable centres c_j and widths σ_j."""

    def __init__(self, in_features: int, num_centers: int, width: float):
        super().__init__()
        self.centers = nn.Parameter(torch.empty(num_centers, in_features))
        init_values(self.centers, lambda w: nn.init.normal_(w))
        # log σ keeps every width positive whatever step the optimizer takes
        self.log_widths = nn.Parameter(torch.full((num_centers,), math.log(width)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        d2 = (x.unsqueeze(-2) - self.centers).pow(2).sum(-1)
        return torch.exp(-d2 / (2 * torch.exp(2 * self.log_widths)))


def _polynomial(p, x):
    _features(x)
    return PolynomialFeatures(p.degree, p.include_bias)


def _fourier(p, x):
    _features(x)
    return FourierFeatures(p.num_frequencies, p.frequency)


def _rbf(p, x):
    return RBF(_features(x), p.num_centers, p.width)


# -- convolution and pooling ---------------------------------------------------------------


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


def _conv(dims: int, cls: type[nn.Module]):
    def build(p, x):
        t = _signal(x, dims)
        _need_groups(t.shape[1], p.out_channels, p.groups)
        kernel, stride, dilation = (per_dim(v, dims) for v in (p.kernel_size, p.stride,
                                                                 p.dilation))
        padding = per_dim(p.padding, dims)
        if padding == "same" and set(stride) != {1}:
            raise ParamError("padding 'same' needs stride 1; give the padding as a number")
        _need_fits(t, kernel, dilation, padding, "dilated kernel")
        return cls(t.shape[1], p.out_channels, kernel, stride, padding, dilation, p.groups,
                   p.bias, p.padding_mode)
    return build


def _conv_transpose(p, x):
    t = _signal(x, 2)
    _need_groups(t.shape[1], p.out_channels, p.groups)
    kernel, stride, padding, output_padding, dilation = (
        per_dim(v, 2) for v in (p.kernel_size, p.stride, p.padding, p.output_padding,
                                p.dilation))
    if any(o >= max(s, d) for o, s, d in zip(output_padding, stride, dilation, strict=True)):
        raise ParamError("output_padding must be smaller than the stride or the dilation")
    return nn.ConvTranspose2d(t.shape[1], p.out_channels, kernel, stride, padding,
                              output_padding, p.groups, p.bias, dilation)


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


def _pool(kind: str, dims: int):
    def build(p, x):
        t = _signal(x, dims)
        kernel, padding = per_dim(p.kernel_size, dims), per_dim(p.padding, dims)
        stride = kernel if p.stride is None else per_dim(p.stride, dims)
        if any(2 * pad > k for pad, k in zip(padding, kernel, strict=True)):
            raise ParamError(f"padding {list(padding)} must be at most half the kernel size "
                             f"{list(kernel)}")
        dilation = per_dim(p.dilation, dims) if "dilation" in p else (1,) * dims
        _need_fits(t, kernel, dilation, padding, "pooling window")
        extra = ({"count_include_pad": p.count_include_pad} if kind == "Avg"
                 else {"dilation": dilation})
        return POOLS[kind, dims](kernel, stride, padding, ceil_mode=p.ceil_mode, **extra)
    return build


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
    return [*params, sizes("dilation", [1], "spacing between window taps", dims)]


def _global_pool(reduce: Callable[[torch.Tensor], torch.Tensor], name: str):
    def build(p, x):
        need_ndim(x, "input", range(3, 6), "(N, C, ...spatial)",
                  "global pooling reduces the spatial dims of a conv output; this input has "
                  "none")
        return Fn(lambda t: reduce(t.flatten(2)), name)
    return build


UPSAMPLE_DIMS = {"nearest": (3, 4, 5), "linear": (3,), "bilinear": (4,), "bicubic": (4,),
                 "trilinear": (5,)}


def _upsample(p, x):
    layouts = {3: "(N, C, L)", 4: "(N, C, H, W)", 5: "(N, C, D, H, W)"}
    ndims = UPSAMPLE_DIMS[p.mode]
    need_ndim(x, "input", ndims, " or ".join(layouts[n] for n in ndims),
              "choose a mode that matches the input: linear for (N, C, L), bilinear or "
              "bicubic for images, trilinear for volumes")
    need_float(x, "input")
    corners = None if p.mode == "nearest" else p.align_corners
    return nn.Upsample(scale_factor=p.scale_factor, mode=p.mode, align_corners=corners)


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


def _fixed_conv(p, x):
    t = _signal(x, 2)
    kernel = FILTERS[p.filter]
    padding = per_dim(p.padding, 2)
    _need_fits(t, (len(kernel), len(kernel[0])), (1, 1), padding, "filter")
    if padding == "same" and per_dim(p.stride, 2) != (1, 1):
        raise ParamError("padding 'same' needs stride 1; give the padding as a number")
    return FixedConv2d(kernel, t.shape[1], per_dim(p.stride, 2), padding)


# -- tensor plumbing -----------------------------------------------------------------------


def _flatten(p, x):
    t = x["input"]
    start, end = (dim_index(d, t.ndim, "input", t.shape) for d in (p.start_dim, p.end_dim))
    if start == 0:
        raise PortError("input", "would merge the batch dim (dim 0) into the features",
                        "start_dim counts from the batch: 1 is the first feature dim")
    if end < start:
        raise PortError("input", f"end_dim {p.end_dim} comes before start_dim "
                        f"{p.start_dim} in {fmt(t.shape)}")
    return nn.Flatten(start, end)


def _reshape(p, x):
    t, shape = x["input"], list(p.shape)
    per_sample = math.prod(t.shape[1:])
    if 0 in shape or shape.count(-1) > 1:
        raise ParamError(f"shape {shape}: sizes must be positive, with at most one -1 "
                         "(inferred)")
    known = math.prod(s for s in shape if s != -1)
    if (per_sample % known if -1 in shape else per_sample != known):
        raise PortError("input", f"cannot be reshaped from {fmt(t.shape)} to "
                        f"{fmt([0, *shape])}: {per_sample} values per sample do not fill "
                        f"{shape}", "the product of shape must equal the values per sample; "
                        "use -1 for one size to infer it")
    return Fn(lambda v: v.reshape(v.shape[0], *shape), f"reshape to (N, {shape})")


def _permute(p, x):
    t, dims = x["input"], list(p.dims)
    if sorted(dims) != list(range(1, t.ndim)):
        raise PortError("input", f"is {fmt(t.shape)}, so dims must order 1..{t.ndim - 1} "
                        f"(each once), got {dims}", "the batch dim 0 always stays first; "
                        "e.g. [3, 1, 2] turns (N, H, W, C) into (N, C, H, W)")
    return Fn(lambda v: v.permute(0, *dims), f"permute(0, {dims})")


def _concat(p, x):
    a, b = x["a"], x["b"]
    dim = dim_index(p.dim, a.ndim, "a", a.shape)
    same_rest = a.ndim == b.ndim and all(
        i == dim or sa == sb for i, (sa, sb) in enumerate(zip(a.shape, b.shape, strict=True)))
    if not same_rest:
        raise PortError("b", f"cannot be joined to 'a' along dim {p.dim}: 'a' is "
                        f"{fmt(a.shape)} and 'b' is {fmt(b.shape)}",
                        "all dims except the joined one must match")
    return Fn(lambda u, v: torch.cat((u, v), dim), f"cat(dim={dim})")


def _split(p, x):
    t = x["input"]
    dim = dim_index(p.dim, t.ndim, "input", t.shape)
    if not 0 < p.split_size < t.shape[dim]:
        raise PortError("input", f"has size {t.shape[dim]} in dim {p.dim} ({fmt(t.shape)}): "
                        f"split_size {p.split_size} must leave something for both 'a' and 'b'",
                        f"choose split_size between 1 and {t.shape[dim] - 1}")
    s = p.split_size
    return Fn(lambda v: (v.narrow(dim, 0, s), v.narrow(dim, s, v.shape[dim] - s)),
              f"split({s}, dim={dim})")


def _arith(fn: Callable, verb: str):
    def build(p, x):
        need_broadcast(x, verb)
        return Fn(fn, verb)
    return build


def _matmul(p, x):
    a, b = x["a"], x["b"]
    if a.ndim == 0 or b.ndim == 0:
        raise PortError("a" if a.ndim == 0 else "b", "needs at least one dim for a matrix "
                        "product", "use Multiply to scale by a scalar")
    k_b = b.shape[-2] if b.ndim >= 2 else b.shape[0]
    if a.shape[-1] != k_b:
        raise PortError("b", f"cannot multiply 'a' {fmt(a.shape)} by 'b' {fmt(b.shape)}: "
                        f"the last dim of 'a' ({a.shape[-1]}) must equal the "
                        f"{'second-to-last' if b.ndim >= 2 else 'only'} dim of 'b' ({k_b})",
                        "transpose one of them with Permute, or check the widths")
    return Fn(torch.matmul, "matmul")


def _residual(p, x):
    a, b = x["input"], x["skip"]
    if a.shape != b.shape:
        raise PortError("skip", f"cannot be added: 'input' is {fmt(a.shape)} but 'skip' is "
                        f"{fmt(b.shape)}; a residual connection needs equal shapes",
                        "put a projection (Linear, or a 1x1 Conv2d with matching stride) on "
                        "the skip path")
    return Fn(torch.add, "input + skip")


class Scale(nn.Module):
    """Multiplies by one scalar, learnable or fixed."""

    def __init__(self, scale: float, learnable: bool):
        super().__init__()
        value = torch.tensor(float(scale))
        if learnable:
            self.scale = nn.Parameter(value)
        else:
            self.register_buffer("scale", value)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.scale * x


def _embedding(p, x):
    need_index(x, "input", "an embedding lookup")
    if p.padding_idx is not None and p.padding_idx >= p.num_embeddings:
        raise ParamError(f"padding_idx {p.padding_idx} must be below num_embeddings "
                         f"({p.num_embeddings})")
    return nn.Embedding(p.num_embeddings, p.embedding_dim, padding_idx=p.padding_idx)


# -- tensors without inputs ----------------------------------------------------------------


INITS = {
    "zeros": lambda w, s: nn.init.zeros_(w),
    "constant": lambda w, s: nn.init.constant_(w, s),
    "normal": lambda w, s: nn.init.normal_(w, 0.0, s),
    "uniform": lambda w, s: nn.init.uniform_(w, -s, s),
    "xavier_uniform": lambda w, s: nn.init.xavier_uniform_(w, gain=s),
}


class LearnedTensor(nn.Module):
    """A learnable tensor with no inputs: a learned bias, token or positional table."""

    def __init__(self, shape: list[int], init: str, scale: float):
        super().__init__()
        self.value = nn.Parameter(torch.empty(shape))
        init_values(self.value, lambda w: INITS[init](w, scale))

    def forward(self) -> torch.Tensor:
        return self.value


def _parameter(p, x):
    if p.init == "xavier_uniform" and len(p.shape) < 2:
        raise ParamError("xavier_uniform needs a shape of at least 2 dims (fan in and out)")
    return LearnedTensor(p.shape, p.init, p.scale)


class ConstantTensor(nn.Module):
    """A fixed tensor with no inputs."""

    def __init__(self, value: torch.Tensor):
        super().__init__()
        # not saved with the weights: the param is its source of truth
        self.register_buffer("value", value, persistent=False)

    def forward(self) -> torch.Tensor:
        return self.value


DTYPES = {"float32": torch.float32, "float64": torch.float64, "int64": torch.int64,
          "bool": torch.bool}


def _constant(p, x):
    try:
        value = torch.tensor(p.value, dtype=DTYPES[p.dtype])
    except (TypeError, ValueError, RuntimeError):
        raise ParamError("value must be a number or a rectangular nested list of numbers, "
                         f"got {p.value!r}") from None
    return ConstantTensor(value)


# -- declarations --------------------------------------------------------------------------


def _op(name: str, doc: str, build: Callable, params: Sequence[Param] = (),
        inputs: Sequence[Port | str] = ("input",), outputs: Sequence[Port | str] = ("output",),
        keywords: tuple[str, ...] = ()):
    return block(f"layers.{name}", "op", doc, build, inputs=inputs, outputs=outputs,
                 params=params, keywords=keywords)


def _conv_doc(dims: int) -> str:
    return (f"{dims}-D convolution (cross-correlation) with learnable filters.\n\n"
            f"Input {LAYOUT[dims]}; in_channels is inferred from C. Each of out_channels "
            "filters slides over the input and sums products with it, plus a bias: "
            "parameters out_channels x (in_channels/groups x kernel + 1).")


def _pool_block(kind: str, dims: int):
    what = {"Max": "largest", "Avg": "mean", "Min": "smallest"}[kind]
    return _op(f"{kind}Pool{dims}d",
               f"{dims}-D {kind.lower()} pooling: the {what} value in each window.\n\n"
               f"Input {LAYOUT[dims]}, pooled per channel; shrinks the spatial size "
               "(by the stride, which defaults to the window) and adds no weights.",
               _pool(kind, dims), _pool_params(kind, dims),
               keywords=("pool", "downsample", "subsample"))


TENSOR_AB = [Port("a", doc="first operand"), Port("b", doc="second operand")]

BLOCKS = [
    block("layers.Linear", "op",
          "Fully connected layer y = x Wᵀ + b.\n\nApplies to the last dimension; "
          "`in_features` is inferred from the incoming wire.",
          _linear, inputs=["input"], outputs=["output"],
          params=[int_param("out_features", doc="size of each output sample", min=1),
                  bool_param("bias", True, "learn an additive bias"),
                  int_param("in_features", None, "size of each input sample; empty means "
                            "inferred from the wire", min=1, nullable=True)],
          keywords=("dense", "fully connected", "affine", "mlp")),
    _op("PolynomialFeatures",
        "Polynomial basis expansion x -> [x, x², ..., x^degree].\n\nEach feature is raised "
        "to every power, concatenated power by power (no cross terms); a Linear after it "
        "is polynomial regression. The constant column is off by default because the "
        "Linear has its own bias.",
        _polynomial,
        [int_param("degree", 2, "highest power", min=1, max=20),
         bool_param("include_bias", False, "prepend a column of ones (x⁰)")],
        keywords=("basis", "polynomial regression", "feature map")),
    _op("FourierFeatures",
        "Fourier basis expansion: sin(k·ω·x) and cos(k·ω·x) for k = 1..num_frequencies.\n\n"
        "All sines come first (feature-major, frequency inner), then the cosines in the "
        "same order, so (N, F) becomes (N, 2·F·num_frequencies). Fits periodic or wiggly "
        "targets with a linear layer after it.",
        _fourier,
        [int_param("num_frequencies", 4, "how many multiples k of the base frequency", min=1),
         float_param("frequency", 1.0, "base angular frequency ω (radians per unit of x)",
                     min=1e-9)],
        keywords=("basis", "sinusoid", "periodic", "feature map")),
    _op("RBF",
        "Gaussian radial basis functions exp(-‖x - c_j‖² / (2σ_j²)) with learnable centres "
        "and widths.\n\n(N, F) becomes (N, num_centers): one bump per centre. Centres start "
        "from N(0, 1) (normalise the inputs), widths at `width`; both are trained.",
        _rbf, [int_param("num_centers", 10, "number of basis functions", min=1),
               float_param("width", 1.0, "initial width σ of every bump", min=1e-6)],
        keywords=("radial basis", "gaussian", "kernel", "rbf network")),
    _op("Conv1d", _conv_doc(1), _conv(1, nn.Conv1d), _conv_params(1),
        keywords=("convolution", "filter", "sequence", "temporal")),
    _op("Conv2d", _conv_doc(2), _conv(2, nn.Conv2d), _conv_params(2),
        keywords=("convolution", "filter", "cnn", "image", "feature map")),
    _op("ConvTranspose2d",
        "Transposed 2-D convolution: a learnable upsampling (a deconvolution).\n\n"
        "Input (N, C, H, W); each input pixel stamps a weighted copy of the filters onto a "
        "larger output (size (H-1)·stride - 2·padding + dilation·(k-1) + output_padding + 1). "
        "The generator side of DCGANs and U-Nets.",
        _conv_transpose,
        [*[q for q in _conv_params(2) if q.name in ("out_channels", "kernel_size", "stride")],
         sizes("padding", [0], "removed from each side of the output", 2, min=0),
         sizes("output_padding", [0], "extra size on one side of the output, to reach an "
               "exact size when stride > 1", 2, min=0),
         *[q for q in _conv_params(2) if q.name in ("groups", "bias", "dilation")]],
        keywords=("deconvolution", "upsample", "transposed", "generator")),
    _op("Upsample",
        "Upsampling by a scale factor, without weights.\n\nnearest copies pixels; linear, "
        "bilinear, bicubic and trilinear interpolate (for (N, C, L), images and volumes).",
        _upsample,
        [float_param("scale_factor", 2.0, "multiplier of every spatial size", min=1e-3),
         choice_param("mode", tuple(UPSAMPLE_DIMS), "nearest", "how new values are made"),
         bool_param("align_corners", False, "interpolating modes: align the corner pixels "
                    "of input and output")],
        keywords=("resize", "interpolate", "zoom")),
    *[_pool_block(kind, dims) for dims in (1, 2) for kind in ("Max", "Avg", "Min")],
    _op("GlobalAvgPool",
        "Mean over all spatial dims: (N, C, ...) -> (N, C).\n\nReplaces Flatten + a big "
        "Linear at the end of a CNN, and works for any input size.",
        _global_pool(lambda t: t.mean(-1), "global mean"),
        keywords=("global average pooling", "gap", "pool")),
    _op("GlobalMaxPool",
        "Maximum over all spatial dims: (N, C, ...) -> (N, C).\n\nAsks of each channel "
        "whether its feature occurs anywhere in the input.",
        _global_pool(lambda t: t.amax(-1), "global max"), keywords=("pool", "global")),
    _op("FixedConv2d",
        "Convolution with a fixed, hand-made filter, applied to each channel separately.\n\n"
        "Edge detectors from the notes: vertical_edge [[1,0,-1]]x3, Sobel and Scharr "
        "(positive where brightness falls from left to right, or top to bottom for _y), the "
        "difference (1, -1) and the Laplacian. Nothing is learned; output channels = input "
        "channels.",
        _fixed_conv,
        [choice_param("filter", tuple(sorted(FILTERS)), "sobel_x", "which filter"),
         sizes("stride", [1], "step between filter positions", 2),
         sizes("padding", [0], "zeros added on each side; 'same' keeps the size", 2, min=0,
               words=("same", "valid"))],
        keywords=("sobel", "scharr", "edge detection", "laplacian", "filter", "kernel")),
    _op("Flatten",
        "Flattens dims start_dim..end_dim into one: (N, C, H, W) -> (N, C·H·W).\n\n"
        "Order is channel, then row, then column (PyTorch's NCHW order), as in the notes. "
        "Goes between a conv stack and Linear layers.",
        _flatten, [int_param("start_dim", 1, "first dim to flatten (0 is the batch)"),
                   int_param("end_dim", -1, "last dim to flatten (-1 = the last)")],
        keywords=("unroll", "vectorize", "reshape")),
    _op("Reshape",
        "Gives each sample a new shape, keeping the batch dim.\n\n`shape` excludes the batch: "
        "[1, 28, 28] turns (N, 784) into (N, 1, 28, 28). One size may be -1 (inferred).",
        _reshape, [Param("shape", "ints", doc="new shape of one sample, without the batch dim",
                         min=-1)],
        keywords=("view", "unflatten")),
    _op("Permute",
        "Reorders the dims of each sample; the batch dim stays first.\n\n`dims` lists the "
        "non-batch dims in their new order, numbered as PyTorch numbers them (batch = 0), so "
        "[3, 1, 2] turns (N, H, W, C) into (N, C, H, W).",
        _permute, [Param("dims", "ints", doc="new order of dims 1..ndim-1", min=1)],
        keywords=("transpose", "swap axes", "channels last")),
    _op("Concat",
        "Joins `a` and `b` along a dim.\n\nAll other dims must match; along `dim` the sizes "
        "add up. dim 1 joins features or channels.",
        _concat, [int_param("dim", 1, "dim to join along (-1 = last)")],
        inputs=TENSOR_AB, keywords=("cat", "join", "stack", "merge")),
    _op("Split",
        "Cuts the input in two along a dim: the first split_size entries to `a`, the rest "
        "to `b`.\n\nThe inverse of Concat; e.g. a head that outputs μ and log σ² together.",
        _split, [int_param("split_size", doc="size of the first part, `a`", min=1),
                 int_param("dim", 1, "dim to cut (-1 = last)")],
        outputs=[Port("a", doc="the first split_size entries"), Port("b", doc="the rest")],
        keywords=("chunk", "slice", "separate")),
    _op("Add", "Element-wise sum a + b.\n\nShapes must match or broadcast (a (N, F) plus a "
        "learned (F,) bias works).", _arith(torch.add, "add"), inputs=TENSOR_AB,
        keywords=("sum", "plus")),
    _op("Multiply", "Element-wise product a · b.\n\nShapes must match or broadcast; gates "
        "and masks multiply.", _arith(torch.mul, "multiply"), inputs=TENSOR_AB,
        keywords=("product", "hadamard", "gate", "mask")),
    _op("MatMul", "Matrix product a @ b, batched over leading dims.\n\nThe last dim of `a` "
        "meets the second-to-last of `b` (as torch.matmul).", _matmul, inputs=TENSOR_AB,
        keywords=("matrix multiply", "dot", "bmm")),
    _op("Scale", "Multiplies the input by one scalar, learnable or fixed.\n\nA learnable "
        "gain, or a fixed factor such as 1/√d.",
        lambda p, x: Scale(p.scale, p.learnable),
        [float_param("scale", 1.0, "the factor (its initial value when learnable)"),
         bool_param("learnable", True, "train the factor")],
        keywords=("gain", "multiply", "factor")),
    _op("ResidualAdd",
        "Adds a skip connection: output = input + skip, shapes checked.\n\nThe ResNet "
        "shortcut: wire the block's output to `input` and its input to `skip`.",
        _residual, inputs=[Port("input", doc="the branch output"),
                           Port("skip", doc="the shortcut, same shape")],
        keywords=("skip connection", "shortcut", "resnet")),
    _op("Embedding",
        "Looks up a learnable vector for each integer index (token, class, node id).\n\n"
        "Input of integers, any shape; output adds a last dim of embedding_dim.",
        _embedding,
        [int_param("num_embeddings", doc="number of distinct indices (vocabulary size)",
                   min=1),
         int_param("embedding_dim", doc="length of each vector", min=1),
         int_param("padding_idx", None, "an index whose vector stays zero and untrained",
                   min=0, nullable=True)],
        keywords=("lookup", "token", "word vector", "one-hot")),
    _op("Dropout",
        "Zeroes each value with probability p while training, scaling the rest by 1/(1-p)."
        "\n\nAt evaluation it passes values through unchanged. A regulariser against "
        "co-adapted units.",
        lambda p, x: nn.Dropout(p.p), [float_param("p", 0.5, "probability of zeroing",
                                                   min=0, max=1)],
        keywords=("regularization", "noise", "mask")),
    _op("StopGradient",
        "Passes values forward but no gradient back (detach).\n\nFreezes what lies before "
        "it for the loss after it, e.g. the generator when training a GAN discriminator.",
        lambda p, x: Fn(torch.Tensor.detach, "detach"),
        keywords=("detach", "no grad", "freeze")),
    _op("Identity", "Passes the input through unchanged.\n\nA named tap point or a "
        "placeholder while editing.", lambda p, x: nn.Identity(),
        keywords=("passthrough", "noop")),
    _op("Parameter",
        "A learnable tensor of a given shape, with no inputs.\n\nThe output is exactly "
        "`shape` (no batch dim); broadcasting adds it to batches, e.g. a learned "
        "positional table or a CLS token. `scale` is the constant's value, the normal's "
        "std, the uniform's half-width or Xavier's gain.",
        _parameter,
        [Param("shape", "ints", doc="shape of the tensor", min=1),
         choice_param("init", tuple(INITS), "normal", "how the values start"),
         float_param("scale", 1.0, "size of the initial values (see the doc)")],
        inputs=(), keywords=("weight", "learned", "token", "bias")),
    _op("Constant",
        "A fixed tensor from a JSON value, with no inputs.\n\nA number or nested lists, "
        "e.g. [[1, 0], [0, 1]]; the output has exactly that shape (no batch dim).",
        _constant,
        [Param("value", "json", doc="a number or a rectangular nested list"),
         choice_param("dtype", tuple(DTYPES), "float32", "element type")],
        inputs=(), keywords=("fixed", "literal", "tensor")),
]
