"""Rename on the canvas (F2): a text field over the card's title, Enter to apply.

The field opens over the selected card at the current zoom with the id selected, so
typing replaces it; Enter renames through the document (one undo step; a refused name is
said in the status bar and the field stays open to correct it), Escape or clicking
elsewhere leaves the name as it was.
"""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject, QRect, Qt
from PySide6.QtWidgets import QLineEdit

from nodegraph.gui.base import theme
from nodegraph.gui.document.document import EditRefused


class CanvasRename(QObject):
    """Owns the one rename field of a canvas."""

    def __init__(self, doc, scene, view, notify):
        super().__init__(view)
        self.doc, self.scene, self.view, self.notify = doc, scene, view, notify
        self.field = QLineEdit(view.viewport())
        self.field.setObjectName("canvas_rename")
        self.field.hide()
        self.field.installEventFilter(self)
        self.field.returnPressed.connect(self._commit)
        self.node: str | None = None

    def start(self, node: str | None = None) -> bool:
        """Open the field over `node` (default: the one selected card)."""
        if node is None:
            chosen = self.scene.selected_node_ids()
            if len(chosen) != 1:
                self.notify("Select one node to rename it.")
                return False
            node = chosen[0]
        item = self.scene.nodes.get(node)
        if item is None:
            return False
        self.node = node
        top_left = self.view.mapFromScene(item.mapToScene(0, 0))
        width = max(140, int(item.boundingRect().width() * self.view.zoom))
        self.field.setGeometry(QRect(top_left.x(), top_left.y(), width, 26))
        self.field.setFont(theme.font(10, bold=True))
        self.field.setText(node)
        self.field.selectAll()
        self.field.show()
        self.field.raise_()
        self.field.setFocus()
        return True

    def _commit(self) -> None:
        if self.node is None:
            return
        try:
            self.doc.rename(self.node, self.field.text())
        except EditRefused as e:
            self.notify(f"Cannot rename: {e}")
            return
        self.cancel()

    def cancel(self) -> None:
        self.node = None
        self.view.setFocus()  # first: a focused field that hides hands focus on by chance
        self.field.hide()

    def eventFilter(self, obj, event) -> bool:
        if obj is self.field:
            if event.type() == QEvent.Type.KeyPress and event.key() == Qt.Key.Key_Escape:
                self.cancel()
                return True
            if event.type() == QEvent.Type.FocusOut and self.field.isVisible():
                self.node = None
                self.field.hide()
        return False
