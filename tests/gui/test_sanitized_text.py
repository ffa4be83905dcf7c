"""The editor shows text from a file with its control characters escaped (issue #24, item 3):
the log panel and the problems list."""

from __future__ import annotations

from nodegraph.gui.panels.log_view import LogView
from nodegraph.gui.panels.problems import _tooltip
from nodegraph.model.errors import Problem

ESC = "\x1b]52;c;cHduZWQ=\x07\u202e"


def test_the_log_panel_escapes_what_a_file_wrote(qtbot):
    view = LogView()
    qtbot.addWidget(view)
    view.log("node n" + ESC + " failed")
    view.flush()
    assert view.lines[-1] == "node n\\x1b]52;c;cHduZWQ=\\x07\\u202e failed"
    assert "\x1b" not in view.toPlainText() and "\u202e" not in view.toPlainText()


def test_a_problems_tooltip_escapes_node_and_message():
    tip = _tooltip(Problem("n" + ESC, None, "bad_param", "<b>x</b>" + ESC, "hint" + ESC))
    assert "\x1b" not in tip and "\x07" not in tip and "&lt;b&gt;" in tip
