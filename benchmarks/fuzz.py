"""Do damaged graph files end in our own error? Load + validate N mutated examples.

Each case is an example from `examples/*.json` damaged by `tests/mutations.py` (seeded by
`--seed` and the case number, so any case can be replayed alone with `--case I`). Cases run
in-process — `nodegraph.loads` and `nodegraph.validate(for_training=True)`, which runs every
check the CLI and the editor run, called as functions — in `--jobs`
long-lived worker processes. The parent watches each worker: a case that takes longer than
`--time-limit` seconds is a *hang*, one whose worker's resident memory passes `--mem-limit`
MB is a *blowup* (an RSS watchdog, because torch alone reserves gigabytes of address space
it never touches); the worker is killed and a fresh one takes its place. A case that raises
anything but a `NodegraphError` is a *crash*. Prints the counts (`crashes`, `hangs`,
`blowups`, and `slow` for cases over one second) and the first few cases of each class,
grouped by exception and place, with the mutations that made them.

    python benchmarks/fuzz.py --cases 10000 --seed 0 --jobs 2
    python benchmarks/fuzz.py --seed 0 --case 1234      # replay one case, with traceback
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import sys
import time
import traceback
from collections import Counter, defaultdict
from multiprocessing.connection import Connection, wait
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.mutations import case  # noqa: E402 (after the path is set)

SLOW_S = 1.0


def run_case(seed: int, index: int, compile_too: bool = False) -> tuple[str, str]:
    """Load and validate case `index`: ("ok" | "crash" | "disagree", what went wrong where).
    With `compile_too`, a graph that validates is compiled on the CPU as well, and a refusal
    there is a disagreement (validation should have said so)."""
    import nodegraph
    from nodegraph.model.errors import NodegraphError

    _, text, _ = case(seed, index)
    try:
        graph = nodegraph.loads(text, source=f"case{index}.json")
        report = nodegraph.validate(graph, for_training=True)  # every check the CLI runs
    except NodegraphError:
        return "ok", ""
    except BaseException as e:  # noqa: BLE001 (anything else is what we count)
        return "crash", _where(e)
    if compile_too and report.ok:
        try:
            nodegraph.compile(graph, device="cpu")
        except NodegraphError as e:
            return "disagree", f"{type(e).__name__}: {(str(e).splitlines() or [''])[-1][:150]}"
        except BaseException as e:  # noqa: BLE001
            return "crash", "compile: " + _where(e)
    return "ok", ""


def _where(e: BaseException) -> str:
    """Exception type, the innermost frame of our code, and the message's first line."""
    frames = traceback.extract_tb(e.__traceback__)
    ours = [f for f in frames if "/nodegraph/" in f.filename or "/nodes/" in f.filename]
    place = ours[-1] if ours else (frames[-1] if frames else None)
    at = f"{Path(place.filename).name}:{place.lineno} {place.name}" if place else "?"
    message = (str(e).strip().splitlines() or [""])[0][:120]
    return f"{type(e).__name__} at {at}: {message}"


def _worker(conn: Connection, seed: int, compile_too: bool) -> None:
    import torch

    torch.set_num_threads(1)
    import nodegraph

    for warm in ("xor.json", "cnn_digits.json"):  # first-use costs (imports, data) untimed
        nodegraph.validate(nodegraph.load(ROOT / "examples" / warm))
    conn.send(("ready", 0, "", 0.0))
    while True:
        index = conn.recv()
        if index is None:
            return
        start = time.perf_counter()
        outcome, detail = run_case(seed, index, compile_too)
        conn.send((outcome, index, detail, time.perf_counter() - start))


def _rss_mb(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


class Worker:
    """One worker process, the case it runs and since when."""

    def __init__(self, ctx, seed: int, compile_too: bool):
        self.ctx, self.seed, self.compile_too = ctx, seed, compile_too
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_worker, args=(child, seed, compile_too), daemon=True)
        self.proc.start()
        child.close()
        self.index: int | None = None
        self.started = 0.0
        self.ready = False

    def give(self, index: int) -> None:
        self.index, self.started = index, time.perf_counter()
        self.conn.send(index)

    def kill(self) -> None:
        self.proc.kill()
        self.proc.join()
        self.conn.close()


