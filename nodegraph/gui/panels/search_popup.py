"""The block search that pops up at the cursor (Tab, double-click, or a wire dropped loose).

Type a few letters (or a word people use: "xent", "bn", "fc"), pick with the arrows and
Enter (or a click). When a wire was dropped on empty canvas, the list holds only blocks
with a port that wire fits, the title says so, and what usually follows comes first (after
logits: the losses and metrics). Ctrl+D stars the current block (favourites rank higher).
Hovering an entry shows the block's doc. The last entry finds the typed text among the
graph's own nodes (the Find panel, Ctrl+F). The popup only reports the choice; the window
makes the edit.
"""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import QPoint, Qt, Signal
from PySide6.QtGui import QKeyEvent
from PySide6.QtWidgets import QFrame, QLabel, QLineEdit, QListWidget, QListWidgetItem, QVBoxLayout

from nodegraph.gui.base.list_keys import steer_list
from nodegraph.gui.panels.ranking import Context, rank
from nodegraph.model.spec import BlockSpec

ID_ROLE = Qt.ItemDataRole.UserRole
FIND_ROLE = Qt.ItemDataRole.UserRole + 1  # the last row: find the text among the nodes


class SearchPopup(QFrame):
    """A small floating list of blocks filtered as the user types."""

    chosen = Signal(str)
    find_requested = Signal(str)  # "find this among the graph's nodes" (Ctrl+F's panel)

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
        self.context: Context | None = None
        self.prefs = None  # a block_prefs.BlockPrefs once the window installs one
        self.offers_find = False  # set by the window that answers find_requested
        self.edit.textChanged.connect(self._filter)
        self.edit.installEventFilter(self)
        self.list.itemActivated.connect(self._choose_item)
        self.list.itemClicked.connect(self._choose_item)

    def open_at(self, screen_pos: QPoint, specs: Sequence[BlockSpec], title: str = "",
                context: Context | None = None) -> None:
        self.specs = list(specs)
        self.context = context
        self.title.setText(title or "Add a block")
        self.edit.clear()
        self._filter("")
        self.move(screen_pos)
        self.show()
        self.edit.setFocus()

    def _filter(self, text: str) -> None:
        self.list.clear()
        recent = self.prefs.recent if self.prefs is not None else ()
        favourites = set(self.prefs.favourites) if self.prefs is not None else set()
        for spec in rank(text, self.specs, self.context, recent, favourites):
            star = "★ " if spec.id in favourites else ""
            item = QListWidgetItem(f"{star}{spec.id}    —  {spec.summary}")
            item.setData(ID_ROLE, spec.id)
            item.setToolTip(f"<b>{spec.id}</b><br>"
                            + spec.doc.strip().replace("\n\n", "<br><br>"))
            self.list.addItem(item)
        if text.strip() and self.offers_find:
            # the same search reaches the graph's own nodes: ids, params, groups
            find = QListWidgetItem(f"Find “{text.strip()}” among the graph's nodes…  (Ctrl+F)")
            find.setData(FIND_ROLE, text.strip())
            self.list.addItem(find)
        if self.list.count():
            self.list.setCurrentRow(0)

    def toggle_favourite(self) -> None:
        """Star or unstar the current entry (Ctrl+D)."""
        item = self.list.currentItem()
        if item is None or self.prefs is None:
            return
        row = self.list.currentRow()
        self.prefs.toggle_favourite(item.data(ID_ROLE))
        self._filter(self.edit.text())
        self.list.setCurrentRow(min(row, self.list.count() - 1))

    def shown_ids(self) -> list[str]:
        return [self.list.item(i).data(ID_ROLE) for i in range(self.list.count())
                if self.list.item(i).data(ID_ROLE) is not None]

    def choose(self, block_id: str) -> None:
        self.hide()
        self.chosen.emit(block_id)

    def _choose_item(self, item: QListWidgetItem) -> None:
        if item.data(FIND_ROLE) is not None:
            self.hide()
            self.find_requested.emit(item.data(FIND_ROLE))
            return
        self.choose(item.data(ID_ROLE))

    def eventFilter(self, obj, event) -> bool:
        if obj is self.edit and isinstance(event, QKeyEvent) and \
                event.type() == event.Type.KeyPress:
            key = event.key()
            if steer_list(key, self.list, self._choose_item):
                return True
            if key == Qt.Key.Key_D and event.modifiers() & Qt.KeyboardModifier.ControlModifier:
                self.toggle_favourite()
                return True
            if key == Qt.Key.Key_Escape:
                self.hide()
                return True
        return super().eventFilter(obj, event)
