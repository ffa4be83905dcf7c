"""The plot of a search's trials: a PNG through matplotlib where it is installed, else text.

The PNG has two panels: each trial's per-epoch curve of the watched number (pruned trials
dashed, failed ones absent, the best bold), and each finished trial's value by trial number
with the best so far as a step line. Without matplotlib (it is not a dependency; the core's
other charts are text too, as `lr-find`'s) the same facts go into a text chart: one row per
trial, a bar as long as its value, its state, and a mark on the best.
"""

from __future__ import annotations

import math
from pathlib import Path

from nodegraph.runtime.search import SearchResult, TrialRow

WIDTH = 40


def write_plot(result: SearchResult, folder: Path) -> Path:
    """`trials.png` (matplotlib) or `trials.txt` in `folder`; returns the path written."""
    try:
        import matplotlib

        matplotlib.use("Agg")  # never a window: no display, no Qt
        import matplotlib.pyplot as plt
    except ImportError:
        path = folder / "trials.txt"
        path.write_text(text_plot(result) + "\n")
        return path
    path = folder / "trials.png"
    fig, (curves, values) = plt.subplots(1, 2, figsize=(11, 4.2))
    for t in result.trials:
        if not t.curve or t.state not in ("COMPLETE", "PRUNED"):
            continue
        epochs, ys = zip(*t.curve, strict=True)
        curves.plot(epochs, ys, linestyle="--" if t.state == "PRUNED" else "-",
                    linewidth=2.5 if t.best else 1, alpha=1 if t.best else 0.6,
                    label=f"trial {t.number} (best)" if t.best else None)
    curves.set(xlabel="epoch", ylabel=result.metric, title="per-epoch values (pruned dashed)")
    if result.best is not None:
        curves.legend()
    finished = [t for t in result.trials if t.state == "COMPLETE" and t.value is not None
                and math.isfinite(t.value)]
    values.scatter([t.number for t in finished], [t.value for t in finished], label="complete")
    pruned = [t for t in result.trials if t.state == "PRUNED" and t.curve]
    values.scatter([t.number for t in pruned], [t.curve[-1][1] for t in pruned], marker="x",
                   label="pruned (last value)")
    best = best_so_far(result)
    if best:
        values.step(*zip(*best, strict=True), where="post", color="black", label="best so far")
    values.set(xlabel="trial", ylabel=result.metric, title=f"study {result.study_name}")
    values.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def best_so_far(result: SearchResult) -> list[tuple[int, float]]:
    """(trial number, best value among the complete trials up to it)."""
    out: list[tuple[int, float]] = []
    best: float | None = None
    for t in sorted(result.trials, key=lambda t: t.number):
        if t.state == "COMPLETE" and t.value is not None and math.isfinite(t.value):
            if best is None or (t.value > best if result.rises else t.value < best):
                best = t.value
        if best is not None:
            out.append((t.number, best))
    return out


def _shown(t: TrialRow) -> float | None:
    """A trial's value for the chart: its result, or a pruned trial's last report."""
    if t.value is not None:
        return t.value
    return t.curve[-1][1] if t.curve else None


def text_plot(result: SearchResult) -> str:
    """One row per trial: number, state, value, a bar as long as the value, `*` on the
    best; pruned trials show the last value they reported."""
    shown = {t.number: _shown(t) for t in result.trials}
    finite = [v for v in shown.values() if v is not None and math.isfinite(v)]
    lines = [f"{'trial':>5}  {'state':<8}  {result.metric:>10}"]
    lo, hi = (min(finite), max(finite)) if finite else (0.0, 0.0)
    for t in sorted(result.trials, key=lambda t: t.number):
        v = shown[t.number]
        if v is None or not math.isfinite(v):
            bar, text = "", "-" if v is None else str(v)
        else:
            bar = "#" * max(1, round(WIDTH * (v - lo) / (hi - lo))) if hi > lo else "#"
            text = f"{v:.4g}"
        lines.append(f"{t.number:>5}  {t.state:<8}  {text:>10}  {bar}"
                     + ("  * best" if t.best else ""))
    return "\n".join(lines)
