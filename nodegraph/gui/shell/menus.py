"""The window's menus and toolbars: every action with its shortcut, in one table.

Shortcuts appear in the menus next to their actions, and Help > Shortcuts lists them all
from these very actions. Every shortcut belongs to the window itself (`WindowShortcut` on
actions added to the window), so it works whichever canvas, group tab or panel has focus
(Delete after a click in the palette); one rule (`key_rules`) gives a text field the keys
it types with, so T types a T in the inspector and never folds a panel. Tab is handled by
the canvas itself, so it still moves between fields elsewhere.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol, cast

from PySide6.QtCore import QObject, Qt
from PySide6.QtGui import QAction, QActionGroup, QKeySequence
from PySide6.QtWidgets import QMenu, QMenuBar, QWidget

from nodegraph.gui.document import files
from nodegraph.gui.shell import key_rules

if TYPE_CHECKING:
    from nodegraph.gui.canvas.view import GraphView
    from nodegraph.gui.document.file_actions import FileActions
    from nodegraph.gui.panels.find_panel import FindPanel
    from nodegraph.gui.panels.help import Help
    from nodegraph.gui.shell.compare_view import ComparePanel
    from nodegraph.gui.shell.group_tabs import GroupTabs
    from nodegraph.gui.training.runner import TrainingRunner

Key = QKeySequence.StandardKey


class Window(Protocol):
    """What the menus ask of the window they fill (`main_window.MainWindow`, a QMainWindow):
    a Protocol, because the window imports this module to build its menus."""

    file_actions: FileActions
    view: GraphView
    group_tabs: GroupTabs
    runner: TrainingRunner
    finder: FindPanel
    help: Help
    compare: ComparePanel
    recent: files.RecentFiles
    recent_menu: QMenu
    examples_menu: QMenu
    docks_menu: QMenu | None
    run_menu: QMenu

    def menuBar(self) -> QMenuBar: ...

    def addAction(self, action: QAction) -> None: ...

    def close(self) -> bool: ...

    def new_window(self) -> object: ...

    def export_image(self, path: str | None = None) -> bool: ...

    def save_trained_model(self, path: str | None = None) -> bool: ...

    def undo(self) -> None: ...

    def redo(self) -> None: ...

    def set_snap(self, on: bool) -> None: ...

    def set_theme(self, name: str, remember: bool = True) -> None: ...

    def show_start_page(self) -> None: ...

    def start_training(self) -> bool: ...

    def run_procedure(self, node: str | None = None) -> bool: ...

    def preview_selected(self, node: str | None = None) -> None: ...


def _action(w: Window, text: str, slot, shortcut=None, tip: str = "",
            canvas_only: bool = False) -> QAction:
    action = QAction(text, cast(QObject, w))  # the window, a QObject, owns its actions
    if shortcut is not None:
        keys = shortcut if isinstance(shortcut, list) else [shortcut]
        action.setShortcuts([QKeySequence(k) for k in keys])
    if shortcut is not None:
        # one window-wide context for every shortcut, held by the window itself and not
        # through the menu bar: the keys work wherever focus is in this window (a group's
        # tab, a dock, the palette) and never fire in a second window's place; a text
        # field keeps the keys it types with (`key_rules`), so `canvas_only` (a key that
        # acts on the canvas: Delete, F, F2, T, N) needs no narrower context
        action.setShortcutContext(Qt.ShortcutContext.WindowShortcut)
        w.addAction(action)
    if tip:
        action.setStatusTip(tip)
        action.setToolTip(f"{tip} ({action.shortcut().toString()})" if shortcut else tip)
    action.triggered.connect(lambda *_: slot())
    return action


def _leave_field(w: Window) -> None:
    """A field that had the keys (Epochs) commits and hands them to the canvas."""
    rules = getattr(w, "key_rules", None)
    if rules is not None:
        rules.leave_field()


def _train(w: Window) -> None:
    """Train, after the field that had the keys (Epochs) has committed its value."""
    _leave_field(w)
    w.start_training()


class _Current:
    """The edit actions (or view) of the canvas in front — the graph's, or an open group's
    — looked up when an action fires."""

    def __init__(self, w: Window, part: str):
        self.w, self.part = w, part

    def __getattr__(self, name: str):
        def call(*args):
            tabs = getattr(self.w, "group_tabs", None)
            if tabs is None:
                target = getattr(self.w, self.part)
            else:
                target = getattr(tabs, f"current_{self.part}")()
            return getattr(target, name)(*args)
        return call


def build(w: Window) -> dict[str, QAction]:
    """Create the actions, the menu bar and the toolbar of `w`; returns actions by name."""
    f, e, r = w.file_actions, _Current(w, "edit_actions"), w
    v = _Current(w, "view")
    a: dict[str, QAction] = {
        "new": _action(w, "&New", f.new, Key.New, "start an empty graph"),
        "new_window": _action(w, "New &Window", w.new_window, "Ctrl+Shift+N"),
        "open": _action(w, "&Open…", f.open, Key.Open, "open a graph file"),
        "save": _action(w, "&Save", f.save, Key.Save, "save the graph"),
        "save_as": _action(w, "Save &As…", f.save_as, "Ctrl+Shift+S"),
        "export_image": _action(w, "Export &Image…", w.export_image, "Ctrl+Alt+E",
                                "save a picture of the graph: PNG (by the name .png) or SVG "
                                "(.svg)"),
        "save_model": _action(w, "Save Trained &Model…", w.save_trained_model, "Ctrl+Alt+M",
                              "write the last run's trained model to a .ngz file "
                              "(nodegraph.load_model reads it: predict, export, fit on)"),
        "compare": _action(w, "Compare &with…", lambda: w.compare.compare_with(), None,
                           "open another graph file beside this one, with what changed "
                           "coloured on both (as `nodegraph diff`)"),
        "close": _action(w, "&Quit", w.close, Key.Quit),
        "undo": _action(w, "&Undo", w.undo, Key.Undo, "undo the last edit"),
        # spelt out: the standard key for redo differs between platforms (and offscreen)
        "redo": _action(w, "&Redo", w.redo, ["Ctrl+Shift+Z", "Ctrl+Y"], "redo"),
        "cut": _action(w, "Cu&t", e.cut, Key.Cut),
        "copy": _action(w, "&Copy", e.copy, Key.Copy),
        "paste": _action(w, "&Paste", e.paste, Key.Paste),
        "duplicate": _action(w, "D&uplicate", e.duplicate, "Ctrl+D"),
        "delete": _action(w, "&Delete", e.delete_selection, ["Delete", "Backspace"],
                          canvas_only=True),
        "select_all": _action(w, "Select &All", e.select_all, Key.SelectAll),
        "find": _action(w, "&Find…", lambda: w.finder.open(), "Ctrl+F",
                        "find a node by id, block type, param value or group name"),
        "rename": _action(w, "Re&name Node", e.rename_selected, "F2",
                          "rename the selected node on the canvas", canvas_only=True),
        # Tab is the canvas's own key (the view handles it), so the inspector keeps Tab
        "add_block": _action(w, "Add &Block…\tTab", v.request_search_at_cursor, None,
                             "search blocks to add at the cursor (or double-click the canvas)"),
        "comment": _action(w, "Add &Comment", e.add_comment, "Ctrl+Shift+C",
                           "a text note on the canvas (double-click it to edit)"),
        "backdrop": _action(w, "Add Bac&kdrop", e.add_backdrop, "Ctrl+B",
                            "a titled frame around the selected nodes; moving it moves them"),
        "recolour": _action(w, "Backdrop C&olour", e.recolour_backdrops, "Ctrl+Shift+B",
                            "give the selected backdrops the next colour"),
        "group": _action(w, "&Group Selection…", lambda: w.group_tabs.group_selection(),
                         "Ctrl+G", "put the selected nodes into a new group block"),
        "open_group": _action(w, "&Open Group", lambda: w.group_tabs.open_selected(),
                              "Ctrl+E", "edit the selected group's body in a tab "
                              "(or double-click the group)"),
        "back": _action(w, "&Back to Parent", lambda: w.group_tabs.back(), "Ctrl+Shift+E",
                        "close this group's tab and return to the graph around it"),
        "minimap": _action(w, "&Minimap", v.toggle_minimap, "Ctrl+M",
                           "an overview of the whole graph in the canvas corner, when it "
                           "does not fit in view"),
        "zoom_in": _action(w, "Zoom &In", lambda: v.zoom_by(1.25), ["Ctrl++", "Ctrl+="]),
        "zoom_out": _action(w, "Zoom &Out", lambda: v.zoom_by(0.8), Key.ZoomOut),
        "zoom_reset": _action(w, "&Actual Size", lambda: v.set_zoom(1.0), "Ctrl+0"),
        "fit": _action(w, "&Fit All", v.fit, "Home", "show the whole graph",
                       canvas_only=True),
        "layout": _action(w, "Auto-&layout", lambda: e.auto_layout(), "Ctrl+L",
                          "arrange the nodes in layers, inputs to outputs (in the direction "
                          "chosen last)"),
        "layout_lr": _action(w, "Auto-layout Left to Right", lambda: e.auto_layout("LR"), None,
                             "arrange the nodes in columns, inputs on the left"),
        "layout_tb": _action(w, "Auto-layout Top to Bottom", lambda: e.auto_layout("TB"),
                             "Ctrl+Shift+L", "arrange the nodes in rows, inputs at the top"),
        "frame": _action(w, "&Frame Selected", v.frame_selection, "F",
                         "show the selected nodes (the whole graph when none is selected)",
                         canvas_only=True),
        "snap": _action(w, "&Snap to Grid", lambda: w.set_snap(a["snap"].isChecked()),
                        "Ctrl+Shift+G", "moved cards land on the canvas grid"),
        "align_left": _action(w, "Align &Left", lambda: e.align("left")),
        "align_right": _action(w, "Align &Right", lambda: e.align("right")),
        "align_top": _action(w, "Align &Top", lambda: e.align("top")),
        "align_bottom": _action(w, "Align &Bottom", lambda: e.align("bottom")),
        "align_column": _action(w, "Align as &Column", lambda: e.align("hcenter"),
                                "Ctrl+Alt+Up", "centre the selected cards on one vertical"),
        "align_row": _action(w, "Align as Ro&w", lambda: e.align("vcenter"), "Ctrl+Alt+Left",
                             "centre the selected cards on one horizontal"),
        "distribute_x": _action(w, "Distribute &Horizontally", lambda: e.distribute("x"),
                                None, "equal gaps between the selected cards, left to right"),
        "distribute_y": _action(w, "Distribute &Vertically", lambda: e.distribute("y"),
                                None, "equal gaps between the selected cards, top to bottom"),
        "straighten": _action(w, "Strai&ghten Wires", e.straighten, "Ctrl+Alt+S",
                              "move the selected cards so the wires among them run level"),
        "theme_dark": _action(w, "&Dark", lambda: w.set_theme("dark")),
        "theme_light": _action(w, "&Light", lambda: w.set_theme("light")),
        "shortcuts": _action(w, "&Shortcuts", lambda: w.help.shortcuts(), "Ctrl+/",
                             "every shortcut and mouse gesture"),
        "block_help": _action(w, "&Block Documentation", lambda: w.help.block(), "F1",
                              "the selected node's block: ports, params and what it does"),
        "start_page": _action(w, "Start &Page", w.show_start_page, None,
                              "the example gallery and recent files"),
        "train": _action(w, "&Train", lambda: _train(w), "F5", "train the graph"),
        "pause": _action(w, "&Pause", r.runner.toggle_pause, "F6", "pause or resume training"),
        "stop": _action(w, "&Stop", r.runner.stop, "Shift+F5", "stop training"),
        "run_procedure": _action(w, "Run Pro&cedure", lambda: w.run_procedure(), "Ctrl+R",
                                 "run the selected procedure node (sampling, forecasting) on "
                                 "the trained model and open its view"),
        "preview": _action(w, "Pre&view Node", r.preview_selected, "Ctrl+P",
                           "show the selected node's output for one batch"),
    }
    a["pause"].setCheckable(True)
    a["snap"].setCheckable(True)
    themes = QActionGroup(cast(QObject, w))
    for name in ("theme_dark", "theme_light"):
        a[name].setCheckable(True)
        themes.addAction(a[name])
    for name in ("pause", "stop"):
        a[name].setEnabled(False)
    bar = w.menuBar()
    file_menu = bar.addMenu("&File")
    file_menu.addActions([a["new"], a["new_window"], a["open"]])
    w.recent_menu = file_menu.addMenu("Open &Recent")
    w.examples_menu = file_menu.addMenu("Open &Example")
    file_menu.addSeparator()
    file_menu.addActions([a["save"], a["save_as"]])
    file_menu.addAction(a["save_model"])
    file_menu.addAction(a["export_image"])
    file_menu.addAction(a["compare"])
    file_menu.addSeparator()
    file_menu.addAction(a["close"])
    w.recent_menu.aboutToShow.connect(lambda: fill_recent(w))
    fill_examples(w)
    edit = bar.addMenu("&Edit")
    edit.addActions([a["undo"], a["redo"]])
    edit.addSeparator()
    edit.addActions([a[n] for n in ("cut", "copy", "paste", "duplicate", "delete",
                                    "select_all", "rename", "find")])
    edit.addSeparator()
    edit.addAction(a["add_block"])
    edit.addSeparator()
    edit.addActions([a["comment"], a["backdrop"], a["recolour"]])
    edit.addSeparator()
    edit.addActions([a["group"], a["open_group"], a["back"]])
    view = bar.addMenu("&View")
    view.addActions([a[n] for n in ("zoom_in", "zoom_out", "zoom_reset", "fit", "frame",
                                    "layout", "layout_lr", "layout_tb", "minimap")])
    view.addSeparator()
    arrange = view.addMenu("&Arrange")
    arrange.addActions([a[n] for n in ("align_left", "align_right", "align_top",
                                       "align_bottom", "align_column", "align_row")])
    arrange.addSeparator()
    arrange.addActions([a["distribute_x"], a["distribute_y"], a["straighten"]])
    view.addAction(a["snap"])
    theme_menu = view.addMenu("&Theme")
    theme_menu.addActions([a["theme_dark"], a["theme_light"]])
    view.addSeparator()
    w.docks_menu = view.addMenu("&Panels")
    run = bar.addMenu("&Run")
    run.addActions([a[n] for n in ("train", "pause", "stop")])
    run.addSeparator()
    run.addActions([a["preview"], a["run_procedure"]])
    w.run_menu = run
    help_menu = bar.addMenu("&Help")
    help_menu.addActions([a["shortcuts"], a["block_help"], a["start_page"]])
    key_rules.install(cast(QWidget, w))  # where each key goes: one rule, for this window
    return a


def _opener(w: Window, path: str) -> Callable[[], object]:
    """A menu entry's slot that opens `path`."""
    return lambda: w.file_actions.open(path)


def fill_recent(w: Window) -> None:
    menu: QMenu = w.recent_menu
    menu.clear()
    paths = w.recent.list()
    for path in paths:
        menu.addAction(path, _opener(w, path))
    if not paths:
        menu.addAction("(none yet)").setEnabled(False)


def fill_examples(w: Window) -> None:
    menu: QMenu = w.examples_menu
    menu.clear()
    examples = files.example_files()
    for path in examples:
        menu.addAction(path.stem, _opener(w, str(path)))
    if not examples:
        menu.addAction("(no examples found)").setEnabled(False)
