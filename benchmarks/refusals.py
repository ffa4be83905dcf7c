"""What each refusal of issue #33's attacker files costs: wall time and peak memory.

Builds the attacker's files (a FIFO and a /dev/zero symlink as .ngz, a weights member and
a run.json that inflate to 1.5 GiB, a 13,000 x 13,000 PNG in a WebDataset tar, a brace
range of a million names, a FIFO in a Hugging Face folder, a gzip IDX bomb, an
AdaptiveLogSoftmaxWithLoss of 5 GB under NODEGRAPH_MEMORY_LIMIT=1G, settings out of
bounds) and opens each in a child process as a user would (`load_model`, or validate and
build the data block: `benchmarks.fuzz_files.open_case`, or validate a graph file). The
child times the open alone (its imports done, and the same reader run once on a valid
file first, so first-use costs are not counted) and reports how far its resident
peak rose over what importing took (VmHWM, reset before the open); the parent measures
the child's wall time and its whole peak RSS (`os.wait4`'s rusage of that one child;
`resource.getrusage(RUSAGE_CHILDREN)` gives only the maximum over all children so far).
Goal: every refusal under 2 s and 300 MB of rise.

    python benchmarks/refusals.py                   # the table
    python benchmarks/refusals.py --out benchmarks/results/refusals.txt
"""

from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks import fuzz_files  # noqa: E402

GOAL_SECONDS, GOAL_MB = 2.0, 300

_CHILD = """
import json, sys, time
import nodegraph, nodegraph.interop.model
from benchmarks import fuzz_files
from nodegraph.model.errors import NodegraphError

def status(key):
    return next(int(line.split()[1]) for line in open("/proc/self/status")
                if line.startswith(key + ":"))

def run(how, arg):
    if how == "load_model":
        nodegraph.load_model(arg)
        return []
    if how == "validate":
        report = nodegraph.validate(nodegraph.load(arg))
        return [p.message for p in report.problems if p.severity == "error"]
    case = fuzz_files.Case(fuzz_files.Path(arg["folder"]), fuzz_files.Path(arg["samples"]),
                           arg["block"], arg["params"])
    return [m for _, m in fuzz_files.open_case(case, "")]

how, arg, warm = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3])
if warm is not None:  # the same reader on a valid file first: first-use costs untimed
    run(how, warm)
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")  # the peak (VmHWM) starts again from the resident size now
before, began = status("VmRSS"), time.perf_counter()
try:
    errors = run(how, arg)
    out = {"refused": errors[0] if errors else None}
except NodegraphError as e:
    out = {"refused": str(e)}
except BaseException as e:
    out = {"crash": repr(e)[:300]}
out["seconds"] = time.perf_counter() - began
out["rise_mb"] = (status("VmHWM") - before) / 1024
print("RESULT " + json.dumps(out))
"""


def _graph(folder: Path, name: str, nodes: dict, edges: list, training: dict | None = None
           ) -> str:
    doc = {"format": "nodegraph", "version": 1, "name": name, "nodes": nodes, "edges": edges}
    if training:
        doc["training"] = training
    path = folder / f"{name}.json"
    path.write_text(json.dumps(doc))
    return str(path)


def _xor(folder: Path, name: str, training: dict) -> str:
    xor = json.loads((ROOT / "examples" / "xor.json").read_text())
    xor["training"] = {**xor.get("training", {}), **training}
    xor["name"] = name
    path = folder / f"{name}.json"
    path.write_text(json.dumps(xor))
    return str(path)


def _case(samples: Path, work: Path, surface: str, slot: str) -> fuzz_files.Case:
    """A fresh copy of `surface`'s valid sample, in a folder of its own (`slot`)."""
    case, _ = fuzz_files.prepare(samples, work / slot, surface, 0, 0, damage=False)
    return case


def _as_arg(case: fuzz_files.Case) -> dict:
    return {"folder": str(case.folder), "samples": str(case.samples), "block": case.block,
            "params": case.params}


