"""The block palette: every registered block by family, searchable, dragged onto the canvas.

Blocks come from the registry, so a new block appears here without a line of editor code.
Each entry shows the block's name with its doc as a tooltip, and carries its id in a drag
so the canvas can add it where it is dropped; double-clicking an entry adds it in the
middle of the view. The search ranks as `ranking.rank` does ("xent" finds CrossEntropy);
with an empty search the starred and recent blocks head the tree. Right-click an entry to
star it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from PySide6.QtCore import QMimeData, Qt, Signal
from PySide6.QtGui import QBrush, QColor
from PySide6.QtWidgets import (
    QLineEdit,
    QMenu,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from nodegraph.gui.base import theme
from nodegraph.gui.canvas.view import BLOCK_MIME
from nodegraph.gui.panels.ranking import rank
from nodegraph.model.spec import Registry

if TYPE_CHECKING:
    from nodegraph.gui.panels.block_prefs import BlockPrefs
    from nodegraph.model.groupdefs import GroupRegistry

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

    def __init__(self, registry: Registry | GroupRegistry, parent=None):
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
        self.tree.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.tree.customContextMenuRequested.connect(self._menu)
        self.prefs: BlockPrefs | None = None  # once the window installs one
        self.menu: QMenu | None = None  # the last context menu shown
        self.refresh()

    def set_prefs(self, prefs: BlockPrefs) -> None:
        self.prefs = prefs
        prefs.changed.connect(self._refresh_unless_searching)
        self.refresh()

    def _refresh_unless_searching(self) -> None:
        if not self.search.text().strip():  # never reorder what the user is reading
            self.refresh()

    def set_registry(self, registry: Registry | GroupRegistry) -> None:
        self.registry = registry
        self.refresh()

    def refresh(self) -> None:
        """Show the blocks matching the search text, by family (all when it is empty)."""
        query = self.search.text().strip()
        recent = self.prefs.recent if self.prefs is not None else []
        favourites = self.prefs.favourites if self.prefs is not None else []
        self.tree.clear()
        groups: dict[str, QTreeWidgetItem] = {}
        if query:
            specs = rank(query, self.registry, recent=recent, favourites=favourites)
        else:
            specs = sorted(self.registry, key=lambda s: (s.category, s.id))
            known = {s.id: s for s in self.registry}
            for title, ids in (("★ favourites", favourites), ("recent", recent)):
                for block_id in ids:
                    if block_id in known:
                        self._leaf(self._group(groups, title, QColor(theme.SELECTION)),
                                   known[block_id], favourites)
        for spec in specs:
            color = theme.category_color(spec.category).lighter(150)
            self._leaf(self._group(groups, spec.category, color), spec, favourites)
        self.tree.expandAll()

    def _group(self, groups: dict, title: str, color: QColor) -> QTreeWidgetItem:
        group = groups.get(title)
        if group is None:
            group = QTreeWidgetItem(self.tree, [title])
            group.setFlags(Qt.ItemFlag.ItemIsEnabled)
            group.setForeground(0, QBrush(color))
            font = group.font(0)
            font.setBold(True)
            group.setFont(0, font)
            groups[title] = group
        return group

    def _leaf(self, group: QTreeWidgetItem, spec, favourites) -> None:
        star = "★ " if spec.id in favourites else ""
        leaf = QTreeWidgetItem(group, [star + spec.id.split(".", 1)[1]])
        leaf.setData(0, ID_ROLE, spec.id)
        leaf.setToolTip(0, f"<b>{spec.id}</b><br>{spec.doc.strip().replace(chr(10), '<br>')}")
        leaf.setForeground(0, QBrush(QColor(theme.TEXT)))
        leaf.setFlags(Qt.ItemFlag.ItemIsEnabled | Qt.ItemFlag.ItemIsSelectable
                      | Qt.ItemFlag.ItemIsDragEnabled)

    def _menu(self, pos) -> None:
        item = self.tree.itemAt(pos)
        block_id = item.data(0, ID_ROLE) if item is not None else None
        if not block_id or self.prefs is None:
            return
        menu = QMenu(self.tree)
        starred = self.prefs.is_favourite(block_id)
        menu.addAction("Remove from Favourites" if starred else "Add to Favourites",
                       lambda: self.prefs.toggle_favourite(block_id))
        menu.popup(self.tree.viewport().mapToGlobal(pos))
        self.menu = menu

    def visible_ids(self) -> list[str]:
        """Block ids shown now, top to bottom (a starred or recent block may show twice)."""
        out = []
        for i in range(self.tree.topLevelItemCount()):
            group = self.tree.topLevelItem(i)
            if group is not None:
                out += [child.data(0, ID_ROLE) for j in range(group.childCount())
                        if (child := group.child(j)) is not None]
        return out

    def _on_double_click(self, item: QTreeWidgetItem) -> None:
        block_id = item.data(0, ID_ROLE)
        if block_id:
            self.block_activated.emit(block_id)

    def _activate_first(self) -> None:
        ids = self.visible_ids()
        if ids:
            self.block_activated.emit(ids[0])
