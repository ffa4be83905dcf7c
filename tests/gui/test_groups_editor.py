"""Groups in the editor: group a selection (one undo step), open an instance's body in a
tab by double-click, edit it there (undoable, revalidated, saved in the groups section),
and go back to the graph."""

from __future__ import annotations

import json

from PySide6.QtCore import Qt
from PySide6.QtGui import QMouseEvent

from nodegraph.model import fileformat
from nodegraph.model.graph import Tie
from nodegraph.runtime.train import train
from tests.gui.driver import model_state, mouse


def _group_hidden_layer(w) -> str:
    w.scene.select_nodes(["hidden", "act"])
    w.actions_by_name["group"].trigger()
    return w.scene.selected_node_ids()[0]


def test_grouping_is_one_step_trains_alike_and_undoes_exactly(xor_window):
    w = xor_window
    before, positions = model_state(w.doc.graph), dict(w.doc.positions())
    instance = _group_hidden_layer(w)
    g = w.doc.graph
    assert instance == "block" and g.node("block").type == "group.block"
    assert sorted(g.groups["block"].body.nodes) == ["act", "hidden"]
    assert "hidden" not in w.scene.nodes and "block" in w.scene.nodes
    assert ("group_name", "block") in w.prompts.asked
    assert any(s.id == "group.block" for s in w.palette.registry)
    report = w.validator.validate_now()
    assert report.ok and report.param_counts["block"] == 12  # Linear(2 -> 4)
    grouped = train(g.copy(), epochs=5).history[-1]["train"]["loss"]
    w.undo()
    assert model_state(g) == before and dict(w.doc.positions()) == positions
    # the grouped graph computed what the flat one does: same weights, same losses
    assert train(g.copy(), epochs=5).history[-1]["train"]["loss"] == grouped
    assert "block" not in g.groups and "hidden" in w.scene.nodes
    w.redo()
    assert g.node("block").type == "group.block" and "hidden" not in w.scene.nodes


def test_open_edit_undo_save_and_go_back(xor_window, tmp_path):
    w = xor_window
    _group_hidden_layer(w)
    card = w.scene.nodes["block"]
    mouse(w, QMouseEvent.Type.MouseButtonDblClick, card.sceneBoundingRect().center())
    canvas = w.group_tabs.current_canvas()
    assert canvas is not None and canvas.name == "block"
    assert w.group_tabs.tabText(1) == "xor.json › block"
    assert sorted(canvas.scene.nodes) == ["act", "hidden"]
    assert w.inspector.doc is canvas.doc
    revision = w.doc.revision
    canvas.scene.select_nodes(["hidden"])
    assert w.inspector.node_id == "hidden"  # the body node's params are in the inspector
    w.inspector.fields["out_features"].editor.setValue(6)
    assert w.doc.graph.groups["block"].body.node("hidden").params["out_features"] == 6
    assert w.doc.revision > revision and w.doc.dirty
    w.validator.wait(60)
    assert w.validator.report.param_counts["block"] == 18  # Linear(2 -> 6): 12 + 6
    assert w.validator.report.param_counts["out"] == 7  # Linear(6 -> 1)
    wire = next(wire for e, wire in canvas.scene.wires.items() if e.src == "hidden")
    assert wire.label == "(N, 6)"  # the body's wires show the instance's shapes
    canvas.edit_actions.add_comment(text="six hidden units")
    w.undo()
    w.undo()
    assert w.doc.graph.groups["block"].body.node("hidden").params["out_features"] == 4
    w.redo()
    w.redo()
    w.prompts.save_to = str(tmp_path / "grouped.json")
    w.file_actions.save_as()
    saved = json.loads((tmp_path / "grouped.json").read_text())
    body = saved["groups"]["block"]
    assert body["nodes"]["hidden"]["params"] == {"out_features": 6}
    assert set(body["ui"]["positions"]) == {"hidden", "act"}
    assert body["ui"]["comments"][0]["text"] == "six hidden units"
    again = fileformat.load(tmp_path / "grouped.json")
    assert again.groups["block"].body.node("hidden").params == {"out_features": 6}
    w.actions_by_name["back"].trigger()
    assert w.group_tabs.count() == 1 and w.group_tabs.current_canvas() is None
    assert w.inspector.doc is w.doc


def test_body_keeps_port_nodes_and_ports_follow_a_rename(xor_window):
    w = xor_window
    _group_hidden_layer(w)
    w.scene.select_nodes(["block"])
    canvas = w.group_tabs.open_selected()
    canvas.scene.select_nodes(["hidden"])
    canvas.edit_actions.delete_selection()  # "hidden" is the group's input: kept
    assert "hidden" in canvas.doc.graph.nodes
    assert canvas.doc.rename("hidden", "dense")
    defn = w.doc.graph.groups["block"]
    assert [n for n, _ in defn.inputs["input"]] == ["dense"]
    assert w.validator.validate_now().ok
    w.undo()
    assert [n for n, _ in defn.inputs["input"]] == ["hidden"]


