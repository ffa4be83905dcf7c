"""The running QApplication, made once per process for the editor, its tools and its tests.

Here, below every part of the editor, so that a view's own screenshot helper (and a test or
a tool) gets a themed application without importing the editor's entry point.
"""

from __future__ import annotations

import sys

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication

from nodegraph.gui.base import theme


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
