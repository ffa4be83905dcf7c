"""A note on the canvas: a comment (text on top) or a backdrop (a titled frame behind nodes).

A backdrop is grabbed by its title bar (its body lets clicks through, so a selection band
can start inside it); when it moves, the scene hands it the cards inside it to carry. Both
kinds are resized from the handle in their lower-right corner and edited in place by a
double-click: the text becomes editable, and Escape or clicking elsewhere ends the edit.
The item keeps no graph state: the scene tells it its note and reads its geometry back.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import QColor, QFontMetricsF, QPainter, QPainterPath, QPen, QTextOption
from PySide6.QtWidgets import QGraphicsItem, QGraphicsTextItem, QStyleOptionGraphicsItem

from nodegraph.gui.base import theme
from nodegraph.gui.document import annotations as canvas_notes  # `annotations` is __future__'s

TITLE_FONT = theme.font(11.0, bold=True)
TEXT_FONT = theme.font(9.5)
HANDLE = 14.0  # the resize handle's size
PAD = 8.0
Z_BACKDROP, Z_COMMENT = -10.0, 5.0  # backdrops behind wires (0) and cards (1), comments on top


class _Editor(QGraphicsTextItem):
    """The in-place text editor; tells its note when editing ends."""

    def __init__(self, note: AnnotationItem):
        super().__init__(note)
        self.note = note

    def focusOutEvent(self, event) -> None:
        super().focusOutEvent(event)
        self.note.finish_edit()

    def keyPressEvent(self, event) -> None:
        plain_enter = (event.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter)
                       and self.note.kind == "backdrop")
        if event.key() == Qt.Key.Key_Escape or plain_enter:
            self.note.finish_edit()  # a title is one line; Enter ends it
            return
        super().keyPressEvent(event)


class AnnotationItem(QGraphicsItem):
    """One comment or backdrop."""

    def __init__(self, note: dict):
        super().__init__()
        self.note_id = note["id"]
        self.kind = note["kind"]
        self.text = ""
        self.color = QColor(theme.TEXT)
        self.size = QRectF()
        self.carried: list[QGraphicsItem] = []  # cards moving with this backdrop's drag
        self.editor: _Editor | None = None
        # called with (note id, text), set by the scene
        self.on_text_edited: Callable[[str, str], object] | None = None
        self._resize_from: tuple[QPointF, QRectF] | None = None
        self.setFlags(QGraphicsItem.GraphicsItemFlag.ItemIsMovable
                      | QGraphicsItem.GraphicsItemFlag.ItemIsSelectable
                      | QGraphicsItem.GraphicsItemFlag.ItemSendsGeometryChanges)
        self.setZValue(Z_BACKDROP if self.kind == "backdrop" else Z_COMMENT)
        self.set_note(note)

    # -- the note ------------------------------------------------------------------------

    def set_note(self, note: dict) -> None:
        x, y, w, h = note["rect"]
        self.text = str(note.get("text", ""))
        self.color = QColor(note.get("color") or canvas_notes.COMMENT_COLOR)
        if not self.color.isValid():
            self.color = QColor(canvas_notes.COMMENT_COLOR)
        self.prepareGeometryChange()
        self.size = QRectF(0, 0, w, h)
        carried, self.carried = self.carried, []  # a set position carries nothing
        self.setPos(x, y)
        self.carried = carried
        self.setToolTip(self.text if self.kind == "comment" else
                        f"<b>{self.text or 'backdrop'}</b><br>drag the title to move it with "
                        "the nodes inside; double-click the title to rename it")
        self.update()

    def rect(self) -> list[float]:
        """The note's [x, y, w, h] as the item shows it now."""
        return [round(self.pos().x(), 1), round(self.pos().y(), 1),
                round(self.size.width(), 1), round(self.size.height(), 1)]

    def scene_rect(self) -> QRectF:
        return self.size.translated(self.pos())

    # -- shape and painting ----------------------------------------------------------------

    def boundingRect(self) -> QRectF:
        return self.size.adjusted(-2, -2, 2, 2)

    def _handle(self) -> QRectF:
        return QRectF(self.size.right() - HANDLE, self.size.bottom() - HANDLE, HANDLE, HANDLE)

    def shape(self) -> QPainterPath:
        path = QPainterPath()
        if self.kind == "backdrop":  # the title bar and the handle; the body lets clicks by
            path.addRect(QRectF(0, 0, self.size.width(), canvas_notes.TITLE_HEIGHT))
            path.addRect(self._handle())
        else:
            path.addRect(self.size)
        return path

    def paint(self, painter: QPainter, option: QStyleOptionGraphicsItem, widget=None) -> None:
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        outline = QPen(QColor(theme.SELECTION), 2.0) if self.isSelected() else Qt.PenStyle.NoPen
        if self.kind == "backdrop":
            self._paint_backdrop(painter, outline)
        else:
            self._paint_comment(painter, outline)
        painter.setPen(QPen(QColor(theme.TEXT_DIM), 1.2))
        h = self._handle()
        for k in (4, 8, 12):  # three short diagonal strokes: the usual resize grip
            painter.drawLine(QPointF(h.right() - k, h.bottom() - 2),
                             QPointF(h.right() - 2, h.bottom() - k))

    def _paint_backdrop(self, painter: QPainter, outline) -> None:
        body = QColor(self.color)
        body.setAlpha(48)
        painter.setPen(outline)
        painter.setBrush(body)
        painter.drawRoundedRect(self.size, 8, 8)
        bar = QPainterPath()
        bar.addRoundedRect(QRectF(0, 0, self.size.width(), canvas_notes.TITLE_HEIGHT), 8, 8)
        bar.addRect(QRectF(0, canvas_notes.TITLE_HEIGHT - 8, self.size.width(), 8))
        title = QColor(self.color)
        title.setAlpha(200)
        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(title)
        painter.drawPath(bar.simplified())
        if self.editor is None:
            painter.setFont(TITLE_FONT)
            painter.setPen(QColor(theme.TEXT))
            width = self.size.width() - 2 * PAD
            text = QFontMetricsF(TITLE_FONT).elidedText(self.text, Qt.TextElideMode.ElideRight,
                                                        width)
            painter.drawText(QRectF(PAD, 0, width, canvas_notes.TITLE_HEIGHT),
                             Qt.AlignmentFlag.AlignVCenter | Qt.AlignmentFlag.AlignLeft, text)

    def _paint_comment(self, painter: QPainter, outline) -> None:
        fill = QColor(self.color).darker(330)
        fill.setAlpha(235)
        painter.setPen(outline if self.isSelected() else QPen(QColor(self.color).darker(160), 1))
        painter.setBrush(fill)
        painter.drawRoundedRect(self.size, 4, 4)
        painter.fillRect(QRectF(0, 0, 4, self.size.height()), self.color)  # a marker edge
        if self.editor is None:
            painter.setFont(TEXT_FONT)
            painter.setPen(QColor(theme.TEXT))
            option = QTextOption()
            option.setWrapMode(QTextOption.WrapMode.WordWrap)
            painter.drawText(self.size.adjusted(PAD + 4, PAD, -PAD, -PAD), self.text, option)

    # -- resizing, moving ------------------------------------------------------------------

    def mousePressEvent(self, event) -> None:
        if (event.button() == Qt.MouseButton.LeftButton
                and self._handle().contains(event.pos())):
            self._resize_from = (event.scenePos(), QRectF(self.size))
            event.accept()
            return
        super().mousePressEvent(event)

    def mouseMoveEvent(self, event) -> None:
        if self._resize_from is not None:
            start, size = self._resize_from
            delta = event.scenePos() - start
            self.prepareGeometryChange()
            self.size = QRectF(0, 0, max(canvas_notes.MIN_SIZE[0], size.width() + delta.x()),
                               max(canvas_notes.MIN_SIZE[1], size.height() + delta.y()))
            self.update()
            return
        super().mouseMoveEvent(event)

    def mouseReleaseEvent(self, event) -> None:
        if self._resize_from is not None:
            self._resize_from = None
            event.accept()
            return
        super().mouseReleaseEvent(event)

    def itemChange(self, change, value):
        if change == QGraphicsItem.GraphicsItemChange.ItemPositionChange and self.carried:
            delta = QPointF(value) - self.pos()
            for item in self.carried:
                item.moveBy(delta.x(), delta.y())
        return super().itemChange(change, value)

    # -- editing the text ------------------------------------------------------------------

    def mouseDoubleClickEvent(self, event) -> None:
        self.edit_text()
        event.accept()

    def edit_text(self) -> _Editor:
        """Make the text editable in place (a double-click does this)."""
        if self.editor is None:
            self.editor = _Editor(self)
            self.editor.setDefaultTextColor(QColor(theme.TEXT))
            if self.kind == "backdrop":
                self.editor.setFont(TITLE_FONT)
                self.editor.setPos(PAD - 4, 1)
                self.editor.setTextWidth(self.size.width() - 2 * PAD)
            else:
                self.editor.setFont(TEXT_FONT)
                self.editor.setPos(PAD, PAD - 4)
                self.editor.setTextWidth(self.size.width() - 2 * PAD)
            self.editor.setPlainText(self.text)
            self.editor.setTextInteractionFlags(Qt.TextInteractionFlag.TextEditorInteraction)
            self.editor.setFocus(Qt.FocusReason.MouseFocusReason)
            cursor = self.editor.textCursor()
            cursor.select(cursor.SelectionType.Document)
            self.editor.setTextCursor(cursor)
            self.update()
        return self.editor

    def finish_edit(self) -> None:
        """End in-place editing; a changed text is reported to the scene (one undo step)."""
        editor, self.editor = self.editor, None
        if editor is None:
            return
        text = editor.toPlainText().strip() if self.kind == "backdrop" \
            else editor.toPlainText()
        # Qt takes None (no parent item); its stubs do not say so
        editor.setParentItem(None)  # type: ignore[arg-type]
        if editor.scene() is not None:
            editor.scene().removeItem(editor)
        self.update()
        if text != self.text and self.on_text_edited is not None:
            self.on_text_edited(self.note_id, text)
