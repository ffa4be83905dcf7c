"""Small things a new user met: a block added off-screen is scrolled into view, the empty
metrics plot says how to fill it, long ids keep their ends."""

from __future__ import annotations

from PySide6.QtCore import QPointF


def _shown(w):
    return w.view.mapToScene(w.view.viewport().rect()).boundingRect()


def test_a_block_added_off_screen_is_brought_into_view(xor_window):
    w = xor_window
    w.view.set_zoom(1.0)
    far = _shown(w).center() + QPointF(5000, 3000)
    node = w.edit_actions.add_block("activations.ReLU", far)
    assert _shown(w).contains(w.scene.nodes[node].sceneBoundingRect())
    # a pasted copy lands in view as well (where the view is now)
    w.scene.select_nodes([node])
    w.edit_actions.copy()
    w.view.pan_by(-4000, -4000)
    pasted = w.edit_actions.paste()
    assert all(_shown(w).contains(w.scene.nodes[n].sceneBoundingRect()) for n in pasted)


def test_the_metrics_plot_says_to_connect_a_metric_block(xor_window, window, qtbot):
    # the XOR graph has an accuracy block: no hint once it is checked
    xor_window.validator.validate_now()
    qtbot.waitUntil(lambda: not xor_window.plots.metric_hint.isVisible(), timeout=10000)
    window.edit_actions.add_block("layers.Linear", QPointF(0, 0))
    window.validator.validate_now()
    assert window.plots.metric_hint.isVisible()
    assert window.plots.metric_hint.toPlainText() == "connect a metric block to see metrics here"
    xor_window.doc.delete(["accuracy"])
    xor_window.validator.validate_now()
    qtbot.waitUntil(lambda: xor_window.plots.metric_hint.isVisible(), timeout=10000)


def test_long_ids_are_elided_in_the_middle(make_window, tmp_path, qtbot):
    from nodegraph.model.fileformat import save
    from nodegraph.model.graph import Graph

    g = Graph("imported")
    for tail in ("conv1", "conv2"):
        g.add("activations.ReLU", f"layer1_0_residual_branch_block_{tail}")
    save(g, tmp_path / "g.json")
    w = make_window(str(tmp_path / "g.json"))
    w.view.set_zoom(1.0)
    grabbed = w.view.viewport().grab()  # paints every card: the titles they drew
    assert not grabbed.isNull()
    for node, item in w.scene.nodes.items():
        title = item.shown_title
        assert title != node and "…" in title  # too long for the card
        assert title.startswith("layer1") and title.endswith(node[-5:])  # both ends kept


def test_the_canvas_gets_three_quarters_and_panels_fold_with_one_key(window, qtbot):
    from PySide6.QtCore import Qt
    from PySide6.QtWidgets import QApplication

    w = window
    w.resize(1600, 1000)
    qtbot.waitUntil(lambda: w.width() == 1600 and w.height() == 1000, timeout=5000)
    QApplication.processEvents()
    canvas = w.group_tabs
    assert canvas.width() * canvas.height() >= 0.75 * 1600 * 1000
    edges = w.panel_edges
    assert not edges.is_folded("left") and edges.is_folded("right")
    assert edges.is_folded("bottom")
    w.activateWindow()
    w.view.setFocus()
    qtbot.waitUntil(lambda: QApplication.focusWidget() is w.view, timeout=5000)
    qtbot.keyClick(w.view, Qt.Key.Key_T)
    assert edges.is_folded("left") and w.docks["palette"].isHidden()
    qtbot.keyClick(w.view, Qt.Key.Key_T)
    assert not w.docks["palette"].isHidden()
    qtbot.keyClick(w.view, Qt.Key.Key_N)
    assert not w.docks["inspector"].isHidden()
    qtbot.keyClick(w.view, Qt.Key.Key_J, Qt.KeyboardModifier.ControlModifier)
    assert not edges.is_folded("bottom")
    qtbot.keyClick(w.view, Qt.Key.Key_J, Qt.KeyboardModifier.ControlModifier)
    assert edges.is_folded("bottom")
    edges.buttons["bottom"].click()  # the button at the window's foot does the same
    assert not edges.is_folded("bottom")


def test_the_minimap_takes_a_corner_that_covers_no_card(xor_window, qtbot):
    w = xor_window
    w.view.set_zoom(2.5)  # the graph no longer fits: the map appears
    w.view.centerOn(w.scene.nodes["out"].sceneBoundingRect().center())
    w.view.minimap.refresh()
    mm = w.view.minimap
    assert mm.isVisible()
    free = [c for c in range(4)]  # at least one corner is free in this small graph
    assert free
    geo = mm.geometry().translated(-w.view.viewport().pos())
    shown = w.view.mapToScene(geo).boundingRect()
    assert not any(shown.intersects(i.sceneBoundingRect()) for i in w.scene.nodes.values())


def test_problems_say_checking_while_validation_runs(window, xor_file, qtbot):
    from nodegraph.model.errors import Problem

    w = window
    w.problems.set_problems([Problem("gone", None, "shape_mismatch", "an old file's error")])
    w.file_actions.open(str(xor_file))
    # the other file's rows go at once, and the panel says a check is under way
    assert w.problems.problems == [] and "checking" in w.problems.summary.text()
    assert not w.problems.table.isEnabled()
    assert w.validator.wait(120)
    assert "checking" not in w.problems.summary.text() and w.problems.table.isEnabled()
