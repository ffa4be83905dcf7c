"""The problems list: every validation problem with where it is and what to do.

One row per problem, errors first, with its location (node.port), message and hint.
Long messages wrap onto more lines (never cut off with "…"), and every cell's tooltip
holds the whole problem. Clicking a row selects the node on the canvas. The summary line
above says whether the graph is ready to train.
"""

from __future__ import annotations

import html

from PySide6.QtCore import QRect, QSize, Qt, Signal
from PySide6.QtGui import QBrush, QColor
from PySide6.QtWidgets import (
    QLabel,
    QStyledItemDelegate,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from nodegraph.gui.base import theme
from nodegraph.model.errors import Problem
from nodegraph.model.sanitize import clean, clean_lines

NODE_ROLE = Qt.ItemDataRole.UserRole


class _WrapDelegate(QStyledItemDelegate):
    """Rows as tall as their longest cell wrapped at its column's width (a tree view asks
    its delegate for one line otherwise, and cuts the rest off)."""

    def __init__(self, tree: QTreeWidget):
        super().__init__(tree)
        self.tree = tree

    def sizeHint(self, option, index) -> QSize:
        hint = super().sizeHint(option, index)
        width = self.tree.columnWidth(index.column()) - 12
        text = index.data() or ""
        if width <= 0 or not text:
            return hint
        rect = option.fontMetrics.boundingRect(QRect(0, 0, width, 100_000),
                                               int(Qt.TextFlag.TextWordWrap), text)
        return QSize(hint.width(), max(hint.height(), rect.height() + 6))


class ProblemsView(QWidget):
    """A summary line over a table of problems."""

    node_clicked = Signal(str)

    def __init__(self, parent=None):
        super().__init__(parent)
        self.summary = QLabel()
        self.table = QTreeWidget()
        self.table.setColumnCount(3)
        self.table.setHeaderLabels(["Where", "Problem", "Hint"])
        self.table.setRootIsDecorated(False)
        self.table.setWordWrap(True)
        self.table.setTextElideMode(Qt.TextElideMode.ElideNone)
        self.table.setUniformRowHeights(False)
        self.table.setItemDelegate(_WrapDelegate(self.table))
        header = self.table.header()
        header.setStretchLastSection(False)
        header.setSectionResizeMode(1, header.ResizeMode.Stretch)  # the message gets the room
        self.table.setColumnWidth(0, 130)
        self.table.setColumnWidth(2, 220)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addWidget(self.summary)
        layout.addWidget(self.table)
        self.table.itemClicked.connect(self._on_click)
        # rows grow and shrink with the column: re-wrap when a column is resized
        header.sectionResized.connect(lambda *_: self.table.doItemsLayout())
        self.problems: list[Problem] = []
        self.set_problems([])

    def checking(self, forget: bool = False) -> None:
        """A check is running: say so, and grey the rows it may change (`forget`: another
        file is open, so the rows belong to no graph shown and go at once)."""
        if forget:
            self.problems = []
            self.table.clear()
        self.table.setEnabled(False)
        self.summary.setText(f"<span style='color:{theme.TEXT_DIM}'>checking…</span>")

    def set_problems(self, problems: list[Problem], extra_note: str = "") -> None:
        self.table.setEnabled(True)
        self.problems = sorted(problems, key=lambda p: (p.severity != "error", p.location()))
        self.table.clear()
        for p in self.problems:
            item = QTreeWidgetItem(self.table, [clean(p.location()), clean_lines(p.message),
                                                clean_lines(p.hint)])
            item.setForeground(0, QBrush(QColor(
                theme.ERROR if p.severity == "error" else theme.WARNING)))
            tip = _tooltip(p)
            for column in range(3):
                item.setToolTip(column, tip)
            item.setData(0, NODE_ROLE, p.node)
        errors = sum(p.severity == "error" for p in problems)
        warnings = len(problems) - errors
        if not problems:
            text, color = "No problems found.", theme.OK
        else:
            text = f"{errors} error(s), {warnings} warning(s)"
            color = theme.ERROR if errors else theme.WARNING
        self.summary.setText(f"<span style='color:{color}'>{text}</span> {extra_note}")

    def _on_click(self, item: QTreeWidgetItem) -> None:
        node = item.data(0, NODE_ROLE)
        if node:
            self.node_clicked.emit(node)


def _tooltip(p: Problem) -> str:
    """The whole problem as rich text (Qt wraps rich-text tooltips at a readable width)."""
    text = f"<b>{html.escape(clean(p.location()))}</b>: {html.escape(clean_lines(p.message))}"
    return text + (f"<br><i>hint: {html.escape(clean_lines(p.hint))}</i>" if p.hint else "")
