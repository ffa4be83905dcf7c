"""Layers and tensor operations: the blocks that carry weights or reshape values.

Dense and basis-expansion layers, tensor plumbing (reshape, concat, split, arithmetic),
embeddings, dropout and fixed tensors; convolution and pooling live in `nodes.layers.conv`. Every
block infers its input sizes from the wire (`in_features`, `num_features`) and checks the
incoming shape in `build`, so a wrong wire is reported before anything runs, by port, with
what to insert. Tensors are batch-first.

Layers with a weight matrix or kernel (Linear here, the convolutions in `nodes.layers.conv`) share
how they start: `init` picks a random initialisation (torch's default, Xavier, He, a
normal of a given std, zeros), `weight` and `bias_init` set values by hand (the worked
examples of the notes, threshold units), and `trainable` false freezes them.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from typing import Any, cast

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from nodegraph.kinds import shapes
from nodegraph.kinds.declare import family, op
from nodegraph.kinds.dtypes import DTYPE_PARAM
from nodegraph.model.errors import ParamError, PortError
from nodegraph.model.spec import (
    Param,
    Params,
    Port,
    Search,
    TorchEquivalent,
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


def init_values(w: torch.Tensor, init: Callable[[torch.Tensor], Any]) -> None:
    """Fill `w` in place, except on the meta device: shape inference needs no values, and
    torch's meta random normal costs seconds the first time."""
    if not w.is_meta:
        with torch.no_grad():
            init(w)


# -- the weights a layer starts from ------------------------------------------------------

# Random starts by name. Xavier (Glorot) keeps Var(w) = 2/(fan_in + fan_out), the notes'
# (7.19); He (Kaiming, for ReLU) keeps Var(w) = 2/fan_in; both as torch computes the fans.
WEIGHT_INITS: dict[str, Callable[[torch.Tensor, float], Any]] = {
    "xavier_uniform": lambda w, std: nn.init.xavier_uniform_(w),
    "xavier_normal": lambda w, std: nn.init.xavier_normal_(w),
    "kaiming_uniform": lambda w, std: nn.init.kaiming_uniform_(w, nonlinearity="relu"),
    "kaiming_normal": lambda w, std: nn.init.kaiming_normal_(w, nonlinearity="relu"),
    "normal": lambda w, std: nn.init.normal_(w, 0.0, std),
    "zeros": lambda w, std: nn.init.zeros_(w),
}


def weight_params(layout: str) -> list[Param]:
    """The params of how a layer's weights start; `layout` names the weight's dims."""
    return [
        choice_param("init", ("default", *WEIGHT_INITS), "default",
                     "how the weights start: default is torch's (uniform, ±1/√fan_in); "
                     "xavier_* keep Var = 2/(fan_in + fan_out) (tanh, sigmoid); kaiming_* "
                     "keep Var = 2/fan_in (He, for ReLU); normal draws N(0, init_std²); "
                     "zeros. Any choice but default starts the biases at 0"),
        float_param("init_std", 1.0, "standard deviation of the normal init", min=0),
        Param("weight", "json", None, f"initial weights set by hand: a nested list shaped "
              f"{layout} (leading sizes of 1 may be left out); empty means from init",
              nullable=True),
        Param("bias_init", "floats", None, "initial biases set by hand, one per output; "
              "empty means from init", nullable=True),
        bool_param("trainable", True, "false freezes the weights and biases: no optimizer "
                   "changes them and they do not count as trainable parameters"),
    ]


class WeightParams(Params):
    """The typed view of `weight_params`: a weighted layer's view subclasses it."""

    init: str
    init_std: float
    weight: Any
    bias_init: list[float] | None
    trainable: bool