def attacks(samples: Path, work: Path) -> list[tuple[str, str, object, dict]]:
    """(name, how, argument, extra environment) of each attacker's file."""
    out: list[tuple[str, str, object, dict]] = []
    fifo = work / "fifo.ngz"
    os.mkfifo(fifo)
    out.append(("ngz: a FIFO", "load_model", str(fifo), {}))
    zero = work / "zero.ngz"
    zero.symlink_to("/dev/zero")
    out.append(("ngz: a symlink to /dev/zero", "load_model", str(zero), {}))
    out.append(("ngz: weights member inflating to 1.5 GiB", "load_model",
                str(samples / "bombs" / "weights-bomb.ngz"), {}))
    out.append(("ngz: run.json inflating to 1.5 GiB", "load_model",
                str(samples / "bombs" / "run-bomb.ngz"), {}))

    case = _case(samples, work, "webdataset", "png")
    shard = case.folder / "shards" / "bomb.tar"
    with tarfile.open(shard, "w") as tar:
        for name, raw in (("0000000.png", (samples / "bombs" / "bomb.png").read_bytes()),
                          ("0000000.cls", b"0")):
            info = tarfile.TarInfo(name)
            info.size = len(raw)
            tar.addfile(info, fileobj=io.BytesIO(raw))
    case.params = {"shards": "shards/bomb.tar", "x_field": "png", "storage": "auto"}
    out.append(("webdataset: a 13,000 x 13,000 PNG in a tar", "case", _as_arg(case), {}))

    case = _case(samples, work, "webdataset", "brace")
    case.params = {"shards": "shards/x-{000000..999999}.tar", "storage": "auto"}
    out.append(("webdataset: brace range of 1,000,000 names", "case", _as_arg(case), {}))

    case = _case(samples, work, "hf", "fifo")
    arrow = next(case.folder.rglob("*.arrow"))
    arrow.unlink()
    os.mkfifo(arrow)
    out.append(("hf: a FIFO as the Arrow file", "case", _as_arg(case), {}))

    case = _case(samples, work, "idx", "gzip")
    (case.folder / "train-images-idx3-ubyte").unlink()
    gz = case.folder / "train-images-idx3-ubyte.gz"
    gz.write_bytes((samples / "bombs" / "bomb.gz").read_bytes())
    case.params = {**case.params, "images": gz.name}
    out.append(("idx: gzip inflating to 1.5 GiB", "case", _as_arg(case), {}))

    als = _graph(work, "als", {
        "data": {"type": "data.Digits", "params": {}},
        "lin": {"type": "layers.Linear", "params": {"out_features": 4096}},
        "als": {"type": "opaque.Module", "params": {
            "target": "torch.nn:AdaptiveLogSoftmaxWithLoss", "index": 1,
            "kwargs": {"in_features": 4096, "n_classes": 300_000, "cutoffs": [150_000],
                       "div_value": 1.0}}}},
        [{"from": ["data", "x"], "to": ["lin", "input"]},
         {"from": ["lin", "output"], "to": ["als", "input"]},
         {"from": ["data", "y"], "to": ["als", "input_2"]}])
    out.append(("AdaptiveLogSoftmaxWithLoss of 4.9 GB, limit 1G", "validate", als,
                {"NODEGRAPH_MEMORY_LIMIT": "1G"}))
    out.append(("training.workers = 100000", "validate",
                _xor(work, "workers", {"workers": 100_000}), {}))
    out.append(("training.epochs = 10**15, batch_size 10**9", "validate",
                _xor(work, "epochs", {"epochs": 10**15, "batch_size": 10**9}), {}))
    out.append(("training.log_dir outside the graph's folder", "validate",
                _xor(work, "logdir", {"log_dir": "/tmp/elsewhere-nodegraph"}), {}))
    return out


def measure(how: str, arg: object, env: dict, warm: object = None,
            timeout: float = 120.0) -> dict:
    """Run one open in a child: its report, wall seconds, and the child's own peak RSS in
    MB (`os.wait4`'s rusage of that one child: the per-child value of RUSAGE_CHILDREN)."""
    full = {**os.environ, "PYTHONPATH": str(ROOT), **env}
    began = time.perf_counter()
    child = subprocess.Popen([sys.executable, "-c", _CHILD, how, json.dumps(arg),
                              json.dumps(warm)],
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=full,
                             text=True, cwd=str(ROOT))
    killed: list[bool] = []
    timer = threading.Timer(timeout, lambda: (killed.append(True), child.kill()))
    timer.start()
    assert child.stdout is not None
    stdout = child.stdout.read()
    _, status, usage = os.wait4(child.pid, 0)
    timer.cancel()
    child.returncode = os.waitstatus_to_exitcode(status)
    out: dict = {"hang": bool(killed), "wall": time.perf_counter() - began,
                 "peak_mb": usage.ru_maxrss / 1024}
    line = next((s for s in stdout.splitlines() if s.startswith("RESULT ")), None)
    if line:
        out.update(json.loads(line[7:]))
    return out


def table(rows: list[tuple[str, dict]]) -> str:
    head = f"{'attack':48} {'outcome':9} {'open s':>7} {'rise MB':>8} {'child MB':>9} {'wall s':>7}"
    lines = [head, "-" * len(head)]
    for name, r in rows:
        outcome = ("hang" if r.get("hang") else "crash" if "crash" in r else
                   "refused" if r.get("refused") else "READ")
        ok = (outcome == "refused" and r.get("seconds", 99) < GOAL_SECONDS
              and r.get("rise_mb", 1e9) < GOAL_MB)
        lines.append(f"{name:48} {outcome:9} {r.get('seconds', float('nan')):7.2f} "
                     f"{r.get('rise_mb', float('nan')):8.1f} {r['peak_mb']:9.0f} "
                     f"{r['wall']:7.2f}{'' if ok else '  <- over the goal'}")
    lines.append("")
    for name, r in rows:
        said = r.get("refused") or r.get("crash") or ""
        lines.append(f"{name}: {said.splitlines()[0][:200] if said else '(read whole)'}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", help="also write the table to this file")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="nodegraph-refusals-") as tmp:
        root = Path(tmp)
        samples = fuzz_files.make_samples(root / "samples", ["ngz", "webdataset", "hf", "idx"])
        work = root / "work"
        work.mkdir()
        base = measure("validate", str(ROOT / "examples" / "xor.json"), {})
        rows = []
        warm = {"load_model": str(samples / "ngz" / "model.ngz"),
                "validate": str(ROOT / "examples" / "xor.json")}
        for name, how, arg, env in attacks(samples, work):
            pristine = None
            if how == "case":
                surface = Path(arg["folder"]).name.split("-")[0]  # type: ignore[index]
                pristine = _as_arg(_case(samples, work, surface, "warm"))
            r = measure(how, arg, env, warm.get(how, pristine))
            rows.append((name, r))
            print(f"{name}: {r.get('seconds', float('nan')):.2f} s", file=sys.stderr,
                  flush=True)
    text = (f"baseline (validate examples/xor.json): open {base.get('seconds', 0):.2f} s, "
            f"rise {base.get('rise_mb', 0):.1f} MB, child peak {base['peak_mb']:.0f} MB\n"
            "open s / rise MB: the open alone, in the child after its imports; child MB: "
            "that child's whole peak RSS (os.wait4 rusage), imports included\n\n"
            + table(rows))
    print(text)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(text + "\n")


if __name__ == "__main__":
    main()
