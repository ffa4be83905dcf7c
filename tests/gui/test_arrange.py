"""Arranging cards: the geometry of align, distribute, straighten and snap, checked
against hand-computed positions, and straighten driven by its shortcut."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtTest import QTest

from nodegraph.gui.canvas import arrange
from tests.gui.driver import click_node

RECTS = {"a": (0.0, 0.0, 100.0, 40.0), "b": (150.0, 30.0, 60.0, 80.0),
         "c": (400.0, -20.0, 100.0, 60.0)}


def test_align_edges_and_centres():
    # lined up on the left edge they would overlap: pushed down in their order, 24 apart
    # (c spans -20..40, so a goes to 64; a ends at 104, so b goes to 128)
    assert arrange.align(RECTS, "left") == {"a": (0, 64), "b": (0, 128), "c": (0, -20)}
    assert arrange.align(RECTS, "right") == {"a": (400, 64), "b": (440, 128),
                                             "c": (400, -20)}
    # on one bottom line they are already apart (different x): nobody moves sideways
    assert arrange.align(RECTS, "bottom") == {"a": (0, 70), "b": (150, 30), "c": (400, 50)}
    centre = (50 + 180 + 450) / 3
    col = arrange.align(RECTS, "hcenter")
    assert all(abs(col[n][0] + RECTS[n][2] / 2 - centre) < 1e-9 for n in RECTS)
    assert arrange.align({"a": RECTS["a"]}, "left") == {}  # one card: nothing to align


def test_align_as_column_on_one_row_makes_a_column_not_a_stack():
    row = {f"n{i}": (i * 220.0, 0.0, 180.0, 90.0) for i in range(4)}
    col = arrange.align(row, "hcenter")
    tops = [col[f"n{i}"][1] for i in range(4)]
    assert tops == [0.0, 114.0, 228.0, 342.0]  # in their left-to-right order, 24 apart
    assert len({col[n][0] for n in row}) == 1


def test_distribute_keeps_the_ends_and_equalises_the_gaps():
    out = arrange.distribute(RECTS, "x")
    assert out["a"] == (0, 0) and out["c"] == (400, -20)  # the outermost stay
    gap1 = out["b"][0] - (out["a"][0] + 100)
    gap2 = out["c"][0] - (out["b"][0] + 60)
    assert abs(gap1 - gap2) < 1e-9 and abs(gap1 - 120) < 1e-9  # (500 - 260) / 2


def test_straighten_levels_each_wire_in_order_and_snap_rounds():
    corners = {"a": (0.0, 0.0), "b": (200.0, 37.0), "c": (400.0, -50.0)}
    wires = [("a", 50.0, "b", 60.0), ("b", 50.0, "c", 60.0)]
    out = arrange.straighten(corners, wires, ["a", "b", "c"])
    assert out == {"b": (200.0, -10.0), "c": (400.0, -20.0)}
    assert arrange.snap({"a": (13.0, -37.0)}, 24.0) == {"a": (24.0, -48.0)}


def test_ctrl_alt_s_straightens_the_selected_wires(xor_window, qtbot):
    w = xor_window
    w.activateWindow()
    w.view.setFocus()
    qtbot.waitUntil(lambda: w.view.hasFocus(), timeout=30_000)
    w.doc.move(w.scene.item_positions(["act"]), {"act": (w.scene.nodes["act"].pos().x(),
                                                         w.scene.nodes["act"].pos().y() + 77)})
    click_node(w, "hidden")
    click_node(w, "act", Qt.KeyboardModifier.ShiftModifier)
    click_node(w, "out", Qt.KeyboardModifier.ShiftModifier)
    QTest.keyClick(w.view, Qt.Key.Key_S, Qt.KeyboardModifier.ControlModifier
                   | Qt.KeyboardModifier.AltModifier)
    for src, dst in (("hidden", "act"), ("act", "out")):
        a = w.scene.nodes[src].port("output", True).anchor()
        b = w.scene.nodes[dst].port("input", False).anchor()
        assert abs(a.y() - b.y()) < 1e-6
