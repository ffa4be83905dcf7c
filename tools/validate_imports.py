"""Which examples import torch._dynamo when validated, and how long a cold validate takes.

Validation infers each op node from its block's declared shape rule (`nodegraph.kinds.shapes`)
or, where there is none or it declines, by running the block on meta tensors; many of
torch's Python meta kernels import torch._dynamo (about a second of start-up). Each example
is validated in a fresh process (as `nodegraph validate` does it: for training when it has
an optimizer, data files read beside it); one row per example: whether torch._dynamo got
imported, the validate time (import of nodegraph excluded) and, with `--why`, the blocks
that went the meta path (no rule, or the rule declined) and how often.

    python tools/validate_imports.py [--why] [--only NAME ...] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"

# run in the child: validate one graph file, print one JSON line
CHILD = r"""
import collections, json, sys, time
import nodegraph
from nodegraph.check import validate as v
from nodegraph.cli.common import beside, trains
from nodegraph.kinds import shapes

meta = collections.Counter()
if sys.argv[2] == "why":
    infer_op = v._infer_op

    def counting(spec, params, inputs, *args, **kwargs):
        if spec.shape is None:
            meta[f"{spec.id} (no rule)"] += 1
        elif shapes.infer(spec.shape, params, inputs) is None:
            meta[f"{spec.id} (declined)"] += 1
        return infer_op(spec, params, inputs, *args, **kwargs)

    v._infer_op = counting
graph = nodegraph.load(sys.argv[1])
start = time.perf_counter()
with beside(sys.argv[1]):
    report = v.validate(graph, for_training=trains(graph))
seconds = time.perf_counter() - start
print(json.dumps({"ok": report.ok, "seconds": seconds, "meta": dict(meta),
                  "dynamo": "torch._dynamo" in sys.modules}))
"""


def validate_fresh(path: Path, why: bool = False) -> dict:
    """Validate `path` in a new interpreter; what the child printed, or its error."""
    out = subprocess.run([sys.executable, "-c", CHILD, str(path), "why" if why else "-"],
                         capture_output=True, text=True, cwd=ROOT)
    if out.returncode != 0:
        return {"error": (out.stderr.strip().splitlines() or ["?"])[-1]}
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--why", action="store_true", help="list the blocks that ran on meta")
    ap.add_argument("--only", nargs="*", default=None, help="example names (no .json)")
    ap.add_argument("--json", type=Path, default=None, help="also write the rows here")
    args = ap.parse_args(argv)
    paths = sorted(EXAMPLES.glob("*.json"))
    if args.only:
        paths = [p for p in paths if p.stem in set(args.only)]
    rows, dynamo = {}, []
    for path in paths:
        row = rows[path.stem] = validate_fresh(path, args.why)
        if "error" in row:
            print(f"{path.stem:32} error: {row['error']}")
            continue
        if row["dynamo"]:
            dynamo.append(path.stem)
        why = ", ".join(f"{k} x{n}" for k, n in sorted(row["meta"].items()))
        print(f"{path.stem:32} {'dynamo' if row['dynamo'] else '-':7} "
              f"{row['seconds']:6.3f} s{'' if row['ok'] else ' (problems)'}  {why}")
    print(f"{len(dynamo)} of {len(paths)} import torch._dynamo: {' '.join(dynamo)}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
