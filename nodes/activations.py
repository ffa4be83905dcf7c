"""Activation functions: element-wise non-linearities, and softmax over one dim.

Each block maps every value on its own (Softmax and LogSoftmax normalise along `dim`).
Params carry torch's names (`negative_slope`, `alpha`, `beta`...). The step-like ones
(Step, Sign) have zero gradient almost everywhere: they are for hand-built threshold units
(TLUs, Hopfield recall), not for layers trained by gradient descent.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn
from torch.nn import functional as F

from nodegraph.kinds import shapes
from nodegraph.kinds.declare import family
from nodegraph.kinds.dtypes import DTYPE_PARAM
from nodegraph.model.errors import ParamError, PortError
from nodegraph.model.spec import (
    Params,
    Search,
    TorchEquivalent,
    choice_param,
    float_param,
    int_param,
)
from nodes._shapes import dim_index, need_float
from nodes.layers.dense import Fn


def _elementwise(make: Callable) -> Callable:
    """A build that checks for real numbers, then makes the module from the params."""
    def build(p, x):
        need_float(x, "input")
        return make(p, x)
    return build


_act = family("activations", "op", wrap=_elementwise, inputs=["input"], outputs=["output"])


def _made(work: int, dim: bool = False) -> shapes.Rule:
    """The shape rule of an activation whose forward makes `work` tensors the size of its
    input (a multiplied or divided input first, then the function); `dim`: it has one."""
    def rule(p: Params, x):
        need_float(x, "input")
        if dim:
            t = x["input"]
            dim_index(p.typed(DIM), t.ndim, "input", t.shape)
        return shapes.like(x["input"], work)
    return rule


class _Heaviside(torch.autograd.Function):
    """Θ(x) whose backward passes its true derivative, zero, like torch.sign does.

    A bare comparison would cut the autograd graph, and a loss behind a threshold unit
    would fail to backpropagate at all; with a zero gradient it trains and nothing moves,
    which is the lesson (step units are set by hand, not learned).
    """

    @staticmethod
    def forward(ctx, t: torch.Tensor, value: float) -> torch.Tensor:
        return (t > 0).to(t.dtype) + value * (t == 0).to(t.dtype)

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        return torch.zeros_like(grad), None


def _step(p: StepParams, x):
    value, threshold = p.value_at_zero, p.threshold
    if threshold == 0:
        return Fn(lambda t: _Heaviside.apply(t, value), f"heaviside(x, {value})")
    # x − θ is exactly 0 only at x = θ (IEEE subtraction of unequal floats never gives 0)
    return Fn(lambda t: _Heaviside.apply(t - threshold, value),
              f"heaviside(x − {threshold}, {value})")


class StepParams(Params):
    threshold: float
    value_at_zero: float


def _step_shape(p: StepParams, x):
    need_float(x, "input")
    t = x["input"]
    # two bool masks (x > 0, x == 0), each cast to t's dtype, the product and the sum; and
    # x − θ first when θ is not 0
    floats = 4 + (p.threshold != 0)
    return shapes.Inferred(((t.shape, t.dtype),), work=floats * t.nbytes + 2 * t.numel())


class SigmoidParams(Params):
    slope: float


def _sigmoid(p: SigmoidParams, x):
    slope = p.slope
    return Fn(lambda t: torch.sigmoid(slope * t), f"sigmoid({slope}·x)")


class PReLUParams(Params):
    num_parameters: int | None
    init: float
    dtype: str


def _prelu(p: PReLUParams, x):
    t = x["input"]
    n = p.num_parameters
    if n is None:  # one slope per channel
        if t.ndim < 2:
            raise PortError("input", "has no channel dim (dim 1) for one slope per channel",
                            "set num_parameters to 1")
        n = t.shape[1]
    elif n > 1 and (t.ndim < 2 or t.shape[1] != n):
        raise PortError("input", f"has {t.shape[1] if t.ndim > 1 else 'no'} channels (dim 1) "
                        f"but num_parameters is {n}",
                        "use 1 (one shared slope) or empty (one per channel, inferred)")
    return nn.PReLU(n, p.init)


class RReLUParams(Params):
    lower: float
    upper: float


def _rrelu(p: RReLUParams, x):
    if p.lower > p.upper:
        raise ParamError(f"lower ({p.lower}) must not exceed upper ({p.upper})")
    return nn.RReLU(p.lower, p.upper)


class SoftmaxParams(Params):
    """Softmax's and LogSoftmax's."""

    dim: int
    temperature: float


def _softmax(log: bool):
    def build(p: SoftmaxParams, x):
        t = x["input"]
        dim = dim_index(p.dim, t.ndim, "input", t.shape)
        temperature = p.temperature
        fn = torch.log_softmax if log else torch.softmax
        return Fn(lambda v: fn(v / temperature, dim), f"{fn.__name__}(x/{temperature}, "
                  f"dim={dim})")
    return build


DIM = int_param("dim", -1, "dim whose entries are normalised (-1 = last, the classes)")
SOFTMAX_PARAMS = [DIM,
                  float_param("temperature", 1.0, "divides the input first: above 1 flattens "
                              "the distribution, below 1 sharpens it", min=1e-6)]

def _dim(args: list, kwargs: dict) -> dict | None:
    dim = kwargs.get("dim", args[0] if args else None)
    return {"dim": dim} if isinstance(dim, int) and not kwargs.keys() - {"dim", "dtype",
                                                                          "_stacklevel"} \
        and kwargs.get("dtype") is None else None


def _none(args: list, kwargs: dict) -> dict | None:
    """A call with no params (an `inplace` flag changes nothing in a graph)."""
    return {} if not args and not kwargs.keys() - {"inplace"} or args == [True] or \
        args == [False] else None


class LeakyReLUParams(Params):
    negative_slope: float


def _leaky_relu(p: LeakyReLUParams, x) -> nn.Module:
    return nn.LeakyReLU(p.negative_slope)


class ELUParams(Params):
    alpha: float


def _elu(p: ELUParams, x) -> nn.Module:
    return nn.ELU(p.alpha)


class GELUParams(Params):
    approximate: str


def _gelu(p: GELUParams, x) -> nn.Module:
    return nn.GELU(p.approximate)


class SoftplusParams(Params):
    beta: float
    threshold: float


def _softplus(p: SoftplusParams, x) -> nn.Module:
    return nn.Softplus(p.beta, p.threshold)


BLOCKS = [
    _act("Identity", "Identity activation f(x) = x.\n\nThe linear output of a regression "
         "head.", lambda p, x: nn.Identity(), keywords=("linear", "none"),
         shape=_made(0)),
    _act("Step", "Heaviside step: 1 for x > threshold, 0 below, `value_at_zero` at it.\n\n"
         "The threshold logic unit (TLU) of the perceptron; hand-set weights only, as its "
         "gradient is zero. A threshold θ is the same unit as a bias of −θ before the step.",
         _step,
         [float_param("threshold", 0.0, "θ: the unit fires (outputs 1) for x > θ"),
          float_param("value_at_zero", 0.0, "the output at exactly x = θ (0 by default)",
                      min=0, max=1)],
         ("heaviside", "threshold", "tlu", "perceptron"), shape=_step_shape),
    _act("Sign", "Sign function: -1, 0 or 1.\n\nThe bipolar threshold of perceptrons and "
         "Hopfield units.", lambda p, x: Fn(torch.sign, "sign"), keywords=("bipolar",),
         shape=_made(1)),
    _act("Sigmoid", "Logistic sigmoid 1 / (1 + exp(-slope·x)), squashing to (0, 1).\n\n"
         "Reads as a probability; a larger slope makes it closer to a step.", _sigmoid,
         [float_param("slope", 1.0, "steepness: multiplies x before the sigmoid")],
         ("logistic",),
         shape=_made(2),
         torch=TorchEquivalent((nn.Sigmoid,), lambda m: {},
                               (torch.sigmoid, F.sigmoid, "sigmoid"), _none),
         search=Search(words=("sigm", "logistic"), popularity=2.0)),
    _act("Tanh", "Hyperbolic tangent, squashing to (-1, 1).\n\nZero-centred, unlike the "
         "sigmoid.", lambda p, x: nn.Tanh(), keywords=("squash",),
         shape=_made(1),
         torch=TorchEquivalent((nn.Tanh,), lambda m: {},
                               (torch.tanh, F.tanh, "tanh"), _none),
         search=Search(popularity=2.5)),
    _act("ReLU", "Rectified linear unit max(0, x).\n\nThe default hidden activation: cheap, "
         "and its gradient does not vanish for x > 0.", lambda p, x: nn.ReLU(),
         keywords=("rectifier",),
         shape=_made(1),
         torch=TorchEquivalent((nn.ReLU,), lambda m: {},
                               (F.relu, torch.relu, "relu"), _none),
         search=Search(popularity=4.0)),
    _act("LeakyReLU", "Leaky ReLU: x for x >= 0, negative_slope·x below.\n\nKeeps a small "
         "gradient for negative inputs so units cannot die.",
         _leaky_relu,
         [float_param("negative_slope", 0.01, "slope for x < 0 (Keras uses 0.3)", min=0)],
         ("leaky", "rectifier"),
         shape=_made(1),
         torch=TorchEquivalent((nn.LeakyReLU,),
                               lambda m: {"negative_slope": m.negative_slope})),
    _act("PReLU", "Parametric ReLU: a leaky ReLU whose negative slope is learned.\n\nOne "
         "slope shared, or one per channel (dim 1).", _prelu,
         [int_param("num_parameters", 1, "number of slopes: 1 (shared) or the channel "
                    "count; empty means one per channel, inferred", min=1, nullable=True),
          float_param("init", 0.25, "initial slope"), DTYPE_PARAM],
         ("parametric", "learnable", "rectifier"),
         torch=TorchEquivalent((nn.PReLU,),
                               lambda m: {"num_parameters": m.num_parameters})),
    _act("RReLU", "Randomised leaky ReLU: the negative slope is drawn from U(lower, upper) "
         "while training.\n\nAt evaluation the slope is fixed to the mean (lower + upper)/2.",
         _rrelu,
         [float_param("lower", 1 / 8, "smallest slope", min=0),
          float_param("upper", 1 / 3, "largest slope", min=0)],
         ("randomized", "rectifier")),
    _act("ELU", "Exponential linear unit: x for x > 0, alpha·(exp(x) - 1) below.\n\n"
         "Smooth, with negative outputs that push mean activations towards zero.",
         _elu, [float_param("alpha", 1.0, "the value approached "
                                                    "for very negative x is -alpha")],
         ("exponential",),
         shape=_made(1),
         torch=TorchEquivalent((nn.ELU,), lambda m: {"alpha": m.alpha})),
    _act("GELU", "Gaussian error linear unit x·Φ(x).\n\nThe smooth ReLU of transformers; "
         "`tanh` uses the faster approximation.",
         _gelu,
         [choice_param("approximate", ("none", "tanh"), "none", "exact (none) or the tanh "
                       "approximation")],
         ("gaussian", "transformer"),
         shape=_made(1),
         torch=TorchEquivalent(
             (nn.GELU,), lambda m: {"approximate": m.approximate}, (F.gelu,),
             lambda a, k: {"approximate": k.get("approximate", "none")} if not a and
             not k.keys() - {"approximate"} else None),
         search=Search(popularity=2.0)),
    _act("SiLU", "Sigmoid-weighted linear unit x·σ(x) (swish).\n\nSmooth and non-monotonic "
         "near zero; the usual activation of diffusion U-Nets and timestep MLPs.",
         lambda p, x: nn.SiLU(), keywords=("swish",),
         shape=_made(1),
         torch=TorchEquivalent((nn.SiLU,), lambda m: {}, (F.silu,), _none),
         search=Search(words=("swish",))),
    _act("ReLU6", "ReLU capped at 6: min(max(0, x), 6).\n\nThe activation of MobileNet v1/v2, "
         "kept bounded for low-precision inference.", lambda p, x: nn.ReLU6(),
         keywords=("relu6", "clipped", "mobilenet"),
         shape=_made(1),
         torch=TorchEquivalent((nn.ReLU6,), lambda m: {}, (F.relu6,), _none)),
    _act("Hardswish", "Hard swish x·ReLU6(x + 3)/6: a piecewise approximation of SiLU.\n\n"
         "Cheap on mobile hardware; the activation of MobileNetV3.",
         lambda p, x: nn.Hardswish(), keywords=("hard swish", "mobilenet", "silu"),
         shape=_made(1),
         torch=TorchEquivalent((nn.Hardswish,), lambda m: {}, (F.hardswish,),
                               _none)),
    _act("Hardsigmoid", "Hard sigmoid ReLU6(x + 3)/6: 0 below -3, 1 above 3, linear "
         "between.\n\nThe gate of MobileNetV3's squeeze-and-excitation.",
         lambda p, x: nn.Hardsigmoid(), keywords=("hard sigmoid", "gate", "mobilenet"),
         shape=_made(1),
         torch=TorchEquivalent((nn.Hardsigmoid,), lambda m: {},
                               (F.hardsigmoid,), _none)),
    _act("Softplus", "Softplus log(1 + exp(beta·x)) / beta: a smooth ReLU.\n\nAbove "
         "beta·x > threshold it returns x, for numerical stability. Gives positive outputs "
         "(variances, rates).",
         _softplus,
         [float_param("beta", 1.0, "sharpness", min=1e-6),
          float_param("threshold", 20.0, "beta·x above which the result is linear")],
         ("smooth relu", "positive"),
         shape=_made(1),
         torch=TorchEquivalent((nn.Softplus,),
                               lambda m: {"beta": m.beta, "threshold": m.threshold})),
    _act("Satlins", "Symmetric saturating linear: clamp(x, -1, 1).\n\nMATLAB's satlins, "
         "the transfer function of newhop Hopfield networks.",
         lambda p, x: nn.Hardtanh(-1.0, 1.0), keywords=("hardtanh", "clip", "hopfield"),
         shape=_made(1)),
    _act("Softmax", "Softmax of x / temperature along `dim`: positive values summing to 1."
         "\n\nTurns class scores into probabilities. For training with cross-entropy feed "
         "the raw scores to the loss instead (it has softmax built in).",
         _softmax(log=False), SOFTMAX_PARAMS, ("probabilities", "normalize", "temperature"),
         shape=_made(2, dim=True),
         torch=TorchEquivalent(
             (nn.Softmax,), lambda m: {"dim": m.dim} if m.dim is not None else None,
             (F.softmax, torch.softmax, "softmax"), _dim)),
    _act("LogSoftmax", "Log of the softmax of x / temperature along `dim`.\n\nNumerically "
         "stable log-probabilities, for a negative log-likelihood.",
         _softmax(log=True), SOFTMAX_PARAMS, ("log probabilities", "nll"),
         shape=_made(2, dim=True),
         torch=TorchEquivalent(
             (nn.LogSoftmax,), lambda m: {"dim": m.dim} if m.dim is not None else None,
             (F.log_softmax, torch.log_softmax, "log_softmax"), _dim)),
]

