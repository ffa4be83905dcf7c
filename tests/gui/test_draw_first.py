"""The editor draws first: its window needs no torch, shows the file's cards before the
block library is in, holds edits, checks and Train while it loads (Problems says
'checking…'), then opens the file for real."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_window_imports_no_torch():
    code = ("import sys; import nodegraph.gui.shell.app, nodegraph.gui.shell.main_window; "
            "print(sorted(m for m in sys.modules if m == 'torch' or m.startswith('torch.')))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, check=True, env={"PYTHONPATH": str(ROOT),
                                                     "QT_QPA_PLATFORM": "offscreen",
                                                     "PATH": "/usr/bin:/bin"})
    assert out.stdout.strip() == "[]"


def test_cards_first_then_the_blocks(qtbot, tmp_path, prompts, xor_file, monkeypatch):
    from PySide6.QtCore import QSettings

    from nodegraph.gui.base.application import application
    from nodegraph.gui.shell import main_window

    application()
    # this test process has the library imported already: make the window wait for it anyway
    monkeypatch.setattr(main_window, "default_registry_loaded", lambda: False)
    settings = QSettings(str(tmp_path / "s.ini"), QSettings.Format.IniFormat)
    w = main_window.MainWindow(str(xor_file), settings=settings, prompts=prompts,
                               recovery_dir=tmp_path / "rec", draw_first=True)
    qtbot.addWidget(w)
    assert w.blocks_loading
    assert len(w.doc.graph.base_registry) == 0
    assert set(w.scene.nodes) == set(w.doc.graph.nodes) and {"data", "opt"} <= set(w.scene.nodes)
    assert all(item.known for item in w.scene.nodes.values())  # not flagged unknown
    assert "checking" in w.problems.summary.text()
    assert not w.start_training()  # no Train, no edit, no check before the blocks
    assert not w.doc.delete(["act"]) and "act" in w.doc.graph.nodes
    assert w.validator.report is None and not w.validator._timer.isActive()

    w.resize(1400, 900)
    w.show()  # the first paint starts the loading
    qtbot.waitUntil(lambda: not w.blocks_loading, timeout=60_000)
    assert "layers.Linear" in w.doc.graph.registry
    assert "layers.Linear" in w.palette.registry
    assert w.doc.path == str(xor_file) and not w.doc.dirty
    assert w.scene.nodes["opt"].known
    assert w.validator.wait(30) and w.validator.report.ok
    assert "checking" not in w.problems.summary.text()
    assert w.doc.add_block("layers.Linear", (0, 400))
    w.close()


def test_a_file_that_cannot_open_says_so_once_the_blocks_are_in(qtbot, tmp_path, prompts,
                                                                 monkeypatch):
    from PySide6.QtCore import QSettings

    from nodegraph.gui.base.application import application
    from nodegraph.gui.shell import main_window

    application()
    monkeypatch.setattr(main_window, "default_registry_loaded", lambda: False)
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "nodegraph", "nodes": [', encoding="utf-8")
    settings = QSettings(str(tmp_path / "s.ini"), QSettings.Format.IniFormat)
    w = main_window.MainWindow(str(bad), settings=settings, prompts=prompts,
                               recovery_dir=tmp_path / "rec", draw_first=True)
    qtbot.addWidget(w)
    assert not w.doc.graph.nodes and prompts.kinds() == []  # the first look says nothing
    w.show()
    qtbot.waitUntil(lambda: not w.blocks_loading, timeout=60_000)
    assert prompts.kinds() == ["error"] and "bad.json" in prompts.asked[0][2]
    assert not w.doc.graph.nodes and "layers.Linear" in w.doc.graph.registry
    assert bad.read_text(encoding="utf-8") == '{"format": "nodegraph", "nodes": ['
    w.close()


def test_no_file_the_start_page_then_the_blocks(qtbot, tmp_path, prompts, monkeypatch):
    from PySide6.QtCore import QSettings

    from nodegraph.gui.base.application import application
    from nodegraph.gui.shell import main_window

    application()
    monkeypatch.setattr(main_window, "default_registry_loaded", lambda: False)
    settings = QSettings(str(tmp_path / "s.ini"), QSettings.Format.IniFormat)
    w = main_window.MainWindow(None, settings=settings, prompts=prompts,
                               recovery_dir=tmp_path / "rec", draw_first=True)
    qtbot.addWidget(w)
    w.show()  # the start page covers the canvas: the window's own paint starts the loading
    qtbot.waitUntil(lambda: not w.blocks_loading, timeout=60_000)
    assert w.start_page.isVisible() and "layers.Linear" in w.palette.registry
    assert w.doc.add_block("layers.Linear", (0, 0))
    w.close()


def test_closed_while_the_blocks_load(qtbot, tmp_path, prompts, xor_file, monkeypatch):
    from PySide6.QtCore import QSettings

    from nodegraph.gui.base.application import application
    from nodegraph.gui.shell import main_window

    application()
    monkeypatch.setattr(main_window, "default_registry_loaded", lambda: False)
    settings = QSettings(str(tmp_path / "s.ini"), QSettings.Format.IniFormat)
    w = main_window.MainWindow(str(xor_file), settings=settings, prompts=prompts,
                               recovery_dir=tmp_path / "rec", draw_first=True)
    qtbot.addWidget(w)
    w.show()
    qtbot.waitUntil(lambda: w.blocks._thread is not None, timeout=10_000)
    assert w.close()  # waits for the loading thread, opens nothing, asks nothing
    assert not w.blocks._thread.is_alive() and w.blocks_loading and prompts.kinds() == []
    qtbot.wait(100)
    assert w.blocks_loading  # what it loaded was not announced to the closed window
