"""Mixed precision and gradient accumulation for the trainer's optimizer step.

``training.precision`` takes Lightning's names: ``32`` (float32, the plain step, untouched),
``bf16-mixed`` (the forward under `torch.autocast` in bfloat16; weights and gradients stay
float32) and ``16-mixed`` (autocast in float16 with a `torch.amp.GradScaler`, which scales
the loss so small float16 gradients do not flush to zero, unscales before clipping and
skips steps whose gradients overflowed). ``training.accumulate`` = K adds the gradients of
K batches before each optimizer step, each batch's loss divided by the number of batches in
its window (the last window of an epoch may be shorter), so K batches of B train like one
of K·B. With both at their defaults the trainer keeps its own step and nothing here runs.
"""

from __future__ import annotations

import math
from contextlib import AbstractContextManager, nullcontext
from typing import Any

import torch

from nodegraph.model.errors import NodegraphError

DTYPES = {"bf16-mixed": torch.bfloat16, "16-mixed": torch.float16}

# measured (benchmarks of issue #37): a small CNN (two 3x3 convolutions, 64 MNIST-size
# images a step, one thread, torch 2.13 on an AVX2 CPU), median step time over 3 runs of 20
# steps: float32 111 ms, bf16-mixed 485 ms (4.4x), 16-mixed 420 ms (3.8x); the issue's own
# run took 849 s in bf16-mixed against 262 s in float32 (3.2x)
CPU_SLOWDOWN = {"bf16-mixed": "3-4x", "16-mixed": "about 4x"}


def slow_warning(precision: str, device: torch.device) -> str | None:
    """What to tell a user who asks for mixed precision on a device without fast support
    for it: a CPU (autocast there converts every operand and gains nothing without AMX
    tiles), or a GPU without bfloat16 units; None where it pays."""
    if precision not in DTYPES:
        return None
    if device.type == "cpu":
        return (f"training.precision {precision} on the CPU is slower, not faster: each step "
                f"took {CPU_SLOWDOWN[precision]} as long as in float32 when measured on a "
                "small CNN; use precision 32 on a CPU")
    if device.type == "cuda" and precision == "bf16-mixed" and not torch.cuda.is_bf16_supported():
        return ("training.precision bf16-mixed: this GPU has no fast bfloat16 (compute "
                "capability below 8.0), so it is emulated and slow; use 16-mixed or 32")
    return None


class Precision:
    """The step of one run under `precision` and `accumulate`."""

    def __init__(self, precision: str, accumulate: int, device: torch.device,
                 optimizers: list):
        self.precision, self.k, self.device = precision, accumulate, device
        self.plain = precision == "32" and accumulate == 1
        self.dtype = DTYPES.get(precision)
        if accumulate > 1 and (len(optimizers) > 1 or any(o.closure for o in optimizers)):
            raise NodegraphError(
                "training.accumulate needs one optimizer that steps without a closure: with "
                "several optimizers (a GAN) one's backward reaches the other's gradients, and "
                "L-BFGS-like optimizers evaluate the loss themselves")
        if self.dtype is not None and any(o.closure for o in optimizers):
            raise NodegraphError(f"training.precision {precision} cannot drive an optimizer "
                                 "that evaluates the loss itself (L-BFGS); use 32")
        self.scaler = (torch.amp.GradScaler(device.type) if precision == "16-mixed" else None)

    def autocast(self) -> AbstractContextManager[Any]:
        """The forward's context: autocast in the mixed dtype, or nothing."""
        if self.dtype is None:
            return nullcontext()
        return torch.autocast(self.device.type, dtype=self.dtype)

    def step(self, o, values: dict, run, scale: float, index: int, steps: int) -> None:
        """Batch `index` (from 1) of `steps` for optimizer run `o`: forward under autocast,
        backward (scaled), and the optimizer's step at the end of each window of K."""
        k = self.k
        start = (index - 1) // k * k + 1  # the first batch of this window
        window = min(k, steps - start + 1) if steps else k
        optimizer = o.optimizer
        if index == start:
            optimizer.zero_grad(set_to_none=True)
        with self.autocast():
            loss = run(o.plan, values)[o.loss_key]
        factor = scale / window if window > 1 else scale
        scaled = loss * factor if factor != 1.0 else loss
        if self.scaler is not None:
            scaled = self.scaler.scale(scaled)
        scaled.backward()
        if index - start + 1 < window:
            return  # gradients keep adding up
        if self.scaler is not None:
            if o.clip is not None:
                self.scaler.unscale_(optimizer)
                torch.nn.utils.clip_grad_norm_(o.params, o.clip)
            self.scaler.step(optimizer)
            self.scaler.update()
        else:
            if o.clip is not None:
                torch.nn.utils.clip_grad_norm_(o.params, o.clip)
            optimizer.step()
        if o.per_step and o.scheduler is not None:
            o.scheduler.step()

    def state_dict(self) -> dict:
        """The GradScaler's state under 16-mixed (its loss scale and growth count, plain
        numbers: checkpoints keep it in their JSON), else nothing."""
        return {} if self.scaler is None else {"scaler": self.scaler.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        """Restore `state_dict`'s; a malformed one (a hand-edited checkpoint) is refused."""
        if self.scaler is None or not isinstance(state, dict) or "scaler" not in state:
            return
        saved = state["scaler"]
        numbers = ("scale", "growth_factor", "backoff_factor")
        if not isinstance(saved, dict) or not all(
                isinstance(saved.get(k), int | float) and not isinstance(saved.get(k), bool)
                and math.isfinite(saved[k]) and saved[k] > 0 for k in numbers) or not all(
                isinstance(saved.get(k), int) and not isinstance(saved.get(k), bool)
                and saved[k] >= 0 for k in ("growth_interval", "_growth_tracker")):
            raise NodegraphError("its 16-mixed loss-scaler state is malformed (expected "
                                 "positive finite scale, growth_factor, backoff_factor and "
                                 "whole growth_interval, _growth_tracker)")
        self.scaler.load_state_dict(saved)
