"""Zoomed far out, one item draws every wire and card: the same picture, still clickable."""

from __future__ import annotations

from PySide6.QtCore import QPointF
from PySide6.QtGui import QImage
from PySide6.QtWidgets import QGraphicsItem

from nodegraph.gui.canvas.image_export import export_png, graph_rect
from tests.gui.driver import click_node, drag

NO_CONTENTS = QGraphicsItem.GraphicsItemFlag.ItemHasNoContents


def _grab(w) -> QImage:
    w.view.viewport().repaint()
    return w.view.viewport().grab().toImage()


def _differing(a: QImage, b: QImage) -> int:
    return sum(a.pixel(x, y) != b.pixel(x, y) for x in range(0, a.width(), 2)
               for y in range(0, a.height(), 2))


def test_far_out_the_layers_draw_what_the_items_would(xor_window):
    w = xor_window
    w.view.minimap.set_enabled(False)
    w.validator.validate_now()
    w.view.set_zoom(0.15)  # below SIMPLE_LOD: cards and wires by the layers
    w.view.centerOn(w.scene.nodes["act"])
    assert w.scene.far_cards.active and w.scene.far_wires.active
    assert all(i.flags() & NO_CONTENTS for i in [*w.scene.nodes.values(),
                                                  *w.scene.wires.values()])
    far = _grab(w)
    state = w.scene.far_suspended()  # every item paints itself again
    assert not any(i.flags() & NO_CONTENTS for i in w.scene.nodes.values())
    near = _grab(w)
    w.scene.far_resume(state)
    card = w.view.mapFromScene(w.scene.nodes["act"].sceneBoundingRect().center())
    assert far.pixel(card) == near.pixel(card) != w.view.backgroundBrush().color().rgb()
    assert _differing(far, near) == 0


def test_far_out_cards_are_still_clicked_dragged_and_outlined(xor_window):
    w = xor_window
    w.view.minimap.set_enabled(False)
    w.view.set_zoom(0.15)
    w.view.centerOn(w.scene.nodes["act"])
    before = _grab(w)
    click_node(w, "act")
    assert w.scene.selected_node_ids() == ["act"]
    assert _differing(before, _grab(w)) > 0  # the selection outline shows at once
    start = w.scene.nodes["act"].sceneBoundingRect().center()
    drag(w, start, start + QPointF(0, 400))
    assert w.doc.positions()["act"][1] > 300
    moved = _grab(w)
    state = w.scene.far_suspended()
    assert _differing(moved, _grab(w)) == 0  # the layers followed the move
    w.scene.far_resume(state)


def test_the_picture_export_draws_the_details_even_when_zoomed_far_out(xor_window,
                                                                         tmp_path):
    w = xor_window
    w.validator.validate_now()
    w.view.set_zoom(0.1)
    export_png(w.scene, tmp_path / "far.png", scale=1.0)
    w.view.set_zoom(1.0)
    export_png(w.scene, tmp_path / "near.png", scale=1.0)
    far, near = QImage(str(tmp_path / "far.png")), QImage(str(tmp_path / "near.png"))
    origin = graph_rect(w.scene).topLeft()
    for item in w.scene.nodes.values():  # each card drawn in full (its inside: the port
        box = item.sceneBoundingRect().translated(-origin).adjusted(14, 4, -14, -4)  # dots
        box = box.toRect()  # hide with the zoom)
        assert far.copy(box) == near.copy(box), item.node_id
    w.view.set_zoom(0.1)
    assert w.scene.far_cards.active  # and the canvas is back to the fast drawing
