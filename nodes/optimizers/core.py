"""Optimizers: each minimises the loss wired into it over the parameters upstream of it.

Where torch has the method the block builds torch's optimizer, so its numbers are torch's.
Three are written here because torch has no equivalent: heavy-ball momentum in the
textbook and moving-average forms, normalised gradient descent, and `LeastSquares`, a
Newton solver that is exact for a squared loss on a linear model. Every block passes its
parameters through `nodegraph.kinds.optim.param_groups`, so `weight_decay` (or `ridge`) can
spare biases when ``decay="weights_only"``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from nodegraph.kinds import NamedParams
from nodegraph.kinds.declare import optimizer
from nodegraph.kinds.optim import OPTIMIZER_PARAMS, OptimizerParams, param_groups
from nodegraph.model.errors import NodegraphError, ParamError
from nodegraph.model.spec import (
    LOSS_IN,
    SCHEDULE_IN,
    Param,
    Search,
    bool_param,
    choice_param,
    float_param,
    int_param,
)

PORTS = {"inputs": [LOSS_IN, SCHEDULE_IN], "outputs": []}
LR = float_param("lr", 0.01, "learning rate (step size); may change while training", min=0,
                 live=True)
WEIGHT_DECAY = float_param("weight_decay", 0.0, "L2 penalty added to the gradient", min=0)
EPS = float_param("eps", 1e-8, "added to the denominator for stability", min=0)
BETAS: Param[list[float]] = Param("betas", "floats", [0.9, 0.999],
              "decay rates of the first and second moment estimates", min=0, max=1)
AMSGRAD = bool_param("amsgrad", False, "use the AMSGrad variant")


def _lr(default: float) -> Param:
    return float_param("lr", default, "learning rate (step size); may change while training",
                       min=0, live=True)


def _momentum(default: float) -> Param:
    return float_param("momentum", default, "momentum factor μ: the share of the previous "
                       "velocity kept at each step", min=0, max=1)


def _torch(cls: type[torch.optim.Optimizer], *names: str, **fixed) -> Callable:
    """A build passing the params `names` (lists as tuples) to torch optimizer `cls`."""
    def build(p, named):
        kwargs: dict[str, Any] = {n: tuple(p[n]) if isinstance(p[n], list) else p[n]
                                  for n in names}
        return cls(param_groups(named, p), **kwargs, **fixed)

    return build


def _evaluate(closure: Callable | None) -> torch.Tensor | None:
    """The loss from an optional closure, with gradients on (inside a no_grad step)."""
    if closure is None:
        return None
    with torch.enable_grad():
        return closure()


# -- momentum --------------------------------------------------------------------------


class HeavyBall(torch.optim.Optimizer):
    """Heavy-ball momentum in the textbook forms torch does not implement.

    ``classical``: v ← μv − lr·g, θ ← θ + v (the notes' form, v₀ = 0).
    ``ema``: v ← μv + (1 − μ)·g, θ ← θ − lr·v (velocity as a moving average of gradients).
    With a constant lr, classical is iterate-identical to torch's SGD(momentum=μ); the forms
    differ once a schedule changes lr, because classical has lr baked into the velocity.
    """

    def __init__(self, params, lr: float, momentum: float, form: str, weight_decay: float = 0):
        if form not in ("classical", "ema"):
            raise ValueError(f"unknown momentum form {form!r}")
        super().__init__(params, {"lr": lr, "momentum": momentum, "weight_decay": weight_decay})
        self.form = form

    @torch.no_grad()
    def step(self, closure=None):
        loss = _evaluate(closure)
        for group in self.param_groups:
            lr, mu, wd = group["lr"], group["momentum"], group["weight_decay"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                g = p.grad if not wd else p.grad.add(p, alpha=wd)
                v = self.state[p].setdefault("velocity", torch.zeros_like(p))
                if self.form == "classical":
                    v.mul_(mu).add_(g, alpha=-lr)
                    p.add_(v)
                else:
                    v.mul_(mu).add_(g, alpha=1 - mu)
                    p.add_(v, alpha=-lr)
        return loss


class MomentumParams(OptimizerParams):
    lr: float
    momentum: float
    form: str
    weight_decay: float


def _momentum_block(p: MomentumParams, named):
    if p.form == "pytorch":
        return torch.optim.SGD(param_groups(named, p), lr=p.lr, momentum=p.momentum)
    return HeavyBall(param_groups(named, p), p.lr, p.momentum, p.form)


class NesterovParams(OptimizerParams):
    lr: float
    momentum: float
    weight_decay: float


def _nesterov(p: NesterovParams, named):
    if p.momentum == 0:
        raise ParamError("Nesterov needs a momentum above 0 (0.9 is usual)")
    return torch.optim.SGD(param_groups(named, p), lr=p.lr, momentum=p.momentum, nesterov=True)


# -- normalised gradient descent ---------------------------------------------------------


class NormalizedGD(torch.optim.Optimizer):
    """θ ← θ − lr·g/(‖g‖ + eps), ‖g‖ the norm of the whole gradient over every parameter.

    The step always has length lr (the steepest-descent direction of a unit step); the
    norm stays a tensor, so a GPU run never waits for it.
    """

    def __init__(self, params, lr: float, eps: float = 1e-12):
        super().__init__(params, {"lr": lr, "eps": eps})

    @torch.no_grad()
    def step(self, closure=None):
        loss = _evaluate(closure)
        grads = [p.grad for g in self.param_groups for p in g["params"] if p.grad is not None]
        if not grads:
            return loss
        norm = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g)
                                                     for g in grads]))
        for group in self.param_groups:
            scale = -group["lr"] / (norm + group["eps"])
            for p in group["params"]:
                if p.grad is not None:
                    p.add_(p.grad * scale)
        return loss


# -- L-BFGS ----------------------------------------------------------------------------


class LBFGS(torch.optim.LBFGS):
    """torch's L-BFGS whose state can be checkpointed.

    torch keeps the curvature history as Python lists of tensors, which a checkpoint cannot
    store without pickling. The history is a cache: `state_dict` leaves it out and restarts
    the iteration count, so a resumed run rebuilds it from its next gradients.
    """

    HISTORY = ("d", "t", "old_dirs", "old_stps", "ro", "al", "H_diag", "prev_flat_grad",
               "prev_loss")

    def state_dict(self):
        sd = super().state_dict()
        for entry in sd["state"].values():
            for key in self.HISTORY:
                entry.pop(key, None)
            entry["n_iter"] = 0
        return sd


class LBFGSParams(OptimizerParams):
    lr: float
    max_iter: int
    tolerance_grad: float
    tolerance_change: float
    history_size: int
    line_search_fn: str


def _lbfgs(p: LBFGSParams, named):
    return LBFGS(param_groups(named, p), lr=p.lr, max_iter=p.max_iter,
                 tolerance_grad=p.tolerance_grad, tolerance_change=p.tolerance_change,
                 history_size=p.history_size,
                 line_search_fn=None if p.line_search_fn == "none" else p.line_search_fn)


# -- least squares by one Newton step ----------------------------------------------------

MAX_SOLVER_PARAMS = 4096  # the Hessian costs one backward pass per parameter


class _Float64(TorchFunctionMode):
    """Every torch call made under it computes in float64: its float32 (or half) tensor
    arguments are widened first, exactly (every float32 is a float64).

    The solver runs the model's forward under it, its parameters turned to float64, so the
    loss, the gradient and the Hessian carry float64's 16 digits instead of float32's 7 —
    the normal equations of a raw monomial basis square a condition number of 10⁷ and
    lose every float32 digit. The target of an in-place call (x.add_(...), ``out=``) keeps
    its dtype: widening it would update a copy.
    """

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        name = getattr(func, "__name__", "")
        if name in _ATTRIBUTE_ACCESS:  # x.grad, x.data, x.shape: about x itself, not its value
            return func(*args, **kwargs)
        out = kwargs.pop("out", None)
        in_place = name in ("__setitem__",) or name.startswith("__i") or (
            name.endswith("_") and not name.endswith("__"))
        head, rest = (args[:1], args[1:]) if in_place else ((), args)
        rest, kwargs = _widen((rest, kwargs))
        if out is not None:
            kwargs["out"] = out
        return func(*head, *rest, **kwargs)


_ATTRIBUTE_ACCESS = ("__get__", "__set__", "__delete__")


def _widen(value):
    """`value` with every non-float64 floating tensor in it (in lists, tuples and dicts,
    as torch.cat and keyword arguments hold them) converted to float64."""
    if isinstance(value, torch.Tensor):
        return value.double() if value.is_floating_point() and value.dtype != torch.float64 \
            else value
    if type(value) in (list, tuple):  # not torch.Size or named tuples: no tensors there
        return type(value)(_widen(v) for v in value)
    if isinstance(value, dict):
        return {k: _widen(v) for k, v in value.items()}
    return value


@contextmanager
def _in_float64(params: list[torch.nn.Parameter]) -> Iterator[bool]:
    """Parameters held as float64 and torch calls widened to float64, for the block inside;
    the parameters return to their dtypes after it. Yields False (nothing changed) on a
    device without float64 (Apple's MPS)."""
    if any(p.device.type == "mps" for p in params):
        yield False
        return
    dtypes = [p.dtype for p in params]
    for p in params:
        p.data = p.data.double()
    try:
        with _Float64():
            yield True
    finally:
        for p, dtype in zip(params, dtypes, strict=True):
            p.data = p.data.to(dtype)


class LeastSquares(torch.optim.Optimizer):
    """Newton's method on the full Hessian: one step solves a quadratic loss exactly.

    Each step asks the trainer's closure for the loss with its autograd graph
    (``closure(backward=False)``), differentiates it twice — the gradient g and the
    Hessian H over all parameters — and moves θ ← θ − lr·(H + 2λD)⁻¹(g + 2λDθ): the
    minimiser of loss + λ·Σ_D θ², where λ is the group's `ridge` and D its parameters.
    For a squared loss on a linear model that is the normal equations, θ* = (XᵀX)⁻¹Xᵀy
    (losses.SSE; losses.MSE scales XᵀX and Xᵀy by 1/n alike). With losses.SSE and ridge λ
    on every parameter, θ* = (XᵀX + λI)⁻¹Xᵀy. For other convex losses each step is one
    Newton iteration (for BCE: iteratively reweighted least squares).

    The whole step runs in float64 — the forward pass, both derivatives and the solve —
    because the normal equations square the design's condition number. The system is
    scaled to a unit diagonal (Jacobi) and solved by SVD least squares, so a singular
    Hessian (a parameter the loss does not use, more parameters than samples) gets the
    smallest step in that scaling, and an unused parameter does not move. The forward
    passes of a solve leave the buffers of layers that update them in place as they were
    (BatchNorm's running statistics: the update lands on a float64 copy).
    """

    def __init__(self, params, lr: float = 1.0, iterations: int = 1):
        super().__init__(params, {"lr": lr, "ridge": 0.0})
        self.iterations = iterations

    def step(self, closure=None):
        if closure is None:
            raise NodegraphError("LeastSquares needs the loss closure (it is a closure=True "
                                 "optimizer)")
        params = [p for g in self.param_groups for p in g["params"]]
        dtype, first = params[0].dtype, None
        for _ in range(self.iterations):
            with _in_float64(params):
                loss = closure(backward=False)
                first = loss.detach().to(dtype) if first is None else first
                delta = self._newton_step(loss, params)
            self._move(delta)
        return first

    def _newton_step(self, loss: torch.Tensor, params: list) -> torch.Tensor:
        """The step (H + 2λD)⁻¹(g + 2λDθ), as one float64 vector over all parameters."""
        grads = torch.autograd.grad(loss, params, create_graph=True, allow_unused=True)
        g = _flat(grads, params)
        hessian = torch.stack([self._hessian_row(gi, params) for gi in g]).double()
        theta = _flat([p.detach() for p in params], params).double()
        ridge = torch.cat([torch.full((p.numel(),), 2.0 * grp["ridge"], dtype=torch.float64,
                                      device=p.device)
                           for grp in self.param_groups for p in grp["params"]])
        hessian = hessian + torch.diag(ridge)
        rhs = g.detach().double() + ridge * theta
        return _solve(hessian.cpu(), rhs.cpu()).to(theta.device)

    def _move(self, delta: torch.Tensor) -> None:
        with torch.no_grad():
            offset = 0
            for grp in self.param_groups:
                for p in grp["params"]:
                    n = p.numel()
                    step = (grp["lr"] * delta[offset:offset + n]).reshape(p.shape)
                    p.copy_((p.double() - step).to(p.dtype))  # θ − step rounded once
                    offset += n

    @staticmethod
    def _hessian_row(gi: torch.Tensor, params: list) -> torch.Tensor:
        if not gi.requires_grad:  # a gradient entry that does not depend on θ
            return torch.zeros(sum(p.numel() for p in params), dtype=gi.dtype,
                               device=gi.device)
        return _flat(torch.autograd.grad(gi, params, retain_graph=True, allow_unused=True),
                     params)


def _solve(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """x minimising ‖a x − b‖ (minimum norm where a is singular), for a symmetric `a`.

    Scaling rows and columns by 1/√|a_ii| first gives the SVD's cut-off for "singular"
    the same meaning for every parameter, however different their scales (x and x¹⁵).
    """
    diag = a.diagonal().abs()
    scale = torch.where(diag > 0, diag.rsqrt(), torch.ones_like(diag))
    scaled = scale[:, None] * a * scale[None, :]
    y = torch.linalg.lstsq(scaled, (scale * b)[:, None], driver="gelsd").solution[:, 0]
    return scale * y


def _flat(tensors, params) -> torch.Tensor:
    """One vector of `tensors` (a missing gradient counts as zeros)."""
    return torch.cat([(t if t is not None else torch.zeros_like(p)).reshape(-1)
                      for t, p in zip(tensors, params, strict=True)])


class LeastSquaresParams(OptimizerParams):
    ridge: float
    lr: float
    iterations: int


def _least_squares(p: LeastSquaresParams, named):
    count = sum(t.numel() for _, t in named)
    if count > MAX_SOLVER_PARAMS:
        raise NodegraphError(f"LeastSquares builds the full Hessian and would need {count} "
                             f"backward passes per step (the limit is {MAX_SOLVER_PARAMS})")
    groups = param_groups(named, {"weight_decay": p.ridge, "decay": p.decay})
    for group in groups:
        group["ridge"] = group.pop("weight_decay")
    return LeastSquares(groups, lr=p.lr, iterations=p.iterations)


class NormalizedGDParams(OptimizerParams):
    lr: float
    eps: float


def _normalized_gd(p: NormalizedGDParams, named: NamedParams) -> NormalizedGD:
    return NormalizedGD(param_groups(named, p), p.lr, p.eps)


BLOCKS = [
    optimizer("optimizers.GD",
              "Gradient descent θ ← θ − lr·∇L, without momentum.\n\n"
              "Full-batch GD when the data block's batch_size is 0 (one step per epoch on the "
              "whole training split); with a smaller batch size it is mini-batch SGD — the "
              "batch size belongs to the data block, not to the optimizer.",
              _torch(torch.optim.SGD, "lr"), params=[LR, WEIGHT_DECAY, *OPTIMIZER_PARAMS],
              keywords=("gradient descent", "full batch", "steepest descent"), **PORTS),
    optimizer("optimizers.SGD",
              "Stochastic gradient descent, with optional (Nesterov) momentum.",
              _torch(torch.optim.SGD, "lr", "momentum", "dampening", "nesterov"),
              params=[LR, float_param("momentum", 0.0, "momentum factor", min=0, max=1),
                      float_param("dampening", 0.0, "dampening for momentum", min=0, max=1),
                      bool_param("nesterov", False, "use Nesterov momentum"),
                      WEIGHT_DECAY, *OPTIMIZER_PARAMS],
              keywords=("gradient descent", "momentum"), **PORTS,
              search=Search(popularity=3.0)),
    optimizer("optimizers.Momentum",
              "Gradient descent with heavy-ball momentum, in the form you choose.\n\n"
              "pytorch: v ← μv + g, θ ← θ − lr·v (torch's SGD). classical: v ← μv − lr·g, "
              "θ ← θ + v (the notes' form). ema: v ← μv + (1 − μ)g, θ ← θ − lr·v. All start "
              "from v = 0. With a fixed lr, pytorch and classical take the same steps; ema takes "
              "steps (1 − μ) times smaller. Momentum damps zig-zags across a ravine.",
              _momentum_block,
              params=[LR, _momentum(0.9),
                      choice_param("form", ("pytorch", "classical", "ema"), "pytorch",
                                   "which momentum update (see the block's description)"),
                      WEIGHT_DECAY, *OPTIMIZER_PARAMS],
              keywords=("heavy ball", "velocity", "polyak"), **PORTS),
    optimizer("optimizers.Nesterov",
              "Nesterov accelerated gradient (torch's form).\n\n"
              "v ← μv + g, θ ← θ − lr·(g + μv): the look-ahead gradient of Nesterov's method "
              "rewritten so it needs one gradient per step (not iterate-identical to the "
              "textbook look-ahead form, which evaluates g at θ − lr·μ·v).",
              _nesterov, params=[LR, _momentum(0.9), WEIGHT_DECAY, *OPTIMIZER_PARAMS],
              keywords=("nag", "accelerated", "momentum", "look-ahead"), **PORTS),
    optimizer("optimizers.AdaGrad",
              "AdaGrad: per-parameter steps lr/√(Σg² + eps) from the sum of squared gradients.\n\n"
              "Parameters with rare, large gradients get larger steps; the sum only grows, so "
              "steps shrink over training.",
              _torch(torch.optim.Adagrad, "lr", "lr_decay", "initial_accumulator_value", "eps"),
              params=[LR, float_param("lr_decay", 0.0, "lr is divided by 1 + (step − 1)·lr_decay",
                                      min=0),
                      float_param("initial_accumulator_value", 0.0, "starting value of the sum of "
                                  "squared gradients", min=0),
                      float_param("eps", 1e-10, "added to the denominator for stability", min=0),
                      WEIGHT_DECAY, *OPTIMIZER_PARAMS],
              keywords=("adaptive", "adagrad"), **PORTS),
    optimizer("optimizers.RMSProp",
              "RMSProp: v ← αv + (1 − α)g², θ ← θ − lr·g/(√v + eps).\n\n"
              "Like AdaGrad with a moving average instead of a sum, so steps do not vanish. The "
              "notes' β is torch's `alpha` (they suggest 0.9; torch's default is 0.99).",
              _torch(torch.optim.RMSprop, "lr", "alpha", "eps", "momentum", "centered"),
              params=[LR, float_param("alpha", 0.99, "decay rate of the moving average of g²",
                                      min=0, max=1),
                      EPS, _momentum(0.0),
                      bool_param("centered", False, "divide by the estimated variance of the "
                                 "gradient instead of its second moment"),
                      WEIGHT_DECAY, *OPTIMIZER_PARAMS],
              keywords=("adaptive", "rmsprop", "moving average"), **PORTS),
    optimizer("optimizers.Adadelta",
              "Adadelta: RMSProp whose step size comes from a moving average of past steps.\n\n"
              "Δθ = −√(u + eps)/√(v + eps)·g with v and u moving averages of g² and Δθ²; lr "
              "only scales that step (1.0 is the method as published).",
              _torch(torch.optim.Adadelta, "lr", "rho", "eps"),
              params=[_lr(1.0), float_param("rho", 0.9, "decay rate of the moving averages",
                                            min=0, max=1),
                      float_param("eps", 1e-6, "added inside the square roots", min=0),
                      WEIGHT_DECAY, *OPTIMIZER_PARAMS],
              keywords=("adaptive", "adadelta"), **PORTS),
    optimizer("optimizers.Adam",
              "Adam: adaptive moment estimation (Kingma & Ba, 2015).",
              _torch(torch.optim.Adam, "lr", "betas", "eps", "amsgrad"),
              params=[_lr(0.001), BETAS, EPS, WEIGHT_DECAY, AMSGRAD, *OPTIMIZER_PARAMS],
              keywords=("adaptive",), **PORTS,
              search=Search(popularity=4.0)),
    optimizer("optimizers.AdamW",
              "AdamW: Adam with decoupled weight decay (Loshchilov & Hutter, 2019).\n\n"
              "Weight decay shrinks θ by lr·weight_decay·θ directly instead of being added to "
              "the gradient, so Adam's scaling does not weaken it.",
              _torch(torch.optim.AdamW, "lr", "betas", "eps", "amsgrad"),
              params=[_lr(0.001), BETAS, EPS,
                      float_param("weight_decay", 0.01, "decoupled weight decay factor", min=0),
                      AMSGRAD, *OPTIMIZER_PARAMS],
              keywords=("adaptive", "decoupled", "weight decay"), **PORTS,
              search=Search(popularity=2.5)),
    optimizer("optimizers.LBFGS",
              "L-BFGS: a quasi-Newton method that re-evaluates the loss during each step.\n\n"
              "Builds a curvature estimate from the last `history_size` gradients; each "
              "trainer step runs up to `max_iter` iterations on the batch. Best with full "
              "batches (batch_size 0) on small smooth problems. Gradient clipping does not "
              "apply.",
              _lbfgs,
              params=[_lr(1.0),
                      int_param("max_iter", 20, "iterations per trainer step", min=1),
                      float_param("tolerance_grad", 1e-7, "stop when the largest gradient entry "
                                  "is below this", min=0),
                      float_param("tolerance_change", 1e-9, "stop when the loss or step changes "
                                  "less than this", min=0),
                      int_param("history_size", 100, "gradients kept for the curvature estimate",
                                min=1),
                      choice_param("line_search_fn", ("none", "strong_wolfe"), "none",
                                   "none: fixed step lr; strong_wolfe: a line search (safer on "
                                   "well-scaled inputs)"),
                      *OPTIMIZER_PARAMS],
              keywords=("quasi-newton", "bfgs", "second order", "closure"), closure=True,
              **PORTS),
    optimizer("optimizers.NormalizedGD",
              "Normalised gradient descent: a step of length lr along −g/‖g‖.\n\n"
              "The steepest-descent direction with a fixed step length, ‖g‖ taken over all "
              "parameters together; it does not slow down where the loss is flat, nor blow up "
              "where it is steep.",
              _normalized_gd,
              params=[LR, float_param("eps", 1e-12, "added to ‖g‖ so a zero gradient gives no "
                                      "step", min=0), *OPTIMIZER_PARAMS],
              keywords=("ngd", "steepest descent", "unit step"), **PORTS),
    optimizer("optimizers.LeastSquares",
              "Closed-form least squares (ridge): one Newton step lands on the minimiser.\n\n"
              "For a squared loss on a linear model the step solves the normal equations "
              "θ* = (XᵀX)⁻¹Xᵀy exactly: use losses.SSE or losses.MSE, batch_size 0 and one "
              "epoch. `ridge` λ adds λ·‖θ‖² to the loss (biases included unless decay is "
              "weights_only); with losses.SSE that is θ* = (XᵀX + λI)⁻¹Xᵀy, with losses.MSE "
              "the same with λ·n. For other smooth losses each step is a Newton iteration. It "
              "builds the full Hessian (small models only) and works in float64, so raw "
              "polynomial features stay exact to about degree 15.",
              _least_squares,
              params=[float_param("ridge", 0.0, "λ of the ridge penalty λ·‖θ‖²", min=0),
                      float_param("lr", 1.0, "fraction of the Newton step taken; 1 is the exact "
                                  "solve", min=0),
                      int_param("iterations", 1, "Newton steps per trainer step: one solves a "
                                "squared loss; more refine a badly conditioned solve, or iterate "
                                "Newton's method on other losses", min=1),
                      *OPTIMIZER_PARAMS],
              keywords=("normal equations", "ridge", "ols", "newton", "solver", "closed form"),
              closure=True, **PORTS),
]
