"""How long a command takes to start, against bare `python -c "import torch"`.

Five commands, each a fresh process, alternating round by round so load drifts hit all
alike: importing torch, `nodegraph --help`, `nodegraph validate examples/xor.json`, the
same for a 1,000-node graph (a chain of Linear/Tanh written to a temp folder), and a first
fit from Python (`nodegraph.fit(nodegraph.load("examples/xor.json"), epochs=1)`: no
torch._dynamo, no scikit-learn). Prints the median wall and CPU seconds of each and the
figures the targets are stated in:

    help_seconds          nodegraph --help                       target < 0.3 s
    validate_minus_torch  validate xor.json - import torch       target <= 0.5 s
    validate_1000_minus_torch                                    target <= 1.0 s
    first_fit_minus_torch fit xor.json 1 epoch - import torch    target <= 1.0 s

CPU seconds (the child's user + system time) are steadier than wall time on a busy
machine; both are printed.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


FIRST_FIT = ("import nodegraph\n"
             "nodegraph.fit(nodegraph.load('examples/xor.json'), epochs=1)")


def chain(n: int) -> dict:
    """A graph file of `n` nodes: data, then Linear/Tanh pairs, a loss and an optimizer."""
    nodes = {"data": {"type": "data.Moons", "params": {"batch_size": 64}}}
    edges, last = [], ("data", "x")
    for i in range((n - 4) // 2):
        nodes[f"fc{i}"] = {"type": "layers.Linear", "params": {"out_features": 8}}
        nodes[f"act{i}"] = {"type": "activations.Tanh", "params": {}}
        edges += [{"from": list(last), "to": [f"fc{i}", "input"]},
                  {"from": [f"fc{i}", "output"], "to": [f"act{i}", "input"]}]
        last = (f"act{i}", "output")
    nodes["out"] = {"type": "layers.Linear", "params": {"out_features": 2}}
    nodes["loss"] = {"type": "losses.CrossEntropy", "params": {}}
    nodes["opt"] = {"type": "optimizers.Adam", "params": {}}
    edges += [{"from": list(last), "to": ["out", "input"]},
              {"from": ["out", "output"], "to": ["loss", "input"]},
              {"from": ["data", "y"], "to": ["loss", "target"]},
              {"from": ["loss", "loss"], "to": ["opt", "loss"]}]
    return {"format": "nodegraph", "version": 1, "name": f"chain{n}", "nodes": nodes,
            "edges": edges}


def timed(command: list[str]) -> tuple[float, float]:
    """Wall and CPU seconds of one run of `command` (which must succeed)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, cwd=ROOT,
                   env={**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")})
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--only-fit", action="store_true",
                        help="time only import torch and the first fit")
    args = parser.parse_args()
    py = sys.executable
    with tempfile.TemporaryDirectory() as tmp:
        big = Path(tmp) / "chain1000.json"
        big.write_text(json.dumps(chain(1000)))
        commands = {
            "import torch": [py, "-c", "import torch"],
            "nodegraph --help": [py, "-m", "nodegraph", "--help"],
            "validate xor": [py, "-m", "nodegraph", "validate", "examples/xor.json"],
            "validate 1000 nodes": [py, "-m", "nodegraph", "validate", str(big)],
            "first fit xor": [py, "-c", FIRST_FIT],
        }
        if args.only_fit:
            commands = {k: v for k, v in commands.items()
                        if k in ("import torch", "first fit xor")}
        times: dict[str, list[tuple[float, float]]] = {name: [] for name in commands}
        for round_ in range(args.rounds):
            names = list(commands)
            names = names[round_ % len(names):] + names[:round_ % len(names)]
            for name in names:
                times[name].append(timed(commands[name]))
    med = {name: (statistics.median(w for w, _ in t), statistics.median(c for _, c in t))
           for name, t in times.items()}
    print(f"{'command':<22} {'wall s':>8} {'cpu s':>8}   (medians of {args.rounds})")
    for name, (wall, cpu) in med.items():
        print(f"{name:<22} {wall:8.2f} {cpu:8.2f}")
    torch_wall, torch_cpu = med["import torch"]
    if "nodegraph --help" in med:
        print(f"help_seconds: {med['nodegraph --help'][0]:.2f} wall, "
              f"{med['nodegraph --help'][1]:.2f} cpu (target < 0.3)")
    for name, key, target in (("validate xor", "validate_minus_torch", 0.5),
                              ("validate 1000 nodes", "validate_1000_minus_torch", 1.0),
                              ("first fit xor", "first_fit_minus_torch", 1.0)):
        if name in med:
            print(f"{key}: {med[name][0] - torch_wall:+.2f} wall, "
                  f"{med[name][1] - torch_cpu:+.2f} cpu (target <= {target})")
    print(f"load average at the end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
