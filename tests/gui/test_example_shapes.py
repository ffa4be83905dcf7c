"""The shipped examples' wire labels (`nodegraph/gui/document/example_shapes.json`): what
each example's clean check gives today, and shown at the first paint of an example opened
for the first time on a machine (an empty state folder), before the block library is in."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from nodegraph.gui.document import shape_memo

ROOT = Path(__file__).resolve().parents[2]


def test_the_shipped_labels_are_what_the_examples_check_to_today():
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "example_shapes.py"),
                           "--check"], capture_output=True, text=True, timeout=600,
                          cwd=ROOT, env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT),
                                         "QT_QPA_PLATFORM": "offscreen"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    names = {e["example"] for e in json.loads(shape_memo.SHIPPED.read_text()).values()}
    assert {"xor.json", "rcnn_shapes.json", "jpeg_folder.json"} <= names


def test_an_example_opened_first_shows_its_labels_at_the_first_look(qtbot, tmp_path,
                                                                   prompts, monkeypatch):
    from PySide6.QtCore import QSettings

    from nodegraph.gui.shell import main_window

    monkeypatch.setattr(main_window, "default_registry_loaded", lambda: False)
    settings = QSettings(str(tmp_path / "s.ini"), QSettings.Format.IniFormat)
    w = main_window.MainWindow(str(ROOT / "examples" / "rcnn_shapes.json"), settings=settings,
                               prompts=prompts, recovery_dir=tmp_path / "recovery",
                               draw_first=True)
    qtbot.addWidget(w)
    assert w.blocks_loading and w.validator.report is None  # nothing checked yet
    assert not list((tmp_path / "shapes").glob("*.json"))  # nothing remembered here
    shipped = shape_memo.shipped()[shape_memo.content_key(w.doc.graph)]
    shown = [(item.label, shipped[e.source]) for e, item in w.scene.wires.items()]
    assert len(shown) == 50 and all(label == want != "" for label, want in shown)
    w.close()


def test_a_damaged_shipped_file_labels_nothing(tmp_path, monkeypatch):
    bad = tmp_path / "example_shapes.json"
    bad.write_text('{"k": {"labels": [["a", "x", 3], ["a", "y"]]}, "j": 5')
    monkeypatch.setattr(shape_memo, "SHIPPED", bad)
    shape_memo.shipped.cache_clear()
    try:
        assert shape_memo.shipped() == {}
        bad.write_text('{"k": {"labels": [["a", "x", 3], ["a", "y", "(N, 2)"]]}, "j": 5}')
        shape_memo.shipped.cache_clear()
        assert shape_memo.shipped() == {"k": {("a", "y"): "(N, 2)"}}
        assert shape_memo.ShapeMemo(tmp_path).recall("k") == {("a", "y"): "(N, 2)"}
    finally:
        shape_memo.shipped.cache_clear()
