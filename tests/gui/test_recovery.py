"""Crash recovery as a person meets it: the editor runs as a process of its own, an edit
is autosaved into the state folder, the process is killed (SIGKILL: no clean-up runs),
and the next editor on the same file offers the edit back."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

# The editor's own entry point (`nodegraph edit FILE` calls app.main), plus one edit made
# once the window is up, as a person would make it.
DRIVER = """
import sys
from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication
from nodegraph.gui.shell import app
from nodegraph.gui.shell.main_window import MainWindow

def edit():
    (window,) = [w for w in QApplication.topLevelWidgets() if isinstance(w, MainWindow)]
    if window.blocks_loading:  # the editor draws first; its blocks come right after
        QTimer.singleShot(50, edit)
        return
    window.doc.set_param("opt", "lr", 0.2)
    print("edited", flush=True)

app.application()
QTimer.singleShot(0, edit)
sys.exit(app.main(sys.argv[1]))
"""


def wait_for(predicate, timeout_s: float, process: subprocess.Popen) -> bool:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if predicate():
            return True
        if process.poll() is not None:
            return False
        time.sleep(0.1)
    return False


@pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL is POSIX")
def test_an_edit_survives_the_editor_being_killed(tmp_path, xor_file, make_window, prompts):
    state = tmp_path / "recovery"  # the folder make_window's editor uses too
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen", "NODEGRAPH_STATE_DIR": str(state),
           "NODEGRAPH_AUTOSAVE_MS": "200", "NODEGRAPH_TRAIN_IN_THREAD": "1",
           "XDG_CONFIG_HOME": str(tmp_path / "config"), "XDG_DATA_HOME": str(tmp_path / "data"),
           "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    before = xor_file.read_bytes()
    editor = subprocess.Popen([sys.executable, "-c", DRIVER, str(xor_file)], env=env,
                              cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        saved = wait_for(lambda: any(state.glob("xor-*.autosave.json")), 240, editor)
    finally:
        editor.kill()  # SIGKILL
        output = editor.communicate(timeout=60)[0].decode(errors="replace")
    assert saved, f"no autosave appeared; the editor said:\n{output}"
    assert editor.returncode == -9 and "edited" in output
    (auto,) = state.glob("xor-*.autosave.json")
    assert xor_file.read_bytes() == before  # the file itself was not touched
    assert sorted(p.name for p in xor_file.parent.iterdir() if "autosave" in p.name) == []

    prompts.restore = True
    again = make_window(str(xor_file))
    assert ("restore", str(auto)) in prompts.asked
    assert again.doc.graph.node("opt").params["lr"] == 0.2 and again.doc.dirty
    assert not auto.exists()
