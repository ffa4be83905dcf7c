"""Keys that always work: every documented edit and view shortcut, pressed as a real key
event on whatever widget has focus, does its job after each of the things that used to
steal the keys — an F2 rename on the canvas, Ctrl+G / Ctrl+E / Ctrl+Shift+E on groups, a
dialog opened and closed, and a block added from the palette's search. Ctrl+Z undoes after
every one of them.

The checks read the graph model (node counts, positions, the undo stack), not pixels.
"""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication

CTRL = Qt.KeyboardModifier.ControlModifier
SHIFT = Qt.KeyboardModifier.ShiftModifier
ALT = Qt.KeyboardModifier.AltModifier
NO = Qt.KeyboardModifier.NoModifier
K = Qt.Key


def press(qtbot, w, key, mods=NO) -> None:
    """A key pressed as a person would: sent to the widget that has focus in `w`."""
    target = QApplication.focusWidget()
    # the window itself, or a popup of its own (Find, the block search)
    assert target is not None and w in (target.window(), target.window().parentWidget()), \
        f"focus left the window: {target!r}"
    qtbot.keyClick(target, key, mods)


def canvas(w):
    t = w.group_tabs
    return t.current_doc(), t.current_scene(), t.current_view()


def check_every_shortcut(qtbot, w) -> None:
    """Each documented shortcut through a real key event, with its effect asserted."""
    stack = w.doc.undo_stack
    doc, scene, view = canvas(w)
    g = doc.graph

    # Ctrl+Z / Ctrl+Shift+Z / Ctrl+Y: the last edit goes and comes back
    assert stack.canUndo()
    at = stack.index()
    press(qtbot, w, K.Key_Z, CTRL)
    assert stack.index() == at - 1
    press(qtbot, w, K.Key_Z, CTRL | SHIFT)
    assert stack.index() == at
    press(qtbot, w, K.Key_Z, CTRL)
    press(qtbot, w, K.Key_Y, CTRL)
    assert stack.index() == at

    # Ctrl+A selects every card of the canvas in front
    press(qtbot, w, K.Key_A, CTRL)
    assert sorted(scene.selected_node_ids()) == sorted(scene.nodes)

    # Ctrl+C, Ctrl+V: a copy of every node; Ctrl+Z takes it away again
    n = len(g.nodes)
    press(qtbot, w, K.Key_C, CTRL)
    press(qtbot, w, K.Key_V, CTRL)
    assert len(g.nodes) == 2 * n
    press(qtbot, w, K.Key_Z, CTRL)
    assert len(g.nodes) == n

    # Ctrl+D duplicates the selection; Delete removes the copy; Ctrl+Z brings each back
    first = sorted(scene.nodes)[0]
    scene.select_nodes([first])
    press(qtbot, w, K.Key_D, CTRL)
    assert len(g.nodes) == n + 1
    copy = scene.selected_node_ids()
    assert len(copy) == 1 and copy[0] != first
    press(qtbot, w, K.Key_Delete)
    assert copy[0] not in g.nodes
    press(qtbot, w, K.Key_Z, CTRL)
    assert copy[0] in g.nodes
    press(qtbot, w, K.Key_Z, CTRL)
    assert len(g.nodes) == n

    # Ctrl+X cuts (the clipboard holds it: Ctrl+V brings a copy back); Ctrl+Z undoes each
    cut = [m for m in sorted(scene.nodes) if m not in getattr(doc, "port_nodes",
                                                              lambda: set())()][:1]
    if cut:
        scene.select_nodes(cut)
        press(qtbot, w, K.Key_X, CTRL)
        assert cut[0] not in g.nodes
        press(qtbot, w, K.Key_Z, CTRL)
        assert cut[0] in g.nodes

    # Ctrl+Alt+Left aligns as a row, Ctrl+Alt+S straightens, Ctrl+Shift+L lays out top
    # to bottom: each one undo step
    pair = sorted(scene.nodes)[:2]
    for key, mods in ((K.Key_Left, CTRL | ALT), (K.Key_S, CTRL | ALT),
                      (K.Key_L, CTRL | SHIFT)):
        scene.select_nodes(pair)
        at, before = stack.index(), dict(doc.positions())
        press(qtbot, w, key, mods)
        if stack.index() > at:  # (nothing to move is no step)
            press(qtbot, w, K.Key_Z, CTRL)
            assert stack.index() == at and dict(doc.positions()) == before

    # T, N and Ctrl+J fold and unfold the panels of each side
    edges = w.panel_edges
    for key, mods, side in ((K.Key_T, NO, "left"), (K.Key_N, NO, "right"),
                            (K.Key_J, CTRL, "bottom")):
        was = edges.is_folded(side)
        press(qtbot, w, key, mods)
        assert edges.is_folded(side) != was
        press(qtbot, w, key, mods)
        assert edges.is_folded(side) == was

    # F1 opens the selected block's documentation (a window of its own); closed again
    scene.select_nodes([first])
    press(qtbot, w, K.Key_F1)
    assert w.help.dialog is not None and w.help.dialog.isVisible()
    w.help.dialog.close()
    w.activateWindow()
    qtbot.waitUntil(lambda: QApplication.focusWidget() is view, timeout=10000)

    # Ctrl+Alt+Up aligns the selection as a column: one centre line, cards kept apart
    pair = sorted(scene.nodes)[:2]
    scene.select_nodes(pair)
    before = dict(doc.positions())
    press(qtbot, w, K.Key_Up, CTRL | ALT)
    centres = {round(scene.nodes[m].sceneBoundingRect().center().x(), 3) for m in pair}
    assert len(centres) == 1
    a, b = (scene.nodes[m].sceneBoundingRect() for m in pair)
    assert not a.intersects(b)
    press(qtbot, w, K.Key_Z, CTRL)
    assert dict(doc.positions()) == before

    # Ctrl+L lays the graph out (one undo step)
    at = stack.index()
    press(qtbot, w, K.Key_L, CTRL)
    assert stack.index() == at + 1 or dict(doc.positions()) == before
    if stack.index() == at + 1:
        press(qtbot, w, K.Key_Z, CTRL)
        assert stack.index() == at

    # Ctrl+0, Ctrl+=, Ctrl+-: actual size, in, out
    press(qtbot, w, K.Key_0, CTRL)
    assert view.zoom == pytest.approx(1.0)
    press(qtbot, w, K.Key_Equal, CTRL)
    assert view.zoom > 1.0
    press(qtbot, w, K.Key_Minus, CTRL)
    press(qtbot, w, K.Key_Minus, CTRL)
    assert view.zoom < 1.0

    # Home fits the graph; F frames the selected card
    scene.select_nodes([first])
    press(qtbot, w, K.Key_F)
    assert view.mapToScene(view.viewport().rect()).boundingRect().contains(
        scene.nodes[first].sceneBoundingRect().center())
    press(qtbot, w, K.Key_Home)
    shown = view.mapToScene(view.viewport().rect()).boundingRect()
    assert all(shown.contains(i.sceneBoundingRect().center()) for i in scene.nodes.values())

    # Ctrl+M toggles the minimap
    was = view.minimap.enabled
    press(qtbot, w, K.Key_M, CTRL)
    assert view.minimap.enabled != was
    press(qtbot, w, K.Key_M, CTRL)
    assert view.minimap.enabled == was

    # Ctrl+Shift+C adds a comment, Ctrl+B a backdrop; Ctrl+Z removes each
    notes = len(doc.notes())
    press(qtbot, w, K.Key_C, CTRL | SHIFT)
    assert len(doc.notes()) == notes + 1
    press(qtbot, w, K.Key_Z, CTRL)
    assert len(doc.notes()) == notes
    scene.select_nodes([first])
    press(qtbot, w, K.Key_B, CTRL)
    assert len(doc.notes()) == notes + 1
    press(qtbot, w, K.Key_Z, CTRL)
    assert len(doc.notes()) == notes

    # Ctrl+Shift+G toggles snapping
    snap = w.actions_by_name["snap"]
    was = snap.isChecked()
    press(qtbot, w, K.Key_G, CTRL | SHIFT)
    assert snap.isChecked() != was
    press(qtbot, w, K.Key_G, CTRL | SHIFT)

    # Ctrl+F opens Find with its field ready; Escape closes it and the canvas has the keys
    press(qtbot, w, K.Key_F, CTRL)
    assert w.finder.isVisible()
    press(qtbot, w, K.Key_Escape)
    qtbot.waitUntil(lambda: not w.finder.isVisible(), timeout=5000)
    qtbot.waitUntil(lambda: QApplication.focusWidget() is view, timeout=5000)

    # F2 opens the rename field; Escape closes it and the keys come back to the canvas
    scene.select_nodes([first])
    press(qtbot, w, K.Key_F2)
    field = w.group_tabs.current_edit_actions().renamer.field
    assert field.isVisible() and QApplication.focusWidget() is field
    press(qtbot, w, K.Key_Escape)
    assert not field.isVisible() and QApplication.focusWidget() is view


