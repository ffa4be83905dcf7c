"""Does training in the editor keep up with headless training? The same graph, steps and
device, headless (`nodegraph.train` in this process) and from the editor.

The editor run is what pressing Train does after validation: the real main window with the
graph open, its runner training a copy in the editor's training process (started ahead, as
the editor does when it opens), the events coming back to the plots, status bar, log and
animation on the GUI thread (whose event loop keeps running). The editor's run also probes
activations and gradients for the animation (within the trainer's probe budget and rate); a
third run, headless but probing alike, tells that cost apart. Runs alternate, headless
first, `--rounds` rounds; each gives a ratio, and the median is printed last as

    editor_train_ratio: X    (training throughput: headless seconds / editor seconds from
                              RunStarted to RunFinished, the same steps; 1.0 = no cost,
                              the target is >= 0.9)

`editor_total_time_ratio` counts from Train to the trained model back in the editor, so it
adds the run's fixed costs (the job reaching the process, the weights loaded back: about
0.1 s), which weigh on a run of a second and vanish in one of minutes.

First-Train latency: before anything else is imported in this process, a fresh editor
window opens the graph and Train is pressed (as soon as the window shows and has checked
the graph, and again after `--idle` seconds, as a user who looks first); the seconds from
Train to the first point on the loss plot are printed beside those of later runs:

    first_train_latency_s: X    (Train to the first plot point of the first run; the
                                 target is < 1 s on XOR)
    later_train_latency_s: Y    (the same for later runs)

Both use one torch thread. Wall time counts other processes too: read `uptime` beside the
figure. `editor_train_cpu_ratio` compares CPU seconds of training itself (headless, and as
the training process reports them), which load does not skew; `editor_gui_cpu_s` is what
the editor's GUI thread spent per run, on another core than training.

    .venv/bin/python benchmarks/editor_training.py [examples/xor.json] [--epochs 1500]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import torch  # noqa: E402
from PySide6.QtCore import QEventLoop, QSettings  # noqa: E402

import nodegraph  # noqa: E402
from nodegraph.gui.base.application import application  # noqa: E402
from nodegraph.gui.shell.main_window import MainWindow  # noqa: E402
from nodegraph.model.events import (  # noqa: E402
    Emitter,
    EpochEnded,
    RunFinished,
    RunStarted,
    StepEnded,
)
from nodegraph.runtime.probes import ProbeFrame  # noqa: E402


def _timed(events_seen: dict[str, float]):
    """A listener noting when a run started and finished (its training window)."""
    def note(event) -> None:
        events_seen[type(event).__name__] = time.perf_counter()
    return note


def headless(graph: nodegraph.Graph, epochs: int, probes: bool = False) -> dict[str, float]:
    """Seconds of a headless run: `total` wall, `cpu` of this process, `training` from
    RunStarted to RunFinished; with `probes`, a run that probes activations and gradients
    as the editor's runs do for the animation."""
    events, seen = Emitter(), {}
    events.subscribe(_timed(seen), RunStarted, RunFinished)
    if probes:
        events.subscribe(lambda frame: None, ProbeFrame)
    began, began_cpu = time.perf_counter(), time.process_time()
    nodegraph.train(graph.copy(), epochs=epochs, device="cpu", events=events)
    return {"total": time.perf_counter() - began, "cpu": time.process_time() - began_cpu,
            "training": seen["RunFinished"] - seen["RunStarted"]}


def in_editor(window: MainWindow, epochs: int) -> dict[str, float]:
    """Seconds of a run from the editor: `total` wall from Train to the trained model back
    in the editor, `training` from RunStarted to RunFinished as the GUI received them,
    `gui_cpu` of the editor's process meanwhile, `train_cpu` of training itself. The GUI
    thread sits in its event loop (as in the running editor) serving the run's events,
    plots and status bar."""
    window.plots.reset()
    loop, seen = QEventLoop(), {}

    def on_state(state: str) -> None:
        if state == "idle":
            loop.quit()

    window.runner.state_changed.connect(on_state)
    stop = window.runner.listen(_timed(seen), RunStarted, RunFinished)
    began, began_cpu = time.perf_counter(), time.process_time()
    window.runner.start(window.doc.graph, window.doc.revision, epochs=epochs, device="cpu")
    loop.exec()
    total, cpu = time.perf_counter() - began, time.process_time() - began_cpu
    window.runner.state_changed.disconnect(on_state)
    stop()
    if window.runner.result is None:
        raise RuntimeError("the editor's run failed: see its log")
    return {"total": total, "gui_cpu": cpu, "train_cpu": window.runner.train_cpu_seconds,
            "training": seen["RunFinished"] - seen["RunStarted"]}


