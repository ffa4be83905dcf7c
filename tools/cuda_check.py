"""Does every example train on a CUDA GPU, and does it learn what it learns on the CPU?

For a machine with a GPU (CI has none, so this is a tool, not a test). Each trainable example
in `examples/` trains for `--epochs` epochs with the same seed on `cuda` and on `cpu`; one
row per example: time on each device, the final train loss on each and their relative
difference. GPU kernels are not bit-identical to CPU ones, so small differences are
expected; a failure on one device only, or a large difference, is a bug to look at.

    python tools/cuda_check.py [--epochs 2] [--only NAME ...] [--dtype float64]
        [--out REPORT.md]

`--dtype` sets `training.dtype` (float32, float64, bfloat16) on every example first.
"""

from __future__ import annotations

import argparse
import time
import traceback
from pathlib import Path

import torch

import nodegraph

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def final_loss(result) -> float | None:
    train = result.final.get("train", {})
    value = train.get("loss")
    return float(value) if value is not None else None


def run_on(path: Path, device: str, epochs: int, dtype: str | None = None
           ) -> tuple[str, float, float | None]:
    """(status, seconds, final train loss) of training the example on `device`."""
    graph = nodegraph.load(path)
    if dtype:
        graph.set_training("dtype", dtype)
    start = time.perf_counter()
    try:
        result = nodegraph.train(graph, epochs=epochs, device=device)
        if device.startswith("cuda"):
            torch.cuda.synchronize()
    except nodegraph.NodegraphError as e:
        return f"refused: {str(e).splitlines()[0][:80]}", time.perf_counter() - start, None
    except Exception as e:  # a crash is what this tool looks for: keep going, report it
        traceback.print_exc()
        return f"CRASH {type(e).__name__}: {str(e).splitlines()[0][:70]}", \
            time.perf_counter() - start, None
    return "ok", time.perf_counter() - start, final_loss(result)


def trainable(path: Path) -> bool:
    graph = nodegraph.load(path)
    return any(n.type.startswith("optimizers.") for n in graph.nodes.values())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--only", nargs="*", default=None, help="example names (no .json)")
    parser.add_argument("--dtype", default=None, help="training.dtype for every example")
    parser.add_argument("--out", default=None, help="also write the table to this file")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("no CUDA GPU here: this tool needs one")
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}, "
          f"dtype {args.dtype or 'as in each file'}")
    paths = sorted(p for p in EXAMPLES.glob("*.json")
                   if args.only is None or p.stem in args.only)
    rows = ["| example | cuda | cuda s | cpu | cpu s | loss cuda | loss cpu | rel. diff |",
            "|---|---|---|---|---|---|---|---|"]
    for path in paths:
        if not trainable(path):
            continue
        cuda = run_on(path, "cuda", args.epochs, args.dtype)
        cpu = run_on(path, "cpu", args.epochs, args.dtype)
        diff = ""
        if cuda[2] is not None and cpu[2] is not None:
            diff = f"{abs(cuda[2] - cpu[2]) / max(abs(cpu[2]), 1e-12):.1e}"
        loss = [f"{r[2]:.4g}" if r[2] is not None else "" for r in (cuda, cpu)]
        rows.append(f"| {path.stem} | {cuda[0]} | {cuda[1]:.2f} | {cpu[0]} | {cpu[1]:.2f} | "
                    f"{loss[0]} | {loss[1]} | {diff} |")
        print(rows[-1], flush=True)
    table = "\n".join(rows)
    print("\n" + table)
    if args.out:
        Path(args.out).write_text(table + "\n")


if __name__ == "__main__":
    main()
