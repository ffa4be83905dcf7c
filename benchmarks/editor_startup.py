"""The editor's first moments as a user lives them, each in a fresh process: launch ->
first paint -> a real mouse click on a card served (the selection drawn) -> every wire
labelled, and the first Train to the first point on the loss plot.

    python benchmarks/editor_startup.py [--rounds 3] [--graphs xor rcnn_shapes resnet50]
                                        [--train] [--reopen]

A first open ever waits for the block library (torch) and the first check for its labels;
`--reopen` opens each graph again with the first open's state folder, where the editor
remembered the labels of that check (`gui/document/shape_memo.py`), as a user reopening a
file lives it.

Each round starts `python` on this file's `child` part, as `nodegraph edit GRAPH` would
start the editor (offscreen, 1600x1000, fresh settings), and a bare PySide6 window the
same way, interleaved so that load drifts hit all alike. `resnet50` is torchvision's
ResNet-50 (no weights) imported by `nodegraph import` in the set-up. Per graph:

    drawn_s        launch -> the canvas's first paint
    clicked_s      launch -> a mouse click on a card, posted at the first paint as a
                   user's would be queued, has selected it and the selection is painted
    labelled_s     launch -> every wire shows the shape the first check gives it (from
                   the paint that first showed them all, remembered ones included)
                                        goals: xor < 2 s, rcnn_shapes < 2 s, resnet50 < 3 s
    imports_s      of which importing the editor (Qt and the torch-free core)
    drawn_cpu_s    CPU seconds the process had used by the first paint (less load-bound)
    blocks_s       launch -> the block library loaded (in the background, after the paint)
    labels         wires labelled / wires (a wire whose shape is unknown has no label)
    first_train_s  (--train) Train pressed once labelled -> the first loss on the plots

and each time as a ratio to the bare window's first paint in the same round (`bare_s`):
the ratios move less with the machine's load than the seconds do. Medians over the
rounds are printed last, with the load average: say which machine and load gave them.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GOALS = {"xor": 2.0, "rcnn_shapes": 2.0, "resnet50": 3.0}
MILESTONES = ("drawn_s", "clicked_s", "labelled_s")
CHILD_TIMEOUT_S = 600  # one editor's start; it waits 300 s at most for its milestones


def bare(launched: float) -> dict[str, float]:
    """Run in the fresh process: a plain PySide6 main window, to its first paint."""
    from PySide6.QtCore import QEvent, QObject
    from PySide6.QtWidgets import QApplication, QMainWindow, QWidget

    app = QApplication.instance() or QApplication([])
    seen: dict[str, float] = {}

    class FirstPaint(QObject):
        def eventFilter(self, obj, event):
            if event.type() == QEvent.Type.Paint:
                seen.setdefault("drawn", time.time())
            return False

    w = QMainWindow()
    central = QWidget()
    w.setCentralWidget(central)
    painted = FirstPaint()
    central.installEventFilter(painted)
    w.resize(1600, 1000)
    w.show()
    while "drawn" not in seen:
        app.processEvents()
        time.sleep(0.001)
    w.close()
    return {"bare_s": seen["drawn"] - launched}


def child(launched: float, graph: str, train: bool, state: str | None = None
          ) -> dict[str, float]:
    """Run in the fresh process: open the editor on `graph`, time its first moments;
    `state`: the user's state folder (the labels a check remembers), else a fresh one."""
    t0 = time.time()
    from PySide6.QtCore import QCoreApplication, QEvent, QObject, QPointF, QSettings, Qt
    from PySide6.QtGui import QMouseEvent

    from nodegraph.gui.base.application import application
    from nodegraph.gui.base.prompts import Prompts
    from nodegraph.gui.canvas.scene import shape_label
    from nodegraph.gui.shell.main_window import MainWindow
    from nodegraph.model.events import EpochEnded, StepEnded
    imported = time.time()
    app = application()
    seen: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        settings = QSettings(str(Path(tmp) / "s.ini"), QSettings.Format.IniFormat)
        w = MainWindow(graph, settings=settings, recovery_dir=Path(state or tmp) / "rec",
                       prompts=no_dialogs(Prompts), draw_first=True)  # as `nodegraph edit`
        scene = w.scene

        def click_a_card() -> None:
            """Post a left click on the first card's title bar, as the window system
            would queue a user's (it is served when the event loop gets to it)."""
            card = next(iter(scene.nodes.values()))
            at = w.view.mapFromScene(card.mapToScene(card.boundingRect().center().x(), 12))
            local, glob = QPointF(at), QPointF(w.view.viewport().mapToGlobal(at))
            left, none = Qt.MouseButton.LeftButton, Qt.MouseButton.NoButton
            for kind, buttons in ((QEvent.Type.MouseButtonPress, left),
                                  (QEvent.Type.MouseButtonRelease, none)):
                QCoreApplication.postEvent(w.view.viewport(), QMouseEvent(
                    kind, local, glob, left, buttons, Qt.KeyboardModifier.NoModifier))
            seen["card"] = float(len(scene.nodes))

        def labelled() -> bool:
            """Every wire shows the shape the check found for it (a wire whose shape is
            unknown has none to show)."""
            report = scene.report
            return report is not None and bool(scene.wires) and all(
                x.label == shape_label(report, x.edge.src, x.edge.src_port)
                for x in scene.wires.values())

        shown: list[tuple[float, dict]] = []  # each change of the labels, at its paint

        def note_labels(now: float) -> None:
            labels = {e: x.label for e, x in scene.wires.items()}
            if not shown or shown[-1][1] != labels:
                shown.append((now, labels))

        def labels_final_since() -> float | None:
            """When the labels the check gave were first on screen, and stayed: remembered
            labels shown before the check count when the check confirmed them."""
            report = scene.report
            if report is None:
                return None
            final = {e: shape_label(report, e.src, e.src_port) for e in scene.wires}
            since = None
            for at, labels in shown:
                since = (since or at) if labels == final else None
            return since

        class Paints(QObject):
            def eventFilter(self, obj, event):
                if event.type() != QEvent.Type.Paint:
                    return False
                now = time.time()
                if "drawn" not in seen:
                    seen["drawn"] = now
                    seen["drawn_cpu"] = time.process_time()
                    if scene.nodes:
                        click_a_card()
                if "selected" in seen and "clicked" not in seen:
                    seen["clicked"] = now  # the paint that shows the selection
                note_labels(now)
                if "labelled" not in seen and labelled():
                    seen["labelled"] = now
                return False

        paints = Paints()
        w.view.viewport().installEventFilter(paints)
        scene.selectionChanged.connect(
            lambda: scene.selectedItems() and seen.setdefault("selected", time.time()))
        w.blocks.loaded.connect(lambda *_: seen.setdefault("blocks", time.time()))
        w.resize(1600, 1000)
        w.show()
        end = time.time() + 300
        while (("clicked" not in seen or "labelled" not in seen or w.blocks_loading)
               and time.time() < end):
            app.processEvents()
            if "labelled" not in seen and labelled():
                w.view.viewport().update()  # its paint is the moment (it may be culled)
            time.sleep(0.001)
        blocks = seen.get("blocks", time.time())
        row = {"drawn_s": seen["drawn"] - launched,
               "clicked_s": seen.get("clicked", float("nan")) - launched,
               "labelled_s": (labels_final_since() or seen.get("labelled", float("nan")))
               - launched,
               "imports_s": imported - t0,
               "drawn_cpu_s": seen["drawn_cpu"],
               "blocks_s": blocks - launched,
               "labels": sum(1 for x in scene.wires.values() if x.label) / max(1, len(
                   scene.wires)),
               "wires": float(len(scene.wires))}
        if train:
            w.runner.listen(lambda e: seen.setdefault("point", time.time())
                            if getattr(e, "loss", None) is not None else None,
                            StepEnded, EpochEnded)
            pressed = time.time()
            if not w.start_training():
                raise SystemExit("Train refused: the graph has problems")
            while "point" not in seen and time.time() < pressed + 120:
                app.processEvents()
                time.sleep(0.001)
            w.runner.stop()
            w.runner.wait(30)
            row["first_train_s"] = seen.get("point", float("nan")) - pressed
        w.validator.shutdown()
        w.close()
    return row


