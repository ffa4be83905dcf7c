"""A field's late commit (its editingFinished when focus leaves, after another block's page
replaced it in the inspector) never reaches the node shown now."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtTest import QTest

from tests.gui.driver import click_node

ROOT = Path(__file__).resolve().parents[2]


def test_typing_a_number_then_picking_another_block_changes_only_the_first(make_window, qtbot):
    w = make_window(str(ROOT / "examples" / "jpeg_folder.json"))
    qtbot.waitUntil(lambda: "data" in w.scene.nodes, timeout=60_000)
    w.activateWindow()
    qtbot.waitUntil(lambda: w.isActiveWindow(), timeout=30_000)
    click_node(w, "data")
    editor = w.inspector.fields["size"].editor
    editor.setFocus()
    QTest.keyClick(editor, Qt.Key.Key_A, Qt.KeyboardModifier.ControlModifier)
    QTest.keyClicks(editor, "24")
    QTest.keyClick(editor, Qt.Key.Key_Return)
    out_before = dict(w.doc.graph.node("out").params)
    click_node(w, "out")  # the size field loses focus after the Linear's page is shown
    w.inspector.fields["out_features"].editor.setFocus()  # the next field to type in
    QTest.qWait(50)
    assert w.doc.graph.node("data").params["size"] == 24
    assert dict(w.doc.graph.node("out").params) == out_before
