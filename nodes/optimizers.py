"""Optimizers: each minimises the loss wired into it over the parameters upstream of it."""

from __future__ import annotations

import torch

from nodegraph.optim import OPTIMIZER_PARAMS, param_groups
from nodegraph.spec import LOSS_IN, SCHEDULE_IN, Param, block, bool_param, float_param

PORTS = {"inputs": [LOSS_IN, SCHEDULE_IN], "outputs": []}
LR = float_param("lr", 0.01, "learning rate (step size)", min=0)
WEIGHT_DECAY = float_param("weight_decay", 0.0, "L2 penalty added to the gradient", min=0)

BLOCKS = [
    block("optimizers.SGD", "optimizer",
          "Stochastic gradient descent, with optional (Nesterov) momentum.",
          lambda p, named: torch.optim.SGD(param_groups(named, p), lr=p.lr,
                                           momentum=p.momentum, dampening=p.dampening,
                                           nesterov=p.nesterov),
          params=[LR, float_param("momentum", 0.0, "momentum factor", min=0, max=1),
                  float_param("dampening", 0.0, "dampening for momentum", min=0, max=1),
                  bool_param("nesterov", False, "use Nesterov momentum"),
                  WEIGHT_DECAY, *OPTIMIZER_PARAMS],
          keywords=("gradient descent", "momentum"), **PORTS),
    block("optimizers.Adam", "optimizer",
          "Adam: adaptive moment estimation (Kingma & Ba, 2015).",
          lambda p, named: torch.optim.Adam(param_groups(named, p), lr=p.lr,
                                            betas=tuple(p.betas), eps=p.eps, amsgrad=p.amsgrad),
          params=[float_param("lr", 0.001, "learning rate (step size)", min=0),
                  Param("betas", "floats", [0.9, 0.999],
                        "decay rates of the first and second moment estimates", min=0, max=1),
                  float_param("eps", 1e-8, "added to the denominator for stability", min=0),
                  WEIGHT_DECAY, bool_param("amsgrad", False, "use the AMSGrad variant"),
                  *OPTIMIZER_PARAMS],
          keywords=("adaptive",), **PORTS),
]
