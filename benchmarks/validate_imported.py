"""Validating an imported real model, as the editor does it: cold (the first check of the
process, after reading the file), warm (again, with the document's op cache) and after an
edit of the head.

    python benchmarks/validate_imported.py [--model torchvision.models:resnet50]
        [--input-shape 2,3,224,224] [--rounds 3]

The model is imported with `nodegraph import` (random weights, nothing downloaded) into a
temporary folder by another process, read back, and validated through the editor's own path
(`nodegraph.gui.document.validator.validate_safely` on a snapshot, under an `OpCache`; no Qt is
created). Wall and CPU seconds are printed per round with the load average: on a shared
machine wall time moves with the load. Target: warm < 1 s.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def timed(fn) -> tuple[float, float, object]:
    wall, cpu = time.perf_counter(), time.process_time()
    out = fn()
    return time.perf_counter() - wall, time.process_time() - cpu, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="torchvision.models:resnet50")
    ap.add_argument("--input-shape", default="2,3,224,224")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "model.json"
        # imported by another process, so this one's first check is a first check
        subprocess.run([sys.executable, "-m", "nodegraph", "import", args.model, "-o",
                        str(path), "--input-shape", args.input_shape], check=True,
                       capture_output=True)
        import nodegraph
        from nodegraph.check.opcache import OpCache, using
        from nodegraph.gui.document.validator import snapshot, validate_safely

        graph = nodegraph.load(path)  # (its weights file is beside it: check in here)
        cache = OpCache()

        def check():
            with using(cache):
                return validate_safely(snapshot(graph))

        cold = timed(check)
        warm = [timed(check) for _ in range(args.rounds)]
        head = next((n for n in reversed(list(graph.nodes.values()))
                     if "out_features" in n.params), None)
        edited = []
        for i in range(args.rounds if head is not None else 0):
            graph.set_param(head.id, "out_features", 7 + i)
            edited.append(timed(check))
        ok = all(r[2].ok for r in [cold, *warm, *edited])
        first_problem = next((p.message for r in [cold, *warm, *edited]
                              for p in r[2].errors), None)
    print(json.dumps({
        "model": args.model, "nodes": len(graph.nodes), "ok": ok, "problem": first_problem,
        "cold_s": round(cold[0], 3), "cold_cpu_s": round(cold[1], 3),
        "warm_s": round(statistics.median(w[0] for w in warm), 3),
        "warm_cpu_s": round(statistics.median(w[1] for w in warm), 3),
        "after_edit_s": round(statistics.median(e[0] for e in edited), 3) if edited else None,
        "loadavg": [round(v, 2) for v in os.getloadavg()]}))


if __name__ == "__main__":
    main()