def test_undoing_the_grouping_closes_its_tab(xor_window):
    w = xor_window
    _group_hidden_layer(w)
    w.scene.select_nodes(["block"])
    w.actions_by_name["open_group"].trigger()
    assert w.group_tabs.count() == 2
    w.group_tabs.setCurrentIndex(0)
    w.undo()
    assert w.group_tabs.count() == 1 and "hidden" in w.doc.graph.nodes


def test_a_shape_error_inside_is_painted_in_the_body_and_on_the_instance(xor_window):
    w = xor_window
    _group_hidden_layer(w)
    w.scene.select_nodes(["block"])
    canvas = w.group_tabs.open_selected()
    canvas.doc.set_param("hidden", "in_features", 3)  # the data has 2 features
    assert w.validator.wait(60)
    assert canvas.scene.nodes["hidden"].has_error and not canvas.scene.nodes["act"].has_error
    assert w.scene.nodes["block"].has_error
    assert "inside, at 'hidden'" in w.scene.nodes["block"].problems[0].message
    w.undo()
    assert w.validator.wait(60)
    assert not canvas.scene.nodes["hidden"].has_error and not w.scene.nodes["block"].has_error


def test_training_settings_shown_in_a_body_are_the_graphs(xor_window):
    w = xor_window
    w.doc.set_training("epochs", 300)
    _group_hidden_layer(w)
    w.scene.select_nodes(["block"])
    canvas = w.group_tabs.open_selected()
    canvas.scene.select_nodes([])
    assert w.inspector.fields["epochs"].editor.value() == 300  # the graph's, not a default
    w.inspector.fields["epochs"].editor.setValue(12)
    assert w.doc.graph.training["epochs"] == 12 and w.epochs.value() == 12
    assert fileformat.to_document(w.doc.graph)["groups"]["block"].get("training") is None


def test_grouping_takes_ties_along_and_undo_puts_them_back(xor_window):
    w = xor_window
    g = w.doc.graph
    g.add_tie(Tie("hidden", "bias", "out", "bias"))  # one end in the selection
    _group_hidden_layer(w)
    assert g.ties == (Tie("block__hidden", "bias", "out", "bias"),)
    w.undo()
    assert g.ties == (Tie("hidden", "bias", "out", "bias"),)
    w.redo()
    assert g.ties == (Tie("block__hidden", "bias", "out", "bias"),)


def test_deleting_a_tied_node_takes_its_tie_and_undo_brings_it_back(xor_window):
    w = xor_window
    g = w.doc.graph
    g.add_tie(Tie("hidden", "bias", "out", "bias"))
    w.scene.select_nodes(["out"])
    w.edit_actions.delete_selection()
    assert "out" not in g.nodes and g.ties == ()
    w.undo()
    assert "out" in g.nodes and g.ties == (Tie("hidden", "bias", "out", "bias"),)


def test_a_groups_tab_shows_its_input_and_output_ports(xor_window):
    w = xor_window
    _group_hidden_layer(w)
    card = w.scene.nodes["block"]
    mouse(w, QMouseEvent.Type.MouseButtonDblClick, card.sceneBoundingRect().center())
    canvas = w.group_tabs.current_canvas()
    defn = w.doc.graph.groups["block"]
    (name_in,), (name_out,) = list(defn.inputs), list(defn.outputs)
    assert sorted(canvas.ports.lines()) == sorted([f"▶ {name_in}", f"{name_out} ▶"])
    tag = next(t for t in canvas.ports.tags if not t.output)
    inner, port = defn.inputs[name_in][0]
    assert tag.parentItem() is canvas.scene.nodes[inner]  # carried by the card
    anchor = canvas.scene.nodes[inner].port(port, False).anchor()
    assert tag.sceneBoundingRect().right() < anchor.x()  # beside the port, not on it
    header = canvas.ports.header.text()
    assert name_in in header and f"{inner}.{port}" in header and name_out in header
    assert canvas.ports.header.isVisible()
    canvas.doc.rename(inner, "dense")  # the marks follow a rename
    assert "dense" in canvas.ports.header.text()
    assert canvas.ports.tags[0].parentItem() is canvas.scene.nodes["dense"]


def test_the_inspector_in_a_groups_tab_shows_the_shapes_its_wires_show(xor_window, qtbot):
    w = xor_window
    w.validator.validate_now()
    _group_hidden_layer(w)
    w.validator.validate_now()
    card = w.scene.nodes["block"]
    mouse(w, QMouseEvent.Type.MouseButtonDblClick, card.sceneBoundingRect().center())
    canvas = w.group_tabs.current_canvas()
    for inner, wanted in (("hidden", ["(N, 2)", "(N, 4)"]), ("act", ["(N, 4)"])):
        item = canvas.scene.nodes[inner]
        at = item.mapToScene(item.boundingRect().center().x(), 12)
        view = canvas.view
        local = view.mapFromScene(at)
        qtbot.mouseClick(view.viewport(), Qt.MouseButton.LeftButton, pos=local)
        assert canvas.scene.selected_node_ids() == [inner]
        text = w.inspector.ports_label.text()
        assert "?" not in text and all(s in text for s in wanted), text
