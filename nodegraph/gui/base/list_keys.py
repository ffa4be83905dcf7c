"""The keys a search field passes to the list of results under it, shared by the block
search (Tab) and Find (Ctrl+F): Up and Down move through the list, Enter takes the
current item. Anything else stays with the field."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QListWidget, QListWidgetItem


def steer_list(key: int, results: QListWidget,
               take: Callable[[QListWidgetItem], object]) -> bool:
    """Handle `key` for `results` (True when it was one of these keys)."""
    if key in (Qt.Key.Key_Down, Qt.Key.Key_Up):
        row = results.currentRow() + (1 if key == Qt.Key.Key_Down else -1)
        results.setCurrentRow(max(0, min(results.count() - 1, row)))
        return True
    if key in (Qt.Key.Key_Return, Qt.Key.Key_Enter):
        item = results.currentItem()
        if item is not None:
            take(item)
        return True
    return False