def start_weights(module: nn.Module, p: WeightParams, layout: str) -> nn.Module:
    """Apply `init`, the hand-set `weight` and `bias_init`, and `trainable` to a new layer
    with `weight` and `bias` attributes (checked on meta tensors too, filled only on real
    ones)."""
    weight, bias = cast(torch.Tensor, module.weight), cast("torch.Tensor | None", module.bias)
    given = check_given(p, tuple(weight.shape), None if bias is None else bias.shape[0],
                        layout)
    if p.init != "default":
        init_values(weight, lambda w: WEIGHT_INITS[p.init](w, p.init_std))
        if bias is not None:
            init_values(bias, nn.init.zeros_)
    if given is not None:
        init_values(weight, lambda w: w.copy_(torch.from_numpy(given)))
    if p.bias_init is not None:
        values = torch.tensor(p.bias_init, dtype=torch.float32, device="cpu")
        init_values(cast(torch.Tensor, bias), lambda b: b.copy_(values))  # a bias to set
    if not p.trainable:
        module.requires_grad_(False)
    return module


def check_given(p: WeightParams, shape: tuple[int, ...], biases: int | None, layout: str
                ) -> np.ndarray | None:
    """The hand-set `weight` as an array of the layer's weight `shape` (None when not set),
    after checking it and `bias_init` against the layer (`biases` per output, None when
    bias is off); shape rules call it too, so they refuse what building refuses."""
    given = None if p.weight is None else _given_values(p.weight, shape, layout)
    if p.bias_init is not None:
        if biases is None:
            raise ParamError("'bias_init' sets biases, but bias is off; turn bias on or "
                             "clear bias_init")
        if len(p.bias_init) != biases:
            raise ParamError(f"'bias_init' needs {biases} values (one per output), "
                             f"got {len(p.bias_init)}")
    return given


def _given_values(value: Any, shape: tuple[int, ...], layout: str) -> np.ndarray:
    """Hand-set `weight` values as an array of `shape`; leading sizes of 1 may be omitted,
    so one output's weights are a flat list and one 2-D filter is a list of rows."""
    try:
        array = np.asarray(value, dtype=np.float32)
    except (TypeError, ValueError):
        raise ParamError("'weight' must be a rectangular nested list of numbers") from None
    ones = 0
    while ones < len(shape) and shape[ones] == 1 and array.shape != shape[ones:]:
        ones += 1
    if array.shape != shape[ones:]:
        raise ParamError(f"'weight' must be shaped {layout} = {shape} for this wire, got "
                         f"{array.shape}")
    return np.ascontiguousarray(array.reshape(shape))


# -- dense layers and basis expansions ----------------------------------------------------


def _linear_in(p: LinearParams, x) -> int:
    """in_features of a Linear on `x`, after checking the wire (meta tensor or TensorMeta)."""
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
    return shape[-1]


class LinearParams(WeightParams):
    out_features: int
    bias: bool
    in_features: int | None
    dtype: str


def _linear(p: LinearParams, x):
    return start_weights(nn.Linear(_linear_in(p, x), p.out_features, bias=p.bias), p,
                         "(out_features, in_features)")


def _linear_shape(p: LinearParams, x):
    n_in = _linear_in(p, x)
    t, dtype = x["input"], shapes.layer_dtype(p)
    check_given(p, (p.out_features, n_in), p.out_features if p.bias else None,
                "(out_features, in_features)")
    if t.dtype != dtype:
        return None  # mixed dtypes: torch's refusal is the meta path's
    out = (*t.shape[:-1], p.out_features)
    return shapes.weighted([(out, dtype)], p.out_features * (n_in + p.bias), dtype,
                           p.trainable)


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

    omega: torch.Tensor  # a buffer

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


class PolynomialFeaturesParams(Params):
    degree: int
    include_bias: bool


def _polynomial(p: PolynomialFeaturesParams, x):
    _features(x)
    return PolynomialFeatures(p.degree, p.include_bias)


def _polynomial_shape(p: PolynomialFeaturesParams, x):
    t = x["input"]
    _features(x)
    # one power each (x**1 too), the column of ones, then their concatenation
    out = (*t.shape[:-1], t.shape[-1] * p.degree + p.include_bias)
    ones = math.prod(t.shape[:-1]) * t.dtype.itemsize * p.include_bias
    return shapes.Inferred(((out, t.dtype),),
                           work=p.degree * t.nbytes + ones + shapes.nbytes(out, t.dtype))


class FourierFeaturesParams(Params):
    num_frequencies: int
    frequency: float


def _fourier(p: FourierFeaturesParams, x):
    _features(x)
    return FourierFeatures(p.num_frequencies, p.frequency)


