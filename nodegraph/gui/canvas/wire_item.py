"""Wires on the canvas: bezier curves from an output to an input, labelled with a shape.

A wire takes its colour from the type of the port it leaves (tensors blue, losses red, ...)
and carries the shape validation inferred for that output, e.g. ``(N, 4)``, in a small
label at its middle. A wire into a port with a problem turns red and explains itself in
its tooltip. `DragWire` is the loose wire that follows the mouse while the user wires.
"""

from __future__ import annotations

import html
from typing import Any

from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import (
    QColor,
    QFont,
    QFontMetricsF,
    QPainter,
    QPainterPath,
    QPainterPathStroker,
    QPen,
)
from PySide6.QtWidgets import QGraphicsItem, QGraphicsPathItem, QStyleOptionGraphicsItem

from nodegraph.gui.base import theme
from nodegraph.gui.canvas.node_item import PORT_FONT, NodeItem, PortItem, detail
from nodegraph.gui.canvas.routing import Rect, curve_points, label_spot, route
from nodegraph.model.errors import Problem
from nodegraph.model.graph import Edge

SEARCH = 240.0  # how far beside the straight line cards are looked for when routing
CORNER = 10.0  # radius of a routed wire's bends
DUPLICATE_GAP = 120.0  # a fan-out's labels closer than this (Manhattan) are shown once

LABEL_FONT = theme.font(7.0, mono=True)


class LabelStyle:
    """The size of the shape labels in one scene. Each window's scene has its own: two
    windows at different zooms each draw their labels at their own size."""

    def __init__(self) -> None:
        self.scale = 1.0
        self.font = LABEL_FONT


_DEFAULT_STYLE = LabelStyle()  # a wire outside a GraphScene (previews, tests): 1:1


def label_style(scene: Any) -> LabelStyle:
    """The label style of `scene` (the 1:1 default for a scene without one)."""
    style = getattr(scene, "label_style", None)
    return style if isinstance(style, LabelStyle) else _DEFAULT_STYLE


def label_scale_for(zoom: float) -> float:
    """How much larger than at 1:1 shape labels are drawn at `zoom`, so they stay about
    8 px tall on screen down to the zoom where labels stop (`label_lod`; in steps of 0.1:
    relabelling costs a little)."""
    return round(min(2.2, max(1.0, 0.9 / max(zoom, 1e-6))), 1)


def set_label_scale(style: LabelStyle, scale: float, wires) -> None:
    """Draw the labels of `wires` (one scene's, sharing `style`) `scale` times their 1:1
    size (the scene calls this on zoom)."""
    if scale == style.scale:
        return
    font = QFont(LABEL_FONT)
    font.setPointSizeF(LABEL_FONT.pointSizeF() * scale)
    style.scale, style.font = scale, font
    for wire in wires:
        wire.relabel()


LABEL_LOD = 0.55  # below this zoom the labels would be unreadable; skip them
# A small graph keeps its labels further out: a few hundred labels cost little to place and
# draw, and such a graph fitted to the window (a detector, 50 wires at 44 %) would otherwise
# show no shape at all. Large graphs keep LABEL_LOD, below which their far layer draws.
FEW_WIRES = 200
FEW_LABEL_LOD = 0.4


def label_lod_for(wires: int) -> float:
    """The zoom below which a scene of `wires` wires draws no shape labels (and its far
    layer draws the wires)."""
    return FEW_LABEL_LOD if wires <= FEW_WIRES else LABEL_LOD


def compact(shape: str) -> str:
    """A shape label without its spaces, for the tag by a port: `(N,16)`."""
    return shape.replace(" ", "")


def rounded(points: list[tuple[float, float]]) -> QPainterPath:
    """A polyline with its corners rounded off."""
    path = QPainterPath(QPointF(*points[0]))
    for i in range(1, len(points) - 1):
        (px, py), (x, y), (nx, ny) = points[i - 1], points[i], points[i + 1]
        r_in = min(CORNER, (abs(x - px) + abs(y - py)) / 2)
        r_out = min(CORNER, (abs(nx - x) + abs(ny - y)) / 2)
        r = min(r_in, r_out)
        ux, uy = _unit(x - px, y - py)
        vx, vy = _unit(nx - x, ny - y)
        path.lineTo(x - ux * r, y - uy * r)
        path.quadTo(QPointF(x, y), QPointF(x + vx * r, y + vy * r))
    path.lineTo(QPointF(*points[-1]))
    return path


def _unit(dx: float, dy: float) -> tuple[float, float]:
    n = (dx * dx + dy * dy) ** 0.5
    return (dx / n, dy / n) if n else (0.0, 0.0)


