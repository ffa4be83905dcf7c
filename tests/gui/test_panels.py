"""The panels tell the truth: one undo step per typed edit, spin interactions merged."""

from __future__ import annotations

import html

from PySide6.QtCore import Qt
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication, QLabel, QPushButton

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


def test_preview_follows_every_change_and_its_message_is_whole(xor_window, qtbot):
    w = xor_window
    assert w.validator.wait(60)
    click_node(w, "out")
    qtbot.waitUntil(lambda: w.preview.shape.text().startswith("shape ("), timeout=60_000)
    spin = w.inspector.fields["out_features"].editor
    spin.setFocus()
    QTest.keyClick(spin, Qt.Key.Key_Down)  # 1 -> "required": the graph cannot run
    assert "out_features" not in w.doc.graph.node("out").params
    qtbot.waitUntil(lambda: "out_features" in w.preview.shape.text(), timeout=60_000)
    assert w.preview.table.isHidden()  # the message gets the room, not an empty table
    assert w.preview.shape.wordWrap()
    QTest.keyClick(spin, Qt.Key.Key_Up)  # fixed: the preview runs again by itself
    qtbot.waitUntil(lambda: w.preview.shape.text().startswith("shape ("), timeout=60_000)
    assert "required" not in w.preview.shape.text()
    w.preview.auto.setChecked(False)  # no refresh wanted: stale values are cleared instead
    QTest.keyClick(spin, Qt.Key.Key_Up)
    assert "changed since this preview" in w.preview.shape.text()


def test_problems_wrap_long_text_and_show_it_whole_in_tooltips(make_window):
    from nodegraph.model.errors import Problem

    w = make_window()
    view = w.problems
    long = ("the input 'input' of linear_2 receives a tensor shaped (N, 64) but the block "
            "was declared with in_features=16; " * 3).strip()
    view.set_problems([Problem("linear_2", "input", "shape_mismatch", long,
                               "set in_features to 64 or leave it empty to infer it")])
    w.docks["problems"].raise_()
    view.table.setColumnWidth(0, 120)
    view.resize(700, 300)
    QApplication.processEvents()
    item = view.table.topLevelItem(0)
    line = view.table.fontMetrics().height()
    assert view.table.visualItemRect(item).height() >= 2 * line  # wrapped, not clipped
    assert html.escape(long) in item.toolTip(1) and "in_features to 64" in item.toolTip(1)
    assert item.toolTip(0) == item.toolTip(2) == item.toolTip(1)


def test_a_procedure_node_says_what_it_does_and_runs_from_the_inspector(make_window, qtbot):
    from nodegraph.gui.document.files import examples_dir
    from nodegraph.gui.training.node_views import TrajectoryView

    w = make_window(str(examples_dir() / "timeseries_mlp.json"))
    click_node(w, "forecast")
    run = w.inspector.findChild(QPushButton, "run_procedure")
    assert run is not None and run.isVisible()
    page_text = " ".join(label.text() for label in w.inspector.findChildren(QLabel)
                         if label.isVisible())
    assert "procedure runs after training" in page_text
    qtbot.mouseClick(run, Qt.MouseButton.LeftButton)
    dock = w.node_views.panel
    assert dock.isVisible() and dock.node == "forecast"
    view = dock.view(TrajectoryView)
    assert view is not None
    qtbot.waitUntil(lambda: view.data is not None, timeout=60_000)


def test_preview_shows_the_trained_weights_once_a_run_ends(xor_window, qtbot):
    w = xor_window
    assert w.validator.wait(60)
    click_node(w, "out")
    qtbot.waitUntil(lambda: "initial weights" in w.preview.title.text(), timeout=60_000)
    w.epochs.setValue(3)
    assert w.start_training()
    qtbot.waitUntil(lambda: not w.runner.running, timeout=60_000)
    qtbot.waitUntil(lambda: "trained weights" in w.preview.title.text(), timeout=60_000)
    assert w.preview.shape.text().startswith("shape (")
