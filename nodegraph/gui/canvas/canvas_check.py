"""What a look at the canvas should catch, found by geometry: wires drawn through cards
and shape labels lying on a card, a port dot or another label, wires whose shape shows
nowhere and ports whose name cannot be read (the gallery's --check and the tests use it;
a person still looks at the pictures)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from PySide6.QtCore import QRectF

    from nodegraph.model.graph import Edge


def defects(scene, labels_shown: bool = True) -> list[str]:
    """Wires drawn through a card that is not one of their ends, and shape labels lying
    on a card, a port dot or another label (when the zoom shows labels)."""
    found = []
    cards = {n: i.sceneBoundingRect().adjusted(2, 2, -2, -2) for n, i in scene.nodes.items()}
    dots = [p.sceneBoundingRect().adjusted(4, 4, -4, -4) for i in scene.nodes.values()
            for p in i.ports() if p.isVisible()]
    labels: list[tuple[Edge, QRectF]] = []
    for edge, wire in scene.wires.items():
        path = wire.path()
        points = [path.pointAtPercent(i / 80) for i in range(1, 80)]
        for node, rect in cards.items():
            if node not in (edge.src, edge.dst) and any(rect.contains(p) for p in points):
                found.append(f"wire {edge} runs under card {node}")
        label = wire.shown_label_rect()
        if label.isEmpty() or not labels_shown:
            continue
        inside = wire.label_at == "port_inside"  # a tag drawn in its card, by design
        found += [f"label of {edge} on card {n}" for n, r in cards.items()
                  if r.intersects(label) and not (inside and n == edge.dst)]
        found += [f"label of {edge} on a port dot" for d in dots if d.intersects(label)]
        found += [f"labels of {edge} and {other} overlap" for other, r in labels
                  if r.intersects(label)]
        labels.append((edge, label))
    return found


READABLE_CAP_PX = 4.0  # a port name whose capitals are smaller on screen cannot be read


def unseen(scene, zoom: float) -> tuple[list[str], list[str]]:
    """Wires with a shape that shows nowhere at `zoom` (not on the wire, not on a wire of
    the same output beside it, not by the input's dot), and ports of several-port cards
    whose name is not drawn readably (the cards must have been painted at this zoom)."""
    wires = [f"{edge}" for edge, wire in scene.wires.items()
             if wire.label and (zoom < scene.label_lod or wire.label_at is None)]
    ports = []
    for node, item in scene.nodes.items():
        if not item.names_ports_when_compact:
            continue  # one input and one output: the card itself says which is which
        if item.port_name_px < READABLE_CAP_PX:
            ports += [f"{node}.{p.port.name}" for p in item.ports()]
    return wires, ports
