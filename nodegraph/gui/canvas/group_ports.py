"""A group's own ports, shown in its body's tab.

Inside a group the inner ports that stand for the group's inputs and outputs look like
any other port; this marks them: a tag beside each such port ("▶ x" where the group's
input x enters, "y ▶" where its output y leaves), carried by the card so it moves with
it, and a line at the top of the tab listing the group's inputs and outputs with the
inner ports they map to. Both follow edits and renames.
"""

from __future__ import annotations

import html

from PySide6.QtCore import QPoint, QPointF, QRectF, Qt
from PySide6.QtGui import QColor, QFontMetricsF, QPainter, QPen
from PySide6.QtWidgets import QGraphicsItem, QLabel

from nodegraph.gui.base import theme

TAG_FONT = theme.font(8.0, bold=True)


class PortTag(QGraphicsItem):
    """A pill naming the group port an inner port stands for."""

    def __init__(self, text: str, output: bool, parent: QGraphicsItem):
        super().__init__(parent)
        self.text, self.output = text, output
        w = QFontMetricsF(TAG_FONT).horizontalAdvance(text) + 14
        self.rect = QRectF(0, -9, w, 18)
        self.setZValue(3)
        self.setToolTip(f"the group's {'output' if output else 'input'} "
                        f"'{text.strip('▶ ')}' {'leaves' if output else 'enters'} here")

    def boundingRect(self) -> QRectF:
        return self.rect

    def paint(self, painter: QPainter, option, widget=None) -> None:
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        painter.setPen(QPen(QColor(theme.HOVER), 1.2))
        painter.setBrush(QColor(theme.LABEL_BG))
        painter.drawRoundedRect(self.rect, 9, 9)
        painter.setFont(TAG_FONT)
        painter.setPen(QColor(theme.HOVER))
        painter.drawText(self.rect, Qt.AlignmentFlag.AlignCenter, self.text)


class GroupPorts:
    """The tags and the ports line of one group canvas."""

    def __init__(self, canvas):
        self.canvas = canvas
        self.tags: list[PortTag] = []
        # a child of the view, not of its viewport: the viewport moves its children when
        # the canvas pans
        self.header = QLabel(canvas.view)
        self.header.setObjectName("group_ports")
        self.header.setTextFormat(Qt.TextFormat.RichText)
        self.header.setStyleSheet(f"background: {theme.LABEL_BG}; color: {theme.TEXT}; "
                                  f"border: 1px solid {theme.NODE_BORDER}; padding: 4px 8px;")
        canvas.doc.changed.connect(lambda *_: self.refresh())
        canvas.doc.graph_replaced.connect(self.refresh)
        self.refresh()

    def refresh(self) -> None:
        defn, scene = self.canvas.doc.defn, self.canvas.scene
        for tag in self.tags:
            if tag.scene() is not None:
                tag.scene().removeItem(tag)
        self.tags = []
        for name, refs in defn.inputs.items():
            for node, port in refs:
                self._tag(scene, node, port, False, f"▶ {name}")
        for name, (node, port) in defn.outputs.items():
            self._tag(scene, node, port, True, f"{name} ▶")
        ins = ", ".join(f"<b>{html.escape(n)}</b> → "
                        + html.escape(", ".join(f"{a}.{b}" for a, b in refs))
                        for n, refs in defn.inputs.items()) or "none"
        outs = ", ".join(f"<b>{html.escape(n)}</b> ← {html.escape(f'{a}.{b}')}"
                         for n, (a, b) in defn.outputs.items()) or "none"
        self.header.setText(f"group <b>{html.escape(defn.name)}</b> · inputs: {ins}"
                            f" · outputs: {outs}")
        self.header.adjustSize()
        self.header.move(self.canvas.view.viewport().geometry().topLeft() + QPoint(8, 8))
        self.header.show()
        self.header.raise_()

    def _tag(self, scene, node: str, port: str, output: bool, text: str) -> None:
        card = scene.nodes.get(node)
        item = card.port(port, output) if card is not None else None
        if item is None:
            return
        tag = PortTag(text, output, card)
        at = item.pos()
        x = at.x() + 12 if output else at.x() - tag.rect.width() - 12
        tag.setPos(QPointF(x, at.y()))
        self.tags.append(tag)

    def lines(self) -> list[str]:
        """The tags' texts (for tests)."""
        return [t.text for t in self.tags]