def no_dialogs(prompts: type) -> object:
    """A `Prompts` whose every question ends the child with the question as the error:
    offscreen, a modal dialog is never seen nor answered, and the child would wait forever
    (rcnn_shapes did, on an error box, before the scene was fixed)."""

    def refuse(name: str):
        def ask(*args, **kwargs):
            sys.stderr.write(f"the editor asked a question: {name}{args[1:]!r}\n")
            sys.stderr.flush()
            os._exit(3)
        return ask

    kind = type("NoDialogs", (prompts,), {name: refuse(name) for name, value in
                                           vars(prompts).items()
                                           if callable(value) and not name.startswith("_")})
    return kind(None)


def resnet50(folder: Path) -> Path:
    """torchvision's ResNet-50 without weights, imported as the user would."""
    out = folder / "resnet50" / "graph.json"
    subprocess.run([sys.executable, "-m", "nodegraph", "import", "torchvision.models:resnet50",
                    "-o", str(out), "--input-shape", "1,3,64,64"], check=True,
                   env=_env(), capture_output=True, text=True)
    return out


def _env() -> dict[str, str]:
    return {**os.environ, "QT_QPA_PLATFORM": os.environ.get("QT_QPA_PLATFORM", "offscreen"),
            "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT),
                                                         os.environ.get("PYTHONPATH")]))}


