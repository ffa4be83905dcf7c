"""Make the README's tree-view pictures, offscreen, as a user would get them.

    QT_QPA_PLATFORM=offscreen python tools/node_views_trees_screenshot.py docs

Trains examples/trees_vs_mlp.json in the editor for a few epochs (the estimators fit when
the run starts) and writes DIR/view_tree.png (the fitted, pruned decision tree) and
DIR/view_pruning.png (accuracy on each split against ccp_alpha).
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from node_views_screenshot import grab  # noqa: E402  (its sibling in tools/)
from PySide6.QtCore import QSettings  # noqa: E402

from nodegraph.gui.base import theme  # noqa: E402
from nodegraph.gui.base.application import application  # noqa: E402
from nodegraph.gui.document.files import examples_dir  # noqa: E402
from nodegraph.gui.shell.main_window import MainWindow  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir")
    args = parser.parse_args()
    out = Path(args.out_dir)
    app = application()
    theme.apply(app)
    with tempfile.TemporaryDirectory() as tmp:
        settings = QSettings(str(Path(tmp) / "settings.ini"), QSettings.Format.IniFormat)
        for tab, name in ((0, "view_tree.png"), (1, "view_pruning.png")):
            window = MainWindow(str(examples_dir() / "trees_vs_mlp.json"), settings=settings,
                                recovery_dir=Path(tmp) / "rec")
            window.resize(1500, 920)
            window.show()
            grab(window, "tree", 3, out / name, tab=tab)
            window.doc.undo_stack.setClean()
            window.close()
    app.processEvents()


if __name__ == "__main__":
    main()
