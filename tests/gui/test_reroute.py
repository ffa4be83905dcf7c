"""Reroute points, by mouse: double-click a wire to add one, drag it, double-click it away;
they round-trip through the file's ui section and never change the model."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QPointF
from PySide6.QtGui import QMouseEvent

from nodegraph.gui.canvas import reroute
from nodegraph.model.graph import Edge
from tests.gui.driver import NONE, drag, model_state, mouse

WIRE = Edge("hidden", "output", "act", "input")


def _clear_spot(w, edge: Edge) -> QPointF:
    """A point of the wire where no other wire or card is (wires cross and run close)."""
    wire = w.scene.wires[edge]
    for i in range(10, 90):
        at = wire.path().pointAtPercent(i / 100)
        if w.scene.items(at) == [wire]:
            return at
    raise AssertionError(f"no clear spot on {edge}")


def _double_click(w, at: QPointF) -> None:
    mouse(w, QMouseEvent.Type.MouseButtonPress, at)
    mouse(w, QMouseEvent.Type.MouseButtonRelease, at, buttons=NONE)
    mouse(w, QMouseEvent.Type.MouseButtonDblClick, at)
    mouse(w, QMouseEvent.Type.MouseButtonRelease, at, buttons=NONE)


def test_add_drag_remove_and_round_trip_a_reroute_point(xor_window, make_window, tmp_path,
                                                         prompts):
    w = xor_window
    w.view.fit()
    g = w.doc.graph
    model = model_state(g)
    wire = w.scene.wires[WIRE]
    at = _clear_spot(w, WIRE)
    _double_click(w, at)
    (point,) = reroute.stored(g.ui, WIRE)
    assert abs(point[0] - at.x()) < 1 and abs(point[1] - at.y()) < 1
    assert model_state(g) == model  # layout only
    (dot,) = w.edit_actions.reroutes.dots[reroute.edge_key(WIRE)]
    steps = w.doc.undo_stack.count()
    target = at + QPointF(30, 160)
    drag(w, dot.scenePos(), target)
    (moved,) = reroute.stored(g.ui, WIRE)
    assert abs(moved[0] - target.x()) < 1 and abs(moved[1] - target.y()) < 1
    assert w.doc.undo_stack.count() == steps + 1
    # the wire now runs through the point: some point of its path is right there
    path = wire.path()
    assert min((path.pointAtPercent(i / 200) - target).manhattanLength()
               for i in range(201)) < 2
    assert model_state(g) == model
    prompts.save_to = str(tmp_path / "rerouted.json")
    w.file_actions.save_as()
    again = make_window(str(tmp_path / "rerouted.json"))
    assert reroute.stored(again.doc.graph.ui, WIRE) == [tuple(moved)]
    assert len(again.scene.wires[WIRE].via) == 1
    (dot,) = w.edit_actions.reroutes.dots[reroute.edge_key(WIRE)]
    _double_click(w, dot.scenePos())
    assert reroute.stored(g.ui, WIRE) == [] and wire.via == []
    w.undo()
    assert len(reroute.stored(g.ui, WIRE)) == 1 and len(wire.via) == 1


def test_a_renamed_node_keeps_its_wires_points(xor_window):
    w = xor_window
    w.view.fit()
    _double_click(w, _clear_spot(w, WIRE))
    w.doc.rename("act", "tanh")
    renamed = Edge("hidden", "output", "tanh", "input")
    assert len(reroute.stored(w.doc.graph.ui, renamed)) == 1
    assert len(w.scene.wires[renamed].via) == 1


def test_copy_paste_keeps_the_reroute_points_of_the_copied_wires(xor_window, qtbot):
    from PySide6.QtCore import Qt
    from PySide6.QtTest import QTest

    from tests.gui.driver import click_node

    ctrl, shift = Qt.KeyboardModifier.ControlModifier, Qt.KeyboardModifier.ShiftModifier
    w = xor_window
    w.view.fit()
    _double_click(w, _clear_spot(w, WIRE))  # a point on hidden -> act
    (point,) = reroute.stored(w.doc.graph.ui, WIRE)
    w.activateWindow()
    w.view.setFocus()
    qtbot.waitUntil(lambda: w.view.hasFocus(), timeout=30_000)
    click_node(w, "hidden")
    click_node(w, "act", shift)
    QTest.keyClick(w.view, Qt.Key.Key_C, ctrl)
    free = w.scene.itemsBoundingRect().bottomRight() + QPointF(150, 150)
    w.view.centerOn(free)
    mouse(w, QMouseEvent.Type.MouseMove, free, button=NONE, buttons=NONE)
    QTest.keyClick(w.view, Qt.Key.Key_V, ctrl)
    pasted = Edge("hidden_2", "output", "act_2", "input")
    assert pasted in w.scene.wires
    dx = w.doc.positions()["hidden_2"][0] - w.doc.positions()["hidden"][0]
    dy = w.doc.positions()["hidden_2"][1] - w.doc.positions()["hidden"][1]
    (copied,) = reroute.stored(w.doc.graph.ui, pasted)  # moved with the cards
    assert copied == pytest.approx((point[0] + dx, point[1] + dy), abs=0.1)  # positions
    # are stored to 0.1
    assert reroute.stored(w.doc.graph.ui, WIRE) == [point]  # the original keeps its own
    (dot,) = w.edit_actions.reroutes.dots[reroute.edge_key(pasted)]
    assert (dot.pos().x(), dot.pos().y()) == copied
    assert w.scene.wires[pasted].via == [QPointF(*copied)]  # the wire passes through it
    QTest.keyClick(w.view, Qt.Key.Key_Z, ctrl)  # one undo takes the paste and its points
    assert "hidden_2" not in w.doc.graph.nodes
    assert reroute.edge_key(pasted) not in w.doc.graph.ui[reroute.KEY]
    QTest.keyClick(w.view, Qt.Key.Key_Z, ctrl | shift)
    assert reroute.stored(w.doc.graph.ui, pasted) == [copied]
    assert len(w.edit_actions.reroutes.dots[reroute.edge_key(pasted)]) == 1