class RBFParams(Params):
    num_centers: int
    width: float
    dtype: str


def _rbf(p: RBFParams, x):
    return RBF(_features(x), p.num_centers, p.width)


def _rbf_shape(p: RBFParams, x):
    """x − c for every centre, squared, summed over the features, negated; 2·log σ, its
    exp and 2σ², the quotient and its exp."""
    t, dtype, c = x["input"], shapes.layer_dtype(p), p.num_centers
    f = _features(x)
    if t.dtype != dtype:
        return None  # mixed dtypes: the meta path refuses them
    rows = math.prod(t.shape[:-1])
    made = (2 * rows * c * f + 4 * rows * c + 3 * c) * dtype.itemsize
    return shapes.weighted([((*t.shape[:-1], c), dtype)], c * f + c, dtype, work=made)


# -- tensor plumbing -----------------------------------------------------------------------


def _flatten_dims(p: FlattenParams, x) -> tuple[int, int]:
    t = x["input"]
    start, end = (dim_index(d, t.ndim, "input", t.shape) for d in (p.start_dim, p.end_dim))
    if start == 0:
        raise PortError("input", "would merge the batch dim (dim 0) into the features",
                        "start_dim counts from the batch: 1 is the first feature dim")
    if end < start:
        raise PortError("input", f"end_dim {p.end_dim} comes before start_dim "
                        f"{p.start_dim} in {fmt(t.shape)}")
    return start, end


class FlattenParams(Params):
    start_dim: int
    end_dim: int


def _flatten(p: FlattenParams, x):
    return nn.Flatten(*_flatten_dims(p, x))


def _flatten_shape(p: FlattenParams, x):
    start, end = _flatten_dims(p, x)
    s = x["input"].shape
    return _view(x["input"], (*s[:start], math.prod(s[start:end + 1]), *s[end + 1:]))


def _view(t, shape) -> shapes.Inferred:
    """One output that is a view of `t`: no new memory."""
    return shapes.Inferred(((tuple(shape), t.dtype),))


def _reshape_to(p: ReshapeParams, x) -> list[int]:
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
    return shape


class ReshapeParams(Params):
    shape: list[int]


def _reshape(p: ReshapeParams, x):
    shape = _reshape_to(p, x)
    return Fn(lambda v: v.reshape(v.shape[0], *shape), f"reshape to (N, {shape})")


def _reshape_shape(p: ReshapeParams, x):
    t, shape = x["input"], _reshape_to(p, x)
    if -1 in shape:
        shape[shape.index(-1)] = math.prod(t.shape[1:]) // -math.prod(shape)
    return _view(t, (t.shape[0], *shape))


def _permute_dims(p: PermuteParams, x) -> list[int]:
    t, dims = x["input"], list(p.dims)
    if sorted(dims) != list(range(1, t.ndim)):
        raise PortError("input", f"is {fmt(t.shape)}, so dims must order 1..{t.ndim - 1} "
                        f"(each once), got {dims}", "the batch dim 0 always stays first; "
                        "e.g. [3, 1, 2] turns (N, H, W, C) into (N, C, H, W)")
    return dims


class PermuteParams(Params):
    dims: list[int]


def _permute_shape(p: PermuteParams, x):
    t = x["input"]
    return _view(t, (t.shape[0], *(t.shape[d] for d in _permute_dims(p, x))))


def _permute(p: PermuteParams, x):
    dims = _permute_dims(p, x)
    return Fn(lambda v: v.permute(0, *dims), f"permute(0, {dims})")


CONCAT_PORTS = "abcdefgh"


def _concat_parts(p: ConcatParams, x) -> tuple[list, int]:
    parts = [(port, x[port]) for port in CONCAT_PORTS if x.get(port) is not None]
    a = parts[0][1]
    dim = dim_index(p.dim, a.ndim, "a", a.shape)
    for port, t in parts[1:]:
        same_rest = a.ndim == t.ndim and all(
            i == dim or sa == st for i, (sa, st) in enumerate(zip(a.shape, t.shape,
                                                                  strict=True)))
        if not same_rest:
            raise PortError(port, f"cannot be joined to 'a' along dim {p.dim}: 'a' is "
                            f"{fmt(a.shape)} and '{port}' is {fmt(t.shape)}",
                            "all dims except the joined one must match")
    return parts, dim


