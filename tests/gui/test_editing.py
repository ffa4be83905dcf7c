"""Editing on the canvas: delete, clipboard between windows, duplicate, moves, layout,
and the inspector refusing values the block's declaration does not allow."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QPointF, Qt

from nodegraph.gui.document.files import example_files
from nodegraph.model.graph import Edge
from tests.gui.driver import drag, model_state


def test_delete_is_one_step_and_undo_restores_order_wires_and_positions(xor_window):
    w = xor_window
    g = w.doc.graph
    before, positions = model_state(g), dict(w.doc.positions())
    w.scene.select_nodes(["hidden", "loss"])
    w.scene.wires[Edge("data", "y", "accuracy", "target")].setSelected(True)
    w.edit_actions.delete_selection()
    assert "hidden" not in g.nodes and "loss" not in g.nodes
    assert Edge("data", "y", "accuracy", "target") not in g.edges
    assert "hidden" not in w.scene.nodes and len(w.scene.wires) == len(g.edges) == 2
    w.undo()
    assert model_state(g) == before  # node and wire order too: training stays reproducible
    assert dict(w.doc.positions()) == positions
    assert len(w.scene.wires) == 8 and w.scene.nodes["hidden"].pos().x() == positions["hidden"][0]
    w.redo()
    assert "hidden" not in g.nodes


def test_copy_in_one_window_and_paste_in_another(make_window, xor_file):
    first = make_window(str(xor_file))
    second = make_window()
    first.scene.select_nodes(["hidden", "act", "out"])
    assert first.edit_actions.copy()
    pasted = second.edit_actions.paste(QPointF(100, 100))
    g = second.doc.graph
    assert sorted(pasted) == ["act", "hidden", "out"]
    assert g.node("hidden").params == {"out_features": 4}
    assert {(e.src, e.dst) for e in g.edges} == {("hidden", "act"), ("act", "out")}
    assert second.doc.undo_stack.count() == 1
    assert sorted(second.scene.selected_node_ids()) == ["act", "hidden", "out"]
    again = second.edit_actions.paste()  # ids taken: fresh ones, shifted so nothing stacks
    assert sorted(again) == ["act_2", "hidden_2", "out_2"]
    assert second.doc.positions()["hidden_2"] != second.doc.positions()["hidden"]
    second.undo()
    assert sorted(g.nodes) == ["act", "hidden", "out"]


def test_a_pasted_group_brings_its_definition_and_never_takes_over_another(make_window,
                                                                             xor_file):
    """The random edit hunt's seed 1053: cards of `group.g1` pasted into a graph without
    `g1` were left without a definition, a later Ctrl+G named `g1` adopted them, and undoing
    that grouping raised ("group 'g1' is used by ...")."""
    first = make_window(str(xor_file))
    assert first.doc.group(["hidden", "act"], "g1") is not None
    instance = next(n for n in first.doc.graph.nodes if first.doc.graph.nodes[n].type
                    == "group.g1")
    first.scene.select_nodes([instance])
    assert first.edit_actions.copy()

    second = make_window(str(xor_file))
    g = second.doc.graph
    (pasted,) = second.edit_actions.paste(QPointF(100, 100))
    assert g.nodes[pasted].type == "group.g1" and "g1" in g.groups  # the definition came
    assert second.scene.nodes[pasted].known
    assert "group.g1" in second.palette.visible_ids()
    again = second.edit_actions.paste()  # the same definition: used as it is
    assert list(g.groups) == ["g1"] and g.nodes[again[0]].type == "group.g1"
    second.undo()
    second.undo()
    assert "g1" not in g.groups and "group.g1" not in second.palette.visible_ids()

    # another g1 in the target: the pasted one takes a fresh name, the graph's stays
    assert second.doc.group(["out"], "g1") is not None
    mine = g.groups["g1"]
    (other,) = second.edit_actions.paste(QPointF(300, 100))
    assert g.groups["g1"] is mine and g.nodes[other].type == "group.g_2"
    assert sorted(g.groups["g_2"].body.nodes) == ["act", "hidden"]
    second.undo()
    assert sorted(g.groups) == ["g1"]
    second.undo()  # the grouping, now with nothing else using g1
    assert not g.groups


def test_grouping_under_the_type_name_of_cards_without_a_definition_is_refused(xor_window):
    from nodegraph.gui.document.document import EditRefused
    from nodegraph.model.graph import Node

    w = xor_window
    w.doc.graph.add_node(Node("stray", "group.g1", {}), strict=False)
    with pytest.raises(EditRefused, match="group type of stray"):
        w.doc.group(["hidden"], "g1")
    assert not w.doc.graph.groups and "hidden" in w.doc.graph.nodes


def test_duplicate_and_select_all(xor_window):
    w = xor_window
    w.scene.select_nodes(["hidden"])
    assert w.edit_actions.duplicate() == ["hidden_2"]
    assert w.doc.graph.node("hidden_2").params == {"out_features": 4}
    w.edit_actions.select_all()
    assert len(w.scene.selected_node_ids()) == 8


def test_dragging_nodes_is_one_undo_step(xor_window):
    w = xor_window
    w.view.fit()
    w.scene.select_nodes(["act", "out"])
    start = w.scene.nodes["act"].sceneBoundingRect().center()
    old = {n: tuple(w.doc.positions()[n]) for n in ("act", "out")}
    drag(w, start, start + QPointF(60, 90), steps=6)
    moved = {n: tuple(w.doc.positions()[n]) for n in ("act", "out")}
    assert all(moved[n][1] > old[n][1] + 30 for n in moved)  # both moved, saved in the ui
    assert w.doc.undo_stack.count() == 1
    w.undo()
    assert {n: tuple(w.doc.positions()[n]) for n in old} == old
    assert (w.scene.nodes["act"].pos().x(), w.scene.nodes["act"].pos().y()) == old["act"]


def test_auto_layout_puts_every_wire_left_to_right_in_one_step(xor_window):
    w = xor_window
    w.doc.set_positions({n: (0, 0) for n in w.doc.graph.nodes})
    w.edit_actions.auto_layout()
    pos = w.doc.positions()
    assert all(pos[e.src][0] < pos[e.dst][0] for e in w.doc.graph.edges)
    assert w.doc.undo_stack.count() == 1
    w.undo()
    assert all(tuple(p) == (0, 0) for p in w.doc.positions().values())


def test_inspector_refuses_invalid_values_with_the_reason(xor_window, qtbot):
    w = xor_window
    w.scene.select_nodes(["opt"])
    betas = w.inspector.fields["betas"]
    betas.editor.setText("[0.9, 2]")
    betas.editor.editingFinished.emit()
    assert w.doc.graph.node("opt").params.get("betas") is None
    assert "must be" in betas.error.text() and "<= 1" in betas.error.text()
    assert not betas.error.isHidden()
    betas.editor.setText("[0.8, 0.99]")
    betas.editor.editingFinished.emit()
    assert w.doc.graph.node("opt").params["betas"] == [0.8, 0.99] and betas.error.isHidden()
    w.inspector.fields["decay"].editor.setCurrentIndex(1)
    w.inspector.fields["decay"].editor.activated.emit(1)
    assert w.doc.graph.node("opt").params["decay"] == "weights_only"
    w.inspector.fields["betas"].reset.click()  # back to the default
    assert "betas" not in w.doc.graph.node("opt").params
    assert w.inspector.fields["lr"].editor.toolTip().startswith("<b>lr</b>")
    edit = w.inspector.id_edit
    edit.selectAll()
    qtbot.keyClicks(edit, "2bad")
    qtbot.keyClick(edit, Qt.Key.Key_Return)
    assert "opt" in w.doc.graph.nodes and "not a valid id" in w.inspector.id_error.text()


def test_inspector_edits_training_settings_when_nothing_is_selected(xor_window):
    w = xor_window
    w.scene.clearSelection()
    w.inspector.fields["epochs"].editor.setValue(42)
    assert w.doc.graph.training["epochs"] == 42 and w.epochs.value() == 42
    w.undo()
    assert "epochs" not in w.doc.graph.training and w.epochs.value() == 10  # the default
    assert w.inspector.fields["epochs"].editor.value() == 10


def test_zoom_and_fit(xor_window):
    w = xor_window
    w.view.set_zoom(0.2)
    w.actions_by_name["zoom_in"].trigger()
    assert abs(w.view.zoom - 0.25) < 1e-6
    w.view.set_zoom(50)
    assert w.view.zoom == 3.0
    w.actions_by_name["fit"].trigger()
    visible = w.view.mapToScene(w.view.viewport().rect()).boundingRect()
    assert all(visible.contains(i.sceneBoundingRect()) for i in w.scene.nodes.values())
    assert w.actions_by_name["fit"].shortcut().toString() == "Home"
    assert w.actions_by_name["frame"].shortcut().toString() == "F"  # frame selected
    assert "Ctrl+L" in w.actions_by_name["layout"].shortcut().toString()


def test_keyboard_shortcuts_delete_undo_redo_and_duplicate(xor_window, qtbot):
    w = xor_window
    w.activateWindow()
    w.view.setFocus()
    qtbot.waitUntil(lambda: w.view.hasFocus(), timeout=30_000)
    w.scene.select_nodes(["act"])
    qtbot.keyClick(w.view, Qt.Key.Key_Delete)
    assert "act" not in w.doc.graph.nodes
    qtbot.keyClick(w.view, Qt.Key.Key_Z, Qt.KeyboardModifier.ControlModifier)
    assert "act" in w.doc.graph.nodes
    qtbot.keyClick(w.view, Qt.Key.Key_Z,
                   Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier)
    assert "act" not in w.doc.graph.nodes
    w.undo()
    w.scene.select_nodes(["act"])
    qtbot.keyClick(w.view, Qt.Key.Key_D, Qt.KeyboardModifier.ControlModifier)
    assert "act_2" in w.doc.graph.nodes
    edit_menu = w.menuBar().actions()[1].menu()
    menu_text = {a.text(): a.shortcut().toString() for a in edit_menu.actions()}
    assert menu_text["&Delete"] == "Del" and menu_text["D&uplicate"] == "Ctrl+D"


def test_a_graph_with_groups_opens_offers_its_groups_and_previews(make_window):
    path = next((p for p in example_files() if '"group.' in p.read_text()), None)
    if path is None:
        pytest.skip("no example with groups in this checkout")
    w = make_window(str(path))
    groups = [n for n in w.doc.graph.nodes.values() if n.type.startswith("group.")]
    assert groups and all(w.scene.nodes[n.id].known for n in groups)
    assert any(b.startswith("group.") for b in w.palette.visible_ids())
    assert w.validator.wait(60) and w.validator.report.ok
    w.scene.select_nodes([groups[0].id])  # a group instance previews through its insides
    assert w.preview.shape.text().startswith("shape (")
