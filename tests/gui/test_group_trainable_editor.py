"""`trainable` on a group instance in the editor: the inspector's check box of a selected
instance freezes it (the validator then counts none of its weights as trainable), and undo
brings it back — fine-tuning an imported model without writing code (issue #34)."""

from __future__ import annotations

import nodegraph
from nodegraph.model.graph import Graph
from nodegraph.model.groups import make_group
from tests.gui.driver import click_node


def _grouped(tmp_path) -> str:
    g = Graph("frozen-body")
    g.add("data.Blobs", id="data", n=64, centers=3)
    g.add("layers.Linear", id="fc", out_features=8)
    g.add("activations.Tanh", id="act")
    g.add("layers.Linear", id="head", out_features=3)
    g.add("losses.CrossEntropy", id="loss")
    g.add("optimizers.Adam", id="opt")
    for src, dst in [("data.x", "fc.input"), ("fc.output", "act.input"),
                     ("act.output", "head.input"), ("head.output", "loss.input"),
                     ("data.y", "loss.target"), ("loss.loss", "opt.loss")]:
        g.connect(tuple(src.split(".")), tuple(dst.split(".")))
    make_group(g, ["fc", "act"], "Body", instance="body")
    path = tmp_path / "grouped.json"
    nodegraph.save(g, path)
    return str(path)


def test_unticking_trainable_freezes_the_instance_and_undo_restores_it(make_window, qtbot,
                                                                        tmp_path):
    w = make_window(_grouped(tmp_path))
    qtbot.waitUntil(lambda: "body" in w.scene.nodes, timeout=30_000)
    assert w.validator.wait(60)
    assert w.validator.report.param_counts["body"] == 2 * 8 + 8
    click_node(w, "body")
    qtbot.waitUntil(lambda: "trainable" in w.inspector.fields, timeout=10_000)
    box = w.inspector.fields["trainable"].editor
    assert box.isChecked()  # the default: trained
    box.click()  # as a click on the box does (toggled -> the undoable param command)
    assert w.doc.graph.node("body").params["trainable"] is False
    assert w.validator.wait(60)
    assert w.validator.report.param_counts["body"] == 0
    w.undo()
    assert w.doc.graph.node("body").params.get("trainable", True) is True
    qtbot.waitUntil(lambda: w.inspector.fields["trainable"].editor.isChecked(), timeout=10_000)
