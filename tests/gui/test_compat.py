"""The editor survives PySide6 6.12's reference bug on Python 3.11
(see nodegraph.gui.base._compat)."""

from __future__ import annotations

import sys

from PySide6.QtGui import QPen

import nodegraph.gui.base.theme  # noqa: F401  (installs the guard, as every window does)


def test_many_void_qt_calls_do_not_exhaust_none():
    pen = QPen()
    start = sys.getrefcount(None)
    for _ in range(200_000):  # more than None's whole count on an unguarded 3.11
        pen.setWidth(1)
    assert sys.getrefcount(None) > 0 and start > 0


def test_the_qt_free_helpers_import_no_qt():
    """Scripts (the example builders) use the auto-layout without a Qt installation."""
    import subprocess

    code = ("import sys, nodegraph.gui.canvas.layout, nodegraph.gui.panels.fuzzy, "
            "nodegraph.gui.document.wiring, nodegraph.gui.document.clipboard; "
            "print(any(m.startswith('PySide6') for m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
