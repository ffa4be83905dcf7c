"""Probing: while someone watches (the editor, `--probe-out`), a `Prober` hooks the blocks
for some steps and sends a `ProbeFrame` of what each node's output and gradient looked
like. Every step is timed, so probing keeps to its share of the training time; a probed
step whose output went NaN stops the run with the node's name."""

from __future__ import annotations

import time

from nodegraph.runtime.callbacks.base import Callback
from nodegraph.runtime.probes import Prober, _Watch


class Probing(Callback):
    """Watches the steps the prober picks; `ports` maps each node to its output ports, in
    forward order."""

    def __init__(self, prober: Prober, ports: dict[str, list[str]]):
        self.prober, self.ports = prober, ports
        self.watch: _Watch | None = None
        self.start = 0.0

    def on_step_start(self, trainer, values: dict) -> None:
        self.start = time.perf_counter()
        if self.prober.wants(trainer.state.global_step):
            self.watch = self.prober.watch(trainer.c.module, self.ports).__enter__()

    def on_step_end(self, trainer, values: dict) -> None:
        watch, self.watch = self.watch, None
        if watch is None:
            self.prober.note_step_time(time.perf_counter() - self.start)
            return
        watch.__exit__(None, None, None)
        self.prober.note_step_time(time.perf_counter() - self.start - watch.cost)
        s = trainer.state
        frame = watch.frame(s.epoch, s.global_step)
        trainer.events.emit(frame)
        if frame.nonfinite is not None:
            trainer.fail_nonfinite(frame.nonfinite, values, s.epoch)

    def on_exception(self, trainer, error: BaseException) -> None:
        if self.watch is not None:  # a step failed under watch: its hooks come off
            self.watch.__exit__(type(error), error, None)
            self.watch = None


def output_ports(module) -> dict[str, list[str]]:
    """Each node of a compiled module and the names of its output ports, in forward order."""
    return {node: [k[1] for k in out_keys] for node, _, _, out_keys in module.full_plan}
