"""Training in a process of its own, for the editor: jobs go in as pickles on the process's
stdin, events come back as pickles on its stdout.

Why a process: a training thread in the editor's process shares the interpreter lock with
the GUI thread, so on a fast model every plot, wave and status line the GUI draws is time
the model waits; measured on XOR that cost training 10-25% of its speed. In its own process
the model trains at headless speed while the editor draws what it sends (the benchmark is
`benchmarks/editor_training.py`).

The protocol, one pickled tuple per message:

    editor -> process: ("train", graph text, folder, trusted modules, options, torch threads)
                       ("stop",) ("pause",) ("resume",) ("set", node, param, value)
    process -> editor: ("ready",)   once, first: warm (`warm`), a run starts at once now
                       ("events", [event, ...])   batched as `EventBatcher` does
                       ("failed", message, node id or None)
                       ("done", result payload or None)

A process serves one job at a time and then waits for the next, so the editor starts one
ahead and keeps it (`acquire`, `release`). A new process first warms up: it imports torch,
the trainer and the blocks and trains a tiny network once (seconds, more on a busy
machine), then says it is ready; until then the editor trains in a thread of its own
(`acquire(ready_only=True)` gives no process), so the first Train never waits for it. The process's
own stdout is the channel; anything a block prints goes to stderr instead. When the editor
closes the process's stdin, it stops the run and exits.
"""

from __future__ import annotations

import atexit
import json
import os
import pickle
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any, cast

from nodegraph.model.errors import NodegraphError, NodeRuntimeError, ValidationError
from nodegraph.model.events import EpochEnded, StepEnded

BATCH_INTERVAL_S = 0.05
_GROUPS = hasattr(os, "killpg")  # POSIX: the process leads a group of its own


class EventBatcher:
    """Collects a run's events into batches for another thread or process: per-step and
    per-epoch events at most one batch every 50 ms (steps: those carrying a loss, plus the
    latest), anything else at once with what came before it, in order."""

    def __init__(self, send: Callable[[list], None]):
        self.send = send
        self._pending: list = []
        self._sent = 0.0

    def __call__(self, event) -> None:
        if isinstance(event, StepEnded | EpochEnded):
            last = self._pending[-1] if self._pending else None
            if isinstance(last, StepEnded) and last.loss is None:
                self._pending.pop()  # only the latest step without a loss is worth showing
            self._pending.append(event)
            if time.monotonic() - self._sent < BATCH_INTERVAL_S:
                return
        else:
            self._pending.append(event)
        self.flush()

    def flush(self) -> None:
        batch, self._pending = self._pending, []
        if batch:
            self._sent = time.monotonic()
            self.send(batch)


def failure(error: Exception) -> tuple[str, str | None]:
    """(message, node id or None) for a run that raised: what the editor shows and marks."""
    if isinstance(error, ValidationError):
        return str(error), error.problems[0].node if error.problems else None
    if isinstance(error, NodeRuntimeError):
        return str(error), error.node
    if isinstance(error, NodegraphError):
        return str(error), None
    return f"{type(error).__name__}: {error}", None  # a block's bug: name its type


def plain_state(module) -> dict[str, Any]:
    """The module's state on the CPU as a freshly compiled copy names it: weights that
    `torch.nn.utils.prune` split into `_orig` and `_mask` are multiplied back together."""
    state = {k: v.detach().cpu() for k, v in module.state_dict().items()}
    for key in [k for k in state if k.endswith("_orig")]:
        base = key.removesuffix("_orig")
        mask = state.pop(base + "_mask", None)
        if mask is not None:
            state[base] = state.pop(key) * mask
    return state


# -- the process's side ----------------------------------------------------------------------


