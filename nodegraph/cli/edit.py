"""`nodegraph edit [GRAPH]`: open the graph editor (`nodegraph.gui.shell.app`).

The editor is an optional extra: without PySide6, or on Linux without a display, the command
says what is missing and how to get it instead of letting Qt abort the process.
"""

from __future__ import annotations

import argparse
import os
import sys

from nodegraph.model.errors import NodegraphError


def register(sub) -> None:
    edit = sub.add_parser("edit", description="Open the graph editor.")
    edit.add_argument("graph", nargs="?")
    edit.set_defaults(func=cmd_edit)


def cmd_edit(args: argparse.Namespace) -> int:
    try:
        from nodegraph.gui.shell.app import main as gui_main
    except ImportError as e:
        raise NodegraphError(f"the editor needs PySide6 and pyqtgraph ({e}); install them with "
                             "pip install 'nodegraph[gui]'") from None
    if _no_display():
        raise NodegraphError("the editor needs a display, and this session has none (no "
                             "DISPLAY or WAYLAND_DISPLAY): run it under xvfb-run, or train "
                             f"headless with: nodegraph run {args.graph or 'GRAPH'}")
    return gui_main(args.graph)


def _no_display() -> bool:
    """On Linux, Qt aborts the process when no display can be reached; say so instead.
    An explicit QT_QPA_PLATFORM (offscreen, vnc, ...) is the user's choice."""
    return (sys.platform.startswith("linux") and not os.environ.get("QT_QPA_PLATFORM")
            and not os.environ.get("DISPLAY") and not os.environ.get("WAYLAND_DISPLAY"))
