"""Drive the editor like a user: palette drops, wire drags and node drags as real Qt events.

The helpers send the same events a mouse sends to the canvas viewport, so the code paths
under test are the ones a person triggers; positions are given in scene coordinates (or
as ports) and mapped through the view's current zoom.
"""

from __future__ import annotations

import json

from PySide6.QtCore import QPoint, QPointF, Qt
from PySide6.QtGui import QDragEnterEvent, QDragMoveEvent, QDropEvent, QMouseEvent
from PySide6.QtWidgets import QApplication

from nodegraph.model.fileformat import to_document
from nodegraph.model.graph import Graph

LEFT = Qt.MouseButton.LeftButton
NONE = Qt.MouseButton.NoButton


def viewport_point(window, scene_pos: QPointF) -> QPoint:
    return window.view.mapFromScene(scene_pos)


def mouse(window, kind, scene_pos: QPointF, button=LEFT, buttons=LEFT, modifiers=None) -> None:
    viewport = window.view.viewport()
    local = QPointF(viewport_point(window, scene_pos))
    event = QMouseEvent(kind, local, QPointF(viewport.mapToGlobal(local.toPoint())), button,
                        buttons, modifiers or Qt.KeyboardModifier.NoModifier)
    QApplication.sendEvent(viewport, event)


def drag(window, start: QPointF, end: QPointF, steps: int = 4) -> None:
    """Press at `start`, move to `end` in a few steps, release (scene coordinates)."""
    mouse(window, QMouseEvent.Type.MouseButtonPress, start)
    for i in range(1, steps + 1):
        mouse(window, QMouseEvent.Type.MouseMove, start + (end - start) * (i / steps),
              button=NONE)
    mouse(window, QMouseEvent.Type.MouseButtonRelease, end, buttons=NONE)


def port_pos(window, node: str, port: str, output: bool) -> QPointF:
    return window.scene.nodes[node].port(port, output).anchor()


def drag_wire(window, source: tuple[str, str], target: tuple[str, str]) -> None:
    """Drag from an output port onto an input port."""
    drag(window, port_pos(window, *source, True), port_pos(window, *target, False))


def palette_item(window, block_id: str):
    tree = window.palette.tree
    for i in range(tree.topLevelItemCount()):
        group = tree.topLevelItem(i)
        for j in range(group.childCount()):
            if group.child(j).data(0, Qt.ItemDataRole.UserRole) == block_id:
                return group.child(j)
    raise AssertionError(f"{block_id} is not in the palette")


def drop_block(window, block_id: str, scene_pos: QPointF) -> str:
    """Drag `block_id` from the palette and drop it on the canvas; returns the new node id."""
    before = set(window.doc.graph.nodes)
    mime = window.palette.tree.mimeData([palette_item(window, block_id)])
    viewport = window.view.viewport()
    local = viewport_point(window, scene_pos)
    action = Qt.DropAction.CopyAction
    point, mods = QPointF(local), Qt.KeyboardModifier.NoModifier
    try:
        enter = QDragEnterEvent(point, action, mime, LEFT, mods)
        move = QDragMoveEvent(point, action, mime, LEFT, mods)
    except TypeError:  # PySide6 before 6.12 takes a QPoint (which 6.12 deprecates)
        enter = QDragEnterEvent(local, action, mime, LEFT, mods)
        move = QDragMoveEvent(local, action, mime, LEFT, mods)
    QApplication.sendEvent(viewport, enter)
    QApplication.sendEvent(viewport, move)
    QApplication.sendEvent(viewport, QDropEvent(point, action, mime, LEFT, mods))
    (new,) = set(window.doc.graph.nodes) - before
    return new


def model_state(graph: Graph) -> str:
    """The graph as its file would hold it, without the ui section, as comparable text."""
    doc = to_document(graph)
    doc.pop("ui", None)
    return json.dumps(doc, sort_keys=True)


def xor_graph(name: str = "untitled") -> Graph:
    """The XOR model built with the Python API (the editor tests rebuild it by hand)."""
    g = Graph(name)
    g.add("data.XOR", "data")
    g.add("layers.Linear", "hidden", out_features=4)
    g.add("activations.Tanh", "act")
    g.add("layers.Linear", "out", out_features=1)
    g.add("losses.BCEWithLogits", "loss")
    g.add("optimizers.Adam", "opt", lr=0.05)
    g.add("metrics.Accuracy", "accuracy")
    for source, target in XOR_WIRES:
        g.connect(source, target)
    return g


XOR_WIRES = [
    (("data", "x"), ("hidden", "input")), (("hidden", "output"), ("act", "input")),
    (("act", "output"), ("out", "input")), (("out", "output"), ("loss", "input")),
    (("data", "y"), ("loss", "target")), (("loss", "loss"), ("opt", "loss")),
    (("out", "output"), ("accuracy", "input")), (("data", "y"), ("accuracy", "target")),
]


def click_node(window, node: str, modifiers=None) -> None:
    """Click a card's title bar with the left button (optionally holding modifiers)."""
    item = window.scene.nodes[node]
    at = item.mapToScene(item.boundingRect().center().x(), 12)
    mods = modifiers or Qt.KeyboardModifier.NoModifier
    mouse(window, QMouseEvent.Type.MouseButtonPress, at, modifiers=mods)
    mouse(window, QMouseEvent.Type.MouseButtonRelease, at, buttons=NONE, modifiers=mods)
