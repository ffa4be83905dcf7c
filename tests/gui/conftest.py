"""Editor fixtures: a themed main window with its own settings, recovery folder and answers.

Dialogs are answered by `ScriptedPrompts` (set an attribute to choose the answer; every
question asked is recorded), so no test ever blocks on a modal dialog.
"""

from __future__ import annotations

import gc
import warnings

import pytest

pytest.importorskip("PySide6")
pytest.importorskip("pytestqt")


@pytest.fixture(autouse=True)
def _windows_are_deleted_after_each_test():
    """pytest-qt closes a test's windows and calls `deleteLater`, but with no event loop
    running the deletion never comes: every window of a worker's earlier tests stayed
    alive (a hundred top-level widgets each), so an app-wide restyle (a theme switch) or a
    new window got slower with each test (a theme test took 200 s in CI). Deliver the
    deferred deletions once the test's fixtures are torn down."""
    yield
    from PySide6.QtCore import QCoreApplication, QEvent

    if QCoreApplication.instance() is not None:
        QCoreApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete)
        # pyqtgraph's parentless menus live as long as their plot's wrapper: collect it. A
        # file the collect finds unclosed (a dead process's pipe) is not this test's error.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ResourceWarning)
            gc.collect()
        QCoreApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete)


class ScriptedPrompts:
    """Answers the editor's questions without dialogs and records what was asked."""

    def __init__(self):
        self.asked: list[tuple] = []
        self.unsaved = "discard"
        self.stop_run = "stop"
        self.restore = True
        self.save_to: str | None = None
        self.open_from: str | None = None
        self.image_to: str | None = None  # where File > Export Image writes
        self.model_to: str | None = None  # where File > Save Trained Model writes
        self.group: str | None = "block"  # the name given to a new group
        self.trust = False  # a file naming code of the user's is not trusted
        self.allow = False  # nor allowed to read data outside its folder

    def unsaved_changes(self, name):
        self.asked.append(("unsaved", name))
        return self.unsaved

    def stop_run_to_edit(self):
        self.asked.append(("stop_run",))
        return self.stop_run

    def restore_autosave(self, path, when):
        self.asked.append(("restore", path))
        return self.restore

    def trust_code(self, path, modules):
        self.asked.append(("trust", path, list(modules)))
        return self.trust

    def allow_data(self, path, files):
        self.asked.append(("allow_data", path, list(files)))
        return self.allow

    def load_report(self, path, problems):
        self.asked.append(("load_report", path, list(problems)))

    def error(self, title, text):
        self.asked.append(("error", title, text))

    def group_name(self, suggested):
        self.asked.append(("group_name", suggested))
        return self.group

    def open_path(self, directory):
        return self.open_from

    def save_path(self, suggested):
        return self.save_to

    def model_path(self, suggested):
        self.asked.append(("model", suggested))
        return self.model_to

    def image_path(self, suggested):
        self.asked.append(("image", suggested))
        return self.image_to

    def kinds(self) -> list[str]:
        return [a[0] for a in self.asked]


@pytest.fixture
def prompts():
    return ScriptedPrompts()


@pytest.fixture
def make_window(qtbot, tmp_path, prompts, registry):
    """A factory of shown main windows sharing one settings file and recovery folder."""
    from PySide6.QtCore import QSettings

    from nodegraph.gui.base import theme
    from nodegraph.gui.base.application import application
    from nodegraph.gui.shell.main_window import MainWindow

    theme.apply(application())
    settings = QSettings(str(tmp_path / "settings.ini"), QSettings.Format.IniFormat)
    windows = []

    def make(path=None, prompts_=None):
        w = MainWindow(path, registry=registry, settings=settings, prompts=prompts_ or prompts,
                       recovery_dir=tmp_path / "recovery", autosave_ms=3_600_000)
        qtbot.addWidget(w)
        w.resize(1400, 900)
        w.show()
        qtbot.waitExposed(w)
        windows.append(w)
        return w

    yield make
    for w in windows:
        if w.runner.running:
            w.runner.stop()
            w.runner.wait(10)


@pytest.fixture
def window(make_window):
    return make_window()


@pytest.fixture
def xor_file(tmp_path):
    """The XOR model saved by the Python API (no positions: the editor lays it out)."""
    from nodegraph.model.fileformat import save
    from tests.gui.driver import xor_graph

    path = tmp_path / "xor.json"
    save(xor_graph("xor"), path)
    return path


@pytest.fixture
def xor_window(make_window, xor_file):
    return make_window(str(xor_file))
