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

`--surface` fuzzes the other files a graph or a saved model opens (`benchmarks/fuzz_files.py`):
`ngz` (saved models), `webdataset` (tar shards), `hf` (Hugging Face folders), `table`
(Parquet and CSV), `idx` (MNIST's files), `cifar`, `tokenizer` (tokenizer.json and corpora),
`images` (image folders), each a sample made at start and damaged per case (bytes, header
fields, JSON members, FIFOs, symlinks in and out, decompression bombs), opened by its data
block (validated, then built and read whole) or by `load_model`. `graph` is the graph file
above; `all` is every surface. A refusal that is not a `NodegraphError` naming a file of the
sample is a crash; a case during which a file outside its folder is opened (the samples'
``outside`` folder, which the outward links point to, watched with inotify:
`benchmarks/fuzz_watch.py`) is an *escape*, whatever links the case holds (a link that
stays inside the case's folder is allowed by design); escapes are counted, shown, but not
failed on: the confinement's own tests own that.

    python benchmarks/fuzz.py --surface all --cases 2000 --seed 0
    python benchmarks/fuzz.py --surface images --seed 0 --case 17   # replay one

`--smoke` is the bounded check CI runs: `--cases` (default 30) cases of `--seed` and as many
of a seed made of today's date (so each day tries new ones), trained, with generous time
limits, then (`--surface`, default all) `--file-cases` (default 8) cases of each file
surface and seed; it prints a table per surface and exits 1 on any crash, lie, hang or
blowup, printing the seed to replay it with.
"""

from __future__ import annotations

import argparse
import datetime
import multiprocessing as mp
import os
import shutil
import sys
import tempfile
import time
import traceback
from collections import Counter, defaultdict
from multiprocessing.connection import Connection, wait
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks import fuzz_files, fuzz_watch  # noqa: E402
from tests.mutations import case  # noqa: E402 (after the path is set)

SLOW_S = 1.0
Item = tuple[str, int, int]  # (surface, seed, case number)


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


_WATCHES: dict[Path, fuzz_watch.Watch] = {}


def _watch(outside: Path) -> fuzz_watch.Watch:
    """The inotify watch on an ``outside`` folder (the worker's own copy), made once."""
    if outside not in _WATCHES:
        _WATCHES[outside] = fuzz_watch.Watch(outside)
    return _WATCHES[outside]


def run_file_case(samples: Path, scratch: Path, surface: str, seed: int,
                  index: int) -> tuple[str, str]:
    """Damage a copy of `surface`'s sample (case `index` of `seed`) and open it: ("read" |
    "refused" | "crash" | "escape", what went wrong where, and what was done)."""
    from nodegraph.model.errors import NodegraphError

    made, done = fuzz_files.prepare(samples, scratch, surface, seed, index)
    what = "; ".join(done)
    watch = _watch(made.beyond)
    watch.opened()  # what came before this case is not its doing
    try:
        errors = fuzz_files.open_case(made, surface)
    except NodegraphError as e:
        errors = [("refused", str(e))]
    except BaseException as e:  # noqa: BLE001 (anything else is what we count)
        return "crash", f"{_where(e)} || {what}"
    try:
        if opened := watch.opened():  # a file outside the allowed folders was read
            shown = ", ".join(str(p.relative_to(made.beyond.parent)) for p in opened[:3])
            return "escape", f"opened {shown} || {what}"
        if not watch.available and not errors and fuzz_files.OUTWARD in what:
            return "escape", f"read whole (no inotify: by the mutation's name) || {what}"
        if not errors:
            return "read", ""
        for kind, message in errors:
            if kind == "shape_error":  # an exception validation caught on the data node
                return "crash", f"{_first(message)} || {what}"
            if not fuzz_files.names_a_file(message, made):
                return "crash", f"unnamed: {_first(message)} || {what}"
        return "refused", ""
    finally:
        fuzz_files.remove(made.folder)


def _first(message: str) -> str:
    return (message.strip().splitlines() or [""])[0][:150]


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


def _worker(conn: Connection, compile_too: bool, train_too: bool, samples: Path | None,
            surfaces: tuple[str, ...], scratch: Path) -> None:
    os.setsid()  # its own process group: killed with it, the loader processes it starts
    import torch

    torch.set_num_threads(1)
    import nodegraph

    for warm in ("xor.json", "cnn_digits.json"):  # first-use costs (imports, data) untimed
        nodegraph.validate(nodegraph.load(ROOT / "examples" / warm))
    if train_too and "graph" in surfaces:  # the first training, scikit-learn: seconds, once
        train_one_step(nodegraph.load(ROOT / "examples" / "xor.json"))
        import sklearn.datasets  # noqa: F401
    if samples is not None:
        warm_readers(samples, scratch, [s for s in surfaces if s != "graph"])
    conn.send(("ready", ("", 0, 0), "", 0.0, 0.0))
    while True:
        item = conn.recv()  # (surface, seed, case number)
        if item is None:
            return
        surface, seed, index = item
        before = _peak_reset()
        start = time.perf_counter()
        if surface == "graph":
            outcome, detail = run_case(seed, index, compile_too, train_too)
        else:
            assert samples is not None
            outcome, detail = run_file_case(samples, scratch, surface, seed, index)
        seconds = time.perf_counter() - start
        conn.send((outcome, item, detail, seconds, _status_mb("VmHWM") - before))


def _peak_reset() -> float:
    """Start this process's resident peak (VmHWM) again from its size now, which is
    returned (MB): a case's rise is then its own, not the worker's largest so far."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:  # not Linux, or not allowed: the rise is then the peak so far
        pass
    return _status_mb("VmRSS")


def _status_mb(key: str, pid: int | str = "self") -> float:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def warm_readers(samples: Path, scratch: Path, surfaces: list[str]) -> None:
    """Open each surface's undamaged sample, read whole and streamed, so that no case is
    charged with first-use costs: each reader's imports (pyarrow, datasets, ...), then the
    streamed loader's fork server, which imports what the first streamed data needs only
    (the others' data, imported again in every loader process, took seconds a case)."""
    for stream in (False, True):
        if stream:
            _start_forkserver()
        for surface in surfaces:
            made, _ = fuzz_files.prepare(samples, scratch, surface, 0, 0, damage=False)
            if stream and "storage" not in made.params:
                continue
            made.params.update(storage="stream") if stream else None
            try:
                errors = fuzz_files.open_case(made, surface)
            finally:
                fuzz_files.remove(made.folder)
            if errors:  # the fuzzer's own fault: its sample should read whole
                print(f"warning: the undamaged {surface} sample was refused: {errors[0]}",
                      file=sys.stderr, flush=True)


def _start_forkserver() -> None:
    """Start this process's fork server preloading every data module imported so far (the
    readers of all the surfaces, and the libraries they read with): nodegraph sets the
    preload for the first streamed data only, as a graph streams one kind of data. The
    readers import `datasets` inside their functions: without it here each streamed HF
    case's loader process imported it anew (seconds under load: counted as hangs)."""
    import importlib
    import pkgutil
    from multiprocessing import forkserver

    import nodes.data
    from nodegraph.kinds import loading

    libraries = ("tokenizers", "PIL.Image", "pyarrow", "webdataset", "datasets")
    readers = [f"nodes.data.{m.name}" for m in pkgutil.iter_modules(nodes.data.__path__)]
    for name in (*readers, *libraries):
        try:
            importlib.import_module(name)
        except ImportError:
            pass
    modules = sorted(m for m in sys.modules if m.startswith("nodes.data") or m in libraries)
    mp.get_context("forkserver").set_forkserver_preload(loading._PRELOAD + modules)
    forkserver.ensure_running()


def _rss_mb(pid: int) -> float:
    return _status_mb("VmRSS", pid)


class Worker:
    """One worker process, the case it runs and since when."""

    def __init__(self, ctx, compile_too: bool, train_too: bool, samples: Path | None,
                 surfaces: tuple[str, ...]):
        self.ctx, self.compile_too, self.train_too = ctx, compile_too, train_too
        self.samples, self.surfaces = samples, surfaces
        # the worker's cases are made here, where the parent can find a FIFO it waits on
        self.scratch = Path(tempfile.mkdtemp(prefix="cases-", dir=samples)) if samples \
            else Path()
        if samples is not None:  # its own copy of the files outward links point to
            fuzz_files.own_outside(samples, self.scratch)
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_worker, args=(child, compile_too, train_too, samples,
                                                      surfaces, self.scratch))
        # not a daemon: a streamed data block starts loader processes of its own
        self.proc.start()
        child.close()
        self.index: Item | None = None
        self.started = 0.0
        self.ready = False
        self.draining = False  # its case was counted as a hang; waiting for it to end

    def give(self, index: Item) -> None:
        self.index, self.started = index, time.perf_counter()
        self.conn.send(index)

    def unstick(self) -> bool:
        """Open and close every FIFO of the worker's case, so that a reader blocked opening
        one wakes up (and reads an end of file): the case was counted as a hang already,
        and the worker lives on instead of a fresh one's seconds of start-up. True when
        there was a FIFO to open."""
        import stat

        opened = False
        for top, _dirs, names in os.walk(self.scratch):
            for name in names:
                path = os.path.join(top, name)
                try:
                    if stat.S_ISFIFO(os.lstat(path).st_mode):
                        os.close(os.open(path, os.O_RDWR | os.O_NONBLOCK))
                        opened = True
                except OSError:
                    pass
        return opened

    def kill(self) -> None:
        """Kill the worker and its process group: the forkserver and loader processes a
        streamed case started were left behind before (about 550 MB each, holding the
        run's output pipe open: a run piped to `tail` never ended)."""
        import signal

        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):  # not yet its own group: just it
            self.proc.kill()
        self.proc.join()
        self.conn.close()
        if self.samples is not None:
            fuzz_files.remove(self.scratch)


def fuzz(todo: list[Item], jobs: int, time_limit: float, mem_limit_mb: float,
         compile_too: bool = False, train_too: bool = False,
         samples: Path | None = None, minutes: float = 0
         ) -> tuple[dict[str, list], Counter, dict[tuple[str, str], list]]:
    """Run the cases `todo` on `jobs` workers (no new case after `minutes`, when given);
    returns the failing ones by class, the count of each (surface, outcome), and the
    most seconds and MB of resident rise (the worker's own, not its loader processes') a
    case of each (surface, outcome) took, and the slowest case's number."""
    ctx = mp.get_context("spawn")
    found: dict[str, list[tuple[Item, str]]] = defaultdict(list)
    tally: Counter = Counter()
    worst: dict[tuple[str, str], list] = defaultdict(lambda: [0.0, 0.0, None])
    if train_too:
        found["lies"] = []  # counted, and reported when there are none
    surfaces = tuple(sorted({s for s, _, _ in todo}))
    todo = todo[::-1]
    cases = len(todo)
    workers = [Worker(ctx, compile_too, train_too, samples, surfaces)
               for _ in range(max(1, jobs))]
    done, began = 0, time.perf_counter()
    stop_at = began + 60 * minutes if minutes else float("inf")
    classes = {"crash": "crashes", "disagree": "disagreements", "lie": "lies",
               "escape": "escapes"}
    while done < cases:
        if todo and time.perf_counter() > stop_at:
            print(f"  --minutes {minutes:g} reached: {len(todo)} cases not run", flush=True)
            cases -= len(todo)
            todo = []
        for w in workers:
            if w.ready and w.index is None and todo:
                w.give(todo.pop())
        for conn in wait([w.conn for w in workers], timeout=0.02):
            w = next(w for w in workers if w.conn is conn)
            try:
                outcome, index, detail, seconds, rise = conn.recv()
            except (EOFError, OSError):  # the worker died on its own (a C-level crash)
                if w.index is not None and not w.draining:
                    found["crashes"].append((w.index, "worker died"))
                    tally[w.index[0], "crash"] += 1
                    done += 1
                workers[workers.index(w)] = _replace(w)
                continue
            if outcome == "ready":
                w.ready = True
                continue
            w.index = None
            if w.draining:  # a hang, counted already, that ended once unstuck
                w.draining = False
                continue
            done += 1
            tally[index[0], outcome] += 1
            most = worst[index[0], outcome]
            most[:] = [max(most[0], seconds), max(most[1], rise),
                       index[2] if seconds >= most[0] else most[2]]
            if outcome in classes:
                found[classes[outcome]].append((index, detail))
            if seconds > SLOW_S:
                found["slow"].append((index, f"{seconds:.1f} s"))
            if done % 500 == 0:
                print(f"  {done} cases, {time.perf_counter() - began:.0f} s", flush=True)
        now = time.perf_counter()
        for i, w in enumerate(workers):
            if w.index is None:
                continue
            if w.draining and now - w.started > time_limit:
                workers[i] = _replace(w)  # still stuck after its FIFOs were opened
                continue
            if now - w.started > time_limit:
                found["hangs"].append((w.index, f"> {time_limit:g} s"))
                tally[w.index[0], "hang"] += 1
                if w.unstick():
                    w.draining, w.started = True, now
                    done += 1
                    continue
            elif (rss := _rss_mb(w.proc.pid)) > mem_limit_mb:
                found["blowups"].append((w.index, f"RSS {rss:.0f} MB"))
                tally[w.index[0], "blowup"] += 1
            else:
                continue
            done += 1
            workers[i] = _replace(w)
    for w in workers:
        if w.draining:
            w.kill()
            continue
        w.conn.send(None)
        w.proc.join(timeout=5)
        if w.proc.is_alive():
            w.kill()
        elif w.samples is not None:
            fuzz_files.remove(w.scratch)
    return found, tally, worst


def _replace(w: Worker) -> Worker:
    w.kill()
    return Worker(w.ctx, w.compile_too, w.train_too, w.samples, w.surfaces)


COLUMNS = ("cases", "read", "refused", "crash", "hang", "blowup", "escape")


def table(tally: Counter, surfaces: list[str]) -> None:
    """One line per surface: cases, and how they ended (graph cases: ok, not read/refused)."""
    print(f"{'surface':<11}" + "".join(f"{c:>9}" for c in COLUMNS))
    for s in surfaces:
        row = {c: tally[s, c] for c in COLUMNS[1:]}
        row["read"] += tally[s, "ok"]
        row["crash"] += tally[s, "lie"]
        cases = sum(n for (surface, _), n in tally.items() if surface == s)
        print(f"{s:<11}{cases:>9}" + "".join(f"{row[c]:>9}" for c in COLUMNS[1:]))


def costs(worst: dict[tuple[str, str], list], surfaces: list[str]) -> None:
    """The most time and resident rise one case took, per surface, refused and read (and
    which case was the slowest)."""
    print(f"{'most per case':<14}{'refused s':>10}{'MB':>6}{'case':>7}{'read s':>10}{'MB':>6}"
          f"{'case':>7}")
    for s in surfaces:
        cells = "".join(f"{worst[s, o][0]:>10.2f}{worst[s, o][1]:>6.0f}{worst[s, o][2]:>7}"
                        if (s, o) in worst else f"{'-':>10}{'-':>6}{'':>7}"
                        for o in ("refused", "read"))
        print(f"{s:<14}{cells}")


def report(found: dict[str, list], examples: int, samples: Path | None = None) -> None:
    """The counts, then the first case of each kind of crash and the first few of the rest."""
    names = ("crashes", "hangs", "blowups", "escapes", "slow", "disagreements", "lies")
    for name in names:
        if name in found or name not in ("disagreements", "lies", "escapes"):
            print(f"{name}: {len(found.get(name, []))}")
    for name in names:
        items = sorted(found.get(name, []))
        if not items:
            continue
        kinds = Counter((item[0], _kind(detail)) for item, detail in items)
        if name in ("crashes", "disagreements", "lies", "escapes"):
            firsts: dict = {}
            for item, detail in items:
                firsts.setdefault((item[0], _kind(detail)), (item, detail))
            shown = [(i, d, f" (x{kinds[k]})") for k, (i, d) in firsts.items()]
            print(f"\n{name}: {len(kinds)} kind(s)")
        else:
            shown = [(i, d, "") for i, d in items[:examples]]
            print(f"\n{name}:")
        for item, detail, count in shown:
            print(f"  {_describe(item, detail, count, samples)}")


def _kind(detail: str) -> str:
    """What groups crashes: the error and place, without what was done to the file or the
    numbers in the message."""
    import re

    return re.sub(r"\d+", "N", detail.split(" || ")[0])[:120]


def _describe(item: Item, detail: str, count: str, samples: Path | None) -> str:
    surface, seed, index = item
    error, _, done = detail.partition(" || ")
    if surface == "graph":
        example, _, steps = case(seed, index)
        done = f"{example}: {'; '.join(steps)}"
    elif not done and samples is not None:  # a hang or blowup: say what was done
        scratch = Path(tempfile.mkdtemp(dir=samples))
        try:
            _, steps = fuzz_files.prepare(samples, scratch, surface, seed, index)
        except Exception as e:  # noqa: BLE001 (the fuzzer's own fault: the rest still shown)
            steps = [f"(the case cannot be made again here: {_where(e)})"]
        fuzz_files.remove(scratch)
        done = "; ".join(steps)
    return f"{surface} case {index} of seed {seed}{count}: {error}\n    {done}"


def replay(surface: str, seed: int, index: int, compile_too: bool = False,
           train_too: bool = False) -> None:
    """One case in this process, with the full traceback of anything that escapes."""
    import nodegraph

    start = time.perf_counter()
    if surface != "graph":
        root = Path(tempfile.mkdtemp(prefix="nodegraph-fuzz-"))
        try:  # the fork server started first, as in a worker (making the samples starts
            _start_forkserver()  # threads: their first streamed read would start one)
            samples = fuzz_files.make_samples(root, [surface])
            warm_readers(samples, root, [surface])  # first-use costs untimed, as a worker
            made, done = fuzz_files.prepare(samples, root, surface, seed, index)
            print(f"{surface} case {index}: {'; '.join(done)}")
            start = time.perf_counter()
            errors = fuzz_files.open_case(made, surface)
            print("\n".join(f"{k}: {m}" for k, m in errors) or "read whole")
        except nodegraph.NodegraphError as e:
            print(f"{type(e).__name__}: {e}")
        finally:
            print(f"{time.perf_counter() - start:.2f} s")
            shutil.rmtree(root, ignore_errors=True)
        return
    example, text, steps = case(seed, index)
    print(f"case {index}: {example}: {'; '.join(steps)}")
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


def surfaces_of(given: str) -> list[str]:
    """`--surface`'s value (a name, a comma list, or all) as a list of surfaces."""
    names = list(fuzz_files.SURFACES) if given == "all" else given.split(",")
    unknown = [n for n in names if n not in fuzz_files.SURFACES]
    if unknown:
        raise SystemExit(f"--surface: no surface {unknown[0]!r}; choose from "
                         f"{'|'.join(fuzz_files.SURFACES)}|all")
    return names


def cases_of(surfaces: list[str], seeds: tuple[int, ...], start: int, graph_cases: int,
             file_cases: int) -> list[Item]:
    """The cases to run, surface by surface, interleaved so each surface is tried early."""
    lists = [[(s, seed, i) for seed in seeds
              for i in range(start, start + (graph_cases if s == "graph" else file_cases))]
             for s in surfaces]
    out: list[Item] = []
    for row in range(max((len(x) for x in lists), default=0)):
        out += [x[row] for x in lists if row < len(x)]
    return out


def with_samples(surfaces: list[str]):
    """A temporary folder holding the samples of `surfaces` (None for graph files only)."""
    if surfaces == ["graph"]:
        return None
    root = Path(tempfile.mkdtemp(prefix="nodegraph-fuzz-"))
    began = time.perf_counter()
    fuzz_files.make_samples(root, surfaces)
    print(f"samples of {', '.join(s for s in surfaces if s != 'graph')} made in "
          f"{time.perf_counter() - began:.0f} s", flush=True)
    return root


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, default=None, help="cases per surface and seed: "
                    "default 1000 (30 with --smoke)")
    ap.add_argument("--file-cases", type=int, default=None, help="with --smoke: cases of "
                    "each file surface and seed (default 8)")
    ap.add_argument("--surface", default=None, help="graph|ngz|webdataset|hf|table|idx|cifar|"
                    "tokenizer|images|all, or a comma list (default graph; all with --smoke)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1))
    ap.add_argument("--start", type=int, default=0, help="first case number")
    ap.add_argument("--time-limit", type=float, default=None, help="seconds per case "
                    "(5; 20 with --train or --smoke: a DETR step alone takes seconds)")
    ap.add_argument("--mem-limit", type=float, default=2048, help="MB of RSS per worker")
    ap.add_argument("--examples", type=int, default=5, help="cases shown per class")
    ap.add_argument("--minutes", type=float, default=0, help="give out no new case after "
                    "this many minutes (0: run them all); the table counts what ran")
    ap.add_argument("--compile", action="store_true", help="also compile what validates; "
                    "a refusal there counts as a disagreement")
    ap.add_argument("--train", action="store_true", help="also train what validates for one "
                    "step; an exception there that is not a NodegraphError is a lie")
    ap.add_argument("--case", type=int, help="replay this one case here, with a traceback")
    ap.add_argument("--smoke", action="store_true", help="CI: --seed and today's date as "
                    "a second seed, graphs trained, a few cases of each file surface; exit "
                    "1 on any crash, hang or blowup")
    args = ap.parse_args()
    if args.time_limit is None:
        args.time_limit = 20.0 if args.train or args.smoke else 5.0
    surfaces = surfaces_of(args.surface or ("all" if args.smoke else "graph"))
    if args.case is not None:
        replay(surfaces[0], args.seed, args.case, args.compile, args.train)
        return
    if args.smoke:
        sys.exit(smoke(args, surfaces))
    args.cases = 1000 if args.cases is None else args.cases
    began = time.perf_counter()
    samples = with_samples(surfaces)
    try:
        todo = cases_of(surfaces, (args.seed,), args.start, args.cases, args.cases)
        found, tally, worst = fuzz(todo, args.jobs, args.time_limit, args.mem_limit,
                                   args.compile, args.train, samples, args.minutes)
        print(f"\n{sum(tally.values())} cases, seed {args.seed}, {args.jobs} job(s), "
              f"{time.perf_counter() - began:.0f} s")
        table(tally, surfaces)
        if samples is not None:
            costs(worst, [s for s in surfaces if s != "graph"])
        report(found, args.examples, samples)
    finally:
        if samples is not None:
            shutil.rmtree(samples, ignore_errors=True)


def smoke(args: argparse.Namespace, surfaces: list[str]) -> int:
    """The CI check: two seeds (the given one, today's date) on the same workers, graphs
    trained, with generous time limits; 1 if a crash, lie, hang or blowup is found."""
    cases = 30 if args.cases is None else args.cases
    file_cases = 8 if args.file_cases is None else args.file_cases
    today = int(datetime.date.today().strftime("%Y%m%d"))
    began = time.perf_counter()
    samples = with_samples(surfaces)
    try:
        todo = cases_of(surfaces, (args.seed, today), args.start, cases, file_cases)
        found, tally, _ = fuzz(todo, args.jobs, args.time_limit, args.mem_limit,
                               train_too=True, samples=samples)
        print(f"{cases} graph cases (trained) and {file_cases} of each file surface, of seed "
              f"{args.seed} and of seed {today}, {time.perf_counter() - began:.0f} s")
        table(tally, surfaces)
        if any(found.get(k) for k in ("crashes", "lies", "hangs", "blowups")):
            report(found, args.examples, samples)
            print("replay one: python benchmarks/fuzz.py --train --surface S --seed SEED "
                  "--case N")
            return 1
        if found.get("escapes"):
            report({"escapes": found["escapes"]}, args.examples, samples)
        return 0
    finally:
        if samples is not None:
            shutil.rmtree(samples, ignore_errors=True)


if __name__ == "__main__":
    main()
