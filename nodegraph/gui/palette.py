"""The block palette: every registered block by family, searchable, dragged onto the canvas.

Blocks come from the registry, so a new block appears here without a line of editor code.
Each entry shows the block's name with its one-line summary as a tooltip (the whole doc),
and carries its id in a drag so the canvas can add it where it is dropped; double-clicking
an entry adds it in the middle of the view.
"""

from __future__ import annotations

from PySide6.QtCore import QMimeData, Qt, Signal
from PySide6.QtGui import QBrush, QColor
from PySide6.QtWidgets import QLineEdit, QTreeWidget, QTreeWidgetItem, QVBoxLayout, QWidget

from nodegraph.gui import theme
from nodegraph.gui.fuzzy import rank
from nodegraph.gui.view import BLOCK_MIME
from nodegraph.model.spec import Registry

ID_ROLE = Qt.ItemDataRole.UserRole


class _BlockTree(QTreeWidget):
    """A tree whose leaves drag their block id."""

    def mimeTypes(self) -> list[str]:
        return [BLOCK_MIME]

    def mimeData(self, items) -> QMimeData:
        data = QMimeData()
        ids = [i.data(0, ID_ROLE) for i in items if i.data(0, ID_ROLE)]
        if ids:
            data.setData(BLOCK_MIME, ids[0].encode())
            data.setText(ids[0])
        return data


class Palette(QWidget):
    """Search box over a tree of blocks grouped by category."""

    block_activated = Signal(str)  # double-clicked: add this block

    def __init__(self, registry: Registry, parent=None):
        super().__init__(parent)
        self.registry = registry
        self.search = QLineEdit(placeholderText="Search blocks…  (e.g. lin, bce, adam)")
        self.search.setClearButtonEnabled(True)
        self.tree = _BlockTree()
        self.tree.setHeaderHidden(True)
        self.tree.setDragEnabled(True)
        self.tree.setDragDropMode(QTreeWidget.DragDropMode.DragOnly)
        self.tree.setIndentation(14)
        self.tree.setUniformRowHeights(True)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addWidget(self.search)
        layout.addWidget(self.tree)
        self.search.textChanged.connect(self.refresh)
        self.search.returnPressed.connect(self._activate_first)
        self.tree.itemDoubleClicked.connect(self._on_double_click)
        self.refresh()

    def set_registry(self, registry: Registry) -> None:
        self.registry = registry
        self.refresh()

    def refresh(self) -> None:
        """Show the blocks matching the search text, by family (all when it is empty)."""
        query = self.search.text().strip()
        specs = rank(query, self.registry) if query else list(self.registry)
        self.tree.clear()
        groups: dict[str, QTreeWidgetItem] = {}
        for spec in specs if query else sorted(specs, key=lambda s: (s.category, s.id)):
            group = groups.get(spec.category)
            if group is None:
                group = QTreeWidgetItem(self.tree, [spec.category])
                group.setFlags(Qt.ItemFlag.ItemIsEnabled)
                group.setForeground(0, QBrush(theme.category_color(spec.category).lighter(150)))
                font = group.font(0)
                font.setBold(True)
                group.setFont(0, font)
                groups[spec.category] = group
            leaf = QTreeWidgetItem(group, [spec.id.split(".", 1)[1]])
            leaf.setData(0, ID_ROLE, spec.id)
            leaf.setToolTip(0, f"<b>{spec.id}</b><br>{spec.doc.strip().replace(chr(10), '<br>')}")
            leaf.setForeground(0, QBrush(QColor(theme.TEXT)))
            leaf.setFlags(Qt.ItemFlag.ItemIsEnabled | Qt.ItemFlag.ItemIsSelectable
                          | Qt.ItemFlag.ItemIsDragEnabled)
        self.tree.expandAll()

    def visible_ids(self) -> list[str]:
        """Block ids shown now, top to bottom."""
        out = []
        for i in range(self.tree.topLevelItemCount()):
            group = self.tree.topLevelItem(i)
            out += [group.child(j).data(0, ID_ROLE) for j in range(group.childCount())]
        return out

    def _on_double_click(self, item: QTreeWidgetItem) -> None:
        block_id = item.data(0, ID_ROLE)
        if block_id:
            self.block_activated.emit(block_id)

    def _activate_first(self) -> None:
        ids = self.visible_ids()
        if ids:
            self.block_activated.emit(ids[0])
