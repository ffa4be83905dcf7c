"""`nodegraph sample GRAPH NODE`: run a procedure block and save its trajectory."""

from __future__ import annotations

import argparse
import json

import torch

from nodegraph.cli.common import (
    add_graph_argument,
    open_graph,
    parse_assignments,
    say,  # control characters from the file escaped
)
from nodegraph.model.outputs import check_file, write_text


def register(sub) -> None:
    p = sub.add_parser("sample", description="Run a procedure block (sampling, recall, "
                       "decoding, forecasting) on the trained model and write its trajectory.")
    add_graph_argument(p)
    p.add_argument("node", help="the procedure block to run")
    p.add_argument("--weights", metavar="FILE.safetensors",
                   help="trained weights, e.g. CHECKPOINT_DIR/last/model.safetensors")
    p.add_argument("--train", action="store_true", help="train the graph first")
    p.add_argument("--set", action="append", default=[], metavar="PARAM=VALUE",
                   help="change a param of the procedure for this run; repeatable")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", metavar="FILE.json", help="write the frames as JSON")
    p.set_defaults(func=cmd_sample)


def cmd_sample(args: argparse.Namespace) -> int:
    from nodegraph.runtime.compile import compile_graph
    from nodegraph.runtime.procedure import run_procedure
    from nodegraph.runtime.train import train

    graph = open_graph(args)
    if args.out:  # before training: a path that cannot be written fails now
        check_file(args.out, "--out", special_ok=True)
    overrides = {k.split(".", 1)[-1]: v
                 for k, v in parse_assignments([f"x.{s}" for s in args.set]).items()}
    target = (train(graph).unless_cancelled().compiled if args.train
              else compile_graph(graph, for_training=False))
    frames = run_procedure(target, args.node, weights=args.weights, seed=args.seed,
                           **overrides)
    if args.out:
        write_text(args.out, json.dumps(_plain(frames)), "--out")
    say(f"{args.node}: {len(frames)} frame(s)" + (f", written to {args.out}" if args.out
                                                     else ""))
    table = _number_table(frames)
    if table:
        say(table)
    elif frames:
        last = {k: v for k, v in _plain(frames[-1]).items()
                if not isinstance(v, list) or len(v) <= 8}
        print(f"  last frame: {json.dumps(last)}")
    return 0


TABLE_ROWS = 40


def _number_table(frames: list[dict]) -> str:
    """A few frames whose values are mostly plain numbers (a lottery ticket's rounds, a
    sweep-like trajectory) as an aligned table of those columns; '' when they are not."""
    if not frames or len(frames) > TABLE_ROWS:
        return ""
    columns = [k for k, v in frames[0].items()
               if isinstance(v, int | float) and not isinstance(v, bool)]
    if len(columns) < 2 or any(set(columns) - set(f) for f in frames):
        return ""

    def cell(v) -> str:
        return f"{v:.4g}" if isinstance(v, float) else str(v)

    rows = [columns] + [[cell(f[k]) for k in columns] for f in frames]
    widths = [max(len(r[i]) for r in rows) for i in range(len(columns))]
    return "\n".join("  " + "  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True))
                     for r in rows)


def _plain(value):
    """Frames as JSON values: tensors become (nested) lists."""
    if isinstance(value, torch.Tensor):
        return value.detach().cpu().tolist()
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value
