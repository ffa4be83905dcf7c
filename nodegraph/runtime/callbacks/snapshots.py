"""Weight snapshots: copies of the weights for whoever watches the model train (the
editor's live model views), at most every `interval` seconds; the first and the last epoch's
always come."""

from __future__ import annotations

import math
import time

from nodegraph.model.events import WeightsSnapshot
from nodegraph.runtime.callbacks.base import Callback

SNAPSHOT_INTERVAL_S = 0.5


class WeightSnapshots(Callback):
    """Sends a CPU copy of the weights after an epoch, throttled."""

    def __init__(self, interval: float = SNAPSHOT_INTERVAL_S, clock=time.monotonic):
        self.interval, self.clock = interval, clock
        self.sent = -math.inf

    def on_epoch_end(self, trainer) -> None:
        s = trainer.state
        now = self.clock()
        if now - self.sent < self.interval and s.index < s.total:  # the last always comes
            return
        self.sent = now
        state = {k: v.detach().to("cpu", copy=True)
                 for k, v in trainer.c.module.block_state().items()}
        trainer.events.emit(WeightsSnapshot(s.epoch, state))
