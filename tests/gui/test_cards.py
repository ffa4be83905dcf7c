"""Cards at any zoom: titles at a readable size, the compact and collapsed forms, the "!"."""

from __future__ import annotations

import math

from PySide6.QtCore import QPoint, QPointF
from PySide6.QtGui import QContextMenuEvent
from PySide6.QtWidgets import QApplication

from nodegraph.gui.canvas import node_item
from nodegraph.gui.canvas.node_item import CAP
from nodegraph.gui.document.files import example_files


def painted(window) -> None:
    window.view.viewport().repaint()
    QApplication.processEvents()


def cap_heights(window) -> dict[str, float]:
    """Each visible card's title cap height on screen, in pixels, as last painted."""
    return {n: i.title_px * CAP for n, i in window.scene.nodes.items()}


def test_cnn_digits_fitted_at_1600x1000_shows_every_title_at_9px_cap_height(make_window):
    w = make_window(str(example_files()[0].parent / "cnn_digits.json"))
    w.resize(1600, 1000)
    QApplication.processEvents()
    w.view.fit()
    painted(w)
    caps = cap_heights(w)
    assert all(c >= 9.0 for c in caps.values()), (w.view.zoom, caps)
    for zoom in (0.6, 0.4, 0.3):  # zoomed out further: still readable while cards are drawn
        w.view.set_zoom(zoom)
        w.view.centerOn(w.scene.nodes["conv1"])
        painted(w)
        assert w.scene.nodes["conv1"].title_px * CAP >= 9.0, zoom


def test_right_click_collapses_a_card_and_undo_expands_it(make_window, qtbot):
    w = make_window(str(example_files()[0].parent / "xor.json"))
    w.resize(1600, 1000)
    w.view.fit()
    card = w.scene.nodes["loss"]
    full = card.rect.height()
    at = w.view.mapFromScene(card.sceneBoundingRect().center())
    event = QContextMenuEvent(QContextMenuEvent.Reason.Mouse, at, w.view.viewport()
                              .mapToGlobal(at))
    QApplication.sendEvent(w.view.viewport(), event)
    menu = w.node_views.context_menu
    action = next(a for a in menu.actions() if a.text() == "Collapse Card")
    menu.close()
    action.trigger()
    assert card.collapsed and card.rect.height() < full
    assert w.doc.graph.ui["collapsed"] == ["loss"]
    ports = {p.pos().y() for p in card.ports()}
    assert ports == {card.rect.height() / 2}  # every port at the title bar's ends
    wire = w.scene.wires[next(e for e in w.scene.wires if e.dst == "loss")]
    end = wire.path().pointAtPercent(1.0)
    assert (end - card.port("input", False).scenePos()).manhattanLength() < 1
    w.undo()
    assert not card.collapsed and card.rect.height() == full


def test_collapse_a_selection_from_the_view_menu_and_reopen_the_file(make_window, tmp_path):
    import nodegraph

    w = make_window(str(example_files()[0].parent / "xor.json"))
    w.scene.select_nodes(["hidden", "act"])
    w.actions_by_name["collapse"].trigger()
    assert w.scene.nodes["hidden"].collapsed and w.scene.nodes["act"].collapsed
    w.actions_by_name["collapse"].trigger()  # all collapsed: the same action expands
    assert not w.scene.nodes["hidden"].collapsed
    w.collapser.set(["out"], True)
    path = tmp_path / "x.json"
    nodegraph.save(w.doc.graph, path)
    w2 = make_window(str(path))
    assert w2.scene.nodes["out"].collapsed and not w2.scene.nodes["hidden"].collapsed


def test_the_error_mark_never_covers_a_port_dot(make_window):
    w = make_window(str(example_files()[0].parent / "xor.json"))
    for card in w.scene.nodes.values():
        for collapsed in (False, True):
            card.set_collapsed(collapsed)
            c = card.error_mark_centre()
            for port in card.ports():
                gap = math.dist((c.x(), c.y()), (port.pos().x(), port.pos().y()))
                assert gap > node_item.ERROR_MARK_RADIUS + node_item.theme.PORT_RADIUS


def test_long_type_names_are_cut_at_the_end_not_the_middle(make_window):
    w = make_window(str(example_files()[0].parent / "dcgan_digits.json"))
    w.resize(1600, 1000)
    w.view.set_zoom(1.0)
    w.view.centerOn(w.scene.nodes["d_loss"])
    image = w.view.grab()  # paints; the text itself is checked through the same call
    assert not image.isNull()
    from PySide6.QtCore import Qt
    from PySide6.QtGui import QFontMetricsF

    kind = w.scene.nodes["d_loss"].block_type
    cut = QFontMetricsF(node_item.TYPE_FONT).elidedText(
        kind, Qt.TextElideMode.ElideRight, w.scene.nodes["d_loss"].rect.width() - 20)
    assert cut.startswith("generative.GAN") and cut.endswith("…")
    assert QPoint(0, 0) == QPoint() and QPointF() == QPointF(0, 0)