def fuzz(cases: int, seed: int, jobs: int, time_limit: float, mem_limit_mb: float,
         start: int = 0, compile_too: bool = False) -> dict[str, list[tuple[int, str]]]:
    """Run cases `start .. start+cases-1`; returns the failing ones by class."""
    ctx = mp.get_context("spawn")
    found: dict[str, list[tuple[int, str]]] = defaultdict(list)
    todo = list(range(start, start + cases))[::-1]
    workers = [Worker(ctx, seed, compile_too) for _ in range(max(1, jobs))]
    done, began = 0, time.perf_counter()
    while done < cases:
        for w in workers:
            if w.ready and w.index is None and todo:
                w.give(todo.pop())
        for conn in wait([w.conn for w in workers], timeout=0.02):
            w = next(w for w in workers if w.conn is conn)
            try:
                outcome, index, detail, seconds = conn.recv()
            except (EOFError, OSError):  # the worker died on its own (a C-level crash)
                found["crashes"].append((w.index, "worker died"))
                done += 1
                workers[workers.index(w)] = _replace(w)
                continue
            if outcome == "ready":
                w.ready = True
                continue
            w.index = None
            done += 1
            if outcome in ("crash", "disagree"):
                found["crashes" if outcome == "crash" else "disagreements"].append((index,
                                                                                    detail))
            if seconds > SLOW_S:
                found["slow"].append((index, f"{seconds:.1f} s"))
            if done % 1000 == 0:
                print(f"  {done} cases, {time.perf_counter() - began:.0f} s", flush=True)
        now = time.perf_counter()
        for i, w in enumerate(workers):
            if w.index is None:
                continue
            if now - w.started > time_limit:
                found["hangs"].append((w.index, f"> {time_limit:g} s"))
            elif (rss := _rss_mb(w.proc.pid)) > mem_limit_mb:
                found["blowups"].append((w.index, f"RSS {rss:.0f} MB"))
            else:
                continue
            done += 1
            workers[i] = _replace(w)
    for w in workers:
        w.conn.send(None)
        w.proc.join(timeout=5)
        if w.proc.is_alive():
            w.kill()
    return found


def _replace(w: Worker) -> Worker:
    w.kill()
    return Worker(w.ctx, w.seed, w.compile_too)


def report(found: dict[str, list[tuple[int, str]]], seed: int, examples: int) -> None:
    """The counts, then the first case of each kind of crash and the first few of the rest."""
    names = ("crashes", "hangs", "blowups", "slow", "disagreements")
    for name in names:
        if name in found or name != "disagreements":
            print(f"{name}: {len(found.get(name, []))}")
    for name in names:
        items = sorted(found.get(name, []))
        if not items:
            continue
        kinds = Counter(detail for _, detail in items)
        if name in ("crashes", "disagreements"):
            firsts = {}
            for index, detail in items:
                firsts.setdefault(detail, index)
            shown = [(i, d, f" (x{kinds[d]})") for d, i in firsts.items()]
            print(f"\n{name}: {len(kinds)} kind(s)")
        else:
            shown = [(i, d, "") for i, d in items[:examples]]
            print(f"\n{name}:")
        for index, detail, count in shown:
            example, _, done = case(seed, index)
            print(f"  case {index}{count}: {detail}\n    {example}: {'; '.join(done)}")


def replay(seed: int, index: int, compile_too: bool = False) -> None:
    """One case in this process, with the full traceback of anything that escapes."""
    import nodegraph

    example, text, done = case(seed, index)
    print(f"case {index}: {example}: {'; '.join(done)}")
    start = time.perf_counter()
    try:
        graph = nodegraph.loads(text, source=f"case{index}.json")
        report_ = nodegraph.validate(graph, for_training=True)
        print("ok" if report_.ok else "problems:\n" + "\n".join(f"  {p.kind}: {p}"
                                                                  for p in report_.problems))
        if report_.ok and compile_too:
            nodegraph.compile(graph, device="cpu")
            print("compiled")
    except nodegraph.NodegraphError as e:
        print(f"{type(e).__name__}: {e}")
    print(f"{time.perf_counter() - start:.2f} s")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1))
    ap.add_argument("--start", type=int, default=0, help="first case number")
    ap.add_argument("--time-limit", type=float, default=5.0, help="seconds per case")
    ap.add_argument("--mem-limit", type=float, default=2048, help="MB of RSS per worker")
    ap.add_argument("--examples", type=int, default=5, help="cases shown per class")
    ap.add_argument("--compile", action="store_true", help="also compile what validates; "
                    "a refusal there counts as a disagreement")
    ap.add_argument("--case", type=int, help="replay this one case here, with a traceback")
    args = ap.parse_args()
    if args.case is not None:
        replay(args.seed, args.case, args.compile)
        return
    began = time.perf_counter()
    found = fuzz(args.cases, args.seed, args.jobs, args.time_limit, args.mem_limit,
                 args.start, args.compile)
    print(f"\n{args.cases} cases, seed {args.seed}, {args.jobs} job(s), "
          f"{time.perf_counter() - began:.0f} s")
    report(found, args.seed, args.examples)


if __name__ == "__main__":
    main()
