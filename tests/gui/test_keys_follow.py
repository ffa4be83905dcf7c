"""The keyboard follows the user: after an inspector edit of every editor type (confirmed with
Enter or Escape), a click in the palette, the Runs panel or Find, the same ~30 shortcuts
(`check_every_shortcut`) act on the graph. A text field keeps the keys it types with (T types
a T), and Ctrl+Z in a field with nothing of its own to undo undoes the graph."""

from __future__ import annotations

from PySide6.QtCore import QPoint, Qt
from PySide6.QtWidgets import QApplication, QComboBox, QLineEdit

from tests.gui.driver import click_node, palette_item
from tests.gui.test_shortcuts_always import CTRL, SHIFT, K, _start, check_every_shortcut, press


def _editor_line(editor) -> QLineEdit:
    return editor if isinstance(editor, QLineEdit) else editor.findChild(QLineEdit)


def _type_into(qtbot, w, editor, text: str, done=K.Key_Return) -> None:
    """Click into a field, select its text, type `text` and confirm with `done`."""
    line = _editor_line(editor)
    w.inspector.ensureWidgetVisible(editor)
    qtbot.mouseClick(line, Qt.MouseButton.LeftButton, pos=QPoint(5, line.height() // 2))
    qtbot.waitUntil(lambda: QApplication.focusWidget() in (editor, line), timeout=5000)
    press(qtbot, w, K.Key_A, CTRL)
    qtbot.keyClicks(QApplication.focusWidget(), text)
    press(qtbot, w, done)
    qtbot.waitUntil(lambda: QApplication.focusWidget() is w.view, timeout=5000)


def _pick(qtbot, w, node: str) -> None:
    w.view.setFocus()
    click_node(w, node)
    assert w.scene.selected_node_ids() == [node]


def _field(w, name: str):
    return w.inspector.fields[name].editor


def test_keys_after_an_int_edit_with_enter(xor_window, qtbot):
    w = xor_window
    _start(w, qtbot)
    _pick(qtbot, w, "hidden")
    _type_into(qtbot, w, _field(w, "out_features"), "7")
    assert w.doc.graph.node("hidden").params["out_features"] == 7
    check_every_shortcut(qtbot, w)


def test_keys_after_a_float_edit_with_escape(xor_window, qtbot):
    w = xor_window
    _start(w, qtbot)
    _pick(qtbot, w, "opt")
    _type_into(qtbot, w, _field(w, "lr"), "0.02", done=K.Key_Escape)
    assert w.doc.graph.node("opt").params["lr"] == 0.02
    check_every_shortcut(qtbot, w)


def test_keys_after_a_json_edit(xor_window, qtbot):
    w = xor_window
    _start(w, qtbot)
    _pick(qtbot, w, "opt")
    _type_into(qtbot, w, _field(w, "betas"), "[0.8, 0.9]")
    assert list(w.doc.graph.node("opt").params["betas"]) == [0.8, 0.9]
    check_every_shortcut(qtbot, w)


def test_keys_after_renaming_in_the_id_field(xor_window, qtbot):
    w = xor_window
    _start(w, qtbot)
    _pick(qtbot, w, "act")
    folded = {s: w.panel_edges.is_folded(s) for s in ("left", "right")}
    _type_into(qtbot, w, w.inspector.id_edit, "Tanh_N")  # T and N type; no panel folds
    assert "Tanh_N" in w.doc.graph.nodes
    assert {s: w.panel_edges.is_folded(s) for s in ("left", "right")} == folded
    check_every_shortcut(qtbot, w)


def test_keys_after_a_choice(xor_window, qtbot):
    w = xor_window
    _start(w, qtbot)
    _pick(qtbot, w, "hidden")
    combo = _field(w, "init")
    assert isinstance(combo, QComboBox)
    w.inspector.ensureWidgetVisible(combo)
    before = combo.currentText()
    qtbot.mouseClick(combo, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: combo.view().isVisible(), timeout=5000)
    qtbot.keyClick(combo.view(), K.Key_Down)
    qtbot.keyClick(combo.view(), K.Key_Return)
    qtbot.waitUntil(lambda: not combo.view().isVisible(), timeout=5000)
    assert w.doc.graph.node("hidden").params.get("init") not in (None, before)
    w.activateWindow()  # the popup closed: the window is active again (offscreen: by hand)
    qtbot.waitUntil(lambda: QApplication.focusWidget() is combo, timeout=5000)
    press(qtbot, w, K.Key_Escape)  # done with the form: the canvas has the keys
    qtbot.waitUntil(lambda: QApplication.focusWidget() is w.view, timeout=5000)
    check_every_shortcut(qtbot, w)


def test_ctrl_z_in_a_field_with_nothing_of_its_own_undoes_the_graph(xor_window, qtbot):
    w = xor_window
    _start(w, qtbot)
    _pick(qtbot, w, "hidden")
    _type_into(qtbot, w, _field(w, "out_features"), "9")
    editor = _field(w, "out_features")
    line = _editor_line(editor)
    qtbot.mouseClick(line, Qt.MouseButton.LeftButton, pos=QPoint(5, line.height() // 2))
    qtbot.waitUntil(lambda: QApplication.focusWidget() in (editor, line), timeout=5000)
    press(qtbot, w, K.Key_Z, CTRL)  # nothing typed here: the graph's last edit goes
    assert w.doc.graph.node("hidden").params["out_features"] == 4
    press(qtbot, w, K.Key_Z, CTRL | SHIFT)
    assert w.doc.graph.node("hidden").params["out_features"] == 9
    qtbot.keyClicks(QApplication.focusWidget(), "1")  # typed: Ctrl+Z is the field's now
    stack_at = w.doc.undo_stack.index()
    press(qtbot, w, K.Key_Z, CTRL)
    assert w.doc.undo_stack.index() == stack_at


def test_keys_after_a_click_in_the_palette(xor_window, qtbot):
    w = xor_window
    _start(w, qtbot)
    _pick(qtbot, w, "act")
    tree = w.palette.tree
    item = palette_item(w, "activations.ReLU")
    tree.scrollToItem(item)
    qtbot.mouseClick(tree.viewport(), Qt.MouseButton.LeftButton,
                     pos=tree.visualItemRect(item).center())
    assert QApplication.focusWidget() is tree
    n = len(w.doc.graph.nodes)
    w.scene.select_nodes(["act"])
    press(qtbot, w, K.Key_Delete)  # the palette has focus: Delete still deletes the card
    assert len(w.doc.graph.nodes) == n - 1
    check_every_shortcut(qtbot, w)


def test_keys_after_a_click_in_the_runs_panel(xor_window, qtbot):
    w = xor_window
    _start(w, qtbot)
    w.panel_edges.unfold("bottom", w.docks["runs"])
    w.docks["runs"].raise_()
    runs = w.docks["runs"].widget().list
    qtbot.waitUntil(runs.isVisible, timeout=5000)
    qtbot.mouseClick(runs.viewport(), Qt.MouseButton.LeftButton, pos=QPoint(10, 10))
    assert QApplication.focusWidget() is runs
    w.scene.select_nodes(["act"])
    press(qtbot, w, K.Key_Delete)
    assert "act" not in w.doc.graph.nodes
    check_every_shortcut(qtbot, w)


def test_keys_after_find(xor_window, qtbot):
    w = xor_window
    _start(w, qtbot)
    press(qtbot, w, K.Key_F, CTRL)
    qtbot.keyClicks(QApplication.focusWidget(), "hidden")
    press(qtbot, w, K.Key_Return)
    qtbot.waitUntil(lambda: QApplication.focusWidget() is w.view, timeout=5000)
    assert w.scene.selected_node_ids() == ["hidden"]
    press(qtbot, w, K.Key_Delete)
    check_every_shortcut(qtbot, w)


def test_the_epochs_box_gives_the_keys_back(xor_window, qtbot):
    w = xor_window
    _start(w, qtbot)
    line = w.epochs.findChild(QLineEdit)
    qtbot.mouseClick(line, Qt.MouseButton.LeftButton, pos=QPoint(5, line.height() // 2))
    press(qtbot, w, K.Key_A, CTRL)
    qtbot.keyClicks(QApplication.focusWidget(), "3")
    press(qtbot, w, K.Key_Return)
    qtbot.waitUntil(lambda: QApplication.focusWidget() is w.view, timeout=5000)
    assert w.doc.graph.training["epochs"] == 3
    assert not line.hasSelectedText()
    qtbot.mouseClick(line, Qt.MouseButton.LeftButton, pos=QPoint(5, line.height() // 2))
    press(qtbot, w, K.Key_A, CTRL)
    qtbot.keyClicks(QApplication.focusWidget(), "2")
    press(qtbot, w, K.Key_F5)  # Train straight from the box: 2 epochs, keys to the canvas
    assert QApplication.focusWidget() is w.view and not line.hasSelectedText()
    assert w.doc.graph.training["epochs"] == 2
    qtbot.waitUntil(lambda: not w.runner.running, timeout=120_000)
    assert QApplication.focusWidget() is w.view and not line.hasSelectedText()