def serve(inp: IO[bytes], out: IO[bytes]) -> None:
    """Run jobs from `inp` until it closes, writing each run's messages to `out`."""
    from nodegraph.runtime.train import RunControl

    jobs: queue.Queue = queue.Queue()
    control = RunControl()
    lock = threading.Lock()

    def write(message: tuple) -> None:
        with lock:
            pickle.dump(message, out, protocol=pickle.HIGHEST_PROTOCOL)
            out.flush()

    def read_messages() -> None:
        nonlocal control
        while True:
            try:
                message = pickle.load(inp)
            except (EOFError, OSError, pickle.UnpicklingError):
                control.stop()
                jobs.put(None)
                return
            kind = message[0]
            if kind == "train":
                control = RunControl()
                jobs.put((message, control))
            elif kind == "stop":
                control.stop()
            elif kind == "pause":
                control.pause()
            elif kind == "resume":
                control.resume()
            elif kind == "set" and len(message) == 4:  # a live param, from the next step
                control.set_param(*message[1:])

    threading.Thread(target=read_messages, daemon=True, name="nodegraph-jobs").start()
    warm()
    write(("ready",))
    while (job := jobs.get()) is not None:
        (_, text, folder, trusted, options, threads), run_control = job
        write(_run(text, folder, trusted, options, threads, run_control, write))


def warm() -> None:
    """Import and run once what every run needs (torch, the trainer, the blocks' registry,
    compiling, an optimizer step), so that the first job starts as fast as later ones."""
    import torch

    from nodegraph.model.graph import Graph
    from nodegraph.runtime.train import train

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        g = Graph("warm-up")
        g.add("data.XOR", "data")
        g.add("layers.Linear", "fc", out_features=1)
        g.add("losses.BCEWithLogits", "loss")
        g.add("optimizers.Adam", "opt")
        g.connect(("data", "x"), ("fc", "input"))
        g.connect(("fc", "output"), ("loss", "input"))
        g.connect(("data", "y"), ("loss", "target"))
        g.connect(("loss", "loss"), ("opt", "loss"))
        train(g, epochs=1, device="cpu")
    except Exception as e:  # a broken install shows in the first real run, with its node
        print(f"nodegraph training process: warm-up failed: {e}", file=sys.stderr)
    finally:
        torch.set_num_threads(threads)


def _run(text: str, folder: str | None, trusted: list[str], options: dict, threads: int,
         control, write: Callable[[tuple], None]) -> tuple:
    import torch

    from nodegraph.kinds.loading import release_workers
    from nodegraph.model.events import Emitter
    from nodegraph.model.fileformat import loads
    from nodegraph.runtime.train import train

    torch.set_num_threads(threads)
    batcher = EventBatcher(lambda batch: write(("events", batch)))
    events = Emitter()
    events.subscribe(batcher)
    began = time.process_time()
    compiled: list = []  # the run's compiled graph, whose data workers end with the run
    try:
        graph = loads(text)
        graph.folder = Path(folder) if folder else None
        graph.trusted = frozenset(trusted)  # the file text carries no trust; the editor's does
        options = dict(options)
        graph.data_roots = options.pop("_data_roots", ())  # nor data folders: the user's
        result = train(graph, events=events, control=control, prepare=compiled.append,
                       **options)
    except Exception as e:  # the editor shows it; this process stays up for the next run
        batcher.flush()
        write(("failed", *failure(e)))
        return ("done", None)
    finally:  # before "done": when the editor sees the run end, its workers have ended
        for c in compiled:
            release_workers(c.datasets.values())
    batcher.flush()
    return ("done", {"history": result.history, "final": result.final,
                     "stopped_early": result.stopped_early, "cancelled": result.cancelled,
                     "best_epoch": result.best_epoch,
                     "state": plain_state(result.compiled.module),
                     "cpu_seconds": time.process_time() - began})


