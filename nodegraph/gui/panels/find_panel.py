"""Find (Ctrl+F): type part of a node id, a block type, a param value or a group name.

Results list each node with its group path (`block › hidden  ·  layers.Linear`); Enter (or
a click) jumps there: the group tabs on the way are opened, the node is selected and framed,
and the keys go back to the canvas. Escape closes the panel. The matching itself is
`nodegraph.model.find` (no Qt); this is only the floating field and list.
"""

from __future__ import annotations

from PySide6.QtCore import QPoint, Qt
from PySide6.QtGui import QKeyEvent
from PySide6.QtWidgets import QFrame, QLabel, QLineEdit, QListWidget, QListWidgetItem, QVBoxLayout

from nodegraph.gui.base.list_keys import steer_list
from nodegraph.model.find import Hit, find


class FindPanel(QFrame):
    """A floating search over the window's graph; it jumps, the window does the rest."""

    def __init__(self, window):
        super().__init__(window, Qt.WindowType.Popup)
        self.window_ = window
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.edit = QLineEdit(placeholderText="Find a node: id, block type, param value, "
                                              "group name…")
        self.edit.setObjectName("find_field")
        self.count = QLabel()
        self.count.setProperty("role", "dim")
        self.list = QListWidget()
        self.list.setMinimumSize(460, 300)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 6, 6, 6)
        layout.addWidget(self.edit)
        layout.addWidget(self.count)
        layout.addWidget(self.list)
        self.hits: list[Hit] = []
        self.edit.textChanged.connect(self.search)
        self.edit.installEventFilter(self)
        self.list.itemActivated.connect(self._jump_item)
        self.list.itemClicked.connect(self._jump_item)

    def open(self, text: str = "") -> None:
        """Show the panel at the top of the canvas, the field ready to type."""
        view = self.window_.group_tabs
        self.resize(max(480, view.width() // 3), 380)
        corner = view.mapToGlobal(QPoint((view.width() - self.width()) // 2, 8))
        self.move(corner)
        self.edit.setText(text)
        self.search(text)
        self.show()
        self.edit.setFocus()
        self.edit.selectAll()

    def search(self, text: str) -> None:
        self.hits, total = find(self.window_.doc.graph, text)
        self.list.clear()
        for hit in self.hits:
            extra = f"  ·  {hit.detail}" if hit.detail else ""
            self.list.addItem(QListWidgetItem(f"{hit.where}    —  {hit.type}{extra}"))
        if self.list.count():
            self.list.setCurrentRow(0)
        more = f" (first {len(self.hits)} shown)" if total > len(self.hits) else ""
        self.count.setText(f"{total} node(s){more}" if text.strip() else "")

    def jump(self, hit: Hit) -> bool:
        """Open the group tabs down to `hit`, select and frame its node."""
        w = self.window_
        tabs = w.group_tabs
        tabs.setCurrentIndex(0)
        scene = w.scene
        for instance in hit.path:
            canvas = tabs.open_instance(scene, instance)
            if canvas is None:
                return False
            scene = canvas.scene
        if hit.node not in scene.nodes:
            return False
        scene.select_nodes([hit.node])
        view = tabs.current_view()
        view.frame_selection()
        self.hide()
        tabs.focus_canvas()
        return True

    def _jump_item(self, item: QListWidgetItem) -> None:
        self.jump(self.hits[self.list.row(item)])

    def eventFilter(self, obj, event) -> bool:
        if obj is self.edit and isinstance(event, QKeyEvent) and \
                event.type() == event.Type.KeyPress:
            key = event.key()
            if steer_list(key, self.list, self._jump_item):
                return True
            if key == Qt.Key.Key_Escape:
                self.hide()
                self.window_.group_tabs.focus_canvas()
                return True
        return super().eventFilter(obj, event)