def _run(args: list[str]) -> dict[str, float]:
    launched = time.time()
    done = subprocess.run([sys.executable, __file__, *args, "--child", repr(launched)],
                          env=_env(), capture_output=True, text=True, timeout=CHILD_TIMEOUT_S)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(args)}: the child failed ({done.returncode}):\n"
                         + done.stderr[-3000:])
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--graphs", nargs="+", default=list(GOALS),
                        help="example names, 'resnet50', or paths to graph files")
    parser.add_argument("--train", action="store_true", help="also time the first Train")
    parser.add_argument("--reopen", action="store_true",
                        help="also open each graph a second time with the state folder of "
                        "the first open (the labels its check remembered)")
    parser.add_argument("--state", help=argparse.SUPPRESS)
    parser.add_argument("--bare", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--graph", help=argparse.SUPPRESS)
    parser.add_argument("--child", type=float, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        row = bare(args.child) if args.bare else child(args.child, args.graph, args.train,
                                                       args.state)
        print(json.dumps(row))
        return
    with tempfile.TemporaryDirectory() as tmp:
        paths = {}
        for name in args.graphs:
            if name == "resnet50":
                paths[name] = resnet50(Path(tmp))
            elif (ROOT / "examples" / f"{name}.json").exists():
                paths[name] = ROOT / "examples" / f"{name}.json"
            else:
                paths[Path(name).stem] = Path(name)
        opens = [("", False), *([(" reopened", True)] if args.reopen else [])]
        rows: dict[str, list[dict[str, float]]] = {name + how: [] for name in paths
                                                   for how, _ in opens}
        for i in range(args.rounds):
            base = _run(["--bare"])["bare_s"]
            print(f"round {i + 1}: bare window first paint {base:.2f} s")
            for name, path in paths.items():
                with tempfile.TemporaryDirectory() as state:  # one user's, for both opens
                    for how, _ in opens:
                        row = _run(["--graph", str(path), "--state", state,
                                    *(["--train"] if args.train else [])])
                        row["bare_s"] = base
                        for key in MILESTONES:
                            row[key.replace("_s", "_ratio")] = row[key] / base
                        rows[name + how].append(row)
                        print(f"  {name}{how}: " + "  ".join(f"{k} {v:.2f}"
                                                           for k, v in row.items()))
    summary = {}
    for name, got in rows.items():
        medians = {k: round(statistics.median(r[k] for r in got), 3) for k in got[0]}
        goal = GOALS.get(name.removesuffix(" reopened"))
        if goal is not None:
            medians["goal_s"] = goal
        summary[name] = medians
    print(json.dumps({"medians": summary, "rounds": args.rounds, "loadavg": os.getloadavg(),
                      "cpus": os.cpu_count()}))


if __name__ == "__main__":
    main()
