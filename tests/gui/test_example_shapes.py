"""The shipped examples' wire labels (`nodegraph/gui/document/example_shapes.json`): what
each example's clean check gives today, and shown at the first paint of an example opened
for the first time on a machine (an empty state folder), before the block library is in."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import nodegraph
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


def _import(tmp_path: Path, monkeypatch) -> Path:
    """`nodegraph import` of a small module written the usual way, in this process."""
    from nodegraph.cli.main import main

    (tmp_path / "tiny.py").write_text(
        "import torch\nfrom torch import nn\n\n\nclass Tiny(nn.Module):\n"
        "    def __init__(self):\n        super().__init__()\n"
        "        self.fc1, self.fc2 = nn.Linear(3, 8), nn.Linear(8, 2)\n\n"
        "    def forward(self, x):\n        return self.fc2(torch.relu(self.fc1(x)))\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    out = tmp_path / "tiny" / "graph.json"
    assert main(["import", "tiny:Tiny", "--input-shape", "4,3", "-o", str(out)]) == 0
    return out


def test_a_fresh_import_opens_labelled_at_the_first_look(qtbot, tmp_path, prompts,
                                                        monkeypatch):
    """The import checked the graph it wrote: the file keeps those labels with the key
    of the graph they belong to, and the editor shows them before its library is in; an
    edited file shows none (they would be another graph's)."""
    from PySide6.QtCore import QSettings

    from nodegraph.gui.shell import main_window
    from nodegraph.model import wire_labels

    path = _import(tmp_path, monkeypatch)
    graph = nodegraph.load(path)
    recorded = wire_labels.recorded(graph)
    report = nodegraph.validate(graph)
    assert recorded == wire_labels.labels_of(report, graph) and len(recorded) >= 3
    monkeypatch.setattr(main_window, "default_registry_loaded", lambda: False)
    settings = QSettings(str(tmp_path / "s.ini"), QSettings.Format.IniFormat)

    def first_look():
        w = main_window.MainWindow(str(path), settings=settings, prompts=prompts,
                                   recovery_dir=tmp_path / "recovery", draw_first=True)
        qtbot.addWidget(w)
        assert w.blocks_loading and w.validator.report is None
        return w, {e.source: item.label for e, item in w.scene.wires.items()}

    w, shown = first_look()
    assert shown == recorded
    w.close()
    path.write_text(path.read_text().replace('"out_features": 8', '"out_features": 9'))
    assert wire_labels.recorded(nodegraph.load(path)) is None
    w, shown = first_look()
    assert not any(shown.values())
    w.close()
