"""The lasso's optimizer: proximal gradient descent on a loss plus an L1 penalty.

An L1 penalty λ‖w‖₁ has no gradient at 0, so gradient descent on it (a subgradient)
oscillates around zero and never makes a weight exactly 0 — yet exact zeros are the point
of the lasso. The proximal step takes the gradient step on the smooth
loss and then solves the penalty exactly: soft thresholding, S_t(z) = sign(z)·max(|z| − t, 0)
with t = lr·λ, which sets small weights to exactly 0 (ISTA). `accelerated` adds Nesterov's
extrapolation between steps (FISTA), which converges as 1/k² instead of 1/k.

With losses.MSE, (1/n)‖y − Xw − b‖² + λ‖w‖₁, the minimiser is scikit-learn's
Lasso(alpha = λ/2), whose objective is half of that. Biases are spared by default
(``decay="weights_only"``), as the notes' penalty sums over θ_1..θ_q only.
"""

from __future__ import annotations

import math

import torch

from nodegraph.kinds.declare import optimizer
from nodegraph.kinds.optim import OPTIMIZER_PARAMS, OptimizerParams, param_groups
from nodegraph.model.spec import (
    LOSS_IN,
    SCHEDULE_IN,
    bool_param,
    choice_param,
    float_param,
)


def soft_threshold(z: torch.Tensor, t: float) -> torch.Tensor:
    """The proximal map of t·|z|: shrink towards 0 by t, and to exactly 0 within ±t."""
    return z.sign() * (z.abs() - t).clamp(min=0)


class ProximalGD(torch.optim.Optimizer):
    """ISTA / FISTA: θ ← S_{lr·λ}(y − lr·∇L(y)), y the extrapolated point (FISTA) or θ."""

    def __init__(self, params, lr: float, accelerated: bool):
        super().__init__(params, {"lr": lr, "l1": 0.0})
        self.accelerated = accelerated
        self.t = 1.0  # FISTA's momentum sequence

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        t_next = (1 + math.sqrt(1 + 4 * self.t ** 2)) / 2
        beta = (self.t - 1) / t_next if self.accelerated else 0.0
        for group in self.param_groups:
            lr, l1 = group["lr"], group["l1"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                x = soft_threshold(p - lr * p.grad, lr * l1)  # p holds y, the extrapolation
                state = self.state[p]
                previous = state.get("x", x)
                state["x"] = x.clone()
                p.copy_(x + beta * (x - previous))
        self.t = t_next
        return loss


class ProximalGDParams(OptimizerParams):
    lr: float
    l1: float
    accelerated: bool


def _build(p: ProximalGDParams, named):
    groups = param_groups(named, {"weight_decay": p.l1, "decay": p.decay})
    for group in groups:
        group["l1"] = group.pop("weight_decay")
    return ProximalGD(groups, p.lr, p.accelerated)


BLOCKS = [
    optimizer("optimizers.ProximalGD",
              "Proximal gradient descent (ISTA/FISTA): the lasso's solver.\n\n"
              "A gradient step on the loss, then soft thresholding by lr·l1 — the exact "
              "minimiser of the L1 penalty l1·‖w‖₁ near that step — so weights reach exactly "
              "0. With losses.MSE the solution is scikit-learn's Lasso(alpha = l1/2). Use full "
              "batches (batch_size 0) and lr ≤ 1/L, L the loss's gradient Lipschitz constant "
              "(2·λ_max(XᵀX)/n for MSE).",
              _build,
              inputs=[LOSS_IN, SCHEDULE_IN], outputs=[],
              params=[float_param("lr", 0.1, "step size", min=0),
                      float_param("l1", 0.0, "λ of the L1 penalty λ·‖w‖₁", min=0),
                      bool_param("accelerated", True, "FISTA's extrapolation (1/k² convergence); "
                                 "off: plain ISTA"),
                      *[q if q.name != "decay" else choice_param(
                          "decay", ("all", "weights_only"), "weights_only",
                          "which parameters l1 applies to: all, or only weight matrices "
                          "(biases spared, as in the lasso)") for q in OPTIMIZER_PARAMS]],
              keywords=("lasso", "l1", "ista", "fista", "soft threshold", "sparse", "proximal")),
]
