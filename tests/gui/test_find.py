"""Find (Ctrl+F): a node by id, block type, param value or group name — in a 1,000-node
chain and inside a group — listed with its group path; Enter opens the group's tab, selects
and frames the node; the block search (Tab) reaches the same panel."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication

from nodegraph.model.fileformat import save
from nodegraph.model.find import find
from nodegraph.model.graph import Graph

CTRL = Qt.KeyboardModifier.ControlModifier


def chain(n: int) -> Graph:
    g = Graph("chain")
    g.add("data.XOR", "data")
    prev = ("data", "x")
    for i in range(n):
        g.add("layers.Linear", f"fc{i}", out_features=4)
        g.connect(prev, (f"fc{i}", "input"))
        prev = (f"fc{i}", "output")
    return g


def test_find_ranks_the_id_first_and_matches_types_params_and_groups(xor_window):
    g = xor_window.doc.graph
    hits, total = find(g, "out")
    assert hits[0].node == "out" and hits[0].why == "id"
    assert [h.node for h in find(g, "Tanh")[0]] == ["act"]
    assert [(h.node, h.detail) for h in find(g, "0.05")[0]] == [("opt", "lr=0.05")]
    assert find(g, "  ")[0] == [] and find(g, "no-such-thing") == ([], 0)
    xor_window.scene.select_nodes(["hidden", "act"])
    xor_window.actions_by_name["group"].trigger()  # the group is named "block"
    hits = find(g, "act")[0]
    assert [(h.path, h.node, h.where) for h in hits] == [(("block",), "act",
                                                          "block › act")]
    assert [h.node for h in find(g, "block")[0]] == ["block"]


def test_ctrl_f_finds_fc250_in_a_1000_node_chain_and_frames_it(make_window, tmp_path, qtbot):
    path = tmp_path / "chain.json"
    save(chain(1000), path)
    w = make_window(str(path))
    w.activateWindow()
    qtbot.waitUntil(lambda: QApplication.focusWidget() is w.view, timeout=10000)
    qtbot.keyClick(w.view, Qt.Key.Key_F, CTRL)
    assert w.finder.isVisible()
    qtbot.keyClicks(w.finder.edit, "fc250")
    assert w.finder.hits[0].node == "fc250"
    assert w.finder.list.count() == 1  # fc250 and nothing else ("fc2500" does not exist)
    qtbot.keyClick(w.finder.edit, Qt.Key.Key_Return)
    assert w.scene.selected_node_ids() == ["fc250"]
    shown = w.view.mapToScene(w.view.viewport().rect()).boundingRect()
    assert shown.contains(w.scene.nodes["fc250"].sceneBoundingRect())
    assert not w.finder.isVisible() and QApplication.focusWidget() is w.view


def test_enter_opens_the_group_tab_and_frames_the_inner_node(xor_window, qtbot):
    w = xor_window
    w.scene.select_nodes(["hidden", "act"])
    w.actions_by_name["group"].trigger()
    w.finder.open()
    qtbot.keyClicks(w.finder.edit, "act")
    assert "block › act" in w.finder.list.item(0).text()
    qtbot.keyClick(w.finder.edit, Qt.Key.Key_Return)
    canvas = w.group_tabs.current_canvas()
    assert canvas is not None and canvas.name == "block"
    assert canvas.scene.selected_node_ids() == ["act"]
    shown = canvas.view.mapToScene(canvas.view.viewport().rect()).boundingRect()
    assert shown.contains(canvas.scene.nodes["act"].sceneBoundingRect().center())


def test_the_block_search_reaches_find(xor_window, qtbot):
    w = xor_window
    popup = w.edit_actions.popup
    w.edit_actions.offer_any_block(w.view.mapToScene(w.view.viewport().rect().center()))
    qtbot.keyClicks(popup.edit, "hidden")
    last = popup.list.item(popup.list.count() - 1)
    assert "Find “hidden”" in last.text()
    popup.list.setCurrentItem(last)
    qtbot.keyClick(popup.edit, Qt.Key.Key_Return)
    assert w.finder.isVisible() and w.finder.edit.text() == "hidden"
    assert w.finder.hits[0].node == "hidden"


def test_conv2_lists_the_nodes_named_so_not_every_conv2d():
    g = Graph("convs")
    for name in ("conv1", "conv2", "layer1_0_conv1", "layer1_0_conv2", "downsample"):
        g.add("layers.Conv2d", name, out_channels=4, kernel_size=3)
    hits = [(h.node, h.why) for h in find(g, "conv2")[0]]
    assert hits == [("conv2", "id"), ("layer1_0_conv2", "id_part")]
    assert {h.node for h in find(g, "Conv2d")[0]} == set(g.nodes)  # by type: every one
