"""Make the README's node-view pictures, offscreen, as a user would get them.

    QT_QPA_PLATFORM=offscreen python tools/node_views_screenshot.py docs

Writes DIR/view_decision.png (a small MLP trained in the editor on two interleaved
spirals, its decision boundary) and DIR/view_gradnorm.png (examples/deep_sigmoid.json
trained a few epochs: the gradient norm of every layer, the vanishing-gradient picture).
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from PySide6.QtCore import QSettings  # noqa: E402

from nodegraph.gui.base import theme  # noqa: E402
from nodegraph.gui.base.application import application  # noqa: E402
from nodegraph.gui.document.files import examples_dir  # noqa: E402
from nodegraph.gui.shell.main_window import MainWindow  # noqa: E402
from nodegraph.model.fileformat import save  # noqa: E402
from nodegraph.model.graph import Graph  # noqa: E402


def spirals_graph() -> Graph:
    """Two spiral arms and an MLP with two tanh layers: a boundary worth looking at."""
    g = Graph("spirals")
    g.add("data.Spirals", "data", n=600, noise=2.0, batch_size=64)
    g.add("layers.Linear", "hidden1", out_features=48)
    g.add("activations.Tanh", "act1")
    g.add("layers.Linear", "hidden2", out_features=48)
    g.add("activations.Tanh", "act2")
    g.add("layers.Linear", "out", out_features=2)
    g.add("losses.CrossEntropy", "loss")
    g.add("optimizers.Adam", "opt", lr=0.01)
    chain = ["data", "hidden1", "act1", "hidden2", "act2", "out"]
    for a, b in zip(chain, chain[1:], strict=False):
        g.connect((a, "x" if a == "data" else "output"), (b, "input"))
    g.connect(("out", "output"), ("loss", "input"))
    g.connect(("data", "y"), ("loss", "target"))
    g.connect(("loss", "loss"), ("opt", "loss"))
    return g


def grab(window: MainWindow, node: str | None, epochs: int, out: Path, tab: int = 0) -> None:
    app = application()
    window.validator.wait()
    window.epochs.setValue(epochs)
    window.start_training()
    window.runner.wait(900)
    panel = window.node_views.open(node) if node else window.node_views.open_layers()
    panel.tabs.setCurrentIndex(tab)
    dock = window.node_views.dock
    dock.resize(820, 600)
    for _ in range(30):
        app.processEvents()
    window.node_views.refresh_live()
    for _ in range(10):
        app.processEvents()
    dock.grab().save(str(out))
    print(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir")
    parser.add_argument("--only", choices=("decision", "gradnorm"), help="make one picture")
    args = parser.parse_args()
    out = Path(args.out_dir)
    app = application()
    theme.apply(app)
    with tempfile.TemporaryDirectory() as tmp:
        settings = QSettings(str(Path(tmp) / "settings.ini"), QSettings.Format.IniFormat)
        path = Path(tmp) / "spirals.json"
        save(spirals_graph(), path)
        for graph, node, epochs, name in ((path, "out", 150, "view_decision.png"),
                                          (examples_dir() / "deep_sigmoid.json", None, 8,
                                           "view_gradnorm.png")):
            if args.only and args.only not in name:
                continue
            window = MainWindow(str(graph), settings=settings, recovery_dir=Path(tmp) / "rec")
            window.resize(1500, 920)
            window.show()
            window.doc.set_training("probe_budget", 1.0)
            window.doc.set_training("probe_rate", 0)
            grab(window, node, epochs, out / name)
            window.doc.undo_stack.setClean()
            window.close()


if __name__ == "__main__":
    main()
