"""The editor's first moments, each in a fresh process: launch to a drawn, interactive
window, and the first Train to the first point on the loss plot.

    python benchmarks/editor_startup.py [--rounds 3] [--graph examples/xor.json]

Each round starts `python` on this file's `child` part, as `nodegraph edit GRAPH` would
start the editor (offscreen, 1600x1000, fresh settings), and reports:

    drawn_s        launch -> the canvas's first paint            target < 2 s
    interactive_s  launch -> the event loop free after that paint (a key would be served)
    imports_s      of which importing the editor (Qt and the torch-free core)
    drawn_cpu_s    CPU seconds the process had used by the first paint (less load-bound)
    blocks_s       launch -> the block library loaded (in the background, after the paint)
    first_train_s  Train pressed as soon as the blocks are in -> the first step's loss
                   reaching the plots
                                                                 target < 1 s
    checked_s      launch -> the first validation report shown in Problems

Medians over the rounds are printed last, with the machine's load average: on a shared
machine the figures move with the load, so say which machine and load gave them.
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


def child(launched: float, graph: str) -> dict[str, float]:
    """Run in the fresh process: open the editor on `graph`, time its first moments."""
    t0 = time.time()
    from PySide6.QtCore import QEvent, QObject, QSettings, QTimer

    from nodegraph.gui.base.application import application
    from nodegraph.gui.shell.main_window import MainWindow
    from nodegraph.model.events import EpochEnded, StepEnded
    imported = time.time()
    app = application()
    seen: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        settings = QSettings(str(Path(tmp) / "s.ini"), QSettings.Format.IniFormat)
        w = MainWindow(graph, settings=settings, recovery_dir=Path(tmp) / "rec",
                       draw_first=True)  # as `nodegraph edit` opens it

        class FirstPaint(QObject):
            def eventFilter(self, obj, event):
                if event.type() == QEvent.Type.Paint and "drawn" not in seen:
                    seen["drawn"] = time.time()
                    seen["drawn_cpu"] = time.process_time()
                    QTimer.singleShot(0, lambda: seen.setdefault("interactive", time.time()))
                return False

        painted = FirstPaint()
        w.view.viewport().installEventFilter(painted)
        w.validator.finished.connect(lambda *_: seen.setdefault("checked", time.time()))
        w.resize(1600, 1000)
        w.show()
        while "interactive" not in seen or w.blocks_loading:
            app.processEvents()
            time.sleep(0.001)
        blocks = time.time()
        w.runner.listen(lambda e: seen.setdefault("point", time.time())
                        if getattr(e, "loss", None) is not None else None,
                        StepEnded, EpochEnded)
        pressed = time.time()
        if not w.start_training():
            raise SystemExit("Train refused: the graph has problems")
        end = time.time() + 120
        while ("point" not in seen or "checked" not in seen) and time.time() < end:
            app.processEvents()
            time.sleep(0.001)
        w.runner.stop()
        w.runner.wait(30)
        w.validator.shutdown()
        w.close()
    return {"drawn_s": seen["drawn"] - launched,
            "interactive_s": seen["interactive"] - launched,
            "imports_s": imported - t0,
            "drawn_cpu_s": seen["drawn_cpu"],
            "blocks_s": blocks - launched,
            "first_train_s": seen.get("point", float("nan")) - pressed,
            "checked_s": seen.get("checked", float("nan")) - launched}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--graph", default=str(ROOT / "examples" / "xor.json"))
    parser.add_argument("--child", type=float, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        print(json.dumps(child(args.child, args.graph)))
        return
    env = {**os.environ, "QT_QPA_PLATFORM": os.environ.get("QT_QPA_PLATFORM", "offscreen"),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT),
                                                        os.environ.get("PYTHONPATH")]))}
    rows = []
    for i in range(args.rounds):
        launched = time.time()
        out = subprocess.run([sys.executable, __file__, "--graph", args.graph,
                              "--child", repr(launched)], env=env, capture_output=True,
                             text=True, check=True).stdout
        row = json.loads(out.strip().splitlines()[-1])
        rows.append(row)
        print(f"round {i + 1}: " + "  ".join(f"{k} {v:.2f}" for k, v in row.items()))
    medians = {k: statistics.median(r[k] for r in rows) for k in rows[0]}
    print(json.dumps({"medians": {k: round(v, 3) for k, v in medians.items()},
                      "rounds": args.rounds, "loadavg": os.getloadavg(),
                      "graph": Path(args.graph).name}))


if __name__ == "__main__":
    main()
