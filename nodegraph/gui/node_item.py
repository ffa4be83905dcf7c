"""A node on the canvas: a titled card with typed, coloured ports on its sides.

The title is the node id over its block type; inputs sit on the left, outputs on the
right, each a dot in its port type's colour with the port name beside it (optional inputs
are rings). A badge in the corner counts the node's trainable parameters. Problems paint
the card's outline red and list themselves in its tooltip. The card keeps no graph state
of its own beyond what it shows; the scene tells it what changed.
"""

from __future__ import annotations

import html

from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import QBrush, QColor, QFontMetricsF, QPainter, QPainterPath, QPen
from PySide6.QtWidgets import QGraphicsItem, QStyleOptionGraphicsItem

from nodegraph.errors import Problem
from nodegraph.gui import theme
from nodegraph.spec import Port

TITLE_FONT = theme.font(9.5, bold=True)
TYPE_FONT = theme.font(8.0)
PORT_FONT = theme.font(8.0)
BADGE_FONT = theme.font(7.5, bold=True)
SIMPLE_LOD = 0.4  # below this zoom, draw cards as plain boxes (500 nodes stay fast)


class PortItem(QGraphicsItem):
    """One port: a coloured dot the user drags wires from and onto."""

    HIT = 9.0  # radius of the area that catches the mouse, larger than the dot

    def __init__(self, node: NodeItem, port: Port, output: bool):
        super().__init__(node)
        self.node, self.port, self.output = node, port, output
        self.color = QColor(port.type.color)
        self.wires: set = set()
        self.error = False
        self.highlight: str | None = None  # "ok" or "refused" while a wire is dragged over
        self.setAcceptHoverEvents(True)
        self.setCursor(Qt.CursorShape.CrossCursor)
        self.setZValue(2)
        kind = "output" if output else "input"
        extra = ", optional" if port.optional else ""
        self.setToolTip(f"<b>{html.escape(port.name)}</b> ({kind}, {port.type.name}{extra})"
                        + (f"<br>{html.escape(port.doc)}" if port.doc else ""))

    @property
    def ref(self) -> tuple[str, str]:
        return (self.node.node_id, self.port.name)

    def anchor(self) -> QPointF:
        return self.scenePos()

    BOUNDS = QRectF(-HIT, -HIT, 2 * HIT, 2 * HIT)

    def boundingRect(self) -> QRectF:
        return self.BOUNDS

    def shape(self) -> QPainterPath:
        path = QPainterPath()
        path.addEllipse(self.boundingRect())
        return path

    def paint(self, painter: QPainter, option: QStyleOptionGraphicsItem, widget=None) -> None:
        r = theme.PORT_RADIUS
        ring = {"ok": theme.OK, "refused": theme.ERROR}.get(self.highlight or "")
        if ring is None and self.error:
            ring = theme.ERROR
        if ring is not None:
            painter.setPen(QPen(QColor(ring), 2.0))
            painter.setBrush(Qt.BrushStyle.NoBrush)
            painter.drawEllipse(QPointF(0, 0), r + 3, r + 3)
        painter.setPen(QPen(self.color.darker(160), 1.2))
        hollow = self.port.optional and not self.wires
        painter.setBrush(QColor(theme.NODE_BODY) if hollow else QBrush(self.color))
        if hollow:
            painter.setPen(QPen(self.color, 2.0))
        painter.drawEllipse(QPointF(0, 0), r, r)

    def set_highlight(self, state: str | None) -> None:
        if state != self.highlight:
            self.highlight = state
            self.update()

    def set_error(self, error: bool) -> None:
        if error != self.error:
            self.error = error
            self.update()


_MOVED = QGraphicsItem.GraphicsItemChange.ItemScenePositionHasChanged


