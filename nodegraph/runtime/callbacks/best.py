"""Best weights: a copy of the weights at each new best of the monitored number, put back
at the end of the run (`training.restore_best`, when early stopping or a monitor is set)."""

from __future__ import annotations

import torch

from nodegraph.model.events import Message
from nodegraph.runtime.callbacks.base import Callback
from nodegraph.runtime.callbacks.monitor import Monitor


class BestWeights(Callback):
    """Keeps the weights of the best epoch (of the stage under way) and restores them."""

    def __init__(self, monitor: Monitor, restore: bool = True):
        self.monitor, self.restore = monitor, restore
        self.weights: dict[str, torch.Tensor] | None = None

    def on_stage_start(self, trainer, fresh: bool) -> None:
        if fresh:
            self.weights = None

    def on_validation_end(self, trainer) -> None:
        if trainer.state.improved:
            self.weights = {k: v.detach().clone()
                            for k, v in trainer.c.module.block_state().items()}

    def on_run_end(self, trainer) -> None:
        if self.weights is None or not self.restore or trainer.state.cancelled:
            return
        trainer.c.module.load_block_state(self.weights)
        m = self.monitor
        trainer.events.emit(Message(f"restored the weights of epoch {m.best_epoch} (best "
                                    f"{m.key} = {m.best:.6g})"))