def main() -> None:
    channel = os.fdopen(os.dup(1), "wb")  # the editor's; prints go to stderr from here on
    try:
        os.dup2(2, 1)
    except OSError:  # no stderr (a windowless launcher): prints go nowhere
        os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
    sys.stdout = sys.stderr if sys.stderr is not None else open(os.devnull, "w")  # noqa: SIM115
    # The jobs come on a file of their own, and sys.stdin reads nothing: the thread that
    # waits for messages holds its file's lock while it waits, and a process forked then
    # (by a block, or DataLoader workers started by fork) would find sys.stdin's lock held
    # forever (multiprocessing closes sys.stdin first thing in a child: issue #32).
    jobs = os.fdopen(os.dup(0), "rb")
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
    sys.stdin = open(os.devnull)  # noqa: SIM115
    serve(jobs, channel)
    # The editor is gone or done with it, and a run's workers end with the run: nothing is
    # left to finalise, and finalising an interpreter that imported torch takes seconds
    # (10 s measured on a loaded machine), which the editor would see as a process left
    # behind. Every message was flushed as it was written.
    sys.stderr.flush()
    if _GROUPS and os.getpgid(0) == os.getpid():  # the group the editor made for it: the
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # fork server goes now, not when its
        os.killpg(0, signal.SIGTERM)  # own finalising ends (seconds after our exit)
    os._exit(0)


# -- the editor's side -----------------------------------------------------------------------


