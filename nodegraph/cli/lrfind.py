"""`nodegraph lr-find GRAPH`: the learning-rate range test from the command line.

Prints the loss-vs-rate curve as a text chart (one row per few steps), the suggested rate
and the other rules' rates; `--csv` writes every step for plotting elsewhere, and `--set`
writes the suggestion into the optimizer's `lr` in a copy of the graph file.
"""

from __future__ import annotations

import argparse
import csv
import math

from nodegraph.cli.common import (
    add_graph_argument,
    open_graph,
    say,  # control characters from the file escaped
)

WIDTH = 40


def register(sub) -> None:
    p = sub.add_parser("lr-find", description="The learning-rate range test: train "
                       "briefly while the rate grows, and read the loss against the rate.")
    add_graph_argument(p)
    p.add_argument("--optimizer", help="the optimizer node (needed when there are several)")
    p.add_argument("--start", type=float, default=1e-6)
    p.add_argument("--end", type=float, default=1.0)
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--suggest", choices=("steepest", "min_loss", "divergence"),
                   default="steepest", help="which rule gives the suggested rate")
    p.add_argument("--csv", metavar="FILE.csv", help="write lr, loss, smoothed loss per step")
    p.add_argument("--write", metavar="GRAPH_OUT.json",
                   help="save a copy of the graph with the suggested rate set")
    p.set_defaults(func=cmd_lr_find)


def cmd_lr_find(args: argparse.Namespace) -> int:
    from nodegraph.model import fileformat
    from nodegraph.runtime.lrfind import lr_range_test

    graph = open_graph(args)
    result = lr_range_test(graph, args.optimizer, args.start, args.end, args.steps,
                           suggest=args.suggest)
    say(chart(result.lrs, result.smoothed))
    say(f"optimizer {result.optimizer}: {len(result.lrs)} steps"
          + (f", diverged at lr {result.divergence_lr:.3g}" if result.diverged else ""))
    for name, value in (("steepest descent", result.steepest_lr),
                        ("min loss / 10", result.min_loss_lr and result.min_loss_lr / 10),
                        ("divergence / 10", result.divergence_lr and result.divergence_lr / 10)):
        if value:
            say(f"  {name:<17} {value:.3g}")
    if result.suggested_lr is None:
        say("no suggestion: the loss did not fall; widen --start/--end or add --steps")
        return 1
    say(f"suggested lr: {result.suggested_lr:.3g}")
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(["lr", "loss", "smoothed"])
            writer.writerows(result.rows())
    if args.write:
        graph.set_param(result.optimizer, "lr", float(f"{result.suggested_lr:.3g}"))
        fileformat.save(graph, args.write)
        say(f"wrote {args.write} with {result.optimizer}.lr = {result.suggested_lr:.3g}")
    return 0


def chart(lrs: list[float], losses: list[float], rows: int = 20) -> str:
    """A text chart: one line per sampled step, a bar as long as the loss."""
    finite = [v for v in losses if math.isfinite(v)]
    if not finite:
        return "(no finite loss)"
    lo, hi = min(finite), max(finite)
    step = max(1, len(lrs) // rows)
    lines = [f"{'lr':>9}  {'loss':>10}"]
    for lr, loss in list(zip(lrs, losses, strict=True))[::step]:
        bar = "" if not math.isfinite(loss) else "#" * max(1, round(
            (loss - lo) / (hi - lo or 1) * WIDTH))
        lines.append(f"{lr:9.2e}  {loss:10.4g}  {bar}")
    return "\n".join(lines)
