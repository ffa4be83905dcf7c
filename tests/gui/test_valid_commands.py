"""Every command leaves a valid graph or changes nothing, and undo gives back the file byte for
byte: driven by real key and mouse events."""

from __future__ import annotations

import json

from PySide6.QtCore import QPointF, Qt
from PySide6.QtWidgets import QApplication

from nodegraph.model import fileformat
from tests.gui.driver import click_node, drag

CTRL = Qt.KeyboardModifier.ControlModifier


def _start(w, qtbot) -> None:
    w.activateWindow()
    qtbot.waitUntil(lambda: QApplication.focusWidget() is w.view, timeout=10000)


def _file(w) -> str:
    return fileformat.dumps(w.doc.graph)


def test_grouping_cards_with_a_path_between_them_is_refused_naming_it(xor_window, qtbot):
    w = xor_window
    _start(w, qtbot)
    before, report = _file(w), w.validator.validate_now()
    click_node(w, "hidden")
    click_node(w, "out", CTRL)  # `act` runs between them: one instance would feed itself
    assert sorted(w.scene.selected_node_ids()) == ["hidden", "out"]
    w.view.setFocus()
    qtbot.keyClick(w.view, Qt.Key.Key_G, CTRL)
    message = w.statusBar().currentMessage()
    assert "loop" in message and "hidden → act → out" in message, message
    assert _file(w) == before and w.doc.undo_stack.count() == 0
    assert not any(a[0] == "group_name" for a in w.prompts.asked)  # refused before asking
    assert w.validator.validate_now().problems == report.problems


def test_the_model_refuses_a_looping_group_before_changing_anything(registry):
    from nodegraph.model import groups
    from nodegraph.model.errors import GraphError
    from tests.gui.driver import xor_graph

    g = xor_graph()
    before = fileformat.dumps(g)
    try:
        groups.make_group(g, ["hidden", "out"], "blk")
    except GraphError as e:
        assert "hidden → act → out" in str(e)
    else:
        raise AssertionError("a looping group was made")
    assert fileformat.dumps(g) == before
    assert groups.group_loop(g, ["hidden", "act", "out"]) == []


def test_a_move_and_its_undo_keep_the_files_integers_and_key_order(make_window, tmp_path,
                                                                   qtbot):
    source = (tmp_path / "xor.json")
    from tests.gui.driver import xor_graph

    g = xor_graph("xor")
    g.set_ui("zoom", 1)  # a key after positions: order must hold
    g.set_positions({n: (286 + 300 * i, 10) for i, n in enumerate(g.nodes)})
    doc = fileformat.to_document(g)
    doc["ui"]["positions"] = {n: [int(x), int(y)] for n, (x, y) in
                              reversed(list(doc["ui"]["positions"].items()))}
    source.write_text(json.dumps(doc, indent=1))
    w = make_window(str(source))
    _start(w, qtbot)
    original = _file(w)
    assert "[586, 10]" in original  # hidden's, as the file has it
    item = w.scene.nodes["hidden"]
    start = item.mapToScene(item.boundingRect().center().x(), 12)
    drag(w, start, start + QPointF(40, 30))
    assert _file(w) != original
    click_node(w, "act")
    assert w.scene.selected_node_ids() == ["act"]
    w.view.setFocus()
    qtbot.keyClick(w.view, Qt.Key.Key_Delete)
    assert "act" not in w.doc.graph.nodes
    qtbot.keyClick(w.view, Qt.Key.Key_Z, CTRL)
    qtbot.keyClick(w.view, Qt.Key.Key_Z, CTRL)
    assert w.doc.undo_stack.index() == 0
    assert _file(w) == original  # not [486.0, 10.0], and `act` back in its place
