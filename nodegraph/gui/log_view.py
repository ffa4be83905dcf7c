"""The run log: one timestamped line per message, coloured by level."""

from __future__ import annotations

import html
import time

from PySide6.QtWidgets import QPlainTextEdit

from nodegraph.gui import theme

LEVEL_COLORS = {"error": theme.ERROR, "warning": theme.WARNING, "debug": theme.TEXT_DIM,
                "info": theme.TEXT}
MAX_LINES = 5000


class LogView(QPlainTextEdit):
    def __init__(self, parent=None):
        super().__init__(parent)
        self.setReadOnly(True)
        self.setMaximumBlockCount(MAX_LINES)
        self.setFont(theme.font(9, mono=True))
        self.lines: list[str] = []

    def log(self, text: str, level: str = "info") -> None:
        stamp = time.strftime("%H:%M:%S")
        self.lines.append(text)
        if len(self.lines) > MAX_LINES:
            del self.lines[:-MAX_LINES]
        color = LEVEL_COLORS.get(level, theme.TEXT)
        self.appendHtml(f"<span style='color:{theme.TEXT_DIM}'>{stamp}</span> "
                        f"<span style='color:{color}'>{html.escape(text)}</span>")
