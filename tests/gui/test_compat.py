"""The editor survives PySide6 6.12's reference bug on Python 3.11 (see nodegraph.gui._compat)."""

from __future__ import annotations

import sys

from PySide6.QtGui import QPen

import nodegraph.gui  # noqa: F401  (installs the guard)


def test_many_void_qt_calls_do_not_exhaust_none():
    pen = QPen()
    start = sys.getrefcount(None)
    for _ in range(200_000):  # more than None's whole count on an unguarded 3.11
        pen.setWidth(1)
    assert sys.getrefcount(None) > 0 and start > 0
