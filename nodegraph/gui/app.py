"""The editor's entry point: `nodegraph edit [GRAPH]` calls `main`."""

from __future__ import annotations

import sys

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication

from nodegraph.gui import theme
from nodegraph.gui.main_window import MainWindow
from nodegraph.model import gcpause


def application() -> QApplication:
    """The running QApplication, created and themed on first use."""
    app = QApplication.instance()
    if app is None:
        QApplication.setHighDpiScaleFactorRoundingPolicy(
            Qt.HighDpiScaleFactorRoundingPolicy.PassThrough)
        app = QApplication(sys.argv[:1])
        app.setApplicationName("nodegraph")
        app.setOrganizationName("nodegraph")
    if not isinstance(app, QApplication):  # Qt's stubs type instance() as QCoreApplication
        raise RuntimeError("a QCoreApplication is running; the editor needs a QApplication")
    theme.apply(app)
    return app


def main(path: str | None = None) -> int:
    """Open the editor on `path` (or an empty graph), run until it closes; the exit code."""
    gcpause.tune_process()  # this process is ours: keep the collector out of the hot paths
    app = application()
    window = MainWindow(path, draw_first=True)  # cards first, the blocks right after
    window.show()
    return app.exec()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else None))
