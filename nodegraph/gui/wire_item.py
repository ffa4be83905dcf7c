"""Wires on the canvas: bezier curves from an output to an input, labelled with a shape.

A wire takes its colour from the type of the port it leaves (tensors blue, losses red, ...)
and carries the shape validation inferred for that output, e.g. ``(N, 4)``, in a small
label at its middle. A wire into a port with a problem turns red and explains itself in
its tooltip. `DragWire` is the loose wire that follows the mouse while the user wires.
"""

from __future__ import annotations

import html

from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import QColor, QFontMetricsF, QPainter, QPainterPath, QPainterPathStroker, QPen
from PySide6.QtWidgets import QGraphicsItem, QGraphicsPathItem, QStyleOptionGraphicsItem

from nodegraph.errors import Problem
from nodegraph.graph import Edge
from nodegraph.gui import theme
from nodegraph.gui.node_item import PortItem, detail

LABEL_FONT = theme.font(7.0, mono=True)
LABEL_LOD = 0.55  # below this zoom the labels would be unreadable; skip them


def bezier(a: QPointF, b: QPointF) -> QPainterPath:
    """A horizontal S-curve from `a` (an output) to `b` (an input)."""
    dx = max(40.0, abs(b.x() - a.x()) * 0.5)
    path = QPainterPath(a)
    path.cubicTo(QPointF(a.x() + dx, a.y()), QPointF(b.x() - dx, b.y()), b)
    return path


class WireItem(QGraphicsPathItem):
    """One edge of the graph."""

    def __init__(self, edge: Edge, source: PortItem, target: PortItem):
        super().__init__()
        self.edge, self.source, self.target = edge, source, target
        self.color = QColor(source.port.type.color)
        self.label = ""
        self.problems: list[Problem] = []
        self.has_error = False
        self._label_rect = QRectF()
        self._bounds = QRectF()  # kept, not computed per call: Qt asks for it very often
        self.via: list[QPointF] = []  # reroute points the wire passes through (reroute.py)
        self.setFlag(QGraphicsItem.GraphicsItemFlag.ItemIsSelectable)
        self.setAcceptHoverEvents(True)
        self.setZValue(0)
        source.wires.add(self)
        target.wires.add(self)
        self.update_path()
        self._update_tooltip()

    def detach(self) -> None:
        """Forget the ports (before the item leaves the scene)."""
        self.source.wires.discard(self)
        self.target.wires.discard(self)
        self.source.update()
        self.target.update()

    def update_path(self) -> None:
        points = [self.source.anchor(), *self.via, self.target.anchor()]
        path = bezier(points[0], points[1])
        for a, b in zip(points[1:], points[2:], strict=False):  # through each reroute point
            path.connectPath(bezier(a, b))
        self.prepareGeometryChange()
        self.setPath(path)
        self._place_label()

    def set_label(self, text: str) -> None:
        if text != self.label:
            self.label = text
            self.prepareGeometryChange()
            self._place_label()
            self._update_tooltip()
            self.update()

    def set_problems(self, problems: list[Problem]) -> None:
        if problems != self.problems:
            self.problems = problems
            self.has_error = any(p.severity == "error" for p in problems)
            self._update_tooltip()
            self.update()

    def _place_label(self) -> None:
        if self.label:
            mid = self.path().pointAtPercent(0.5)
            w = QFontMetricsF(LABEL_FONT).horizontalAdvance(self.label) + 8
            self._label_rect = QRectF(mid.x() - w / 2, mid.y() - 7, w, 14)
        else:
            self._label_rect = QRectF()
        self._bounds = self.path().controlPointRect().adjusted(-4, -4, 4, 4).united(
            self._label_rect)

    def _update_tooltip(self) -> None:
        lines = [html.escape(str(self.edge))]
        if self.label:
            lines.append(f"shape {html.escape(self.label)}")
        for p in self.problems:
            lines.append(f"<span style='color:{theme.ERROR}'>{html.escape(p.message)}</span>"
                         + (f"<br><i>hint: {html.escape(p.hint)}</i>" if p.hint else ""))
        self.setToolTip("<br>".join(lines))

    def boundingRect(self) -> QRectF:
        return self._bounds

    def shape(self) -> QPainterPath:
        stroker = QPainterPathStroker()
        stroker.setWidth(10)
        return stroker.createStroke(self.path())

    def paint(self, painter: QPainter, option: QStyleOptionGraphicsItem, widget=None) -> None:
        lod = detail(option, painter)
        color = QColor(theme.ERROR) if self.has_error else self.color
        if lod < LABEL_LOD:  # zoomed far out: a plain curve is all one can see
            painter.setRenderHint(QPainter.RenderHint.Antialiasing, False)
            painter.setPen(QPen(QColor(theme.SELECTION) if self.isSelected() else color, 0))
            painter.drawPath(self.path())
            return
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        width = 3.2 if self.isSelected() else 2.0
        if self.isSelected():
            painter.setPen(QPen(QColor(theme.SELECTION), width + 3))
            painter.drawPath(self.path())
        pen = QPen(color, width)
        if self.has_error:
            pen.setStyle(Qt.PenStyle.DashLine)
        painter.setPen(pen)
        painter.setBrush(Qt.BrushStyle.NoBrush)
        painter.drawPath(self.path())
        if self.label:
            self._paint_label(painter, color)

    def _paint_label(self, painter: QPainter, color: QColor) -> None:
        painter.setPen(QPen(color.darker(130), 1.0))
        painter.setBrush(QColor(theme.LABEL_BG))
        painter.drawRoundedRect(self._label_rect, 7, 7)
        painter.setFont(LABEL_FONT)
        painter.setPen(QColor(theme.TEXT))
        painter.drawText(self._label_rect, Qt.AlignmentFlag.AlignCenter, self.label)


class DragWire(QGraphicsPathItem):
    """The wire following the mouse while the user drags from a port."""

    def __init__(self, port: PortItem):
        super().__init__()
        self.port = port
        self.color = QColor(port.port.type.color)
        self.setZValue(5)
        self.refused = False
        self._pen()

    def _pen(self) -> None:
        pen = QPen(QColor(theme.ERROR) if self.refused else self.color, 2.0)
        pen.setStyle(Qt.PenStyle.DashLine)
        self.setPen(pen)

    def follow(self, point: QPointF, refused: bool = False) -> None:
        a, b = self.port.anchor(), point
        if not self.port.output:
            a, b = b, a
        self.setPath(bezier(a, b))
        if refused != self.refused:
            self.refused = refused
            self._pen()