def _start(w, qtbot):
    w.activateWindow()
    qtbot.waitUntil(lambda: QApplication.focusWidget() is w.view, timeout=10000)


def test_focus_is_on_the_canvas_at_start(xor_window, qtbot):
    _start(xor_window, qtbot)


def test_keys_after_f2_rename(xor_window, qtbot):
    w = xor_window
    _start(w, qtbot)
    w.scene.select_nodes(["act"])
    press(qtbot, w, K.Key_F2)
    qtbot.keyClicks(QApplication.focusWidget(), "tanh")
    press(qtbot, w, K.Key_Return)
    assert "tanh" in w.doc.graph.nodes
    assert QApplication.focusWidget() is w.view
    assert QApplication.activePopupWidget() is None  # no block search popped up by chance
    check_every_shortcut(qtbot, w)
    press(qtbot, w, K.Key_Z, CTRL)
    assert "act" in w.doc.graph.nodes and "tanh" not in w.doc.graph.nodes


def test_keys_after_group_open_and_back(xor_window, qtbot):
    w = xor_window
    _start(w, qtbot)
    w.scene.select_nodes(["hidden", "act"])
    press(qtbot, w, K.Key_G, CTRL)
    assert w.doc.graph.node("block").type == "group.block"
    check_every_shortcut(qtbot, w)  # its first Ctrl+Z undoes the grouping; redo restores
    assert "block" in w.doc.graph.nodes
    w.scene.select_nodes(["block"])
    press(qtbot, w, K.Key_E, CTRL)
    assert w.group_tabs.current_canvas() is not None
    assert QApplication.focusWidget() is w.group_tabs.current_view()
    w.group_tabs.current_scene().select_nodes(["hidden"])
    w.inspector.fields["out_features"].editor.setValue(6)  # an edit inside, to undo
    w.group_tabs.focus_canvas()
    check_every_shortcut(qtbot, w)
    press(qtbot, w, K.Key_E, CTRL | SHIFT)
    assert w.group_tabs.current_canvas() is None
    assert QApplication.focusWidget() is w.view
    check_every_shortcut(qtbot, w)