def _rect(item: NodeItem) -> Rect:
    r = item.mapRectToScene(item.rect)
    return (r.left(), r.top(), r.right(), r.bottom())


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
        self.diff_mark: str | None = None  # "added", "changed", "removed": File > Compare
        self._label_rect = QRectF()
        self.label_at: str | None = None  # where the shape shows: "wire", "port", "sibling"
        self._points: list | None = None  # the routed polyline, None for the plain curve
        self._cards: list = []  # the other cards near it (labels keep clear of them)
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

    def update_path(self, route: bool = True) -> None:
        """Draw the wire from port to port, around the cards in its way (with `route`;
        a plain curve while cards are being dragged: the scene routes it on the drop)."""
        a, b = self.source.anchor(), self.target.anchor()
        self._points = None
        scene = self.scene()
        if self.via:  # the user's reroute points: through each of them, unrouted
            points = [a, *self.via, b]
            path = bezier(points[0], points[1])
            for p, q in zip(points[1:], points[2:], strict=False):
                path.connectPath(bezier(p, q))
        else:
            if scene is not None and route and not getattr(scene, "adding", False):
                self._points = self._route((a.x(), a.y()), (b.x(), b.y()), scene)
            path = rounded(self._points) if self._points else bezier(a, b)
        self.prepareGeometryChange()
        self.setPath(path)
        far = getattr(scene, "far_wires", None)
        if route or far is None or not far.active:
            self._place_label()
        else:  # dragged while zoomed far out (no label shown): placed on the drop
            self._label_rect = QRectF()
            labels = getattr(scene, "label_index", None)
            if labels is not None:
                labels.put(self, None)
            self._bounds = path.controlPointRect().adjusted(-4, -4, 4, 4)
        self._far_changed(scene)

    def _route(self, a: tuple, b: tuple, scene) -> list | None:
        src, dst = self.source.node, self.target.node
        index = getattr(scene, "card_index", None)
        if index is None:
            return None
        area = [min(a[0], b[0]) - 40, min(a[1], b[1]) - SEARCH,
                max(a[0], b[0]) + 40, max(a[1], b[1]) + SEARCH]
        for _ in range(3):  # a detour may leave the area looked at: look again around it
            entries = index.query(scene.nodes.values(), *area)
            self._cards = [e[:4] for e in entries if e[4] is not src and e[4] is not dst]
            points = route(a, b, self._cards, _rect(src), _rect(dst))
            if points is None:
                return None
            xs, ys = [p[0] for p in points], [p[1] for p in points]
            lo_x, lo_y, hi_x, hi_y = min(xs) - 20, min(ys) - 20, max(xs) + 20, max(ys) + 20
            if lo_x >= area[0] and lo_y >= area[1] and hi_x <= area[2] and hi_y <= area[3]:
                return points
            area = [min(area[0], lo_x), min(area[1], lo_y - SEARCH), max(area[2], hi_x),
                    max(area[3], hi_y + SEARCH)]
        return points

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
            self._far_changed(self.scene())

    @staticmethod
    def _far_changed(scene) -> None:
        layer = getattr(scene, "far_wires", None)
        if layer is not None:
            layer.changed()

    def _place_label(self) -> None:
        self.label_at = None
        if self.label:
            style = label_style(self.scene())
            scale = style.scale
            w = QFontMetricsF(style.font).horizontalAdvance(self.label) + 8 * scale
            h = 14.0 * scale
            mid = self._label_centre(w, h)
            self.label_at = "wire" if mid is not None else None
            if mid is not None and self._said_nearby(mid):
                mid = None  # a fan-out's wires run together: its shape once is enough
                self.label_at = "sibling"
            self._label_rect = QRectF() if mid is None else \
                QRectF(mid[0] - w / 2, mid[1] - h / 2, w, h)
            if self.label_at is None:
                # no room on the wire: the shape goes by the input's dot, compact
                # (`(N,16)`), just above where the wire arrives, outside the card
                self.label_at = "port"
                self._label_rect = self._port_tag_rect()
                self.target.node.update()  # it may paint the tag now (or stop)
        else:
            self._label_rect = QRectF()
        self._bounds = self.path().controlPointRect().adjusted(-4, -4, 4, 4).united(
            self._label_rect)
        labels = getattr(self.scene(), "label_index", None)
        if labels is not None:
            r = self._label_rect
            labels.put(self, None if r.isEmpty() else (r.left(), r.top(), r.right(), r.bottom()))

    @property
    def shown_text(self) -> str:
        """The shape as drawn: in full on the wire, compact by the port."""
        return compact(self.label) if self.label_at in ("port", "port_inside") else self.label

    def _port_tag_rect(self) -> QRectF:
        """Above the arriving wire, left of the input's dot; below it when a card or another
        label is there; else inside the card, after the port's name (`input (N,4)`), where
        cards stand too close for anything between them."""
        style = label_style(self.scene())
        scale = style.scale
        w = QFontMetricsF(style.font).horizontalAdvance(compact(self.label)) + 6 * scale
        h = 12.0 * scale
        b = self.target.anchor()
        right = b.x() - theme.PORT_RADIUS - 4
        spots = [QRectF(right - w, b.y() - h - 1, w, h), QRectF(right - w, b.y() + 1, w, h)]
        # the editor's GraphScene (not importable here: it imports this module) has the
        # card and label indexes; another scene has neither
        scene: Any = self.scene()
        index = getattr(scene, "card_index", None)
        labels = getattr(scene, "label_index", None)
        for spot in spots:
            box = (spot.left() - 2, spot.top() - 2, spot.right() + 2, spot.bottom() + 2)
            if index is not None and index.query(scene.nodes.values(), *box):
                continue
            if labels is not None and labels.near(*box, but=self):
                continue
            return spot
        self.label_at = "port_inside"
        name = QFontMetricsF(PORT_FONT).horizontalAdvance(self.target.port.name)
        return QRectF(b.x() + 12 + name + 4, b.y() - h / 2, w, h)

    def shown_label_rect(self) -> QRectF:
        """Where the shape label is drawn (empty when it has none or no room): the wave
        keeps clear of it."""
        return QRectF(self._label_rect) if self.label else QRectF()

    def relabel(self) -> None:
        """Place the label again (its size changed with the zoom)."""
        if self.label:
            self.prepareGeometryChange()
            self._place_label()
            self.update()

    def _said_nearby(self, at: tuple[float, float]) -> bool:
        """Another wire from the same output shows this shape within DUPLICATE_GAP."""
        for w in self.source.wires:
            if w is not self and w.label == self.label and not w._label_rect.isEmpty():
                c = w._label_rect.center()
                if abs(c.x() - at[0]) + abs(c.y() - at[1]) < DUPLICATE_GAP:
                    return True
        return False

    def _label_centre(self, width: float, height: float) -> tuple[float, float] | None:
        """On the wire (or beside it), clear of every card and port dot; None when the wire
        has no room for it (then only its tooltip shows the shape)."""
        a, b = self.source.anchor(), self.target.anchor()
        if self._points:
            points = self._points
        else:
            dx = max(40.0, abs(b.x() - a.x()) * 0.5)
            points = curve_points(((a.x(), a.y()), (a.x() + dx, a.y()), (b.x() - dx, b.y()),
                                   (b.x(), b.y())), 16)
        cards = [*getattr(self, "_cards", []), _rect(self.source.node), _rect(self.target.node)]
        scene: Any = self.scene()  # GraphScene or another (see _port_tag_rect)
        xs, ys = [p[0] for p in points], [p[1] for p in points]
        # where the label could go: the wire's extent, and a label's size around it
        region = (min(xs) - width, min(ys) - 2 * height, max(xs) + width, max(ys) + 2 * height)
        index = getattr(scene, "card_index", None)
        if index is not None:  # the cards beside the wire too (routing looked only ahead)
            cards += [e[:4] for e in index.query(scene.nodes.values(), *region)]
        side = theme.PORT_RADIUS + 4  # the port dots stand out of the cards' sides
        avoid = [(r[0] - side, r[1] - 4, r[2] + side, r[3] + 4) for r in cards]
        labels = getattr(scene, "label_index", None)
        if labels is not None:  # and off the labels already placed
            avoid += [(r[0] - 2, r[1] - 2, r[2] + 2, r[3] + 2)
                      for r in labels.near(*region, but=self)]
        return label_spot(points, width, height, avoid, [(a.x(), a.y()), (b.x(), b.y())])


    def itemChange(self, change, value):
        if change == QGraphicsItem.GraphicsItemChange.ItemSceneHasChanged and value is not None:
            self.update_path()  # now the cards around it can be seen (unless many are added)
        return super().itemChange(change, value)

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
        if self.diff_mark and not self.has_error:
            color = QColor(theme.diff_color(self.diff_mark))
        scene = self.scene()
        if lod < (scene.label_lod if hasattr(scene, "label_lod") else LABEL_LOD):
            # zoomed far out: a plain curve is all one can see
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
        if self.label and not self._label_rect.isEmpty() and self.label_at != "port_inside":
            self._paint_label(painter, color)  # (a tag inside a card is the card's to paint)

    def _paint_label(self, painter: QPainter, color: QColor) -> None:
        painter.setPen(QPen(color.darker(130), 1.0))
        painter.setBrush(QColor(theme.LABEL_BG))
        radius = self._label_rect.height() / 2
        painter.drawRoundedRect(self._label_rect, radius, radius)
        painter.setFont(label_style(self.scene()).font)
        painter.setPen(QColor(theme.TEXT))
        painter.drawText(self._label_rect, Qt.AlignmentFlag.AlignCenter, self.shown_text)


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
