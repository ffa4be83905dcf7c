"""The knife: which wires a stroke drawn across the canvas (Ctrl+right-drag) crosses.

Each wire's curve is followed in short straight steps and every step is tested against
every segment of the stroke, so a stroke cuts exactly the wires it visibly crosses, and
nothing it merely passes near.
"""

from __future__ import annotations

from collections.abc import Iterable

from PySide6.QtCore import QLineF, QPointF
from PySide6.QtGui import QPainterPath

STEPS = 48  # straight pieces per wire: finer than a card's width at any zoom


def segments(points: list[QPointF]) -> list[QLineF]:
    return [QLineF(a, b) for a, b in zip(points, points[1:], strict=False) if a != b]


def crosses(path: QPainterPath, stroke: list[QLineF]) -> bool:
    """Whether the curve `path` crosses any segment of `stroke`."""
    if not stroke:
        return False
    box = path.controlPointRect().adjusted(-1, -1, 1, 1)
    if not any(box.intersects(_box(s)) for s in stroke):
        return False
    prev = path.pointAtPercent(0.0)
    for i in range(1, STEPS + 1):
        point = path.pointAtPercent(i / STEPS)
        piece = QLineF(prev, point)
        for s in stroke:
            kind, _ = piece.intersects(s)
            if kind == QLineF.IntersectionType.BoundedIntersection:
                return True
        prev = point
    return False


def cut(wires: Iterable, points: list[QPointF]) -> list:
    """The wires (items with a `path()` and an `edge`) that the stroke through `points`
    crosses, as their edges."""
    stroke = segments(points)
    return [w.edge for w in wires if crosses(w.mapToScene(w.path()), stroke)]


def _box(line: QLineF):
    from PySide6.QtCore import QRectF
    return QRectF(line.p1(), line.p2()).normalized().adjusted(-1, -1, 1, 1)
