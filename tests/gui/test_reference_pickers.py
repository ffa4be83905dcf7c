"""The inspector offers the graph's nodes for params declared as node references, and a
rename in the editor carries every reference along (undo takes it back)."""

from __future__ import annotations

from pathlib import Path

from nodegraph.gui.panels import param_widgets as pw

LOTTERY = str(Path(__file__).resolve().parents[2] / "examples" / "lottery_ticket.json")
HOPFIELD = str(Path(__file__).resolve().parents[2] / "examples" / "hopfield_2d.json")


def test_node_params_pick_from_the_graph_and_follow_a_rename(make_window):
    w = make_window(LOTTERY)
    w.scene.select_nodes(["lottery"])
    model = w.inspector.fields["model"].editor
    assert isinstance(model, pw.NodeEditor)
    items = [model.itemText(i) for i in range(model.count())]
    assert items == ["loss", "mlp"]  # op or group nodes: not data, optimizer, metric
    metric = w.inspector.fields["metric"].editor
    assert [metric.itemText(i) for i in range(metric.count())] == ["", "accuracy"]
    metric.setCurrentIndex(1)
    metric.activated.emit(1)
    assert w.doc.graph.node("lottery").params["metric"] == "accuracy"

    w.scene.select_nodes(["opt"])
    scope = w.inspector.fields["scope"].editor
    assert isinstance(scope, pw.NodesEditor) and scope.choices() == ["loss", "mlp"]
    scope.toggle("mlp", True)
    assert w.doc.graph.node("opt").params["scope"] == ["mlp"]
    assert scope.text.text() == '["mlp"]'

    w.doc.rename("mlp", "net")
    g = w.doc.graph
    assert g.node("lottery").params["model"] == "net" and g.node("opt").params["scope"] == ["net"]
    assert scope.text.text() == '["net"]'  # the shown node's field follows
    w.undo()
    assert g.node("lottery").params["model"] == "mlp" and g.node("opt").params["scope"] == ["mlp"]


def test_the_editor_keeps_its_own_op_cache(make_window):
    # the Hopfield block declares no shape rule, so its shapes go through the op cache
    w = make_window(HOPFIELD)
    w.validator.validate_now()
    assert len(w.validator.cache) > 0  # the document's shapes, not a module-level table
    other = make_window(HOPFIELD)
    assert other.validator.cache is not w.validator.cache
