"""Validation in the editor: a shape error is painted on the right node, port and wire,
listed in the problems panel, and goes away when fixed (validation runs as you edit)."""

from __future__ import annotations

from nodegraph.model.fileformat import save
from nodegraph.model.graph import Edge
from tests.gui.driver import xor_graph


def test_a_shape_error_is_painted_on_the_node_that_has_it(make_window, tmp_path):
    g = xor_graph("broken")
    g.set_param("out", "in_features", 3)  # but 'act' gives (N, 4)
    path = tmp_path / "broken.json"
    save(g, path)
    w = make_window(str(path))
    assert w.validator.wait(60)

    out = w.scene.nodes["out"]
    assert out.has_error and out.port("input", False).error
    assert [n for n, item in w.scene.nodes.items() if item.has_error] == ["out"]
    tip = out.toolTip()
    assert "expects (N, 3) but receives (N, 4)" in tip and "hint:" in tip
    wire = w.scene.wires[Edge("act", "output", "out", "input")]
    assert wire.has_error and "expects (N, 3)" in wire.toolTip()
    assert w.scene.wires[Edge("data", "x", "hidden", "input")].label == "(N, 2)"
    assert w.scene.nodes["hidden"].badge == "12"  # 2*4 weights + 4 biases

    (row,) = [p for p in w.problems.problems if p.node == "out"]
    assert row.port == "input" and row.kind == "shape_mismatch"
    w.problems.table.itemClicked.emit(w.problems.table.topLevelItem(0), 0)
    assert w.scene.selected_node_ids() == ["out"]

    w.inspector.fields["in_features"].editor.setText("")  # empty: inferred from the wire
    w.inspector.fields["in_features"].editor.editingFinished.emit()
    assert w.doc.graph.node("out").params.get("in_features") is None
    assert w.validator.wait(60)
    assert not out.has_error and not wire.has_error
    assert "No problems" in w.problems.summary.text()


def test_validation_is_debounced_and_stale_results_are_dropped(xor_window):
    w = xor_window
    assert w.validator.wait(60)
    w.doc.set_param("hidden", "out_features", 8)
    w.doc.set_param("hidden", "out_features", 16)
    assert not w.validator.fresh  # the timer has not fired yet
    assert w.validator.wait(60)
    assert w.scene.wires[Edge("hidden", "output", "act", "input")].label == "(N, 16)"
    assert w.validator.report.param_counts["out"] == 17