class NodeItem(QGraphicsItem):
    """The card of one node."""

    def __init__(self, node_id: str, block_type: str, category: str, inputs: list[Port],
                 outputs: list[Port], summary: str = "", known: bool = True):
        super().__init__()
        self.node_id, self.block_type, self.summary = node_id, block_type, summary
        self.known = known
        self.header = theme.category_color(category) if known else QColor("#5a5f68")
        self.badge = ""
        self.problems: list[Problem] = []
        self.height = card_height(len(inputs), len(outputs))
        self.rect = QRectF(0, 0, theme.NODE_WIDTH, self.height)
        self._bounds = self.rect.adjusted(-3, -3, 3, 3)
        self.inputs = {p.name: self._port(p, False, i) for i, p in enumerate(inputs)}
        self.outputs = {p.name: self._port(p, True, i) for i, p in enumerate(outputs)}
        self.setFlags(QGraphicsItem.GraphicsItemFlag.ItemIsMovable
                      | QGraphicsItem.GraphicsItemFlag.ItemIsSelectable
                      | QGraphicsItem.GraphicsItemFlag.ItemSendsScenePositionChanges)
        self.setCacheMode(QGraphicsItem.CacheMode.DeviceCoordinateCache)
        self.setZValue(1)
        self._update_tooltip()

    def _port(self, port: Port, output: bool, row: int) -> PortItem:
        item = PortItem(self, port, output)
        y = theme.HEADER_HEIGHT + (row + 0.5) * theme.PORT_ROW + 2
        item.setPos(theme.NODE_WIDTH if output else 0.0, y)
        return item

    def ports(self) -> list[PortItem]:
        return [*self.inputs.values(), *self.outputs.values()]

    def port(self, name: str, output: bool) -> PortItem | None:
        return (self.outputs if output else self.inputs).get(name)

    # -- state the scene sets --------------------------------------------------------------

    def set_id(self, node_id: str) -> None:
        self.node_id = node_id
        self._update_tooltip()
        self.update()

    def set_badge(self, count: int | None) -> None:
        text = _count_text(count) if count else ""
        if text != self.badge:
            self.badge = text
            self._update_tooltip()
            self.update()

    def set_problems(self, problems: list[Problem]) -> None:
        if problems == self.problems:
            return
        self.problems = problems
        ports = {p.port for p in problems if p.severity == "error"}
        for item in self.ports():
            item.set_error(item.port.name in ports)
        self._update_tooltip()
        self.update()

    @property
    def has_error(self) -> bool:
        return any(p.severity == "error" for p in self.problems)

    def _update_tooltip(self) -> None:
        lines = [f"<b>{html.escape(self.node_id)}</b> — {html.escape(self.block_type)}"]
        if self.summary:
            lines.append(html.escape(self.summary))
        if self.badge:
            lines.append(f"{self.badge} trainable parameters")
        for p in self.problems:
            color = theme.ERROR if p.severity == "error" else theme.WARNING
            text = f"<span style='color:{color}'>{html.escape(p.message)}</span>"
            if p.hint:
                text += f"<br><i>hint: {html.escape(p.hint)}</i>"
            lines.append(text)
        self.setToolTip("<br>".join(lines))

    # -- painting --------------------------------------------------------------------------

    def boundingRect(self) -> QRectF:
        return self._bounds

    def paint(self, painter: QPainter, option: QStyleOptionGraphicsItem, widget=None) -> None:
        lod = detail(option, painter)
        outline = self._outline_color()
        if lod < SIMPLE_LOD:
            painter.setPen(QPen(outline, 2.0) if outline else Qt.PenStyle.NoPen)
            painter.setBrush(self.header)
            painter.drawRect(self.rect)
            return
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        body = QPainterPath()
        body.addRoundedRect(self.rect, 6, 6)
        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(QColor(theme.NODE_BODY))
        painter.drawPath(body)
        header = QPainterPath()
        header.addRoundedRect(QRectF(0, 0, self.rect.width(), theme.HEADER_HEIGHT), 6, 6)
        header.addRect(QRectF(0, theme.HEADER_HEIGHT - 8, self.rect.width(), 8))
        painter.setBrush(self.header.darker(135))
        painter.drawPath(header.simplified())
        painter.fillRect(QRectF(0, theme.HEADER_HEIGHT - 2, self.rect.width(), 2), self.header)
        self._paint_title(painter)
        self._paint_port_labels(painter)
        painter.setBrush(Qt.BrushStyle.NoBrush)
        painter.setPen(QPen(outline, 2.0) if outline else QPen(QColor(theme.NODE_BORDER), 1.0))
        painter.drawPath(body)
        if self.has_error:
            self._paint_error_mark(painter)

    def _outline_color(self) -> QColor | None:
        if self.isSelected():
            return QColor(theme.SELECTION)
        if self.has_error:
            return QColor(theme.ERROR)
        return None

    def _paint_title(self, painter: QPainter) -> None:
        badge_w = self._paint_badge(painter) if self.badge else 0.0
        width = self.rect.width() - 20 - badge_w
        painter.setFont(TITLE_FONT)
        painter.setPen(QColor(theme.HEADER_TEXT))
        title = QFontMetricsF(TITLE_FONT).elidedText(self.node_id, Qt.TextElideMode.ElideRight,
                                                     width)
        painter.drawText(QRectF(10, 4, width, 18), Qt.AlignmentFlag.AlignVCenter, title)
        painter.setFont(TYPE_FONT)
        painter.setPen(QColor(theme.HEADER_DIM))
        kind = self.block_type if self.known else f"{self.block_type} (unknown)"
        kind = QFontMetricsF(TYPE_FONT).elidedText(kind, Qt.TextElideMode.ElideMiddle,
                                                   self.rect.width() - 20)
        painter.drawText(QRectF(10, 21, self.rect.width() - 20, 15),
                         Qt.AlignmentFlag.AlignVCenter, kind)

    def _paint_badge(self, painter: QPainter) -> float:
        metrics = QFontMetricsF(BADGE_FONT)
        w = metrics.horizontalAdvance(self.badge) + 12
        rect = QRectF(self.rect.width() - w - 6, 6, w, 15)
        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(QColor(0, 0, 0, 90))
        painter.drawRoundedRect(rect, 7, 7)
        painter.setFont(BADGE_FONT)
        painter.setPen(QColor(theme.HEADER_TEXT))
        painter.drawText(rect, Qt.AlignmentFlag.AlignCenter, self.badge)
        return w + 6

    def _paint_port_labels(self, painter: QPainter) -> None:
        painter.setFont(PORT_FONT)
        metrics = QFontMetricsF(PORT_FONT)
        half = self.rect.width() / 2 - 14
        for items, left in ((self.inputs, True), (self.outputs, False)):
            for item in items.values():
                y = item.pos().y()
                painter.setPen(QColor(theme.ERROR if item.error else theme.TEXT_DIM))
                text = metrics.elidedText(item.port.name, Qt.TextElideMode.ElideRight, half)
                if left:
                    rect = QRectF(12, y - 8, half, 16)
                    painter.drawText(rect, Qt.AlignmentFlag.AlignVCenter
                                     | Qt.AlignmentFlag.AlignLeft, text)
                else:
                    rect = QRectF(self.rect.width() - 12 - half, y - 8, half, 16)
                    painter.drawText(rect, Qt.AlignmentFlag.AlignVCenter
                                     | Qt.AlignmentFlag.AlignRight, text)

    def _paint_error_mark(self, painter: QPainter) -> None:
        centre = QPointF(self.rect.width() - 2, self.rect.height() - 2)
        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(QColor(theme.ERROR))
        painter.drawEllipse(centre, 8, 8)
        painter.setPen(QColor("#1b1e23"))
        painter.setFont(BADGE_FONT)
        painter.drawText(QRectF(centre.x() - 8, centre.y() - 8, 16, 16),
                         Qt.AlignmentFlag.AlignCenter, "!")

    def mousePressEvent(self, event) -> None:
        # the card the user grabs comes to the front (not every selected card: select-all
        # of 500 cards must not reorder them all)
        top = max((i.zValue() for i in self.collidingItems() if isinstance(i, NodeItem)),
                  default=self.zValue())
        if top >= self.zValue():
            self.setZValue(top + 0.001)
        super().mousePressEvent(event)

    def itemChange(self, change, value):
        # called for every change of every card (select-all: a thousand calls): the enum
        # member is looked up once, and other changes return at once
        if change is _MOVED:
            for port in self.ports():
                for wire in port.wires:
                    wire.update_path()
        return value


def detail(option: QStyleOptionGraphicsItem, painter: QPainter) -> float:
    """Device pixels per scene unit: how much detail is readable (high-DPI screens show
    labels that the same zoom on a plain screen would blur)."""
    device = painter.device()
    ratio = device.devicePixelRatioF() if device is not None else 1.0
    return option.levelOfDetailFromTransform(painter.worldTransform()) * ratio


def card_height(inputs: int, outputs: int) -> float:
    """The height of a card with this many input and output ports."""
    return theme.HEADER_HEIGHT + max(inputs, outputs, 1) * theme.PORT_ROW + 8


def _count_text(count: int) -> str:
    """1234 -> '1.2k', 3400000 -> '3.4M'."""
    for limit, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if count >= limit:
            value = count / limit
            return f"{value:.1f}{suffix}" if value < 100 else f"{value:.0f}{suffix}"
    return str(count)
