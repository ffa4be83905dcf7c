"""The canvas keeps the cards where the user put them when a panel unfolds beside it: the
first card dropped lands under the mouse (the inspector opening for it narrows the canvas
from the right), and a card picked at the right edge is scrolled clear of the inspector."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QMimeData, QPoint, QPointF, Qt
from PySide6.QtGui import QDropEvent, QMouseEvent

from nodegraph.gui.canvas.view import BLOCK_MIME
from tests.gui.driver import mouse

EXAMPLES = Path(__file__).parent.parent.parent / "examples"


def _drop(view, block: str, at: QPoint) -> None:
    mime = QMimeData()
    mime.setData(BLOCK_MIME, block.encode())
    view.dropEvent(QDropEvent(QPointF(at), Qt.DropAction.CopyAction, mime,
                              Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier))


def test_the_first_card_dropped_lands_where_it_was_dropped(window, qtbot):
    window.start_page.hide()
    assert window.panel_edges.is_folded("right")  # a first layout: the inspector waits
    for at in (QPoint(500, 400), QPoint(700, 250)):
        before = set(window.scene.nodes)
        _drop(window.view, "layers.Linear", at)
        qtbot.wait(20)
        (node,) = set(window.scene.nodes) - before
        centre = window.view.mapFromScene(window.scene.nodes[node].sceneBoundingRect().center())
        assert (centre - at).manhattanLength() <= 8, (at, centre)
    assert not window.panel_edges.is_folded("right")  # it did open (and moved nothing)


def test_a_card_picked_at_the_right_edge_is_not_left_under_the_inspector(make_window, qtbot):
    w = make_window(str(EXAMPLES / "xor.json"))
    qtbot.waitUntil(lambda: "opt" in w.scene.nodes, timeout=20000)
    assert w.panel_edges.is_folded("right")
    w.view.set_zoom(1.0)
    card = w.scene.nodes["opt"]
    rect = card.sceneBoundingRect()
    # the card's left part just inside the viewport's right edge
    w.view.centerOn(rect.left() - w.view.viewport().width() / 2 + rect.width() * 0.6,
                    rect.center().y())
    shown = w.view.mapToScene(w.view.viewport().rect()).boundingRect()
    assert shown.intersects(rect) and not shown.contains(rect)
    at = QPointF(rect.left() + 10, rect.top() + 12)  # its title bar, on the canvas
    assert w.view.viewport().rect().contains(w.view.mapFromScene(at))
    mouse(w, QMouseEvent.Type.MouseButtonPress, at)
    mouse(w, QMouseEvent.Type.MouseButtonRelease, at, buttons=Qt.MouseButton.NoButton)
    assert w.scene.selected_node_ids() == ["opt"]
    qtbot.waitUntil(lambda: not w.panel_edges.is_folded("right"), timeout=5000)
    qtbot.waitUntil(lambda: w.view.mapToScene(w.view.viewport().rect()).boundingRect()
                    .contains(card.sceneBoundingRect()), timeout=5000)
