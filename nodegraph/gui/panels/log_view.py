"""The run log: one timestamped line per message, coloured by level.

Lines reach the widget together, at most five times a second, so it repaints once for them:
a fast run logs a dozen lines a second, and training waits while the GUI thread paints. The
window flushes a run's last lines when the run finishes, so the panel is whole the moment the
status bar says so.

The view keeps the newest line in sight unless the reader scrolled up. Whether it follows is
decided when the reader scrolls, not from where the scroll bar stands when lines arrive: the
panel narrowing or shortening between two flushes (the Training panel beside it widening, the
window resized, a dock unfolded) wraps the lines into more rows, and the bar then stood short
of its end without anyone scrolling, so the log stopped following and showed a run's first
epoch only (issue #36).
"""

from __future__ import annotations

import html
import time

from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QPlainTextEdit

from nodegraph.gui.base import theme
from nodegraph.model.sanitize import clean_lines

LEVEL_COLORS = {"error": theme.ERROR, "warning": theme.WARNING, "debug": theme.TEXT_DIM,
                "info": theme.TEXT}
MAX_LINES = 5000
FLUSH_MS = 200


class LogView(QPlainTextEdit):
    def __init__(self, parent=None):
        super().__init__(parent)
        self.setReadOnly(True)
        self.setMaximumBlockCount(MAX_LINES)
        self.setFont(theme.font(9, mono=True))
        self.lines: list[str] = []
        self._pending: list[str] = []  # html lines not yet in the widget
        self._timer = QTimer(self, singleShot=True, interval=FLUSH_MS)
        self._timer.timeout.connect(self.flush)
        self.following = True  # the newest line is kept in sight
        bar = self.verticalScrollBar()
        bar.valueChanged.connect(self._scrolled)
        bar.rangeChanged.connect(self._range_changed)

    def _scrolled(self, value: int) -> None:
        """The reader scrolled (or the bar's end came down to where it stood): follow when at
        the end, stay put when scrolled up."""
        self.following = value >= self.verticalScrollBar().maximum() - 2

    def _range_changed(self, _low: int, high: int) -> None:
        """More rows (lines came, or the panel narrowed): keep the end in sight if following."""
        if self.following:
            self.verticalScrollBar().setValue(high)

    def log(self, text: str, level: str = "info") -> None:
        text = clean_lines(text)  # names from the file: their control characters shown
        stamp = time.strftime("%H:%M:%S")
        self.lines.append(text)
        if len(self.lines) > MAX_LINES:
            del self.lines[:-MAX_LINES]
        color = LEVEL_COLORS.get(level, theme.TEXT)
        self._pending.append(f"<span style='color:{theme.TEXT_DIM}'>{stamp}</span> "
                             f"<span style='color:{color}'>{html.escape(text)}</span>")
        if not self._timer.isActive():
            self._timer.start()

    def flush(self) -> None:
        """Show the lines logged since the last flush."""
        pending, self._pending = self._pending[-MAX_LINES:], []
        following = self.following  # a reader scrolled up stays where he is
        for line in pending:
            self.appendHtml(line)
        if following and pending:
            bar = self.verticalScrollBar()
            bar.setValue(bar.maximum())
