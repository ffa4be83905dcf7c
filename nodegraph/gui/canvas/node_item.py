"""A node on the canvas: a titled card with typed, coloured ports on its sides.

The title is the node id over its block type; inputs sit on the left, outputs on the
right, each a dot in its port type's colour with the port name beside it (optional inputs
are rings). A badge in the corner counts the node's trainable parameters. Problems paint
the card's outline red and list themselves in its tooltip. The card keeps no graph state
of its own beyond what it shows; the scene tells it what changed.
"""

from __future__ import annotations

import html
import math
import os
from typing import Any

from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import (
    QBrush,
    QColor,
    QFont,
    QFontMetricsF,
    QGuiApplication,
    QPainter,
    QPainterPath,
    QPen,
)
from PySide6.QtWidgets import QGraphicsItem, QStyleOptionGraphicsItem

from nodegraph.gui.base import theme
from nodegraph.model.errors import Problem
from nodegraph.model.spec import Port

TITLE_FONT = theme.font(9.5, bold=True)
TYPE_FONT = theme.font(8.0)
PORT_FONT = theme.font(8.0)
TAG_FONT = theme.font(7.0, mono=True)  # a wire's compact shape, drawn by its input's name
BADGE_FONT = theme.font(7.5, bold=True)
SIMPLE_LOD = 0.2  # below this zoom, draw cards as plain boxes (1,000 nodes stay fast)
COMPACT_LOD = 0.75  # below this zoom, draw the title larger and drop the port names
TITLE_PX = 12.5  # the smallest on-screen title: 9 px cap height in DejaVu Sans Bold
DETAIL_PX = 10.5  # the smallest on-screen type name and parameter count
CAP = 0.73  # cap height / pixel size of DejaVu Sans
PORT_MIN_PX = 9.0  # the smallest on-screen port name (zoomed out), in pixels
ERROR_MARK_RADIUS = 7.0


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
        self.diff_mark: str | None = None  # "added", "changed", "removed": File > Compare
        self.shown_title = node_id  # the id as last painted (elided in the middle)
        self.port_name_px = 0.0  # cap height of the port names as last painted (0: none)
        self.problems: list[Problem] = []
        self.collapsed = False
        self.full_height = card_height(len(inputs), len(outputs))
        self.height = self.full_height
        self.rect = QRectF(0, 0, theme.NODE_WIDTH, self.height)
        self._bounds = self.rect.adjusted(-3, -3, 3, 3)
        self.inputs = {p.name: self._port(p, False, i) for i, p in enumerate(inputs)}
        self.outputs = {p.name: self._port(p, True, i) for i, p in enumerate(outputs)}
        self.title_px = 0.0  # the title's on-screen pixel size when last painted (tests)
        self.setFlags(QGraphicsItem.GraphicsItemFlag.ItemIsMovable
                      | QGraphicsItem.GraphicsItemFlag.ItemIsSelectable
                      | QGraphicsItem.GraphicsItemFlag.ItemSendsScenePositionChanges)
        self.setCacheMode(QGraphicsItem.CacheMode.DeviceCoordinateCache)
        self.setZValue(1)
        self._update_tooltip()

    def _port(self, port: Port, output: bool, row: int) -> PortItem:
        item = PortItem(self, port, output)
        item.setPos(theme.NODE_WIDTH if output else 0.0, self._port_y(row))
        return item

    def _port_y(self, row: int) -> float:
        if self.collapsed:  # every port on the middle of the title bar's edge
            return COLLAPSED_HEIGHT / 2
        return theme.HEADER_HEIGHT + (row + 0.5) * theme.PORT_ROW + 2

    def set_collapsed(self, collapsed: bool) -> None:
        """Show the card as its title bar only (its ports meet at the bar's ends), or whole."""
        if collapsed == self.collapsed:
            return
        self.prepareGeometryChange()
        self.collapsed = collapsed
        # the editor's GraphScene (not importable here: it imports this module) has a card
        # index and a far layer; another scene has neither
        scene: Any = self.scene()
        index = getattr(scene, "card_index", None)
        if index is not None:
            index.invalidate()
            scene.far_cards.changed()
        self.height = COLLAPSED_HEIGHT if collapsed else self.full_height
        self.rect = QRectF(0, 0, theme.NODE_WIDTH, self.height)
        self._bounds = self.rect.adjusted(-3, -3, 3, 3)
        for items in (self.inputs, self.outputs):
            for row, item in enumerate(items.values()):
                item.setPos(item.pos().x(), self._port_y(row))
                for wire in item.wires:
                    wire.update_path()
        self.update()

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
        layer = getattr(self.scene(), "far_cards", None)
        if layer is not None:
            layer.changed()

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
        self.port_name_px = 0.0
        outline = self._outline_color()
        if lod < SIMPLE_LOD:
            painter.setPen(QPen(outline, 2.0) if outline else Qt.PenStyle.NoPen)
            painter.setBrush(self.header)
            painter.drawRect(self.rect)
            return
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        compact = lod < COMPACT_LOD or self.collapsed
        bar = self._bar_height(lod) if compact else theme.HEADER_HEIGHT
        body = QPainterPath()
        body.addRoundedRect(self.rect, 6, 6)
        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(QColor(theme.NODE_BODY))
        painter.drawPath(body)
        header = QPainterPath()
        header.addRoundedRect(QRectF(0, 0, self.rect.width(), bar), 6, 6)
        if bar < self.rect.height():
            header.addRect(QRectF(0, bar - 8, self.rect.width(), 8))
        painter.setBrush(self.header.darker(135))
        painter.drawPath(header.simplified())
        if bar < self.rect.height():
            painter.fillRect(QRectF(0, bar - 2, self.rect.width(), 2), self.header)
        if compact:
            self._paint_compact(painter, lod, bar)
            self._paint_port_labels(painter, lod, bar, names=self.names_ports_when_compact)
        else:
            self._paint_title(painter, lod)
            self._paint_port_labels(painter, lod)
        painter.setBrush(Qt.BrushStyle.NoBrush)
        painter.setPen(QPen(outline, 2.0) if outline else QPen(QColor(theme.NODE_BORDER), 1.0))
        painter.drawPath(body)
        if self.has_error:
            self._paint_error_mark(painter)

    def _bar_height(self, lod: float) -> float:
        """The title bar of a compact card: tall enough for the enlarged title."""
        line = max(TITLE_PX / lod, 13.0) * 1.25
        return min(self.rect.height(), max(theme.HEADER_HEIGHT, line + 8))

    def _paint_compact(self, painter: QPainter, lod: float, bar: float) -> None:
        """Zoomed out (or collapsed): the title at a readable size fills the bar, and the
        type and parameter count follow below it while they fit at a readable size."""
        px = max(TITLE_PX / lod, 13.0)
        width = self.rect.width() - 16
        font = QFont(TITLE_FONT)
        font.setPixelSize(math.ceil(px))
        metrics = QFontMetricsF(font)
        if metrics.height() > bar:  # the card is too small for a readable title: the most
            px = max(6.0, bar / 1.25)  # that fits
            font.setPixelSize(round(px))
            metrics = QFontMetricsF(font)
        self.title_px = font.pixelSize() * lod
        painter.setFont(font)
        painter.setPen(QColor(theme.TEXT))
        # ids elide in the middle: siblings of an imported model differ at the end
        # (`layer1_…_conv1`, `layer1_…_conv2`), which an elision at the end would hide
        title = self.shown_title = metrics.elidedText(self.node_id,
                                                      Qt.TextElideMode.ElideMiddle, width)
        painter.drawText(QRectF(8, 0, width, bar), Qt.AlignmentFlag.AlignVCenter, title)
        if self.collapsed or self.names_ports_when_compact:
            return  # a card of several inputs or outputs names its ports instead
        if any(getattr(w, "label_at", None) == "port_inside"
               for item in self.inputs.values() for w in item.wires):
            return  # a wire's shape is drawn in the input's row: it matters more than the type
        small = QFont(TYPE_FONT)
        small.setPixelSize(max(8, round(DETAIL_PX / lod)))
        sm = QFontMetricsF(small)
        lines = [self.block_type if self.known else f"{self.block_type} (unknown)"]
        if self.badge:
            lines.append(f"{self.badge} params")
        y = bar + 2
        inset = theme.PORT_RADIUS + 6  # clear of the port dots on both edges
        width = self.rect.width() - 2 * inset
        painter.setFont(small)
        painter.setPen(QColor(theme.TEXT_DIM))
        for text in lines:
            if y + sm.height() > self.rect.height() - 2:
                break
            text = sm.elidedText(text, Qt.TextElideMode.ElideRight, width)
            painter.drawText(QRectF(inset, y, width, sm.height()),
                             Qt.AlignmentFlag.AlignVCenter, text)
            y += sm.height()

    def _outline_color(self) -> QColor | None:
        if self.isSelected():
            return QColor(theme.SELECTION)
        if self.has_error:
            return QColor(theme.ERROR)
        if self.diff_mark:
            return QColor(theme.diff_color(self.diff_mark))
        return None

    def _paint_title(self, painter: QPainter, lod: float) -> None:
        badge_w = self._paint_badge(painter) if self.badge else 0.0
        width = self.rect.width() - 20 - badge_w
        font = QFont(TITLE_FONT)  # a little larger just under 1:1, to stay >= 9 px cap
        font.setPixelSize(math.ceil(max(TITLE_FONT.pointSizeF() * 4 / 3, TITLE_PX / lod)))
        self.title_px = font.pixelSize() * lod
        painter.setFont(font)
        painter.setPen(QColor(theme.HEADER_TEXT))
        title = self.shown_title = QFontMetricsF(font).elidedText(
            self.node_id, Qt.TextElideMode.ElideMiddle, width)
        painter.drawText(QRectF(10, 4, width, 18), Qt.AlignmentFlag.AlignVCenter, title)
        painter.setFont(TYPE_FONT)
        painter.setPen(QColor(theme.HEADER_DIM))
        kind = self.block_type if self.known else f"{self.block_type} (unknown)"
        kind = QFontMetricsF(TYPE_FONT).elidedText(kind, Qt.TextElideMode.ElideRight,
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

    @property
    def names_ports_when_compact(self) -> bool:
        """Zoomed out, a card with several inputs or outputs keeps its port names (which
        dot is which matters there); one input and one output need none."""
        return not self.collapsed and (len(self.inputs) > 1 or len(self.outputs) > 1)

    def _paint_port_labels(self, painter: QPainter, lod: float = 1.0,
                           top: float = 0.0, names: bool = True) -> None:
        """Each port's name by its dot; zoomed out, in letters grown to stay readable (up
        to the row's height) and abbreviated to fit; rows under the title bar only. After
        an input's name, the compact shape of a wire that had no room for its label between
        the cards (`input (N,4)`): drawn here, over the card, not by the wire under it."""
        font = QFont(PORT_FONT)
        size = QFontMetricsF(PORT_FONT).height()
        if lod < COMPACT_LOD:
            font.setPixelSize(max(1, round(min(theme.PORT_ROW * 0.9, PORT_MIN_PX / lod))))
            size = QFontMetricsF(font).height()
        metrics = QFontMetricsF(font)
        if names:
            self.port_name_px = metrics.capHeight() * lod  # on screen
        half = self.rect.width() / 2 - 14
        for items, left in ((self.inputs, True), (self.outputs, False)):
            shown = port_names(items.values(), (self.outputs if left else self.inputs).values(),
                               metrics, self.rect.width() - 24, half) if names else {}
            for item in items.values():
                y = item.pos().y()
                if y - size / 2 < top - 1:
                    continue  # under the enlarged title: the dot alone
                text = shown.get(item.port.name, "")
                width = max(half, metrics.horizontalAdvance(text))
                painter.setFont(font)
                painter.setPen(QColor(theme.ERROR if item.error else theme.TEXT_DIM))
                if left:
                    rect = QRectF(12, y - size / 2, width, size)
                    painter.drawText(rect, Qt.AlignmentFlag.AlignVCenter
                                     | Qt.AlignmentFlag.AlignLeft, text)
                    tag = next((w.shown_text for w in item.wires
                                if getattr(w, "label_at", None) == "port_inside"), "")
                    if tag:
                        self._paint_tag(painter, tag, 12 + metrics.horizontalAdvance(text)
                                        + (4 if text else 0), y, lod)
                else:
                    rect = QRectF(self.rect.width() - 12 - width, y - size / 2, width, size)
                    painter.drawText(rect, Qt.AlignmentFlag.AlignVCenter
                                     | Qt.AlignmentFlag.AlignRight, text)

    def _paint_tag(self, painter: QPainter, tag: str, x: float, y: float, lod: float) -> None:
        font = QFont(TAG_FONT)
        if lod < COMPACT_LOD:
            font.setPixelSize(max(1, round(min(theme.PORT_ROW * 0.8, PORT_MIN_PX / lod))))
        painter.setFont(font)
        painter.setPen(QColor(theme.TEXT))
        width = self.rect.width() - x - 8
        painter.drawText(QRectF(x, y - theme.PORT_ROW / 2, width, theme.PORT_ROW),
                         Qt.AlignmentFlag.AlignVCenter | Qt.AlignmentFlag.AlignLeft,
                         QFontMetricsF(font).elidedText(tag, Qt.TextElideMode.ElideRight,
                                                        width))

    def error_mark_centre(self) -> QPointF:
        """Where the red "!" goes: inside the bottom corner, clear of the port dots (they sit
        on the left and right edges; the last row ends PORT_ROW / 2 + 6 above the bottom)."""
        if self.collapsed:
            return QPointF(self.rect.width() - 22, self.rect.height() / 2)
        return QPointF(self.rect.width() - 14, self.rect.height() - 10)

    def _paint_error_mark(self, painter: QPainter) -> None:
        centre = self.error_mark_centre()
        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(QColor(theme.ERROR))
        painter.drawEllipse(centre, ERROR_MARK_RADIUS, ERROR_MARK_RADIUS)
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
        if change is _MOVED:  # plain curves while it moves; the scene routes them after
            scene: Any = self.scene()  # GraphScene or another (see set_collapsed)
            index = getattr(scene, "card_index", None)
            if index is not None:
                index.invalidate()
                scene.far_cards.changed()
            for port in self.ports():
                for wire in port.wires:
                    wire.update_path(route=False)
        return value


_pixel_ratio: list[float] = []  # the screens' device pixel ratio, read once


def detail(option: QStyleOptionGraphicsItem, painter: QPainter) -> float:
    """Device pixels per scene unit: how much detail is readable (high-DPI screens show
    labels that the same zoom on a plain screen would blur). Called for every item in every
    frame, so it reads the painter's scale directly (the view only zooms and pans) and the
    pixel ratio once (the highest of the screens)."""
    if not _pixel_ratio:
        app = QGuiApplication.instance()
        _pixel_ratio.append(app.devicePixelRatio() if isinstance(app, QGuiApplication) else 1.0)
    t = painter.worldTransform()
    return math.hypot(t.m11(), t.m12()) * _pixel_ratio[0]


COLLAPSED_HEIGHT = theme.HEADER_HEIGHT


def port_names(ports, across, metrics: QFontMetricsF, whole: float,
               half: float) -> dict[str, str]:
    """Each port's name as it fits on its side of the card: the whole width where no port
    faces it on the other side (`scheduler` in full, not `sched…`), else half; cut at the
    end, or, where that would make names alike (three `target…` for `target_boxes`,
    `target_labels`, `target_masks`), without their common start (`…boxes`, `…labels`)."""
    facing = {round(p.pos().y()) for p in across}
    room = {p.port.name: half if round(p.pos().y()) in facing else whole for p in ports}
    right = {n: metrics.elidedText(n, Qt.TextElideMode.ElideRight, w) for n, w in room.items()}
    alike: dict[str, list[str]] = {}
    for n, text in right.items():
        alike.setdefault(text, []).append(n)
    for group in alike.values():
        if len(group) < 2:
            continue
        start = os.path.commonprefix(group)
        cut = max(start.rfind("_"), start.rfind("."))
        cut = cut + 1 if cut > 0 else len(start)
        for n in group:
            right[n] = metrics.elidedText("…" + n[cut:], Qt.TextElideMode.ElideRight, room[n])
    return right


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