class ConcatParams(Params):
    dim: int


def _concat(p: ConcatParams, x):
    parts, dim = _concat_parts(p, x)
    if len(parts) == 2 and [q for q, _ in parts] == ["a", "b"]:
        return Fn(lambda a, b, c, d, e, f, g, h: torch.cat((a, b), dim), f"cat(dim={dim})")
    return Fn(lambda a, b, c, d, e, f, g, h: torch.cat(
        [t for t in (a, b, c, d, e, f, g, h) if t is not None], dim), f"cat(dim={dim})")


def _concat_shape(p: ConcatParams, x):
    parts, dim = _concat_parts(p, x)
    dtype = shapes.same_dtype(x)
    if dtype is None:
        return None
    shape = list(parts[0][1].shape)
    shape[dim] = sum(t.shape[dim] for _, t in parts)
    return shapes.weighted([(tuple(shape), dtype)], 0, dtype)


def _split_at(p: SplitParams, x) -> int:
    t = x["input"]
    dim = dim_index(p.dim, t.ndim, "input", t.shape)
    if not 0 < p.split_size < t.shape[dim]:
        raise PortError("input", f"has size {t.shape[dim]} in dim {p.dim} ({fmt(t.shape)}): "
                        f"split_size {p.split_size} must leave something for both 'a' and 'b'",
                        f"choose split_size between 1 and {t.shape[dim] - 1}")
    return dim


class SplitParams(Params):
    split_size: int
    dim: int


def _split(p: SplitParams, x):
    dim, s = _split_at(p, x), p.split_size
    return Fn(lambda v: (v.narrow(dim, 0, s), v.narrow(dim, s, v.shape[dim] - s)),
              f"split({s}, dim={dim})")


def _split_shape(p: SplitParams, x):
    t, dim = x["input"], _split_at(p, x)
    a, b = list(t.shape), list(t.shape)
    a[dim], b[dim] = p.split_size, t.shape[dim] - p.split_size
    return shapes.Inferred(((tuple(a), t.dtype), (tuple(b), t.dtype)))


def _arith(fn: Callable, verb: str):
    def build(p, x):
        need_broadcast(x, verb)
        return Fn(fn, verb)
    return build


def _arith_shape(verb: str):
    def rule(p, x):
        shape, dtype = tuple(need_broadcast(x, verb)), shapes.same_dtype(x)
        return None if dtype is None else shapes.weighted([(shape, dtype)], 0, dtype)
    return rule


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


class ScaleParams(Params):
    scale: float
    learnable: bool
    dtype: str


def _scale_shape(p: ScaleParams, x):
    t, dtype = x["input"], shapes.layer_dtype(p)
    if t.dtype != dtype:
        return None  # an integer input is promoted by torch, another float refused
    w = dtype.itemsize  # the scale is held in the layer's dtype
    return shapes.Inferred(((t.shape, t.dtype),), int(p.learnable), w * p.learnable,
                           w * (not p.learnable), t.nbytes)


def _scale(p: ScaleParams, x) -> Scale:
    return Scale(p.scale, p.learnable)


class DropoutParams(Params):
    p: float


def _dropout(p: DropoutParams, x) -> nn.Module:
    return nn.Dropout(p.p)


def _dropout_shape(p: DropoutParams, x):
    # training mode: a scaled random mask the size of the input, and the product
    return None if p.p == 1 else shapes.like(x["input"], 0 if p.p == 0 else 2)


def _residual_check(p, x):
    a, b = x["input"], x["skip"]
    if a.shape != b.shape:
        raise PortError("skip", f"cannot be added: 'input' is {fmt(a.shape)} but 'skip' is "
                        f"{fmt(b.shape)}; a residual connection needs equal shapes",
                        "put a projection (Linear, or a 1x1 Conv2d with matching stride) on "
                        "the skip path")


def _residual(p, x):
    _residual_check(p, x)
    return Fn(torch.add, "input + skip")


