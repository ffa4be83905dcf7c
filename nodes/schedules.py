"""Learning-rate schedules: wire one into an optimizer's `schedule` input."""

from __future__ import annotations

import torch

from nodegraph.optim import SCHEDULE_PARAMS
from nodegraph.spec import SCHEDULE_OUT, block, float_param, int_param

BLOCKS = [
    block("schedules.Step", "schedule",
          "Multiply the learning rate by `gamma` every `step_size` epochs (or steps).",
          lambda p, opt: torch.optim.lr_scheduler.StepLR(opt, p.step_size, p.gamma),
          outputs=[SCHEDULE_OUT],
          params=[int_param("step_size", 10, "epochs (or steps) between decays", min=1),
                  float_param("gamma", 0.1, "factor applied at each decay", min=0),
                  *SCHEDULE_PARAMS],
          keywords=("decay", "lr")),
    block("schedules.Cosine", "schedule",
          "Cosine annealing from the optimizer's rate down to `eta_min` over `t_max` "
          "epochs (or steps).",
          lambda p, opt: torch.optim.lr_scheduler.CosineAnnealingLR(opt, p.t_max, p.eta_min),
          outputs=[SCHEDULE_OUT],
          params=[int_param("t_max", 100, "epochs (or steps) of one half cosine", min=1),
                  float_param("eta_min", 0.0, "smallest learning rate", min=0),
                  *SCHEDULE_PARAMS],
          keywords=("annealing", "lr")),
]
