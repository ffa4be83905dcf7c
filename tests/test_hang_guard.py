"""The test command's hang guard (pyproject's pytest options): a hung test fails alone, with
the stacks that show where it hung, and the session goes on. Runs pytest on small hanging
tests with the project's configuration and the limits cut to seconds."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def pytest_on(tmp_path, source: str, *options: str) -> subprocess.CompletedProcess:
    test = tmp_path / "test_hangs.py"
    test.write_text(textwrap.dedent(source))
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-c", str(ROOT / "pyproject.toml"), "--rootdir",
         str(tmp_path), "-p", "no:cacheprovider", "-o", "timeout=2",
         "-o", "faulthandler_timeout=5", *options, str(test)],
        capture_output=True, text=True, timeout=240, cwd=tmp_path,
        env=ENV)


# PYTEST_TIMEOUT or PYTEST_ADDOPTS of the outer run would override the limits set here.
ENV = {**{k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")},
       "QT_QPA_PLATFORM": "offscreen"}


def test_a_test_that_hangs_in_python_fails_and_the_session_goes_on(tmp_path):
    proc = pytest_on(tmp_path, """
        import threading

        def test_waits_for_itself():
            lock = threading.Lock()
            lock.acquire()
            lock.acquire()

        def test_after_it():
            pass
    """)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "Failed: Timeout (>2.0s) from pytest-timeout" in proc.stdout
    assert "test_hangs.py:7: Failed" in proc.stdout  # the line where it hung
    assert "1 failed, 1 passed" in proc.stdout


def test_a_hang_that_holds_the_gil_or_sits_in_qt_fails_one_test_with_its_stacks(tmp_path):
    """No Python signal handler or timer thread runs here, so pytest-timeout cannot act;
    faulthandler's watchdog ends the xdist worker, which fails that test and is replaced."""
    qt = importlib.util.find_spec("PySide6") is not None
    proc = pytest_on(tmp_path, """
        import pytest

        def test_holds_the_gil():
            sum(range(10**15))  # one C call: no signal handler, no other thread runs

        def test_sits_in_qt_event_loop():
            QtCore = pytest.importorskip("PySide6.QtCore")
            app = QtCore.QCoreApplication.instance() or QtCore.QCoreApplication([])
            QtCore.QEventLoop().exec()

        def test_after_them():
            pass
    """, "-n", "1")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    assert "worker 'gw0' crashed while running 'test_hangs.py::test_holds_the_gil'" in out
    assert "in test_holds_the_gil" in proc.stderr  # faulthandler's stack, on stderr
    if qt:
        assert "crashed while running 'test_hangs.py::test_sits_in_qt_event_loop'" in out
        assert "in test_sits_in_qt_event_loop" in proc.stderr
    assert ("2 failed, 1 passed" if qt else "1 failed, 1 passed, 1 skipped") in proc.stdout
