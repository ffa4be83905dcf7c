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

With `--train`, a graph that validates clean is also compiled on the CPU and trained for
one step: validation promised it runs, so any exception there that is not a
`NodegraphError` is a *lie* ("validation lied"), counted with the crashes' detail.

    python benchmarks/fuzz.py --cases 10000 --seed 0 --jobs 2
    python benchmarks/fuzz.py --cases 200 --seed 0 --train   # ... and train what validates
    python benchmarks/fuzz.py --seed 0 --case 1234      # replay one case, with traceback
    python benchmarks/fuzz.py --smoke                   # CI: seed 0 and today's, trained

`--smoke` is the bounded check CI runs: `--cases` (default 30) cases of `--seed` and as many
of a seed made of today's date (so each day tries new ones), trained, with generous time
limits; it exits 1 on any crash, lie, hang or blowup, printing the seed to replay it with.
"""

from __future__ import annotations

import argparse
import datetime
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


def run_case(seed: int, index: int, compile_too: bool = False,
             train_too: bool = False) -> tuple[str, str]:
    """Load and validate case `index`: ("ok" | "crash" | "disagree" | "lie", what went
    wrong where). With `compile_too`, a graph that validates is compiled on the CPU as well,
    and a refusal there is a disagreement (validation should have said so). With
    `train_too`, it is trained one step, and an exception that is not a NodegraphError is a
    lie: validation passed a graph that then fails as a bug would."""
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
    if train_too and report.ok:
        try:
            train_one_step(graph)
        except NodegraphError:
            pass  # refused with our own message: what a user would see, so not a lie
        except BaseException as e:  # noqa: BLE001
            return "lie", "train: " + _where(e)
    return "ok", ""


def train_one_step(graph) -> None:
    """Compile `graph` on the CPU and train it for one step (one epoch, stopped after its
    first step), in the folder of the examples, where a case's data files would be."""
    import warnings

    import nodegraph
    from nodegraph.model.events import Emitter, StepEnded
    from nodegraph.runtime.train import RunControl

    control, events = RunControl(), Emitter()
    events.subscribe(lambda event: control.stop(), StepEnded)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a case's warnings are not what is counted
        nodegraph.train(graph, epochs=1, device="cpu", events=events, control=control,
                        threads=1)


def _where(e: BaseException) -> str:
    """Exception type, the innermost frame of our code, and the message's first line."""
    frames = traceback.extract_tb(e.__traceback__)
    ours = [f for f in frames if "/nodegraph/" in f.filename or "/nodes/" in f.filename]
    place = ours[-1] if ours else (frames[-1] if frames else None)
    at = f"{Path(place.filename).name}:{place.lineno} {place.name}" if place else "?"
    message = (str(e).strip().splitlines() or [""])[0][:120]
    return f"{type(e).__name__} at {at}: {message}"


def _worker(conn: Connection, seed: int, compile_too: bool, train_too: bool) -> None:
    import torch

    torch.set_num_threads(1)
    import nodegraph

    for warm in ("xor.json", "cnn_digits.json"):  # first-use costs (imports, data) untimed
        nodegraph.validate(nodegraph.load(ROOT / "examples" / warm))
    if train_too:  # the first training and the digits' scikit-learn import: seconds, once
        train_one_step(nodegraph.load(ROOT / "examples" / "xor.json"))
        import sklearn.datasets  # noqa: F401
    conn.send(("ready", 0, "", 0.0))
    while True:
        item = conn.recv()  # a case number of `seed`, or (another seed, case number)
        if item is None:
            return
        start = time.perf_counter()
        outcome, detail = run_case(*_seeded(item, seed), compile_too, train_too)
        conn.send((outcome, item, detail, time.perf_counter() - start))


def _seeded(item: int | tuple[int, int], seed: int) -> tuple[int, int]:
    """(seed, case number) of a case: an int is a case of the run's own seed."""
    return item if isinstance(item, tuple) else (seed, item)


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

    def __init__(self, ctx, seed: int, compile_too: bool, train_too: bool = False):
        self.ctx, self.seed, self.compile_too, self.train_too = (ctx, seed, compile_too,
                                                                 train_too)
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_worker, args=(child, seed, compile_too, train_too),
                                daemon=True)
        self.proc.start()
        child.close()
        self.index: int | tuple[int, int] | None = None
        self.started = 0.0
        self.ready = False

    def give(self, index: int | tuple[int, int]) -> None:
        self.index, self.started = index, time.perf_counter()
        self.conn.send(index)

    def kill(self) -> None:
        self.proc.kill()
        self.proc.join()
        self.conn.close()


