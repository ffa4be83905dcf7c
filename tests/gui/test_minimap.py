"""The minimap: shown when the graph does not fit in view, a click or drag on it pans the
canvas there, it follows edits, and it can be switched off."""

from __future__ import annotations

from PySide6.QtCore import QPointF, Qt
from PySide6.QtGui import QMouseEvent
from PySide6.QtWidgets import QApplication


def _send(widget, kind, point: QPointF, buttons=Qt.MouseButton.LeftButton) -> None:
    button = Qt.MouseButton.NoButton if kind == QMouseEvent.Type.MouseMove \
        else Qt.MouseButton.LeftButton
    QApplication.sendEvent(widget, QMouseEvent(kind, point, widget.mapToGlobal(point), button,
                                               buttons, Qt.KeyboardModifier.NoModifier))


def _map_point(minimap, scene_point: QPointF) -> QPointF:
    scale, offset = minimap._transform()
    return scene_point * scale + offset


def _centre(view) -> QPointF:
    return view.mapToScene(view.viewport().rect().center())


def test_shown_only_when_the_graph_does_not_fit(xor_window):
    w = xor_window
    minimap = w.view.minimap
    w.view.fit()
    assert not minimap.isVisible()
    w.view.set_zoom(2.5)
    assert minimap.isVisible()
    corner = minimap.geometry()
    viewport = w.view.viewport().geometry()
    assert viewport.contains(corner) and corner.right() > viewport.center().x()
    w.actions_by_name["minimap"].trigger()  # View > Minimap switches it off
    assert not minimap.isVisible()
    w.actions_by_name["minimap"].trigger()
    assert minimap.isVisible()


def test_click_and_drag_pan_the_canvas(xor_window):
    w = xor_window
    w.view.set_zoom(2.5)
    minimap = w.view.minimap
    w.view.centerOn(w.scene.nodes["data"])
    target = w.scene.nodes["opt"].sceneBoundingRect().center()
    _send(minimap, QMouseEvent.Type.MouseButtonPress, _map_point(minimap, target))
    tolerance = 2 / minimap._transform()[0]  # a map pixel, in scene units
    assert (_centre(w.view) - target).manhattanLength() < 2 * tolerance
    other = w.scene.nodes["hidden"].sceneBoundingRect().center()
    _send(minimap, QMouseEvent.Type.MouseMove, _map_point(minimap, other))
    assert (_centre(w.view) - other).manhattanLength() < 2 * tolerance
    _send(minimap, QMouseEvent.Type.MouseButtonRelease, _map_point(minimap, other),
          Qt.MouseButton.NoButton)


def test_follows_edits(xor_window):
    w = xor_window
    w.view.set_zoom(2.5)
    minimap = w.view.minimap
    minimap.repaint()
    before = minimap.graph_rect()
    w.doc.set_positions({"opt": (before.right() + 800, before.bottom() + 400)})
    assert minimap._picture is None  # the cards are drawn again on the next paint
    minimap.repaint()
    assert minimap._world.right() > before.right() + 800
