"""What do probes and the editor's animation cost a training run?

(a) probe overhead: `nodegraph.train` of the digits MLP 64-32-10 (batch 32, 20 epochs, the
    run of benchmarks/overhead.py) with a listener for probe frames, so the trainer probes
    at the default rate (`probe_every` 10, `probe_budget` 5 %), against the same run nobody
    watches. Prints `probe_overhead_ratio: X` (time with / time without; target <= 1.15).
(b) the editor: the same run started with the editor's Train button (offscreen main window,
    its training process, live plots, every probe frame recorded, played as the wave on
    the canvas and turned into badges) against the headless run in this process, and the
    editor with the animation paused to show the animation's own share. Prints
    `editor_animation_ratio: Y`, the editor's training throughput over the headless one
    (headless time / editor time; target >= 0.9).

Runs take turns so drift and noise hit all alike; ratios are of the medians. Four clocks
are read: the CPU time of training itself (`--clock cpu`: immune to other processes on a
busy machine; the editor's training process reports its own), the training window from
RunStarted to RunFinished (the default: throughput, as the GUI receives the events), this
process's CPU time (for the editor: what the GUI's drawing costs, on another core than
training) and wall time (from Train to the trained model back: it adds the run's fixed
costs, about 0.1 s, which weigh on these one-second runs).

    QT_QPA_PLATFORM=offscreen .venv/bin/python benchmarks/probes.py [--rounds 7] [--clock cpu]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import torch  # noqa: E402

import nodegraph  # noqa: E402
from nodegraph.model.events import Emitter, RunFinished, RunStarted  # noqa: E402
from nodegraph.runtime.probes import ProbeFrame  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
from overhead import BATCH, EPOCHS, mlp_graph  # noqa: E402


def digits_graph() -> nodegraph.Graph:
    g = mlp_graph("data.Digits", {"batch_size": BATCH, "val_fraction": 0.2, "split": "random"},
                  [32, 10], 1e-2)
    g.update_training({"epochs": EPOCHS, "seed": 0, "device": "cpu"})
    return g


def _window(seen: dict[str, float]) -> Callable[[object], None]:
    """A listener noting when a run started and finished: its training window."""
    return lambda event: seen.__setitem__(type(event).__name__, time.perf_counter())


def headless(probed: bool) -> Callable[[], dict[str, float]]:
    """A run with no listener but one noting its start and end, or with one for probe
    frames too; returns its thread's CPU seconds and its training window."""
    def run() -> dict[str, float]:
        events, seen = Emitter(), {}
        events.subscribe(_window(seen), RunStarted, RunFinished)
        if probed:
            events.subscribe(lambda frame: None, ProbeFrame)
        start = time.thread_time()
        nodegraph.train(digits_graph(), events=events)
        return {"training": time.thread_time() - start,
                "window": seen["RunFinished"] - seen["RunStarted"]}
    return run


def editor_run(window, app, animate: bool = True) -> Callable[[], dict[str, float]]:
    """The run from the editor's Train button; returns the CPU seconds of training itself
    (in the training process, as it reports them) and the training window as the GUI
    received its start and end."""
    from PySide6.QtCore import QEventLoop

    def run() -> dict[str, float]:
        window.watch.timeline.pause.setChecked(not animate)
        loop, seen = QEventLoop(), {}
        quit_when_idle = window.runner.state_changed.connect(
            lambda state: loop.quit() if state == "idle" else None)
        stop = window.runner.listen(_window(seen), RunStarted, RunFinished)
        try:
            assert window.start_training()
            loop.exec()  # waiting in the event loop costs no CPU, unlike polling
        finally:
            window.runner.state_changed.disconnect(quit_when_idle)
            stop()
        app.processEvents()
        return {"training": window.runner.train_cpu_seconds,
                "window": seen["RunFinished"] - seen["RunStarted"]}
    return run


def open_editor(tmp: Path):
    from PySide6.QtCore import QSettings

    from nodegraph.gui.base import theme
    from nodegraph.gui.base.application import application
    from nodegraph.gui.shell.main_window import MainWindow
    from nodegraph.model.fileformat import save

    app = application()
    theme.apply(app)
    path = tmp / "digits_mlp.json"
    save(digits_graph(), path)
    settings = QSettings(str(tmp / "settings.ini"), QSettings.Format.IniFormat)
    window = MainWindow(str(path), settings=settings, recovery_dir=tmp / "recovery")
    window.resize(1400, 900)
    window.show()
    window.validator.wait()
    window.view.fit()
    return app, window


CLOCKS = ("training", "window", "process", "wall")


def alternate(runs: dict[str, Callable[[], dict[str, float]]], rounds: int
              ) -> dict[str, dict[str, float]]:
    """Median seconds of each run on each clock, the runs taking turns in rotating order:
    the CPU time of training itself and the training window (what the run returns), this
    process's CPU time, wall time."""
    names = list(runs)
    for fn in runs.values():
        fn()  # warm-up: allocator, first-use imports, the dataset cache
    times = {n: {c: [] for c in CLOCKS} for n in names}
    for r in range(rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            process, wall = time.process_time(), time.perf_counter()
            for clock, seconds in runs[name]().items():
                times[name][clock].append(seconds)
            times[name]["process"].append(time.process_time() - process)
            times[name]["wall"].append(time.perf_counter() - wall)
    return {n: {c: statistics.median(v) for c, v in t.items()} for n, t in times.items()}


def show(medians: dict[str, dict[str, float]], rounds: int) -> None:
    print(f"medians of {rounds} rounds, seconds: " + ", ".join(CLOCKS))
    for name, m in medians.items():
        print(f"  {name:<28}" + "  ".join(f"{m[c]:7.3f}" for c in CLOCKS))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                        help="cpu: the CPU time of training itself (immune to other processes "
                        "on a busy machine); the other clocks are printed too")
    args = parser.parse_args()
    torch.set_num_threads(1)  # one torch thread: the trainer's work stays on its thread
    clock = "training" if args.clock == "cpu" else "window"
    print(f"torch {torch.__version__}, 1 thread, {args.clock} clock, load "
          f"{os.getloadavg()[0]:.2f}")

    probes = alternate({"headless, probed": headless(True),
                        "headless, not probed": headless(False)}, args.rounds)
    show(probes, args.rounds)
    with tempfile.TemporaryDirectory() as tmp:
        app, window = open_editor(Path(tmp))
        editor = alternate({"editor, animation on": editor_run(window, app),
                            "editor, animation paused": editor_run(window, app, False),
                            "headless": headless(False)}, args.rounds)
        animator = window.watch.animator
        print(f"the wave played {len(animator.played)} node steps in the last runs; "
              f"{animator.dropped} frames dropped in the last run")
        window.doc.undo_stack.setClean()
        window.close()
    show(editor, args.rounds)
    on, bare = editor["editor, animation on"], editor["headless"]
    paused = editor["editor, animation paused"]
    print(f"editor throughput / headless, training window: {bare['window'] / on['window']:.3f} "
          f"(animation paused: {bare['window'] / paused['window']:.3f}); from Train to the "
          f"trained model back: {bare['wall'] / on['wall']:.3f}; the editor's own CPU per "
          f"run {on['process']:.2f} s (animation paused: {paused['process']:.2f} s)")
    ratio = probes["headless, probed"][clock] / probes["headless, not probed"][clock]
    print(f"probe_overhead_ratio: {ratio:.3f}")
    print(f"editor_animation_ratio: {bare[clock] / on[clock]:.3f}")


if __name__ == "__main__":
    main()
