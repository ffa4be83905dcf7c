"""The editor's entry point: `nodegraph edit [GRAPH]` calls `main`."""

from __future__ import annotations

import sys

from nodegraph.gui.base.application import application
from nodegraph.gui.shell.main_window import MainWindow
from nodegraph.model import gcpause


def main(path: str | None = None) -> int:
    """Open the editor on `path` (or an empty graph), run until it closes; the exit code."""
    gcpause.tune_process()  # this process is ours: keep the collector out of the hot paths
    app = application()
    window = MainWindow(path, draw_first=True)  # cards first, the blocks right after
    window.show()
    return app.exec()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else None))
