"""Make the README's screenshot: an example opened, trained and inspected, offscreen.

    QT_QPA_PLATFORM=offscreen python tools/screenshot.py docs/screenshot.png \\
        [examples/xor.json] [--select hidden] [--epochs N]

It does what a user would: opens the graph, presses Auto-layout and Train, waits for the
run to finish, selects a node (its params in the inspector, its output in the preview) and
grabs the window.
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from PySide6.QtCore import QSettings  # noqa: E402

from nodegraph.gui.base.application import application  # noqa: E402
from nodegraph.gui.document.files import examples_dir  # noqa: E402
from nodegraph.gui.shell.main_window import MainWindow  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("graph", nargs="?", default=str(examples_dir() / "xor.json"))
    parser.add_argument("--select", default="hidden", help="node to inspect and preview")
    parser.add_argument("--epochs", type=int, default=None)
    parser.add_argument("--size", default="1600x1000")
    args = parser.parse_args()
    app = application()
    with tempfile.TemporaryDirectory() as tmp:
        settings = QSettings(str(Path(tmp) / "settings.ini"), QSettings.Format.IniFormat)
        window = MainWindow(args.graph, settings=settings, recovery_dir=Path(tmp) / "rec")
        width, height = (int(v) for v in args.size.split("x"))
        window.resize(width, height)
        window.show()
        window.edit_actions.auto_layout()
        if args.epochs is not None:
            window.epochs.setValue(args.epochs)
        window.validator.wait()
        window.start_training()
        window.runner.wait(600)
        watch = getattr(window, "watch", None)
        if watch is not None:  # a wave frozen mid-play covers the wires' shape labels
            watch.animator.stop()
        window.scene.select_nodes([args.select])
        window.preview_selected()
        window.docks["log"].raise_()  # the run's log reads better than an empty problem list
        window.view.fit()
        window.plots.redraw()
        window.log.flush()
        for _ in range(20):
            app.processEvents()
        window.grab().save(args.out)
        window.doc.undo_stack.setClean()
        window.close()
    print(args.out)


if __name__ == "__main__":
    main()
