"""File > Compare with…: what changed between another graph file and the open graph.

The other file opens in a second window beside this one; both canvases colour the changes
(`nodegraph.model.diff`, the same comparison `nodegraph diff OTHER THIS` prints): in this
window cards and wires added since the other file are green and changed ones (type, params,
a wire's source) amber; in the other window what this graph no longer has is red and the
changed cards amber. The Compare panel lists every change; a click frames its node. The
marks follow later edits of this graph, and go when either file is replaced or Clear is
pressed. Useful with the Runs panel: "what changed between the file that worked and this".
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QRect, Qt, QTimer
from PySide6.QtWidgets import (
    QHBoxLayout,
    QLabel,
    QListWidget,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from nodegraph.model import diff
from nodegraph.model.errors import GraphFileError
from nodegraph.model.fileformat import read_document, to_document

NODE_ROLE = Qt.ItemDataRole.UserRole
MIN_SIDE = 640  # narrower than this, a window beside the other is too small to read


def side_by_side(this: QRect, screen: QRect) -> tuple[QRect, QRect]:
    """Where this window and the compared one go (frames, on `screen`'s free area): the
    other in the free room right (or left) of this one when it is at least MIN_SIDE wide,
    else each on half the screen. Neither covers the other."""
    this = this.intersected(screen) if this.intersects(screen) else QRect(screen)
    right = screen.right() - this.right()
    left = this.left() - screen.left()
    if right >= MIN_SIDE:
        return this, QRect(this.right() + 1, this.top(), min(right, this.width()),
                           this.height())
    if left >= MIN_SIDE:
        width = min(left, this.width())
        return this, QRect(this.left() - width, this.top(), width, this.height())
    half = screen.width() // 2
    return (QRect(screen.left(), screen.top(), half, screen.height()),
            QRect(screen.left() + half, screen.top(), screen.width() - half, screen.height()))


def marks(changes: list[diff.Change], side: str) -> tuple[dict[str, str], dict[tuple, str]]:
    """What to colour on one side ("this": the graph after, "other": before): node ids and
    wire inputs `(node, port)` -> "added", "changed" or "removed". Group bodies' changes
    are coloured on nothing here (the panel lists them)."""
    nodes: dict[str, str] = {}
    wires: dict[tuple, str] = {}
    for c in changes:
        if c.group is not None or c.node is None:
            continue
        if c.kind == "node" and c.action != "changed":
            if (c.action == "added") == (side == "this"):
                nodes[c.node] = c.action
        elif c.kind in ("node", "param"):
            nodes.setdefault(c.node, "changed")
        elif c.kind == "wire" and c.name is not None:
            if c.action == "changed" or (c.action == "added") == (side == "this"):
                wires[(c.node, c.name)] = c.action
    return nodes, wires


def paint(scene, nodes: dict[str, str], wires: dict[tuple, str]) -> None:
    """Set (or clear, with empty dicts) the compare marks on a canvas's cards and wires."""
    for node_id, item in scene.nodes.items():
        item.diff_mark = nodes.get(node_id)
        item.update()
    for edge, wire in scene.wires.items():
        wire.diff_mark = wires.get((edge.dst, edge.dst_port))
        wire.update()


class ComparePanel(QWidget):
    """The list of changes, and the comparison it belongs to."""

    def __init__(self, window):
        super().__init__()
        self.window_ = window
        self.title = QLabel("File > Compare with… lists here what changed between another "
                            "graph file and this one.")
        self.title.setWordWrap(True)
        self.list = QListWidget()
        self.clear_button = QPushButton("Clear")
        self.clear_button.setToolTip("remove the compare colours and close the other file")
        self.clear_button.clicked.connect(self.clear)
        top = QHBoxLayout()
        top.addWidget(self.title, 1)
        top.addWidget(self.clear_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addLayout(top)
        layout.addWidget(self.list)
        self.other_path: str | None = None
        self.other_doc: dict | None = None
        self.other_window = None
        self.changes: list[diff.Change] = []
        self.list.itemClicked.connect(self._frame)
        self._timer = QTimer(self, singleShot=True, interval=300)
        self._timer.timeout.connect(self.refresh)
        window.doc.changed.connect(lambda *_: self.other_doc is not None and self._timer.start())
        window.doc.graph_replaced.connect(self.clear)

    def compare_with(self, path: str | None = None) -> bool:
        w = self.window_
        if path is None:
            start = str(Path(w.doc.path).parent) if w.doc.path else str(Path.cwd())
            path = w.prompts.open_path(start)
            if not path:
                return False
        try:
            other = read_document(path)
        except GraphFileError as e:
            w.prompts.error("Cannot compare", str(e))
            return False
        self.clear()
        self.other_path, self.other_doc = path, other
        self.other_window = self._open_other(path)
        self.refresh()
        dock = w.docks.get("compare")
        if dock is not None:
            dock.show()
            dock.raise_()
        return True

    def _open_other(self, path: str):
        """The other file in a window of its own, beside this one (its marks are set in
        `refresh`); None when it cannot be opened as a graph here."""
        w = self.window_
        other = w.window_on(path)
        if other.doc.path is None:  # it did not open (refused, or not trusted)
            other.deleteLater()
            return None
        other.setWindowTitle(f"{Path(path).name} (compared) — nodegraph")
        screen = w.screen().availableGeometry() if w.screen() is not None else w.geometry()
        mine, theirs = side_by_side(w.frameGeometry(), screen)
        frame = w.frameGeometry().size() - w.geometry().size()  # title bar and borders
        if mine != w.frameGeometry():
            w.move(mine.topLeft())
            w.resize(mine.width() - frame.width(), mine.height() - frame.height())
        other.move(theirs.topLeft())
        other.resize(theirs.width() - frame.width(), theirs.height() - frame.height())
        other.show()
        w._windows.append(other)
        return other

    def refresh(self) -> None:
        """Compare again (this graph may have been edited since) and repaint both sides."""
        if self.other_doc is None:
            return
        w = self.window_
        self.changes = diff.compare(self.other_doc, to_document(w.doc.graph))
        paint(w.scene, *marks(self.changes, "this"))
        if self.other_window is not None:
            paint(self.other_window.scene, *marks(self.changes, "other"))
        self.title.setText(f"{Path(self.other_path or '').name} → this graph: "
                           f"{diff.summary(self.changes)}")
        self.list.clear()
        for c in self.changes:
            self.list.addItem(c.text())
            self.list.item(self.list.count() - 1).setData(NODE_ROLE, c)

    def clear(self) -> None:
        if self.other_doc is not None:
            paint(self.window_.scene, {}, {})
        self.other_doc = self.other_path = None
        self.changes = []
        self.list.clear()
        self.title.setText("File > Compare with… lists here what changed between another "
                           "graph file and this one.")
        if self.other_window is not None:
            other, self.other_window = self.other_window, None
            other.close()

    def _frame(self, item) -> None:
        c: diff.Change = item.data(NODE_ROLE)
        w = self.window_
        side = w if c.action != "removed" or c.kind != "node" else self.other_window
        if side is None or c.group is not None or c.node not in side.scene.nodes:
            return
        side.scene.select_nodes([c.node])
        side.view.frame_selection()


def install(window) -> ComparePanel:
    """The Compare dock (tabbed with Problems), and File > Compare with…."""
    panel = ComparePanel(window)
    window.add_dock("compare", "Compare", panel, Qt.DockWidgetArea.BottomDockWidgetArea,
                    tab_with="problems")
    window.docks["problems"].raise_()
    return panel
