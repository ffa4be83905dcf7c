"""Node badges: what a probe frame says is wrong with a node, in a word under its card.

`diagnose(frame)` reads one `ProbeFrame` and returns the badges of each node:

- **NaN/Inf**: the node's output (or the gradient arriving at it) holds a non-finite value;
  the trainer stops the run at the first such node, and the editor names it.
- **vanishing / exploding ∇**: the gradient reaching a layer's parameters is a hundred times
  smaller / larger than the last layer's, the one nearest the loss where backpropagation
  starts: the picture of a deep sigmoid stack whose first layers stop learning (or of
  weights so large that the gradient grows at every layer on its way back).
- **dead**: a share of the units (features or channels) are zero for every sample of the
  batch: ReLUs that no longer pass anything, and so get no gradient either.
- **saturated**: most values of a bounded activation sit at the edge of its range (sigmoid
  near 0 or 1, tanh near ±1), where its slope and so the gradient through it is near zero.

The rules are plain functions of the frame (this module imports no Qt), so they are tested
on frames built from real tensors; the Qt side only paints them (`overlays.NodeMark`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from nodegraph.runtime.probes import OutputSummary, ProbeFrame


RELATIVE = 100.0  # a layer's gradient this many times off the last layer's is flagged
DEAD_SHARE = 0.25  # of the units
SATURATED_SHARE = 0.5  # of the values


@dataclass(frozen=True)
class Badge:
    """A short tag under a card: what looks wrong with this node's numbers."""

    kind: str  # "nonfinite", "vanishing", "exploding", "dead", "saturated"
    text: str
    detail: str


def diagnose(frame: ProbeFrame, types: dict[str, str] | None = None) -> dict[str, list[Badge]]:
    """Badges per node of one frame (nodes without any are left out). With `types` (node ->
    block type) saturation is only judged on activations: a layer's output that merely
    lies in [0, 1] is not a saturated unit."""
    badges: dict[str, list[Badge]] = {}

    def add(node: str, badge: Badge) -> None:
        badges.setdefault(node, []).append(badge)

    for node, badge in _nonfinite(frame):
        add(node, badge)
    for node, badge in _gradient_scale(frame):
        add(node, badge)
    for node, ports in frame.outputs.items():
        for s in ports.values():
            bounded = types is None or types.get(node, "").startswith("activations.")
            badge = _dead(s) or (_saturated(s) if bounded else None)
            if badge is not None and s.finite:
                add(node, badge)
                break
    return badges


def nonfinite_badge(where: str = "output") -> Badge:
    return Badge("nonfinite", "NaN/Inf", f"the {where} holds NaN or infinite values")


def _nonfinite(frame: ProbeFrame):
    for node in frame.order:
        if any(not s.finite for s in frame.outputs.get(node, {}).values()):
            yield node, nonfinite_badge("output")
        elif any(not g.finite for g in frame.grads.get(node, {}).values()):
            yield node, nonfinite_badge("gradient arriving at the output")


def layer_grad_norms(frame: ProbeFrame) -> dict[str, float]:
    """Each node's parameter-gradient norm (all its parameters together), in forward order."""
    sums: dict[str, float] = {}
    for name, p in frame.params.items():
        node = name.rsplit(".", 1)[0]
        sums[node] = sums.get(node, 0.0) + p.grad_norm ** 2
    order = {n: i for i, n in enumerate(frame.order)}
    return {n: math.sqrt(v) for n, v in sorted(sums.items(),
                                                key=lambda kv: order.get(kv[0], len(order)))}


def _gradient_scale(frame: ProbeFrame):
    norms = {n: v for n, v in layer_grad_norms(frame).items() if math.isfinite(v)}
    if len(norms) < 3:  # too short a chain for the gradient to shrink or grow along it
        return
    last = list(norms)[-1]
    ref = norms[last]
    if ref <= 0:
        return
    for node, v in norms.items():
        if v * RELATIVE < ref:
            times = "∞" if v == 0 else f"{ref / v:.3g}×"
            yield node, Badge("vanishing", "vanishing ∇",
                              f"gradient norm {v:.3g}, {times} smaller than at {last}, "
                              "the layer nearest the loss")
        elif v > ref * RELATIVE:
            yield node, Badge("exploding", "exploding ∇",
                              f"gradient norm {v:.3g}, {v / ref:.3g}× larger than at {last}, "
                              "the layer nearest the loss")


def _dead(s: OutputSummary) -> Badge | None:
    if len(s.shape) >= 2 and s.dead_frac >= DEAD_SHARE:
        return Badge("dead", f"dead {s.dead_frac:.0%}",
                     f"{s.dead_frac:.0%} of the units output zero for every sample")
    return None


def _saturated(s: OutputSummary) -> Badge | None:
    if len(s.shape) >= 2 and s.saturated_frac >= SATURATED_SHARE:
        return Badge("saturated", f"saturated {s.saturated_frac:.0%}",
                     f"{s.saturated_frac:.0%} of the values sit at the edge of the "
                     "activation's range, where its slope is nearly zero")
    return None
