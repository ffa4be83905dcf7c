"""The block search that pops up at the cursor (Tab, double-click, or a wire dropped loose).

Type a few letters, pick with the arrows and Enter (or a click). When a wire was dropped
on empty canvas, the list holds only blocks with a port that wire fits, and the title says
so. The popup only reports the choice; the window makes the edit.
"""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import QPoint, Qt, Signal
from PySide6.QtGui import QKeyEvent
from PySide6.QtWidgets import QFrame, QLabel, QLineEdit, QListWidget, QListWidgetItem, QVBoxLayout

from nodegraph.gui.fuzzy import rank
from nodegraph.model.spec import BlockSpec

ID_ROLE = Qt.ItemDataRole.UserRole


class SearchPopup(QFrame):
    """A small floating list of blocks filtered as the user types."""

    chosen = Signal(str)

    def __init__(self, parent=None):
        super().__init__(parent, Qt.WindowType.Popup)
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.title = QLabel()
        self.title.setProperty("role", "dim")
        self.edit = QLineEdit(placeholderText="Type to search blocks…")
        self.list = QListWidget()
        self.list.setMinimumWidth(340)
        self.list.setMinimumHeight(260)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 6, 6, 6)
        layout.addWidget(self.title)
        layout.addWidget(self.edit)
        layout.addWidget(self.list)
        self.specs: list[BlockSpec] = []
        self.edit.textChanged.connect(self._filter)
        self.edit.installEventFilter(self)
        self.list.itemActivated.connect(self._choose_item)
        self.list.itemClicked.connect(self._choose_item)

    def open_at(self, screen_pos: QPoint, specs: Sequence[BlockSpec], title: str = "") -> None:
        self.specs = list(specs)
        self.title.setText(title or "Add a block")
        self.edit.clear()
        self._filter("")
        self.move(screen_pos)
        self.show()
        self.edit.setFocus()

    def _filter(self, text: str) -> None:
        self.list.clear()
        for spec in rank(text, self.specs) if text.strip() else self.specs:
            item = QListWidgetItem(f"{spec.id}    —  {spec.summary}")
            item.setData(ID_ROLE, spec.id)
            item.setToolTip(spec.doc)
            self.list.addItem(item)
        if self.list.count():
            self.list.setCurrentRow(0)

    def shown_ids(self) -> list[str]:
        return [self.list.item(i).data(ID_ROLE) for i in range(self.list.count())]

    def choose(self, block_id: str) -> None:
        self.hide()
        self.chosen.emit(block_id)

    def _choose_item(self, item: QListWidgetItem) -> None:
        self.choose(item.data(ID_ROLE))

    def eventFilter(self, obj, event) -> bool:
        if obj is self.edit and isinstance(event, QKeyEvent) and \
                event.type() == event.Type.KeyPress:
            key = event.key()
            if key in (Qt.Key.Key_Down, Qt.Key.Key_Up):
                row = self.list.currentRow() + (1 if key == Qt.Key.Key_Down else -1)
                self.list.setCurrentRow(max(0, min(self.list.count() - 1, row)))
                return True
            if key in (Qt.Key.Key_Return, Qt.Key.Key_Enter):
                item = self.list.currentItem()
                if item is not None:
                    self._choose_item(item)
                return True
            if key == Qt.Key.Key_Escape:
                self.hide()
                return True
        return super().eventFilter(obj, event)