def first_point(window: MainWindow) -> float:
    """Seconds from pressing Train (`start_training`, what the button does) to the first
    step or epoch with a loss reaching the editor; the run is then stopped."""
    loop, seen = QEventLoop(), {}

    def point(event) -> None:
        if "first" not in seen and getattr(event, "loss", 1.0) is not None:
            seen["first"] = time.perf_counter()
            window.runner.stop()

    def on_state(state: str) -> None:
        if state == "idle":
            loop.quit()

    window.runner.state_changed.connect(on_state)
    stop = window.runner.listen(point, StepEnded, EpochEnded)
    began = time.perf_counter()
    if not window.start_training():
        raise RuntimeError("Train refused: the graph has problems")
    loop.exec()
    window.runner.state_changed.disconnect(on_state)
    stop()
    if "first" not in seen:
        raise RuntimeError("the run ended before its first loss: see the editor's log")
    return seen["first"] - began


def latency(path: str, idle_s: float, later: int) -> tuple[float, float, list[float]]:
    """First-Train latency pressed at once, after `idle_s`, and of `later` runs after."""
    app = application()
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        for wait in (0.0, idle_s):
            settings = QSettings(str(Path(tmp) / "settings.ini"), QSettings.Format.IniFormat)
            window = MainWindow(path, settings=settings, recovery_dir=Path(tmp) / "rec")
            window.resize(1600, 1000)
            window.show()
            window.epochs.setValue(1000)  # the user's edits are validated before Train
            app.processEvents()
            if not window.validator.wait(120):  # a busy machine: the first check takes long
                raise RuntimeError("the graph was not checked within 2 minutes")
            end = time.perf_counter() + wait
            while time.perf_counter() < end:
                app.processEvents()
                time.sleep(0.01)
            out.append(first_point(window))
            if wait:
                later_runs = [first_point(window) for _ in range(later)]
            window.doc.undo_stack.setClean()
            window.close()
    return out[0], out[1], later_runs


def main_latency(args) -> None:
    at_once, after_idle, later = latency(args.graph, args.idle, 3)
    print(f"Train to first plot point: first run pressed at once {at_once:.2f} s, first run "
          f"after {args.idle:.0f} s {after_idle:.2f} s, later runs "
          + ", ".join(f"{t:.2f}" for t in later) + " s")
    print(f"first_train_latency_s: {max(at_once, after_idle):.2f}")
    print(f"later_train_latency_s: {statistics.median(later):.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("graph", nargs="?", default="examples/xor.json")
    parser.add_argument("--epochs", type=int, default=1500)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--idle", type=float, default=3.0,
                        help="seconds a user looks at the graph before the second first Train")
    parser.add_argument("--latency-only", action="store_true",
                        help="measure the first-Train latency only")
    args = parser.parse_args()
    torch.set_num_threads(1)
    main_latency(args)  # first, while nothing of a run is imported in this process yet
    if args.latency_only:
        return
    app = application()
    graph = nodegraph.load(args.graph)
    headless(graph, 2)  # one-time imports and compiles out of the way
    with tempfile.TemporaryDirectory() as tmp:
        settings = QSettings(str(Path(tmp) / "settings.ini"), QSettings.Format.IniFormat)
        window = MainWindow(args.graph, settings=settings, recovery_dir=Path(tmp) / "rec")
        window.resize(1600, 1000)
        window.show()
        app.processEvents()
        in_editor(window, 2)
        ratios, total_ratios, cpu_ratios, gui_cpu = [], [], [], []
        for r in range(args.rounds):
            h = headless(graph, args.epochs)
            p = headless(graph, args.epochs, probes=True)
            e = in_editor(window, args.epochs)
            ratios.append(h["training"] / e["training"])
            total_ratios.append(h["total"] / e["total"])
            cpu_ratios.append(h["cpu"] / e["train_cpu"])
            gui_cpu.append(e["gui_cpu"])
            print(f"round {r + 1}: headless {h['total']:.2f} s (training {h['training']:.2f} s, "
                  f"{h['cpu']:.2f} s CPU), probed {p['total']:.2f} s, editor {e['total']:.2f} s "
                  f"(training {e['training']:.2f} s, {e['train_cpu']:.2f} s CPU; GUI "
                  f"{e['gui_cpu']:.2f} s CPU): throughput ratio {ratios[-1]:.3f}, total "
                  f"{total_ratios[-1]:.3f}")
        steps = window.run_status.done_steps
        window.doc.undo_stack.setClean()
        window.close()
    print(f"{args.graph}: {args.epochs} epochs, {steps} steps per run, torch threads 1, "
          f"load {os.getloadavg()[0]:.1f}")
    print(f"editor_total_time_ratio: {statistics.median(total_ratios):.3f}  (Train to the "
          "trained model back: adds starting the job and loading the weights back, ~0.1 s)")
    print(f"editor_train_cpu_ratio: {statistics.median(cpu_ratios):.3f}  (CPU seconds of "
          "training itself, headless / editor: probing and event batching, whatever the load)")
    print(f"editor_gui_cpu_s: {statistics.median(gui_cpu):.2f}  (the GUI thread's CPU per run, "
          "on another core than training)")
    print(f"editor_train_ratio: {statistics.median(ratios):.3f}")


if __name__ == "__main__":
    main()
