"""A group's tab shows the shapes of a group instance inside it (issue #36: the inspector
said `in: input ?` / `out: output ?` in a group's tab). The body's view of the report had
no shape for the ports of an instance nested in it (the flat graph knows them only under
the nested instance's inner nodes), so its card's ports read `?` and its wires went
unlabelled; and a port fed by a group input of a nested body showed no shape."""

from __future__ import annotations

from PySide6.QtCore import Qt

from tests.gui.test_shortcuts_always import CTRL, K, _start, press


def _group(qtbot, w, nodes: list[str], name: str) -> None:
    """Select `nodes` and press Ctrl+G, naming the group `name`."""
    w.prompts.group = name
    w.scene.select_nodes(nodes)
    w.view.setFocus()
    press(qtbot, w, K.Key_G, CTRL)
    assert name in w.doc.graph.groups


def _double_click(qtbot, view, item) -> None:
    at = view.mapFromScene(item.sceneBoundingRect().center())
    qtbot.mouseDClick(view.viewport(), Qt.MouseButton.LeftButton, pos=at)


def _pick(qtbot, w, canvas, node: str) -> str:
    """Click `node`'s title in the tab; the inspector's port line."""
    item = canvas.scene.nodes[node]
    canvas.view.centerOn(item)
    at = canvas.view.mapFromScene(item.mapToScene(item.boundingRect().center().x(), 12))
    qtbot.mouseClick(canvas.view.viewport(), Qt.MouseButton.LeftButton, pos=at)
    assert canvas.scene.selected_node_ids() == [node]
    return w.inspector.ports_label.text()


def test_a_nested_instance_shows_its_shapes_in_the_inspector_and_on_its_wires(
        xor_window, qtbot, tmp_path):
    w = xor_window
    _start(w, qtbot)
    _group(qtbot, w, ["hidden", "act"], "layer")  # Linear(2 -> 4) and its activation
    _group(qtbot, w, ["layer", "out"], "model")  # that group, and Linear(4 -> 1)
    report = w.validator.validate_now()
    assert report.ok
    _double_click(qtbot, w.view, w.scene.nodes["model"])
    outer = w.group_tabs.current_canvas()
    assert outer.name == "model" and sorted(outer.scene.nodes) == ["layer", "out"]
    wire = next(wi for e, wi in outer.scene.wires.items() if e.src == "layer")
    assert wire.label == "(N, 4)"  # the nested instance's wire is labelled
    ports = _pick(qtbot, w, outer, "layer")
    assert "?" not in ports and "out: output (N, 4)" in ports, ports
    assert "← group input input (N, 2)" in ports, ports
    ports = _pick(qtbot, w, outer, "out")
    assert ports.startswith("in: input (N, 4)") and "out: output (N, 1)" in ports, ports
    w.grab().save(str(tmp_path / "model_tab.png"))

    _double_click(qtbot, outer.view, outer.scene.nodes["layer"])  # the body within the body
    inner = w.group_tabs.current_canvas()
    assert inner.name == "layer" and inner.prefix == "model__layer__"
    ports = _pick(qtbot, w, inner, "hidden")
    assert ports.startswith("in: input ← group input input (N, 2)"), ports
    assert "out: output (N, 4)" in ports and "?" not in ports, ports
    w.grab().save(str(tmp_path / "layer_tab.png"))


def test_opening_another_instance_of_an_open_body_shows_that_instances_shapes(xor_window,
                                                                            qtbot):
    """One tab a body: double-clicking a second instance reused the tab of the first and
    kept showing the first one's shapes."""
    w = xor_window
    _start(w, qtbot)
    _group(qtbot, w, ["act"], "squash")  # Tanh on hidden's (N, 4)
    second = w.doc.add_block("group.squash", (0, 300), connect_from=("data", "x"),
                             port="input")  # the same body on (N, 2)
    assert second == "squash_2"
    assert w.validator.validate_now().ok
    _double_click(qtbot, w.view, w.scene.nodes["squash"])
    body = w.group_tabs.current_canvas()
    assert _pick(qtbot, w, body, "act").endswith("out: output (N, 4)")
    w.group_tabs.setCurrentIndex(0)
    _double_click(qtbot, w.view, w.scene.nodes["squash_2"])
    assert w.group_tabs.current_canvas() is body and body.prefix == "squash_2__"
    ports = _pick(qtbot, w, body, "act")
    assert ports.endswith("out: output (N, 2)"), ports


def test_the_inspector_calls_a_loss_scalar_as_its_wire_does(xor_window, qtbot):
    """The loss's wire said `scalar` while the inspector said `()` for the same port."""
    w = xor_window
    _start(w, qtbot)
    assert w.validator.validate_now().ok
    wire = next(wi for e, wi in w.scene.wires.items() if e.src == "loss")
    assert wire.label == "scalar"
    ports = _pick(qtbot, w, w, "loss")
    assert "out: loss scalar" in ports and "()" not in ports, ports


def test_picking_a_card_in_a_group_tab_previews_that_card(xor_window, qtbot, monkeypatch):
    """In a group's tab the Preview kept showing the instance around it; now it runs the
    picked inner card, as the flat graph names it (`model__out` inside `model`)."""
    from nodegraph.gui.shell import main_window

    monkeypatch.setattr(main_window, "SLOW_PREVIEW_S", 60.0)  # a loaded machine
    w = xor_window
    _start(w, qtbot)
    _group(qtbot, w, ["hidden", "act", "out"], "model")
    assert w.validator.validate_now().ok
    w.docks["preview"].show()
    w.preview.auto.setChecked(True)
    _double_click(qtbot, w.view, w.scene.nodes["model"])
    body = w.group_tabs.current_canvas()
    assert body.prefix == "model__"
    _pick(qtbot, w, body, "hidden")
    qtbot.waitUntil(lambda: w.preview.node == "model__hidden", timeout=60_000)
    assert w.preview.shape.text().startswith("shape (4, 4) float32"), w.preview.shape.text()
    assert "model › hidden" in w.preview.title.text()
    _pick(qtbot, w, body, "out")
    qtbot.waitUntil(lambda: w.preview.node == "model__out", timeout=60_000)
    assert w.preview.shape.text().startswith("shape (4, 1) float32"), w.preview.shape.text()
