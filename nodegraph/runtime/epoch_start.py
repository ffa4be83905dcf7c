"""What a run was when its epoch began, to go back to when the epoch is stopped.

The rule for a stop (the Stop button, `RunControl.stop`, Ctrl-C, a notebook's Stop) in the
middle of an epoch: the run goes back to the end of the last whole epoch. Weights, buffers,
optimizer moments, schedules, the step count, every random generator, the mixed-precision
loss scale and the callbacks' `state_dict`s are put back as they were when the epoch began,
so the model always holds the weights its history describes (`len(history)` epochs, no
partial epoch), and a checkpoint or a saved model taken after the stop continues exactly
as a run that was never stopped (a KeyboardInterrupt may land inside an optimizer's update;
going back is the only state that is whole then). The price: the steps of the stopped epoch
are trained again, and one copy of the weights and optimizer state is kept (on the CPU).
"""

from __future__ import annotations

import copy
from typing import Any

import torch

from nodegraph.runtime import generators
from nodegraph.runtime.callbacks.base import callback_states, load_callback_states


def _on_cpu(value: Any) -> Any:
    """A deep copy of a state dict with its tensors cloned onto the CPU."""
    if isinstance(value, torch.Tensor):
        return value.detach().to("cpu", copy=True)
    if isinstance(value, dict):
        return {k: _on_cpu(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_on_cpu(v) for v in value)
    return copy.deepcopy(value)


class EpochStart:
    """The state `trainer` has now; `restore` puts it back."""

    def __init__(self, trainer: Any):
        c = trainer.c
        self.weights = _on_cpu(c.module.block_state())
        self.optimizers = [_on_cpu(o.optimizer.state_dict()) for o in c.optimizers]
        self.schedules = [None if o.scheduler is None else _on_cpu(o.scheduler.state_dict())
                          for o in c.optimizers]
        self.global_step = trainer.state.global_step
        self.generators = generators.capture(trainer.shuffle_rng)
        self.precision = _on_cpu(trainer.precision.state_dict())
        self.callbacks = copy.deepcopy(callback_states(trainer.callbacks.all, plain=False))

    def restore(self, trainer: Any) -> None:
        c = trainer.c
        c.module.load_block_state(self.weights)
        for o, opt_state, sched_state in zip(c.optimizers, self.optimizers, self.schedules,
                                             strict=True):
            o.optimizer.load_state_dict(opt_state)
            if o.scheduler is not None and sched_state is not None:
                o.scheduler.load_state_dict(sched_state)
            o.optimizer.zero_grad(set_to_none=True)
        trainer.state.global_step = self.global_step
        generators.restore(self.generators, trainer.shuffle_rng)
        if self.precision:
            trainer.precision.load_state_dict(self.precision)
        load_callback_states(trainer.callbacks.all, copy.deepcopy(self.callbacks))
