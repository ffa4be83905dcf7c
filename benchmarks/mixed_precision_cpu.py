"""Mixed precision on a CPU: the step time of a small CNN in float32, bf16-mixed and 16-mixed.

The figure behind `nodegraph.runtime.precision.CPU_SLOWDOWN` (issue #37: bf16-mixed on a
CPU ran 849 s against 262 s in float32, and nothing warned). Two 3x3 convolutions on 64
MNIST-size images a step, one thread, SGD; the median of 20 steps (after 3 warm-up steps),
three runs of each precision interleaved. Run: ``python benchmarks/mixed_precision_cpu.py``.
"""

from __future__ import annotations

import time

import torch
from torch import nn


def net() -> nn.Module:
    return nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(32 * 7 * 7, 10))


def step_time(dtype: torch.dtype | None, x: torch.Tensor, y: torch.Tensor,
              steps: int = 20) -> float:
    """The median seconds of one training step with the forward under autocast(`dtype`)."""
    model = net()
    opt = torch.optim.SGD(model.parameters(), 0.01)
    times = []
    for i in range(steps + 3):
        began = time.perf_counter()
        opt.zero_grad()
        if dtype is None:
            loss = nn.functional.cross_entropy(model(x), y)
        else:
            with torch.autocast("cpu", dtype=dtype):
                loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        if i >= 3:
            times.append(time.perf_counter() - began)
    return sorted(times)[len(times) // 2]


def main() -> None:
    torch.set_num_threads(1)
    torch.manual_seed(0)
    x, y = torch.randn(64, 1, 28, 28), torch.randint(0, 10, (64,))
    kinds = {"32": None, "bf16-mixed": torch.bfloat16, "16-mixed": torch.float16}
    runs: dict[str, list[float]] = {k: [] for k in kinds}
    for _ in range(3):
        for name, dtype in kinds.items():
            runs[name].append(step_time(dtype, x, y))
    base = sorted(runs["32"])[1]
    print(f"CPU capability {torch.backends.cpu.get_cpu_capability()}, torch {torch.__version__}")
    for name, times in runs.items():
        median = sorted(times)[1]
        print(f"{name:>10}: {median * 1000:7.1f} ms a step  ({median / base:.2f}x float32)")


if __name__ == "__main__":
    main()