def test_keys_after_a_dialog(xor_window, qtbot):
    w = xor_window
    _start(w, qtbot)
    press(qtbot, w, K.Key_Slash, CTRL)
    dialog = w.help.dialog
    qtbot.waitUntil(lambda: dialog is not None and dialog.isVisible(), timeout=5000)
    dialog.activateWindow()
    qtbot.keyClick(dialog, K.Key_Escape)
    qtbot.waitUntil(lambda: not dialog.isVisible(), timeout=5000)
    w.activateWindow()
    qtbot.waitUntil(lambda: QApplication.focusWidget() is w.view, timeout=10000)
    w.scene.select_nodes(["act"])
    press(qtbot, w, K.Key_Delete)  # an edit to undo
    check_every_shortcut(qtbot, w)


def test_keys_after_a_palette_search(xor_window, qtbot):
    w = xor_window
    _start(w, qtbot)
    search = w.palette.search
    search.setFocus()
    qtbot.waitUntil(lambda: QApplication.focusWidget() is search, timeout=5000)
    n = len(w.doc.graph.nodes)
    qtbot.keyClicks(search, "relu")
    press(qtbot, w, K.Key_Return)
    assert len(w.doc.graph.nodes) == n + 1
    assert QApplication.focusWidget() is w.view
    check_every_shortcut(qtbot, w)
