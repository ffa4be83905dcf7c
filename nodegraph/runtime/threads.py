"""The intra-op thread count of a run, chosen for its work per step.

torch starts with one thread per core. For a small model a step is too short to split:
the threads spend it waiting for each other, and when other processes hold the cores a
waiting thread is descheduled and every step waits for it (up to ~350x slower than one
thread). So the trainer counts the FLOPs of one forward pass, gives each thread at least
`GRAIN` FLOPs of a training step, and never asks for more cores than are idle now.

The user's word wins: `--threads` (which sets `training.threads` for the run), then the
file's `training.threads`, then `OMP_NUM_THREADS`; only without them is the count chosen.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import torch

GRAIN = 5e7  # training-step FLOPs per thread below which another thread costs more than it saves
TRAIN_FACTOR = 3  # a training step: the forward, and a backward of about twice its cost


@dataclass(frozen=True)
class Choice:
    """A thread count and the reason for it, said in the run's log."""

    threads: int
    reason: str

    @property
    def text(self) -> str:
        return f"{self.threads} CPU thread{'s' if self.threads != 1 else ''} ({self.reason})"


def physical_cores() -> int:
    """Physical cores this process may run on (hyper-threads share a core's arithmetic)."""
    try:
        usable = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        usable = os.cpu_count() or 1
    cores = set()
    try:
        with open("/proc/cpuinfo") as f:
            phys = core = None
            for line in f:
                key, _, value = line.partition(":")
                key = key.strip()
                if key == "physical id":
                    phys = value.strip()
                elif key == "core id":
                    core = value.strip()
                elif not line.strip() and core is not None:
                    cores.add((phys, core))
                    phys = core = None
            if core is not None:
                cores.add((phys, core))
    except OSError:
        pass
    return max(1, min(usable, len(cores) or usable))


def busy_cores(samples: int = 3, interval: float = 0.002) -> int:
    """Cores other processes keep busy right now: the runnable tasks of /proc/loadavg less
    this one (the median of a few reads, as one read is noisy); 0 where it cannot be read."""
    counts = []
    for i in range(samples):
        try:
            with open("/proc/loadavg") as f:
                running = int(f.read().split()[3].split("/")[0])
        except (OSError, ValueError, IndexError):
            return 0
        counts.append(max(0, running - 1))
        if i + 1 < samples:
            time.sleep(interval)
    return int(statistics.median(counts))


def layer_flops(module: torch.nn.Module, fn: Callable[[], object]) -> float:
    """FLOPs of the weighted layers (linear, convolution, their kin) while `fn()` runs:
    2 per multiply-add, 2 × an output's elements × the inputs each one reads (a row of the
    weight). Forward hooks cost nothing measurable where torch's FlopCounterMode costs
    ~100x a small model's forward; the elementwise work they miss is cheap beside it."""
    total = [0.0]

    def count(layer, _inputs, output):
        weight = getattr(layer, "weight", None)
        if isinstance(output, torch.Tensor) and isinstance(weight, torch.Tensor):
            total[0] += 2.0 * output.numel() * weight[0].numel()

    def weighted(m: torch.nn.Module) -> bool:
        weight = getattr(m, "weight", None)
        return (isinstance(weight, torch.Tensor) and weight.dim() >= 2
                and not isinstance(m, torch.nn.Embedding))

    handles = [m.register_forward_hook(count) for m in module.modules() if weighted(m)]
    try:
        fn()
    finally:
        for h in handles:
            h.remove()
    return total[0]


def forward_flops(compiled) -> float | None:
    """FLOPs of one forward pass over the first training batch (`layer_flops`), in eval
    mode without gradients and with the RNG state kept, so the run is the same as without
    counting; None when there is no batch or the pass fails."""
    values = {}
    for nid, ds in compiled.datasets.items():
        batch = next(iter(ds.batches("train", False, None, node=nid)), None)
        if batch is None:
            return None
        values.update(batch)
    if not values:
        return None
    module = compiled.module
    was_training = module.training
    devices = [compiled.device] if compiled.device.type == "cuda" else []
    try:
        with torch.random.fork_rng(devices=devices), torch.no_grad(), using(1):
            module.eval()  # one thread: on a busy machine more would make counting slow
            return layer_flops(module, lambda: module.run(compiled.eval_plan, dict(values)))
    except Exception:  # a block that cannot run on its own: fall back to the parameters
        return None
    finally:
        module.train(was_training)


def step_flops(compiled) -> tuple[float, str]:
    """Estimated FLOPs of one training step, and how they were estimated."""
    flops = forward_flops(compiled)
    if flops:
        return TRAIN_FACTOR * flops, "counted"
    batch = max((ds.step_batch("train") for ds in compiled.datasets.values()), default=1)
    return TRAIN_FACTOR * 2.0 * compiled.parameter_count() * max(1, batch), "from parameters"


def automatic(flops: float, cores: int, busy: int) -> int:
    """One thread per `GRAIN` of work, at most the cores no other process is using."""
    idle = max(1, cores - busy)
    return max(1, min(int(flops // GRAIN), cores, idle))


def choose(compiled, setting: int | None, environ=os.environ) -> Choice:
    """The thread count for a run: `setting` (training.threads or --threads), else
    OMP_NUM_THREADS, else chosen from the step's work and the idle cores."""
    if setting is not None:
        return Choice(int(setting), "training.threads / --threads")
    omp = environ.get("OMP_NUM_THREADS", "").strip()
    if omp.isdigit() and int(omp) > 0:
        return Choice(int(omp), f"OMP_NUM_THREADS={omp}")
    if compiled.device.type != "cpu":
        return Choice(torch.get_num_threads(), f"torch's default; the model runs on "
                      f"{compiled.device}")
    flops, how = step_flops(compiled)
    cores = physical_cores()
    splits = automatic(flops, cores, 0) > 1
    busy = busy_cores() if splits else 0  # the load matters only to a step worth splitting
    threads = automatic(flops, cores, busy)
    where = (f"{cores} core{'s' if cores != 1 else ''}, {busy} busy with other work" if splits
             else "too small to split")
    return Choice(threads, f"chosen for {_amount(flops)} FLOPs per step ({how}), {where}; "
                  "set training.threads or --threads to override")


@contextmanager
def using(threads: int) -> Iterator[None]:
    """torch's intra-op thread count set to `threads` for the block, then put back."""
    before = torch.get_num_threads()
    if threads != before:
        torch.set_num_threads(threads)
    try:
        yield
    finally:
        if torch.get_num_threads() != before:
            torch.set_num_threads(before)


def _amount(flops: float) -> str:
    for unit, size in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if flops >= size:
            return f"{flops / size:.3g} {unit}"
    return f"{flops:.0f}"
