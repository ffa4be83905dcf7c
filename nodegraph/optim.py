"""What every optimizer and schedule block shares, because the trainer relies on it.

An optimizer block minimises the loss wired into it, over the trainable parameters of the
blocks upstream of that loss — unless `scope` names the nodes it may change (a GAN's two
optimizers each own one network). `clip_grad_norm` clips that optimizer's gradients before
each step. A schedule block wired into an optimizer's `schedule` input steps after every
epoch or every batch, as its `interval` says.
"""

from __future__ import annotations

from nodegraph.spec import Param, choice_param, float_param

OPTIMIZER_PARAMS: tuple[Param, ...] = (
    Param("scope", "strs", [], "node ids whose parameters this optimizer updates; "
          "empty means every trainable block upstream of its loss"),
    float_param("clip_grad_norm", None, "clip the total gradient norm to this value before "
                "each step; empty means no clipping", min=0, nullable=True),
)

SCHEDULE_PARAMS: tuple[Param, ...] = (
    choice_param("interval", ("epoch", "step"), "epoch",
                 "advance the schedule after every epoch or after every batch"),
)
