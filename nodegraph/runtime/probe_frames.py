"""What a probe saw at one step, as plain data: `ProbeFrame` and its summaries, and
`read_frames` for a `--probe-out` recording.

Apart from `nodegraph.runtime.probes` (which makes them, with torch) so that the editor can
name, receive and replay frames without importing torch before its window is drawn.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Histogram:
    lo: float
    hi: float
    counts: list[int]


@dataclass(frozen=True)
class OutputSummary:
    """One output tensor of one node at one step."""

    shape: list[int]
    mean: float
    std: float
    min: float
    max: float
    absmax: float
    zero_frac: float
    dead_frac: float  # units (dim 1) that are zero for every sample of the batch
    saturated_frac: float  # at the edge of a bounded range ([0, 1] or [-1, 1])
    finite: bool
    hist: Histogram
    sample: list[float]
    thumbnail: list[list[float]] | None = None  # first sample as a small 2-D image


@dataclass(frozen=True)
class GradSummary:
    """The gradient of the loss with respect to one output, at one step."""

    norm: float
    mean_abs: float
    finite: bool
    hist: Histogram


@dataclass(frozen=True)
class ParamSummary:
    grad_norm: float
    weight_norm: float
    update_ratio: float  # ||w_after - w_before|| / ||w_before||


@dataclass(frozen=True)
class ProbeFrame:
    """Everything probed at one step; the editor plays it as a forward then backward wave."""

    epoch: int
    step: int  # global step, from 1
    order: list[str]  # forward order of the probed nodes
    outputs: dict[str, dict[str, OutputSummary]]  # node -> port -> summary
    grads: dict[str, dict[str, GradSummary]]
    params: dict[str, ParamSummary]  # "node.param" -> summary
    nonfinite: str | None = None  # first node (forward order) whose output is NaN/Inf
    seconds: float = 0.0  # what probing this step cost

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @staticmethod
    def from_json(d: dict[str, Any]) -> ProbeFrame:
        def out(s: dict) -> OutputSummary:
            return OutputSummary(**{**s, "hist": Histogram(**s["hist"])})

        def grad(s: dict) -> GradSummary:
            return GradSummary(**{**s, "hist": Histogram(**s["hist"])})

        return ProbeFrame(
            d["epoch"], d["step"], d["order"],
            {n: {p: out(s) for p, s in ports.items()} for n, ports in d["outputs"].items()},
            {n: {p: grad(s) for p, s in ports.items()} for n, ports in d["grads"].items()},
            {k: ParamSummary(**v) for k, v in d["params"].items()}, d.get("nonfinite"),
            d.get("seconds", 0.0))


def read_frames(path: str | Path) -> Iterator[ProbeFrame]:
    """Frames written by ProbeWriter, for replay."""
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                yield ProbeFrame.from_json(json.loads(line))