def _residual_shape(p, x):
    _residual_check(p, x)
    dtype = shapes.same_dtype(x)
    return None if dtype is None else shapes.like(x["input"])


class Scale(nn.Module):
    """Multiplies by one scalar, learnable or fixed."""

    scale: torch.Tensor  # a buffer

    def __init__(self, scale: float, learnable: bool):
        super().__init__()
        value = torch.tensor(float(scale))
        if learnable:
            self.scale = nn.Parameter(value)
        else:
            self.register_buffer("scale", value)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.scale * x


def _embedding_check(p: EmbeddingParams, x):
    need_index(x, "input", "an embedding lookup")
    if p.padding_idx is not None and p.padding_idx >= p.num_embeddings:
        raise ParamError(f"padding_idx {p.padding_idx} must be below num_embeddings "
                         f"({p.num_embeddings})")


class EmbeddingParams(Params):
    num_embeddings: int
    embedding_dim: int
    padding_idx: int | None
    dtype: str


def _embedding(p: EmbeddingParams, x):
    """torch's Embedding with torch's start, N(0, 1) and the padding row zeroed, drawn only
    on real tensors: torch's meta normal_ imports torch._dynamo (a second of validation)."""
    _embedding_check(p, x)
    weight = torch.empty(p.num_embeddings, p.embedding_dim)

    def start(w: torch.Tensor) -> None:
        nn.init.normal_(w)
        if p.padding_idx is not None:
            w[p.padding_idx].fill_(0)

    init_values(weight, start)
    return nn.Embedding(p.num_embeddings, p.embedding_dim, padding_idx=p.padding_idx,
                        _weight=weight)


def _embedding_shape(p: EmbeddingParams, x):
    t = x["input"]
    _embedding_check(p, x)  # the module is one (num_embeddings, embedding_dim) table
    if t.dtype not in (torch.int64, torch.int32):
        return None  # torch's lookup refuses other index types
    dtype = shapes.layer_dtype(p)
    return shapes.weighted([((*t.shape, p.embedding_dim), dtype)],
                           p.num_embeddings * p.embedding_dim, dtype)


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


def _parameter_check(p: ParameterParams) -> None:
    if p.init == "xavier_uniform" and len(p.shape) < 2:
        raise ParamError("xavier_uniform needs a shape of at least 2 dims (fan in and out)")


class ParameterParams(Params):
    shape: list[int]
    init: str
    scale: float
    dtype: str


def _parameter(p: ParameterParams, x):
    _parameter_check(p)
    return LearnedTensor(p.shape, p.init, p.scale)


def _parameter_shape(p: ParameterParams, x):
    """The output is the parameter itself: nothing is made."""
    _parameter_check(p)
    dtype = shapes.layer_dtype(p)
    return shapes.weighted([(tuple(p.shape), dtype)], math.prod(p.shape), dtype, work=0)


class ConstantTensor(nn.Module):
    """A fixed tensor with no inputs."""

    value: torch.Tensor  # a buffer

    def __init__(self, value: torch.Tensor):
        super().__init__()
        # not saved with the weights: the param is its source of truth
        self.register_buffer("value", value, persistent=False)

    def forward(self) -> torch.Tensor:
        return self.value


DTYPES = {"float32": torch.float32, "float64": torch.float64, "int64": torch.int64,
          "bool": torch.bool}


def _constant_value(p: ConstantParams) -> torch.Tensor:
    try:
        return torch.tensor(p.value, dtype=DTYPES[p.dtype])
    except (TypeError, ValueError, RuntimeError):
        raise ParamError("value must be a number or a rectangular nested list of numbers, "
                         f"got {p.value!r}") from None


class ConstantParams(Params):
    value: Any
    dtype: str


def _constant(p: ConstantParams, x):
    return ConstantTensor(_constant_value(p))


def _constant_shape(p: ConstantParams, x):
    """An integer or boolean value is held as it is; a floating one is cast to the graph's
    dtype, which a rule does not see (this block's own `dtype` names the value's type)."""
    if DTYPES[p.dtype].is_floating_point:
        return None
    value = _constant_value(p)  # its checks; the tensor itself is the buffer
    return shapes.Inferred(((tuple(value.shape), value.dtype),),
                           buffer_bytes=value.numel() * value.element_size())


