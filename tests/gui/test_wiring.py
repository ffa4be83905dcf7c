"""Wiring by drag: refusals while dragging, replacing, cycles, loose wires, picking wires up."""

from __future__ import annotations

from PySide6.QtCore import QPointF, Qt
from PySide6.QtGui import QMouseEvent

from nodegraph.gui.document.wiring import compatible_input
from nodegraph.model.graph import Edge
from tests.gui.driver import NONE, drag, mouse, port_pos


def press_and_hover(window, start: QPointF, over: QPointF) -> None:
    mouse(window, QMouseEvent.Type.MouseButtonPress, start)
    mouse(window, QMouseEvent.Type.MouseMove, (start + over) / 2, button=NONE)
    mouse(window, QMouseEvent.Type.MouseMove, over, button=NONE)


def release(window, at: QPointF) -> None:
    mouse(window, QMouseEvent.Type.MouseButtonRelease, at, buttons=NONE)


def test_incompatible_target_is_refused_while_dragging_with_the_reason(xor_window):
    w = xor_window
    w.view.fit()
    target = w.scene.nodes["opt"].port("loss", False)
    press_and_hover(w, port_pos(w, "act", "output", True), target.anchor())
    assert target.highlight == "refused"
    reason = w.scene.drag_wire_to(target.anchor())
    assert "cannot feed a loss input" in reason
    release(w, target.anchor())
    assert w.doc.graph.source_of("opt", "loss").source == ("loss", "loss")
    assert target.highlight is None and w.doc.undo_stack.count() == 0


def test_a_wire_that_would_close_a_cycle_is_refused(xor_window):
    w = xor_window
    w.view.fit()
    press_and_hover(w, port_pos(w, "out", "output", True), port_pos(w, "hidden", "input", False))
    assert "cycle" in w.scene.drag_wire_to(port_pos(w, "hidden", "input", False))
    release(w, port_pos(w, "hidden", "input", False))
    assert w.doc.graph.source_of("hidden", "input").source == ("data", "x")


def test_dropping_on_an_occupied_input_replaces_its_wire_in_one_step(xor_window):
    w = xor_window
    w.view.fit()
    hover = w.scene.nodes["loss"].port("input", False)
    press_and_hover(w, port_pos(w, "act", "output", True), hover.anchor())
    assert hover.highlight == "ok"
    release(w, hover.anchor())
    assert w.doc.graph.source_of("loss", "input").source == ("act", "output")
    assert Edge("out", "output", "loss", "input") not in w.doc.graph.edges
    w.undo()
    assert w.doc.graph.source_of("loss", "input").source == ("out", "output")
    assert w.doc.graph.edges.index(Edge("out", "output", "loss", "input")) == 3  # its old place


def test_a_loose_wire_offers_only_blocks_it_fits_and_wires_the_choice(xor_window):
    w = xor_window
    w.view.fit()
    empty = w.scene.nodes["opt"].sceneBoundingRect().bottomRight() + QPointF(150, 200)
    drag(w, port_pos(w, "out", "output", True), empty)
    shown = w.edit_actions.popup.shown_ids()
    assert "losses.MSE" in shown and "activations.ReLU" in shown
    assert "data.XOR" not in shown and "optimizers.Adam" not in shown  # nothing they fit
    registry = w.doc.graph.registry
    assert all(compatible_input(w.doc.graph, ("out", "output"), registry.get(b)) for b in shown)
    w.edit_actions.popup.edit.setText("mse")
    assert w.edit_actions.popup.shown_ids()[0] == "losses.MSE"
    w.edit_actions.popup.choose("losses.MSE")
    assert w.doc.graph.source_of("mse", "input").source == ("out", "output")
    assert w.doc.undo_stack.count() == 1  # block and wire are one step
    w.undo()
    assert "mse" not in w.doc.graph.nodes and "mse" not in w.scene.nodes


def test_a_loose_wire_from_an_input_offers_blocks_that_can_feed_it(window):
    w = window
    node = w.edit_actions.add_block("layers.Linear", QPointF(0, 0))
    w.view.centerOn(QPointF(0, 0))
    drag(w, port_pos(w, node, "input", False), QPointF(-400, 0))
    shown = w.edit_actions.popup.shown_ids()
    assert "data.XOR" in shown and "optimizers.Adam" not in shown
    w.edit_actions.popup.choose("data.XOR")
    assert w.doc.graph.source_of(node, "input").source == ("xor", "x")


def test_picking_a_wire_off_an_input_and_dropping_it_loose_disconnects(xor_window):
    w = xor_window
    w.view.fit()
    empty = w.scene.nodes["opt"].sceneBoundingRect().bottomRight() + QPointF(150, 200)
    drag(w, port_pos(w, "act", "input", False), empty)
    assert w.doc.graph.source_of("act", "input") is None
    assert Edge("hidden", "output", "act", "input") not in w.scene.wires
    w.undo()
    assert w.doc.graph.source_of("act", "input").source == ("hidden", "output")


def test_picking_a_wire_up_and_dropping_it_on_another_input_moves_it(xor_window):
    w = xor_window
    w.view.fit()
    w.doc.disconnect(Edge("out", "output", "accuracy", "input"))
    drag(w, port_pos(w, "loss", "input", False), port_pos(w, "accuracy", "input", False))
    assert w.doc.graph.source_of("loss", "input") is None
    assert w.doc.graph.source_of("accuracy", "input").source == ("out", "output")
    w.undo()
    assert w.doc.graph.source_of("loss", "input").source == ("out", "output")


def test_tab_and_double_click_open_the_block_search_at_the_cursor(window, qtbot):
    w = window
    w.view.setFocus()
    qtbot.keyClick(w.view, Qt.Key.Key_Tab)
    popup = w.edit_actions.popup
    assert popup.isVisible() and len(popup.shown_ids()) == len(w.doc.graph.registry)
    qtbot.keyClicks(popup.edit, "bcel")
    assert popup.shown_ids()[0] == "losses.BCEWithLogits"
    qtbot.keyClick(popup.edit, Qt.Key.Key_Return)
    assert [n.type for n in w.doc.graph] == ["losses.BCEWithLogits"]
    w.scene.clearSelection()
    empty = QPointF(w.view.mapFromScene(QPointF(-600, -600)))
    qtbot.mouseDClick(w.view.viewport(), Qt.MouseButton.LeftButton, pos=empty.toPoint())
    assert popup.isVisible()