def fuzz(cases: int, seed: int, jobs: int, time_limit: float, mem_limit_mb: float,
         start: int = 0, compile_too: bool = False,
         train_too: bool = False, more_seeds: tuple[int, ...] = ()) -> dict[str, list]:
    """Run cases `start .. start+cases-1` (of `seed`, and of each of `more_seeds` as
    (seed, case) pairs, by the same workers); returns the failing ones by class."""
    ctx = mp.get_context("spawn")
    found: dict[str, list[tuple[int, str]]] = defaultdict(list)
    if train_too:
        found["lies"] = []  # counted, and reported when there are none
    todo: list = [*range(start, start + cases),
                  *((s, i) for s in more_seeds for i in range(start, start + cases))][::-1]
    cases = len(todo)
    workers = [Worker(ctx, seed, compile_too, train_too) for _ in range(max(1, jobs))]
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
            if outcome in ("crash", "disagree", "lie"):
                found[{"crash": "crashes", "disagree": "disagreements",
                       "lie": "lies"}[outcome]].append((index, detail))
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
    return Worker(w.ctx, w.seed, w.compile_too, w.train_too)


def report(found: dict[str, list], seed: int, examples: int) -> None:
    """The counts, then the first case of each kind of crash and the first few of the rest."""
    names = ("crashes", "hangs", "blowups", "slow", "disagreements", "lies")
    for name in names:
        if name in found or name not in ("disagreements", "lies"):
            print(f"{name}: {len(found.get(name, []))}")
    for name in names:
        items = sorted(found.get(name, []))
        if not items:
            continue
        kinds = Counter(detail for _, detail in items)
        if name in ("crashes", "disagreements", "lies"):
            firsts = {}
            for index, detail in items:
                firsts.setdefault(detail, index)
            shown = [(i, d, f" (x{kinds[d]})") for d, i in firsts.items()]
            print(f"\n{name}: {len(kinds)} kind(s)")
        else:
            shown = [(i, d, "") for i, d in items[:examples]]
            print(f"\n{name}:")
        for item, detail, count in shown:
            which, index = _seeded(item, seed)
            example, _, done = case(which, index)
            print(f"  case {index} of seed {which}{count}: {detail}\n    {example}: "
                  f"{'; '.join(done)}")


def replay(seed: int, index: int, compile_too: bool = False, train_too: bool = False) -> None:
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
        if report_.ok and train_too:
            train_one_step(graph)
            print("trained one step")
    except nodegraph.NodegraphError as e:
        print(f"{type(e).__name__}: {e}")
    print(f"{time.perf_counter() - start:.2f} s")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, default=None, help="default 1000 (30 with --smoke)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1))
    ap.add_argument("--start", type=int, default=0, help="first case number")
    ap.add_argument("--time-limit", type=float, default=None, help="seconds per case "
                    "(5; 20 with --train or --smoke: a DETR step alone takes seconds)")
    ap.add_argument("--mem-limit", type=float, default=2048, help="MB of RSS per worker")
    ap.add_argument("--examples", type=int, default=5, help="cases shown per class")
    ap.add_argument("--compile", action="store_true", help="also compile what validates; "
                    "a refusal there counts as a disagreement")
    ap.add_argument("--train", action="store_true", help="also train what validates for one "
                    "step; an exception there that is not a NodegraphError is a lie")
    ap.add_argument("--case", type=int, help="replay this one case here, with a traceback")
    ap.add_argument("--smoke", action="store_true", help="CI: --seed and today's date as "
                    "a second seed, trained; exit 1 on anything found")
    args = ap.parse_args()
    if args.time_limit is None:
        args.time_limit = 20.0 if args.train or args.smoke else 5.0
    if args.case is not None:
        replay(args.seed, args.case, args.compile, args.train)
        return
    if args.smoke:
        sys.exit(smoke(args))
    args.cases = 1000 if args.cases is None else args.cases
    began = time.perf_counter()
    found = fuzz(args.cases, args.seed, args.jobs, args.time_limit, args.mem_limit,
                 args.start, args.compile, args.train)
    print(f"\n{args.cases} cases, seed {args.seed}, {args.jobs} job(s), "
          f"{time.perf_counter() - began:.0f} s")
    report(found, args.seed, args.examples)


def smoke(args: argparse.Namespace) -> int:
    """The CI check: two seeds (the given one, today's date) on the same workers, trained,
    with generous time limits; 1 if anything is found."""
    cases = 30 if args.cases is None else args.cases
    today = int(datetime.date.today().strftime("%Y%m%d"))
    began = time.perf_counter()
    found = fuzz(cases, args.seed, args.jobs, args.time_limit, args.mem_limit,
                 args.start, train_too=True, more_seeds=(today,))
    print(f"{cases} cases of seed {args.seed} and of seed {today}, trained, "
          f"{time.perf_counter() - began:.0f} s")
    if any(found.get(k) for k in ("crashes", "lies", "hangs", "blowups")):
        report(found, args.seed, args.examples)
        print("replay one: python benchmarks/fuzz.py --train --seed SEED --case N")
        return 1
    return 0


if __name__ == "__main__":
    main()
