"""What the notebook progress display costs: XOR for 2,000 epochs with `progress=True`
against without, in a real Jupyter kernel (the display's messages go to the kernel's
iopub socket and on to this process, as they go to a browser).

One kernel, one warm-up run, then `--repeats` pairs alternating which goes first; the
figure is the ratio of the medians of whole `nodegraph.train` calls, from this one run.
Target: <= 1.02.

    python benchmarks/progress_overhead.py --epochs 2000 --repeats 5
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import time
from pathlib import Path

import jupyter_client

ROOT = Path(__file__).resolve().parents[1]

CELL = """
import json, statistics, time, nodegraph
g = nodegraph.load({graph!r})
nodegraph.train(g, epochs=50)  # warm-up: imports, first-call costs
times = {{"off": [], "on": []}}
for i in range({repeats}):
    for mode in (("off", "on") if i % 2 == 0 else ("on", "off")):
        began = time.perf_counter()
        nodegraph.train(g, epochs={epochs}, progress=(mode == "on"))
        times[mode].append(time.perf_counter() - began)
print("RESULT " + json.dumps(times))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    km = jupyter_client.KernelManager(kernel_name="python3")
    km.start_kernel(env={**os.environ, "PYTHONPATH": str(ROOT)})
    kc = km.client()
    kc.start_channels()
    try:
        kc.wait_for_ready(timeout=120)
        msg_id = kc.execute(CELL.format(graph=str(ROOT / "examples" / "xor.json"),
                                        epochs=args.epochs, repeats=args.repeats))
        text, displays = "", 0
        while True:
            try:
                msg = kc.get_iopub_msg(timeout=600)
            except queue.Empty:
                raise SystemExit("the kernel did not answer in 10 minutes") from None
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            kind = msg["msg_type"]
            if kind in ("display_data", "update_display_data"):
                displays += 1
            elif kind == "stream":
                text += msg["content"]["text"]
            elif kind == "error":
                raise SystemExit("\n".join(msg["content"]["traceback"]))
            elif kind == "status" and msg["content"]["execution_state"] == "idle":
                break
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
    line = next(ln for ln in text.splitlines() if ln.startswith("RESULT "))
    times = json.loads(line.removeprefix("RESULT "))
    off, on = (sorted(times[k])[len(times[k]) // 2] for k in ("off", "on"))
    runs = args.repeats
    print(f"xor, {args.epochs} epochs, {runs} runs each, in a Jupyter kernel: without progress "
          f"{off:.3f} s, with {on:.3f} s (median); ratio {on / off:.3f}; "
          f"{displays / runs:.0f} display messages per run with progress")
    print(f"at {time.strftime('%Y-%m-%d %H:%M')}")


if __name__ == "__main__":
    main()
