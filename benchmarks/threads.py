"""Does the automatic thread count pay? Three examples of different size trained with the
trainer's choice (`nodegraph.runtime.threads`) against torch's default (one thread per
physical core) and one thread, on the machine as it is and with a CPU-burning neighbour
(one busy-looping process per CPU, started here).

The time is the training loop's (the sum of the epochs' seconds) plus, for the automatic
choice, what choosing cost (counting the FLOPs, reading the load). Variants alternate, each
in every place of the order in turn, `--repeats` times, so drift in the machine's load hits
all alike; the ratio is of medians.
Prints one line per example and load, `auto/best` last: the automatic choice's time over
the better of the other two. Target: auto/best <= 1.10 everywhere.

    python benchmarks/threads.py --epochs 2 --repeats 3
"""

from __future__ import annotations

import os

os.environ.pop("OMP_NUM_THREADS", None)  # torch's own default, and the automatic choice

import argparse  # noqa: E402
import multiprocessing as mp  # noqa: E402
import signal  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import torch  # noqa: E402

import nodegraph  # noqa: E402
from nodegraph.model.events import Emitter, Message  # noqa: E402

EXAMPLES = {  # name: epochs per run scale (small models get more epochs to be measurable)
    "xor": 50,
    "realnvp_moons": 1,
    "cnn_digits": 1,
}
DEFAULT = torch.get_num_threads()


def _burn() -> None:
    while True:
        pass


class Neighbour:
    """One busy-looping process per CPU until the block ends."""

    def __enter__(self):
        ctx = mp.get_context("spawn")
        self.procs = [ctx.Process(target=_burn, daemon=True) for _ in range(os.cpu_count() or 1)]
        for p in self.procs:
            p.start()
        time.sleep(1.0)  # let them reach the run queue
        return self

    def __exit__(self, *exc):
        for p in self.procs:
            p.terminate()
        for p in self.procs:
            p.join()


def one_run(name: str, epochs: int, threads: int | None) -> tuple[float, str]:
    """Seconds of one run (training loop, plus the choice for `threads=None`) and the
    choice's message."""
    graph = nodegraph.load(f"examples/{name}.json")
    events, said = Emitter(), []
    events.subscribe(lambda e: said.append(e.text), Message)
    old = os.getcwd()
    os.chdir("examples")  # files a graph names are relative to it
    try:
        result = nodegraph.train(graph, epochs=epochs, device="cpu", events=events,
                                 threads=threads)
    finally:
        os.chdir(old)
    loop = sum(h["seconds"] for h in result.history)
    cost = 0.0
    if threads is None:
        cost = _choice_cost(result.compiled)
    msg = next((t for t in said if "CPU thread" in t), "")
    return loop + cost, msg


def _choice_cost(compiled) -> float:
    from nodegraph.runtime import threads as chooser

    t = time.perf_counter()
    chooser.choose(compiled, None, {})
    return time.perf_counter() - t


def measure(name: str, epochs: int, repeats: int) -> dict[str, float]:
    times: dict[str, list[float]] = {"auto": [], "default": [], "one": []}
    picks = []
    variants = [("auto", None), ("default", DEFAULT), ("one", 1)]
    for r in range(repeats):  # each variant takes each place in the order in turn
        for variant, threads in variants[r % 3:] + variants[:r % 3]:
            seconds, msg = one_run(name, epochs, threads)
            times[variant].append(seconds)
            if variant == "auto":
                picks.append(msg.split(" (")[0].replace("using ", ""))
    med = {k: statistics.median(v) for k, v in times.items()}
    med["picked"] = ", ".join(sorted(set(picks)))
    return med


def load() -> str:
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:4])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--epochs", type=int, default=2, help="epochs per run (xor: x50)")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--examples", nargs="*", default=list(EXAMPLES))
    args = p.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # so a killed run stops its neighbour
    print(f"torch default threads: {DEFAULT}; CPUs: {os.cpu_count()}")
    worst = 0.0
    for label, ctx in (("idle", None), ("neighbour", Neighbour)):
        for name in args.examples:
            if ctx is None:
                before = load()
                med = measure(name, args.epochs * EXAMPLES[name], args.repeats)
            else:
                with ctx():
                    before = load()
                    med = measure(name, args.epochs * EXAMPLES[name], args.repeats)
            best = min(med["default"], med["one"])
            ratio = med["auto"] / best
            worst = max(worst, ratio)
            print(f"{label:9s} {name:14s} auto {med['auto']:.3f}s [{med['picked']}]  "
                  f"default({DEFAULT}) {med['default']:.3f}s  one {med['one']:.3f}s  "
                  f"default/one {med['default'] / med['one']:.2f}  auto/best {ratio:.2f}  "
                  f"(loadavg {before})", flush=True)
    print(f"auto/best: {worst:.2f} (worst case; target <= 1.10)")


if __name__ == "__main__":
    main()