# -- declarations --------------------------------------------------------------------------


layer_op = family("layers", "op", inputs=("input",), outputs=("output",))


TENSOR_AB = [Port("a", doc="first operand"), Port("b", doc="second operand")]

def _binary(args: list, kwargs: dict) -> dict | None:
    return {} if not args and not kwargs else None


def _flatten_call(args: list, kwargs: dict) -> dict | None:
    start = kwargs.get("start_dim", args[0] if args else 0)
    end = kwargs.get("end_dim", args[1] if len(args) > 1 else -1)
    return {"start_dim": start, "end_dim": end} if isinstance(start, int) and \
        isinstance(end, int) and start != 0 else None


def _dropout_call(args: list, kwargs: dict) -> dict | None:
    p = kwargs.get("p", args[0] if args else 0.5)
    return {"p": p} if isinstance(p, float | int) and not kwargs.keys() - {"p", "training",
                                                                           "inplace"} else None


BLOCKS = [
    op("layers.Linear",
       "Fully connected layer y = x Wᵀ + b.\n\nApplies to the last dimension; "
       "`in_features` is inferred from the incoming wire. The weights start as `init` "
       "says, or as set by hand in `weight` (one row of in_features per output) and "
       "`bias_init`; trainable false freezes them, as in a threshold unit of the notes.",
       _linear, inputs=["input"], outputs=["output"], shape=_linear_shape,
       params=[int_param("out_features", doc="size of each output sample", min=1),
               bool_param("bias", True, "learn an additive bias"),
               int_param("in_features", None, "size of each input sample; empty means "
                         "inferred from the wire", min=1, nullable=True),
               *weight_params("(out_features, in_features)"), DTYPE_PARAM],
       keywords=("dense", "fully connected", "affine", "mlp"),
       torch=TorchEquivalent((nn.Linear,), lambda m: {
           "out_features": m.out_features, "bias": m.bias is not None}),
       search=Search(words=("fc", "dense", "affine", "mlp", "fullyconnected", "perceptron"),
                     popularity=4.0)),
    layer_op("PolynomialFeatures",
        "Polynomial basis expansion x -> [x, x², ..., x^degree].\n\nEach feature is raised "
        "to every power, concatenated power by power (no cross terms); a Linear after it "
        "is polynomial regression. The constant column is off by default because the "
        "Linear has its own bias.",
        _polynomial,
        [int_param("degree", 2, "highest power", min=1, max=20),
         bool_param("include_bias", False, "prepend a column of ones (x⁰)")],
        keywords=("basis", "polynomial regression", "feature map"), shape=_polynomial_shape),
    layer_op("FourierFeatures",
        "Fourier basis expansion: sin(k·ω·x) and cos(k·ω·x) for k = 1..num_frequencies.\n\n"
        "All sines come first (feature-major, frequency inner), then the cosines in the "
        "same order, so (N, F) becomes (N, 2·F·num_frequencies). Fits periodic or wiggly "
        "targets with a linear layer after it.",
        _fourier,
        [int_param("num_frequencies", 4, "how many multiples k of the base frequency", min=1),
         float_param("frequency", 1.0, "base angular frequency ω (radians per unit of x)",
                     min=1e-9)],
        keywords=("basis", "sinusoid", "periodic", "feature map")),
    layer_op("RBF",
        "Gaussian radial basis functions exp(-‖x - c_j‖² / (2σ_j²)) with learnable centres "
        "and widths.\n\n(N, F) becomes (N, num_centers): one bump per centre. Centres start "
        "from N(0, 1) (normalise the inputs), widths at `width`; both are trained.",
        _rbf, [int_param("num_centers", 10, "number of basis functions", min=1),
               float_param("width", 1.0, "initial width σ of every bump", min=1e-6),
               DTYPE_PARAM],
        keywords=("radial basis", "gaussian", "kernel", "rbf network"), shape=_rbf_shape),
    layer_op("Flatten",
        "Flattens dims start_dim..end_dim into one: (N, C, H, W) -> (N, C·H·W).\n\n"
        "Order is channel, then row, then column (PyTorch's NCHW order), as in the notes. "
        "Goes between a conv stack and Linear layers.",
        _flatten, [int_param("start_dim", 1, "first dim to flatten (0 is the batch)"),
                   int_param("end_dim", -1, "last dim to flatten (-1 = the last)")],
        keywords=("unroll", "vectorize", "reshape"), shape=_flatten_shape,
        torch=TorchEquivalent(
            (nn.Flatten,), lambda m: {"start_dim": m.start_dim, "end_dim": m.end_dim}
            if m.start_dim != 0 else None, (torch.flatten, "flatten"), _flatten_call),
        search=Search(popularity=2.0, follows=("layers", "norm", "activations"))),
    layer_op("Reshape",
        "Gives each sample a new shape, keeping the batch dim.\n\n`shape` excludes the batch: "
        "[1, 28, 28] turns (N, 784) into (N, 1, 28, 28). One size may be -1 (inferred).",
        _reshape, [Param("shape", "ints", doc="new shape of one sample, without the batch dim",
                         min=-1)],
        keywords=("view", "unflatten"), shape=_reshape_shape,
        search=Search(words=("view",))),
    layer_op("Permute",
        "Reorders the dims of each sample; the batch dim stays first.\n\n`dims` lists the "
        "non-batch dims in their new order, numbered as PyTorch numbers them (batch = 0), so "
        "[3, 1, 2] turns (N, H, W, C) into (N, C, H, W).",
        _permute, [Param("dims", "ints", doc="new order of dims 1..ndim-1", min=1)],
        keywords=("transpose", "swap axes", "channels last"), shape=_permute_shape,
        search=Search(words=("transpose",))),
    layer_op("Concat",
        "Joins `a`, `b` and up to six more parts (c to h) along a dim, in port order.\n\n"
        "All other dims must match; along `dim` the sizes add up. dim 1 joins features or "
        "channels.",
        _concat, [int_param("dim", 1, "dim to join along (-1 = last)")],
        inputs=[*TENSOR_AB, *(Port(c, doc="a further part, joined after the ones before",
                                   optional=True) for c in CONCAT_PORTS[2:])],
        keywords=("cat", "join", "stack", "merge"), shape=_concat_shape,
        search=Search(words=("cat",))),
    layer_op("Split",
        "Cuts the input in two along a dim: the first split_size entries to `a`, the rest "
        "to `b`.\n\nThe inverse of Concat; e.g. a head that outputs μ and log σ² together.",
        _split, [int_param("split_size", doc="size of the first part, `a`", min=1),
                 int_param("dim", 1, "dim to cut (-1 = last)")],
        outputs=[Port("a", doc="the first split_size entries"), Port("b", doc="the rest")],
        keywords=("chunk", "slice", "separate"), shape=_split_shape),
    layer_op("Add", "Element-wise sum a + b.\n\nShapes must match or broadcast (a (N, F) plus a "
        "learned (F,) bias works).", _arith(torch.add, "add"), inputs=TENSOR_AB,
        keywords=("sum", "plus"), shape=_arith_shape("add"),
        torch=TorchEquivalent(functions=(operator.add, torch.add, "add"), call=_binary),
        search=Search(words=("sum", "plus"))),
    layer_op("Multiply", "Element-wise product a · b.\n\nShapes must match or broadcast; gates "
        "and masks multiply.", _arith(torch.mul, "multiply"), inputs=TENSOR_AB,
        keywords=("product", "hadamard", "gate", "mask"), shape=_arith_shape("multiply"),
        torch=TorchEquivalent(functions=(operator.mul, torch.mul, "mul"),
                              call=_binary)),
    layer_op("MatMul", "Matrix product a @ b, batched over leading dims.\n\nThe last dim of `a` "
        "meets the second-to-last of `b` (as torch.matmul).", _matmul, inputs=TENSOR_AB,
        keywords=("matrix multiply", "dot", "bmm"),
        torch=TorchEquivalent(functions=(operator.matmul, torch.matmul, "matmul"),
                              call=_binary)),
    layer_op("Scale", "Multiplies the input by one scalar, learnable or fixed.\n\nA learnable "
        "gain, or a fixed factor such as 1/√d.",
        _scale,
        [float_param("scale", 1.0, "the factor (its initial value when learnable)"),
         bool_param("learnable", True, "train the factor"), DTYPE_PARAM],
        keywords=("gain", "multiply", "factor"), shape=_scale_shape),
    layer_op("ResidualAdd",
        "Adds a skip connection: output = input + skip, shapes checked.\n\nThe ResNet "
        "shortcut: wire the block's output to `input` and its input to `skip`.",
        _residual, inputs=[Port("input", doc="the branch output"),
                           Port("skip", doc="the shortcut, same shape")],
        keywords=("skip connection", "shortcut", "resnet"), shape=_residual_shape,
        search=Search(words=("residual", "skip"))),
    layer_op("Embedding",
        "Looks up a learnable vector for each integer index (token, class, node id).\n\n"
        "Input of integers, any shape; output adds a last dim of embedding_dim.",
        _embedding,
        [int_param("num_embeddings", doc="number of distinct indices (vocabulary size)",
                   min=1),
         int_param("embedding_dim", doc="length of each vector", min=1),
         int_param("padding_idx", None, "an index whose vector stays zero and untrained",
                   min=0, nullable=True), DTYPE_PARAM],
        keywords=("lookup", "token", "word vector", "one-hot"), shape=_embedding_shape,
        torch=TorchEquivalent((nn.Embedding,), lambda m: {
            "num_embeddings": m.num_embeddings, "embedding_dim": m.embedding_dim,
            "padding_idx": m.padding_idx} if m.max_norm is None else None),
        search=Search(words=("emb", "embed"))),
    layer_op("Dropout",
        "Zeroes each value with probability p while training, scaling the rest by 1/(1-p)."
        "\n\nAt evaluation it passes values through unchanged. A regulariser against "
        "co-adapted units.",
        _dropout, [float_param("p", 0.5, "probability of zeroing",
                                                   min=0, max=1)],
        keywords=("regularization", "noise", "mask"), shape=_dropout_shape,
        torch=TorchEquivalent((nn.Dropout,), lambda m: {"p": m.p}, (F.dropout,),
                              _dropout_call),
        search=Search(words=("drop",), popularity=1.5, follows=("layers", "losses", "metrics"))),
    layer_op("StopGradient",
        "Passes values forward but no gradient back (detach).\n\nFreezes what lies before "
        "it for the loss after it, e.g. the generator when training a GAN discriminator.",
        lambda p, x: Fn(torch.Tensor.detach, "detach"),
        keywords=("detach", "no grad", "freeze"),
        shape=lambda p, x: _view(x["input"], x["input"].shape),
        torch=TorchEquivalent(functions=("detach",), call=_binary)),
    layer_op("Identity", "Passes the input through unchanged.\n\nA named tap point or a "
        "placeholder while editing.", lambda p, x: nn.Identity(),
        keywords=("passthrough", "noop"),
        shape=lambda p, x: _view(x["input"], x["input"].shape),
        torch=TorchEquivalent((nn.Identity,), lambda m: {})),
    layer_op("Parameter",
        "A learnable tensor of a given shape, with no inputs.\n\nThe output is exactly "
        "`shape` (no batch dim); broadcasting adds it to batches, e.g. a learned "
        "positional table or a CLS token. `scale` is the constant's value, the normal's "
        "std, the uniform's half-width or Xavier's gain.",
        _parameter,
        [Param("shape", "ints", doc="shape of the tensor", min=1),
         choice_param("init", tuple(INITS), "normal", "how the values start"),
         float_param("scale", 1.0, "size of the initial values (see the doc)"), DTYPE_PARAM],
        inputs=(), keywords=("weight", "learned", "token", "bias"), shape=_parameter_shape),
    layer_op("Constant",
        "A fixed tensor from a JSON value, with no inputs.\n\nA number or nested lists, "
        "e.g. [[1, 0], [0, 1]]; the output has exactly that shape (no batch dim).",
        _constant,
        [Param("value", "json", doc="a number or a rectangular nested list"),
         choice_param("dtype", tuple(DTYPES), "float32", "element type")],
        inputs=(), keywords=("fixed", "literal", "tensor"), shape=_constant_shape),
]

