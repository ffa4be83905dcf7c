"""The Log panel keeps a run's newest line in sight, whatever happens to the panel's size
between two of its (throttled) updates. Issue #36: "the log shows only epoch 1 of a 7-epoch
run". The log decided whether to follow from where its scroll bar stood when lines came;
rows added without anyone scrolling (long lines wrapping in a narrow panel, counted once laid
out; the panel narrowing or shortening) left the bar short of its end, and from then on the
log stayed on the run's first lines."""

from __future__ import annotations

import re

from PySide6.QtCore import QPoint, QPointF, Qt
from PySide6.QtGui import QWheelEvent
from PySide6.QtWidgets import QApplication, QLineEdit

from nodegraph.gui.panels.log_view import LogView
from tests.gui.test_shortcuts_always import _start
from tests.gui.test_wave_labels import train_by_hand

NONE = Qt.MouseButton.NoButton


def last_shown_line(log) -> str:
    """The text of the line at the bottom of the Log panel's view."""
    return log.cursorForPosition(log.viewport().rect().bottomLeft()).block().text()


def first_shown_line(log) -> str:
    return log.cursorForPosition(log.viewport().rect().topLeft()).block().text()


def test_every_epoch_of_a_seven_epoch_run_is_in_the_log_panel(xor_window, qtbot, tmp_path):
    w = xor_window
    w.resize(1600, 1000)
    _start(w, qtbot)
    w.docks["log"].raise_()
    train_by_hand(qtbot, w, 7)  # typed into the Epochs box, Train clicked
    # the run has just ended (the status bar says so): its lines are all in the panel already,
    # not 0.2 s later (a fast run's epochs come in one burst after the first update: a look
    # when it finished showed epoch 1 only)
    w.grab().save(str(tmp_path / "when_finished.png"))
    assert "Training finished after 7 epoch(s)" in w.log.toPlainText()
    # and the box gave the keys back (#36: it kept focus with its text selected after a run)
    line = w.epochs.findChild(QLineEdit)
    assert QApplication.focusWidget() is w.view and not line.hasSelectedText()
    w.grab().save(str(tmp_path / "after_run.png"))
    epochs = [int(m.group(1)) for line in w.log.lines if (m := re.match(r"epoch (\d+)/7:", line))]
    assert epochs == [1, 2, 3, 4, 5, 6, 7]
    text = w.log.toPlainText()
    assert all(f"epoch {k}/7:" in text for k in range(1, 8))  # in the panel, not only kept
    assert "Training finished after 7 epoch(s)" in last_shown_line(w.log)


def _log(qtbot, width: int) -> LogView:
    log = LogView()
    qtbot.addWidget(log)
    log.resize(width, 150)
    log.show()
    qtbot.waitExposed(log)
    return log


def _run_lines(log, qtbot, first: int, last: int) -> None:
    for k in range(first, last + 1):
        log.log(f"epoch {k}/7: loss 0.{k}{k}{k}, accuracy 0.9 | val loss 0.{k}, accuracy 0.8")
        qtbot.waitUntil(lambda: not log._pending, timeout=5000)  # each its own flush


def test_the_log_follows_a_run_whose_lines_wrap(qtbot):
    """A panel narrower than the epoch lines (a run with val metrics, the Training panel
    beside the log): each line takes rows the scroll bar counts only once they are laid out,
    after the log chose where to scroll; the old log lost the end after a few epochs."""
    log = _log(qtbot, 300)
    log.log("Training cnn_digits.json: 7 epochs on auto")
    _run_lines(log, qtbot, 1, 7)
    bar = log.verticalScrollBar()
    assert bar.maximum() > 7  # the lines wrapped into more rows than the panel shows
    assert "epoch 7/7" in last_shown_line(log)
    assert bar.value() == bar.maximum()


def test_a_reader_scrolled_up_stays_where_he_is(qtbot):
    log = _log(qtbot, 300)
    _run_lines(log, qtbot, 1, 7)
    bar = log.verticalScrollBar()
    assert bar.value() == bar.maximum() > 0  # following the end
    at = QPointF(log.viewport().rect().center())
    for _ in range(12):  # the mouse wheel turned up, to the top
        QApplication.sendEvent(log.viewport(), QWheelEvent(
            at, QPointF(log.viewport().mapToGlobal(at.toPoint())), QPoint(0, 0),
            QPoint(0, 120), NONE, Qt.KeyboardModifier.NoModifier, Qt.ScrollPhase.NoScrollPhase,
            False))
    assert bar.value() == 0
    top = first_shown_line(log)
    _run_lines(log, qtbot, 1, 3)  # a next run logs
    assert bar.value() == 0 and first_shown_line(log) == top
    for _ in range(40):  # wheeled back down to the end: it follows again
        QApplication.sendEvent(log.viewport(), QWheelEvent(
            at, QPointF(log.viewport().mapToGlobal(at.toPoint())), QPoint(0, 0),
            QPoint(0, -120), NONE, Qt.KeyboardModifier.NoModifier,
            Qt.ScrollPhase.NoScrollPhase, False))
    _run_lines(log, qtbot, 4, 7)
    assert "epoch 7/7" in last_shown_line(log)