class TrainingProcess:
    """One training process, seen from the editor."""

    def __init__(self):
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
        # a process group of its own: ending it (`kill`) ends its DataLoader workers and
        # their fork server with it, wherever they were forked from
        self.popen = subprocess.Popen(
            [sys.executable, "-m", "nodegraph.runtime.train_process"], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, env=env, start_new_session=_GROUPS)
        # both pipes exist (PIPE above); typed as such once here
        self._stdin = cast(IO[bytes], self.popen.stdin)
        self._stdout = cast(IO[bytes], self.popen.stdout)
        self._lock = threading.Lock()
        self._reading = threading.Lock()  # held while a thread reads the process's stdout
        self.ready = threading.Event()  # set once the process said it is warm
        self._waiting = threading.Thread(target=self._await_ready, daemon=True,
                                         name="nodegraph-train-warm")
        self._waiting.start()

    def _await_ready(self) -> None:
        """Read the process's first message, ("ready",), in the background (plain Python:
        no Qt here), so that the editor knows without waiting whether a run starts at once."""
        try:
            with self._reading:
                message = pickle.load(self._stdout)
        except (EOFError, OSError, ValueError, pickle.UnpicklingError):
            return
        if message == ("ready",):
            self.ready.set()

    @property
    def alive(self) -> bool:
        return self.popen.poll() is None

    def send(self, *message) -> bool:
        """Write a message; False when the process is gone."""
        try:
            with self._lock:
                pickle.dump(message, self._stdin, protocol=pickle.HIGHEST_PROTOCOL)
                self._stdin.flush()
            return True
        except (BrokenPipeError, OSError, ValueError):
            return False

    def train(self, graph, options: dict) -> bool:
        """Start a run of `graph`; False when the process is gone or the graph cannot be
        written as a file (a param no JSON holds)."""
        import torch

        from nodegraph.model.fileformat import to_document

        try:
            text = json.dumps(to_document(graph))
        except (TypeError, ValueError):
            return False
        folder = str(graph.folder) if graph.folder else None
        # the folders the user let its data come from travel beside it, as trust does
        options = {**options, "_data_roots": graph.data_roots}
        return self.send("train", text, folder, sorted(graph.trusted), options,
                         torch.get_num_threads())

    def receive(self) -> tuple | None:
        """The next message, or None when the process has ended."""
        self._waiting.join()  # the first message is the warm-up's, read there
        if not self.ready.is_set():
            return None
        try:
            with self._reading:
                return pickle.load(self._stdout)
        except (EOFError, OSError, ValueError, pickle.UnpicklingError):  # ValueError: closed
            return None

    def close(self, wait_s: float = 2.0) -> None:
        """Ask the process to end (its stdin closed: the run stops, the process exits), and
        end it and everything it started when it has not within `wait_s`."""
        try:
            self._stdin.close()
        except OSError:
            pass
        try:
            self.popen.wait(wait_s)
        except subprocess.TimeoutExpired:
            pass
        self.kill()  # what is left of its group: a worker, the fork server on its way out
        self.close_pipes(wait_s)

    def close_pipes(self, wait_s: float = 2.0) -> None:
        """Close both pipes of a process that has ended: its stdout once no thread reads
        it (a reader meets the end of the dead process's pipe at once). Left to the garbage
        collector they warned of unclosed files. Nothing is signalled: the ended process's
        id may already be another's."""
        try:
            self._stdin.close()
        except OSError:
            pass
        if self._reading.acquire(timeout=wait_s):
            try:
                self._stdout.close()
            finally:
                self._reading.release()

    def kill(self) -> None:
        """End the process and every process of its group (its DataLoader workers, their
        fork server) at once."""
        if _GROUPS:
            try:  # the group outlives its leader while a member lives, so the id is still its
                os.killpg(self.popen.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass  # nothing left of it
        if self.popen.poll() is None:
            self.popen.kill()
        self.popen.wait()


def rebuild(graph, options: dict, payload: dict):
    """The RunResult of a run in a process: the graph compiled as `train` compiled it, with
    the trained state loaded, for the editor's previews and views of the trained model."""
    from nodegraph.runtime.train import RunResult, compile_for, training_options

    keys = ("epochs", "seed", "device")
    compiled = compile_for(graph, training_options(graph, **{k: options.get(k) for k in keys}))
    compiled.module.load_state_dict(payload["state"])
    return RunResult(payload["history"], payload["final"], compiled, payload["stopped_early"],
                     payload["cancelled"], payload["best_epoch"])


_idle: list[TrainingProcess] = []
_all: list[TrainingProcess] = []


def acquire(ready_only: bool = False) -> TrainingProcess | None:
    """A waiting process (started ahead by `prewarm`), or a new one. With `ready_only`,
    only a process that finished warming up, else None (one is started to warm meanwhile):
    the caller trains elsewhere rather than wait."""
    _idle[:] = _living(_idle)
    for process in reversed(_idle):
        if process.ready.is_set() or not ready_only:
            _idle.remove(process)
            return process
    if ready_only:
        if not _idle:
            _idle.append(_start())
        return None
    return _start()


def release(process: TrainingProcess) -> None:
    """Keep a process whose run ended cleanly for the next run."""
    if process.alive and process not in _idle:
        _idle.append(process)


def prewarm() -> None:
    """Start a process now, so the first run does not wait for it to import torch (quietly
    nothing when no process can start: runs then train in a thread)."""
    if not any(p.alive for p in _idle):
        try:
            _idle.append(_start())
        except OSError:
            pass


def wait_ready(timeout_s: float = 120.0) -> bool:
    """Block until a process started ahead has warmed up (scripts and tests that want
    the next run in a process); False when none is ready in time."""
    prewarm()
    waiting = [p for p in _idle if p.alive]
    return any(p.ready.wait(timeout_s) for p in waiting[:1])


def _start() -> TrainingProcess:
    process = TrainingProcess()
    _all[:] = _living(_all)
    _all.append(process)
    return process


def _living(processes: list[TrainingProcess]) -> list[TrainingProcess]:
    """The processes still running; the pipes of those that ended are closed."""
    living = []
    for process in processes:
        if process.alive:
            living.append(process)
        else:
            process.close_pipes(wait_s=0.5)
    return living


@atexit.register
def close_all() -> None:
    """End every training process this editor started, with their DataLoader workers: at
    exit (a run still going stops; one that does not within a second is ended)."""
    for process in _all:
        if process.alive:
            process.close(wait_s=1.0)
        else:
            process.close_pipes(wait_s=0.5)
    _idle.clear()


if __name__ == "__main__":
    main()
