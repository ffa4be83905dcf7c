"""The panels tell the truth: one undo step per typed edit, spin interactions merged."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtTest import QTest

from tests.gui.driver import click_node


def _retype(editor, text: str) -> None:
    editor.setFocus()
    QTest.keyClick(editor, Qt.Key.Key_A, Qt.KeyboardModifier.ControlModifier)
    if text:
        QTest.keyClicks(editor, text)
    else:
        QTest.keyClick(editor, Qt.Key.Key_Delete)
    QTest.keyClick(editor, Qt.Key.Key_Return)


def test_two_typed_edits_of_one_param_are_two_undo_steps(xor_window):
    w = xor_window
    click_node(w, "hidden")
    editor = w.inspector.fields["in_features"].editor
    stack = w.doc.undo_stack
    start = stack.count()
    _retype(editor, "16")
    assert w.doc.graph.node("hidden").params["in_features"] == 16
    _retype(editor, "")
    assert w.doc.graph.node("hidden").params.get("in_features") is None
    assert stack.count() == start + 2
    w.undo()
    assert w.doc.graph.node("hidden").params["in_features"] == 16  # the wrong value is back


def test_one_spin_interaction_is_one_undo_step_and_typing_starts_another(xor_window):
    w = xor_window
    click_node(w, "hidden")
    spin = w.inspector.fields["out_features"].editor
    stack = w.doc.undo_stack
    start = stack.count()
    spin.setFocus()
    for _ in range(3):
        QTest.keyClick(spin, Qt.Key.Key_Up)
    assert w.doc.graph.node("hidden").params["out_features"] == 7
    assert stack.count() == start + 1
    _retype(spin, "9")
    assert stack.count() == start + 2
    QTest.keyClick(spin, Qt.Key.Key_Up)  # a new interaction after typing
    assert stack.count() == start + 3
    w.undo()
    w.undo()
    assert w.doc.graph.node("hidden").params["out_features"] == 7
    w.undo()
    assert w.doc.graph.node("hidden").params["out_features"] == 4
