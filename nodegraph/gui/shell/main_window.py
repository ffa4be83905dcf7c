"""The main window: the canvas in the middle, docks around it, toolbar and menus on top.

It creates the parts and connects them; each part does its own job. Graph changes flow
document -> scene/inspector/validator; validation reports flow validator -> scene (errors
painted on nodes and wires), problems list and inspector; training events flow runner ->
plots, status bar and log. Edits made while a run is going ask first whether to stop it.

The window remembers, in its QSettings, its size and dock layout, the theme, snapping,
and the zoom and place of each file it showed; an empty canvas shows the start page.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import QEvent, QSettings, Qt, QTimer
from PySide6.QtGui import QCloseEvent, QColor
from PySide6.QtWidgets import (
    QApplication,
    QComboBox,
    QDockWidget,
    QLabel,
    QMainWindow,
    QMenu,
    QSpinBox,
    QToolBar,
    QWidget,
)

from nodegraph.gui.base import theme
from nodegraph.gui.base.later import later
from nodegraph.gui.base.prompts import Prompts
from nodegraph.gui.canvas import collapse, image_export
from nodegraph.gui.canvas.scene import GraphScene
from nodegraph.gui.canvas.view import GraphView, graph_file
from nodegraph.gui.canvas.view_places import ViewPlaces
from nodegraph.gui.document import files, shape_memo
from nodegraph.gui.document.document import Document
from nodegraph.gui.document.file_actions import FileActions
from nodegraph.gui.document.shape_memo import ShapeMemo
from nodegraph.gui.document.validator import Validator
from nodegraph.gui.panels import block_prefs
from nodegraph.gui.panels.blocks_loader import BlocksLoader, devices
from nodegraph.gui.panels.find_panel import FindPanel
from nodegraph.gui.panels.help import Help
from nodegraph.gui.panels.inspector import Inspector
from nodegraph.gui.panels.log_view import LogView
from nodegraph.gui.panels.palette import Palette
from nodegraph.gui.panels.problems import ProblemsView
from nodegraph.gui.shell import compare_view, data_access, menus, panel_edges
from nodegraph.gui.shell.edit_actions import EditActions
from nodegraph.gui.shell.group_tabs import GroupTabs
from nodegraph.gui.shell.start_page import StartPage
from nodegraph.gui.training import node_views, run_history
from nodegraph.gui.training.plots import TrainingPlots
from nodegraph.gui.training.preview import PreviewPanel, node_outputs, preview_error
from nodegraph.gui.training.run_status import RunStatus
from nodegraph.gui.training.runner import TrainingRunner
from nodegraph.gui.training.watch import install as install_watch
from nodegraph.model import settings as training_settings
from nodegraph.model import wire_labels
from nodegraph.model.errors import NodegraphError
from nodegraph.model.events import (
    EpochEnded,
    Message,
    NodeFailed,
    RunFinished,
    RunStarted,
    StepEnded,
)
from nodegraph.model.fileformat import load
from nodegraph.model.graph import Graph
from nodegraph.model.spec import Registry, default_registry_loaded

if TYPE_CHECKING:
    from nodegraph.gui.training.run_history import RunHistoryPanel

compiler = later("nodegraph.runtime.compile")  # torch: imported by the first preview

SLOW_PREVIEW_S = 0.5


class MainWindow(QMainWindow):
    """One editor window over one document."""

    # the Blocks dock; it hides QWidget.palette(), which nothing calls on a window
    palette: Palette  # type: ignore[assignment]
    # made by the modules that install them (menus, run_history)
    recent_menu: QMenu
    examples_menu: QMenu
    docks_menu: QMenu | None  # View > Panels: None until the menus are made
    run_menu: QMenu
    run_history: RunHistoryPanel

    def __init__(self, path: str | None = None, *, registry: Registry | None = None,
                 settings: QSettings | None = None, prompts: Prompts | None = None,
                 recovery_dir: str | Path | None = None, autosave_ms: int | None = None,
                 draw_first: bool = False):
        """`draw_first` (the `nodegraph edit` launch): when the block library is not
        imported yet, show the file's cards at once and load the library after the first
        paint (see `blocks_loader`); edits, checks and Train wait for it."""
        super().__init__()
        self.blocks_loading = draw_first and registry is None and not default_registry_loaded()
        if self.blocks_loading:
            registry = Registry()  # no blocks yet: cards show their ids and types
        self.settings = settings or QSettings("nodegraph", "editor")
        self.prompts = prompts or Prompts(self)
        self.recent = files.RecentFiles(self.settings)
        self.doc = Document(Graph(registry=registry) if registry is not None else None,
                            parent=self)
        self.doc.edit_guard = self._may_edit
        self.doc.live_edit = self._live_edit  # an optimizer's lr changes without a Stop
        self.scene = GraphScene(self.doc, self)
        self.view = GraphView(self.scene)
        self.places = ViewPlaces(self.settings, self.view)  # zoom and place per file
        self.setCentralWidget(self.view)
        self.validator = Validator(self.doc, self)
        self.runner = TrainingRunner(self, warm=not self.blocks_loading)
        self.edit_actions = EditActions(self.doc, self.scene, self.view, self.notify)
        recovery = Path(recovery_dir) if recovery_dir else files.state_dir()
        self.file_actions = FileActions(self.doc, self.prompts, self.recent, recovery,
                                        self.notify, self._after_open)
        self.shape_memo = ShapeMemo(recovery.parent)  # labels at the first paint
        self._build_docks()
        self.help = Help(self)
        self.actions_by_name = menus.build(self)
        self._build_toolbar()
        self._build_status_bar()
        self._connect()
        self.group_tabs = GroupTabs(self)  # the canvas in a tab; groups open beside it
        self.finder = FindPanel(self)  # Ctrl+F: any node by id, type, param or group
        self.edit_actions.popup.find_requested.connect(self.finder.open)
        self.edit_actions.popup.offers_find = True
        self.node_views = node_views.install(self)  # per-node view dock, View menu
        self.watch = install_watch(self)  # animation, badges, timeline, step-through
        self.block_prefs = block_prefs.install(self)  # recent and starred blocks
        self.collapser = collapse.install(self)  # cards shown as their title bar only
        self.run_recorder = run_history.install(self)  # the Runs dock: past runs compared
        self.compare = compare_view.install(self)  # File > Compare with…: two files' changes
        self.panel_edges = panel_edges.install(self)  # T, N, Ctrl+J fold the panels away
        self.data_access = data_access.install(self)  # data outside the folder: asked, kept
        self.inspector.run_procedure = self.run_procedure
        # installed last, so it sees events first: Ctrl+right-drag is the knife, not a menu
        self.view.viewport().installEventFilter(self)
        self._windows: list[MainWindow] = []
        self._painted = False
        self._warm_after_check = False  # the first report starts the first run's warm-up
        self._preview_cache: tuple[int, object] | None = None
        self._slow_previews = 0
        self.autosave_timer = QTimer(self, interval=autosave_ms or files.autosave_interval_ms())
        self.autosave_timer.timeout.connect(self.file_actions.autosave)
        self.autosave_timer.start()
        self.start_page = StartPage(self.view, self.recent, self.doc.graph.base_registry,
                                    recovery.parent / "thumbnails")
        self.start_page.open_requested.connect(lambda p: self.file_actions.open(p))
        self.view.installEventFilter(self)
        self.setAcceptDrops(True)
        self._shown_path: str | None = None  # the file whose place the view shows
        self._restore_settings()
        self._update_title()
        self._path_to_open = path
        self.blocks = BlocksLoader(self)
        self.blocks.loaded.connect(self._blocks_arrived)
        self.blocks.failed.connect(self._blocks_failed)
        if self.blocks_loading:
            self._first_look(path)
        elif path:
            self.file_actions.open(path)
        else:
            self.file_actions.recover_untitled()
        self._update_start_page()
        self.view.setFocus()  # keys go to the canvas from the start, not the palette search

    # -- construction ----------------------------------------------------------------------

    def _first_look(self, path: str | None) -> None:
        """Before the blocks are in: the file's cards as read without them (ids, types,
        wires), checks held, Problems saying 'checking…'; the real open follows."""
        self.validator.hold(True)
        if path:
            try:
                self.doc.set_graph(load(path, self.doc.graph.base_registry), path)
            except Exception:  # the real open, once the blocks are in, says what is wrong
                pass
            else:
                self.view.fit()
                self._recall_labels()
        self.problems.checking(forget=True)
        self.notify("Loading the blocks…")

    def _after_first_paint(self) -> None:
        if self.blocks_loading:
            self.blocks.start()

    def _blocks_arrived(self, registry: Registry, devices: list[str]) -> None:
        """The library is in: open the file for real (trust and autosave questions, the
        load report), fill the palette, start checking, and warm up the first run."""
        self.blocks_loading = False
        self.doc.graph.base_registry = registry  # the placeholder graph, until the open
        self.start_page.cache.registry = registry
        self.palette.set_registry(self.doc.graph.registry)
        self.device.blockSignals(True)
        self.device.addItems(devices[self.device.count():])
        self.device.blockSignals(False)
        self.validator.hold(False)
        path, self._path_to_open = self._path_to_open, None
        if path:
            if not self.file_actions.open(path):  # it said why; as an open at start would
                self.doc.set_graph(Graph(registry=registry))  # leave it: an empty canvas
        else:
            self.file_actions.recover_untitled()
        self._update_start_page()
        self.statusBar().clearMessage()
        self._warm_after_check = True  # the first run's imports would delay the labels

    def _blocks_failed(self, message: str) -> None:
        self.prompts.error("Cannot load the blocks", message)
        self.validator.hold(False)

    def add_dock(self, name: str, title: str, widget: QWidget,
                 area: Qt.DockWidgetArea | None = None, *, split: Qt.Orientation | None = None,
                 tab_with: str | None = None) -> QDockWidget:
        """`widget` in a dock of this window, the one way every panel is made: named `name`
        (the saved layout finds it by that name) and kept in `docks` under it; placed at
        `area` (split along `split` from the docks there, or tabbed with the dock
        `tab_with`) and listed in View > Panels, or floating on its own when `area` is None."""
        dock = QDockWidget(title, self)
        dock.setObjectName(name)
        dock.setWidget(widget)
        self.docks[name] = dock
        if area is None:
            dock.setFloating(True)
            return dock
        if split is None:
            self.addDockWidget(area, dock)
        else:
            self.addDockWidget(area, dock, split)
        if tab_with is not None:
            self.tabifyDockWidget(self.docks[tab_with], dock)
        if self.docks_menu is not None:  # docks made before the menus are listed with them
            self.docks_menu.addAction(dock.toggleViewAction())
        return dock

    def _build_docks(self) -> None:
        self.palette = Palette(self.doc.graph.registry)
        self.inspector = Inspector(self.doc)
        self.problems = ProblemsView()
        self.plots = TrainingPlots()
        self.log = LogView()
        self.preview = PreviewPanel()
        self.docks: dict[str, QDockWidget] = {}
        self.docks_menu = None  # View > Panels, made with the menus
        # One tab group only: Qt 6.12 leaves a stale tab bar painted when there are two.
        area, along = Qt.DockWidgetArea, Qt.Orientation
        self.add_dock("palette", "Blocks", self.palette, area.LeftDockWidgetArea)
        self.add_dock("inspector", "Inspector", self.inspector, area.RightDockWidgetArea)
        self.add_dock("preview", "Preview", self.preview, area.RightDockWidgetArea,
                      split=along.Vertical)
        self.add_dock("problems", "Problems", self.problems, area.BottomDockWidgetArea)
        self.add_dock("log", "Log", self.log, area.BottomDockWidgetArea, tab_with="problems")
        self.add_dock("plots", "Training", self.plots, area.BottomDockWidgetArea,
                      split=along.Horizontal)
        self.docks["problems"].raise_()
        self.resizeDocks([self.docks["palette"]], [190], Qt.Orientation.Horizontal)
        self.resizeDocks([self.docks["inspector"]], [360], Qt.Orientation.Horizontal)
        self.resizeDocks([self.docks["inspector"], self.docks["preview"]], [420, 260],
                         Qt.Orientation.Vertical)
        self.resizeDocks([self.docks["problems"], self.docks["plots"]], [560, 940],
                         Qt.Orientation.Horizontal)
        self.resizeDocks([self.docks["problems"]], [250], Qt.Orientation.Vertical)

    def _build_toolbar(self) -> None:
        a = self.actions_by_name
        bar = QToolBar("Main", self)
        bar.setObjectName("main_toolbar")
        bar.setMovable(False)
        self.addToolBar(bar)
        bar.addActions([a["new"], a["open"], a["save"]])
        bar.addSeparator()
        bar.addActions([a["undo"], a["redo"]])
        bar.addSeparator()
        bar.addActions([a["fit"], a["layout"]])
        bar.addSeparator()
        bar.addActions([a["train"], a["pause"], a["stop"]])
        bar.addWidget(QLabel(" Epochs "))
        self.epochs = QSpinBox()
        self.epochs.setRange(0, 1_000_000)
        self.epochs.setKeyboardTracking(False)
        self.epochs.setToolTip(training_settings._BY_NAME["epochs"].doc)
        bar.addWidget(self.epochs)
        bar.addWidget(QLabel(" Device "))
        self.device = QComboBox()
        self.device.setEditable(True)
        # torch says which devices there are: without it yet, auto and cpu (more come later)
        self.device.addItems(["auto", "cpu"] if self.blocks_loading else devices())
        self.device.setToolTip(training_settings._BY_NAME["device"].doc)
        bar.addWidget(self.device)
        if self.docks_menu is not None:
            for panel in self.docks.values():
                self.docks_menu.addAction(panel.toggleViewAction())
        self._show_training_settings()

    def _build_status_bar(self) -> None:
        self.run_status = RunStatus()
        self.zoom_label = QLabel("100%")
        self.statusBar().addPermanentWidget(self.run_status)
        self.statusBar().addPermanentWidget(self.zoom_label)

    def _connect(self) -> None:
        d = self.doc
        d.undo_stack.cleanChanged.connect(self._update_title)
        d.path_changed.connect(self._update_title)
        d.changed.connect(self._on_graph_changed)
        d.graph_replaced.connect(self._show_training_settings)
        # the palette offers the graph's own groups too (group.NAME blocks)
        d.graph_replaced.connect(lambda: self.palette.set_registry(self.doc.graph.registry))
        d.undo_stack.canUndoChanged.connect(self.actions_by_name["undo"].setEnabled)
        d.undo_stack.canRedoChanged.connect(self.actions_by_name["redo"].setEnabled)
        self.actions_by_name["undo"].setEnabled(False)
        self.actions_by_name["redo"].setEnabled(False)
        self.validator.finished.connect(self._on_report)
        self.validator.started.connect(self.problems.checking)
        d.graph_replaced.connect(lambda: self.problems.checking(forget=True))
        self.scene.selectionChanged.connect(self._on_selection)
        self.palette.block_activated.connect(self._add_from_palette)
        self.problems.node_clicked.connect(self.focus_node)
        self.view.zoom_changed.connect(lambda z: self.zoom_label.setText(f"{z:.0%}"))
        self.view.zoom_changed.connect(
            lambda z: self.scene.set_zoom(z * self.view.devicePixelRatioF()))
        self.epochs.valueChanged.connect(lambda v: self.doc.set_training("epochs", v))
        self.device.currentTextChanged.connect(self._set_device)
        progress = (RunStarted, StepEnded, EpochEnded)
        self.runner.listen(self.plots.on_event, *progress, RunFinished)
        self.runner.listen(self.run_status.on_event, *progress, RunFinished)
        self.runner.listen(self._log_run_event, RunStarted, EpochEnded, Message, NodeFailed,
                           RunFinished)
        self.runner.failed.connect(self._on_run_failed)
        self.runner.state_changed.connect(self._on_run_state)
        self.preview.refresh_button.clicked.connect(lambda: self.preview_selected())
        self._preview_timer = QTimer(self, singleShot=True, interval=250)
        self._preview_timer.timeout.connect(self._refresh_preview)
        d.changed.connect(self._graph_edited)
        d.graph_replaced.connect(
            lambda: self.preview.show_message("Select a node and press Preview."))
        self.view.file_dropped.connect(lambda p: self.file_actions.open(p))
        # before the view shows the next file: store where it was on this one
        d.graph_replaced.connect(lambda: self.places.remember(self._shown_path))
        d.graph_replaced.connect(self._update_start_page)
        d.changed.connect(self._update_start_page)

    # -- reactions -------------------------------------------------------------------------

    def _add_from_palette(self, block_id: str) -> None:
        """A block chosen in the palette (Enter in its search, or a double-click) goes on the
        canvas in front, and the keys go back to that canvas."""
        self.group_tabs.current_edit_actions().add_block(block_id)
        self.group_tabs.focus_canvas()

    def notify(self, text: str) -> None:
        self.statusBar().showMessage(text, 6000)

    def _update_title(self, *_) -> None:
        self.setWindowTitle(f"{self.doc.title}[*] — nodegraph")
        self.setWindowModified(self.doc.dirty)

    def _after_open(self) -> None:
        if not self.places.restore(self.doc.path):
            self.view.fit()
        self._shown_path = self.doc.path
        self._update_start_page()
        self._recall_labels()
        self.validator.schedule()

    def _recall_labels(self) -> None:
        """The labels this graph's last clean check gave (here, or the importer's that
        wrote the file), until its check now says (by the graph's content: an edit is a
        miss)."""
        graph = self.doc.graph
        labels = self.shape_memo.recall(shape_memo.content_key(graph)) \
            or wire_labels.recorded(graph)  # a fresh import's, kept in its file
        if labels:
            self.scene.show_labels(labels)

    # -- start page, settings, theme, export -----------------------------------------------

    def _update_start_page(self, *_) -> None:
        empty = not self.doc.graph.nodes and not self.doc.notes()
        if empty and self.start_page.isHidden():
            self.start_page.fill()
            self.start_page.place()
            self.start_page.show()
            self.start_page.raise_()
        elif not empty and not self.start_page.isHidden():
            self.start_page.hide()

    def show_start_page(self) -> None:
        """Help > Start Page: the gallery over the canvas, even with a graph open (Escape
        or a click on the canvas's own tab closes it)."""
        self.start_page.fill()
        self.start_page.place()
        self.start_page.show()
        self.start_page.raise_()

    def dragEnterEvent(self, event) -> None:
        """A graph file dragged anywhere onto the window (a dock, the start page) opens."""
        if graph_file(event.mimeData()):
            event.acceptProposedAction()

    def dropEvent(self, event) -> None:
        path = graph_file(event.mimeData())
        if path:
            event.acceptProposedAction()
            self.file_actions.open(path)

    def eventFilter(self, obj, event) -> bool:
        if obj is self.view and event.type() == QEvent.Type.Resize:
            self.start_page.place()
        elif (obj is self.view.viewport() and event.type() == QEvent.Type.Resize
              and self.blocks_loading and self.doc.path):
            self.view.fit()  # the first look follows the window taking its size
        elif (obj is self.view.viewport() and event.type() == QEvent.Type.ContextMenu
              and event.modifiers() & Qt.KeyboardModifier.ControlModifier):
            return True  # Ctrl+right-drag cuts wires: no node menu over the knife
        return False

    def paintEvent(self, event) -> None:
        super().paintEvent(event)
        if self.blocks_loading and not self._painted:
            # drawn (the window paints before its children, in the same pass): now the
            # blocks load, after the canvas or the start page is on the screen
            self._painted = True
            QTimer.singleShot(0, self._after_first_paint)

    def keyPressEvent(self, event) -> None:
        if event.key() == Qt.Key.Key_Escape and self.start_page.isVisible() and (
                self.doc.graph.nodes or self.doc.notes()):
            self.start_page.hide()
            return
        super().keyPressEvent(event)

    def _restore_settings(self) -> None:
        s = self.settings
        self.resize(1500, 920)
        geometry, state = s.value("window/geometry"), s.value("window/state")
        if geometry is not None:
            self.restoreGeometry(geometry)
        if state is not None:
            self.restoreState(state)
            self.panel_edges.restore(s)
        else:  # a first start: the canvas gets the room (the panels wait at the edges)
            self.panel_edges.first_layout()
        self.set_theme(str(s.value("view/theme", theme.CURRENT)), remember=False)
        snap = str(s.value("view/snap", "false")).lower() == "true"
        self.actions_by_name["snap"].setChecked(snap)
        self.edit_actions.set_snap(snap)

    def save_settings(self) -> None:
        """Remember the window's size, dock layout and this file's zoom and place."""
        self.places.remember(self._shown_path)
        self.settings.setValue("window/geometry", self.saveGeometry())
        self.settings.setValue("window/state", self.saveState())
        self.panel_edges.save(self.settings)
        self.settings.sync()

    def set_theme(self, name: str, remember: bool = True) -> None:
        """Switch between the dark and the light theme (View > Theme); remembered."""
        if name not in theme.THEMES:
            name = "dark"
        app = QApplication.instance()
        if isinstance(app, QApplication):  # a window runs in one (Qt's stubs: QCoreApplication)
            theme.apply(app, name)
        for key in theme.THEMES:
            action = self.actions_by_name.get(f"theme_{key}")
            if action is not None:
                action.setChecked(key == name)
        for view in [self.view, *(c.view for c in self.group_tabs.canvases)]:
            view.setBackgroundBrush(QColor(theme.CANVAS))
            view.resetCachedContent()
            for item in view.scene().items():  # cards cache their pixmaps: redraw them
                item.update()
            view.viewport().update()
        self.plots.restyle()
        self.run_history.apply_theme()
        self.palette.set_registry(self.doc.graph.registry)  # its colours are set per item
        if remember:
            self.settings.setValue("view/theme", name)
        if getattr(self, "start_page", None) is not None and self.start_page.isVisible():
            self.start_page.fill()

    def set_snap(self, on: bool) -> None:
        self.edit_actions.set_snap(on)
        for canvas in self.group_tabs.canvases:
            canvas.edit_actions.set_snap(on)
        self.settings.setValue("view/snap", bool(on))

    def save_trained_model(self, path: str | None = None) -> bool:
        """File > Save Trained Model: the last run's model (the graph it trained, its weights
        and history) as a `.ngz` file, for `nodegraph.load_model`."""
        from nodegraph.interop.model import model_of_run

        result, graph = self.runner.result, self.runner.graph
        if self.runner.running or result is None or graph is None:
            self.prompts.error("No trained model", "Train the graph first (a run that is still "
                               "going can be stopped: its model so far is kept).")
            return False
        if path is None:
            stem = Path(self.doc.path).stem if self.doc.path else graph.name
            path = self.prompts.model_path(str(Path.cwd() / f"{stem}.ngz"))
            if not path:
                return False
        if Path(path).suffix.lower() != ".ngz":
            path += ".ngz"
        try:
            written = model_of_run(graph, result).save(path)
        except NodegraphError as e:
            self.prompts.error("Cannot save the model", str(e))
            return False
        self.notify(f"Saved the trained model ({len(result.history)} epoch(s)) to {written}")
        return True

    def export_image(self, path: str | None = None) -> bool:
        """File > Export Image: the graph in front as PNG or SVG, by the name's suffix."""
        if path is None:
            stem = Path(self.doc.path).stem if self.doc.path else "graph"
            path = self.prompts.image_path(str(Path.cwd() / f"{stem}.png"))
            if not path:
                return False
        if Path(path).suffix.lower() not in image_export.FORMATS:
            path += ".png"
        try:
            size = image_export.export(self.group_tabs.current_scene(), path)
        except (OSError, ValueError) as e:
            self.prompts.error("Cannot export the image", str(e))
            return False
        self.notify(f"Exported {path} ({size.width()} × {size.height()})")
        return True

    def _on_graph_changed(self, event) -> None:
        if event.kind == "training_changed":
            self._show_training_settings()
        elif event.kind in ("group_defined", "group_removed"):  # a paste, an undo, a redo
            self.palette.set_registry(self.doc.graph.registry)

    def _show_training_settings(self) -> None:
        values = training_settings.resolve(self.doc.graph.training)[0]
        for widget, value in ((self.epochs, values["epochs"]), (self.device, values["device"])):
            widget.blockSignals(True)
            if isinstance(widget, QSpinBox):
                widget.setValue(int(value))
            else:
                widget.setCurrentText(str(value))
            widget.blockSignals(False)

    def _set_device(self, text: str) -> None:
        if text.strip():
            self.doc.set_training("device", text.strip())

    def _on_report(self, report) -> None:
        self.scene.set_report(report)
        if report.ok and not self.doc.dirty:  # as saved: the next open shows these at once
            graph = self.doc.graph
            self.shape_memo.remember(shape_memo.content_key(graph),
                                     shape_memo.labels_of(report, graph))
        self.problems.set_problems(report.problems, f"· checked in {report.seconds * 1000:.0f} ms")
        self.inspector.set_report(report)
        self.plots.show_metric_hint(not any(s.kind == "metric" for s in report.specs.values()))
        if self._warm_after_check:
            self._warm_after_check = False
            self.blocks.warm()
            self.runner.warm_up()

    def _on_selection(self) -> None:
        nodes = self.scene.selected_node_ids()
        self.panel_edges.selected(nodes)  # a picked card brings the inspector (first time)
        self.inspector.show_selection(nodes)
        self.preview_on_select()

    def preview_on_select(self) -> None:
        """Preview the one card picked on the canvas in front, when previewing on select."""
        if len(self.selected_for_preview()) == 1 and self.docks["preview"].isVisible() and \
                self.preview.auto.isChecked():
            self.preview_selected()

    def selected_for_preview(self) -> list[str]:
        """The picked cards of the canvas in front, as the compiled graph names them: in a
        group's tab, an inner card of the instance the tab was opened from
        (``model__layer__hidden``), not the instance around it."""
        canvas = self.group_tabs.current_canvas()
        if canvas is None:
            return self.scene.selected_node_ids()
        if canvas.prefix is None:  # a body opened without an instance has no data to run
            return []
        return [canvas.prefix + n for n in canvas.scene.selected_node_ids()]

    def focus_node(self, node_id: str) -> None:
        item = self.scene.nodes.get(node_id)
        if item is not None:
            self.scene.select_nodes([node_id])
            self.view.centerOn(item)

    # -- edits while training --------------------------------------------------------------

    def _live_edit(self, node: str, name: str, value) -> bool:
        """A live param edited while a run trains: the run takes it from its next step (and
        writes it in its history); the log says so."""
        if not self.runner.running or not self.runner.set_param(node, name, value):
            return False
        self.log.log(f"{node}.{name} = {value}: applied to the running run from its next step")
        return True

    def _may_edit(self) -> bool:
        if self.blocks_loading:
            self.notify("The blocks are still loading; edit in a moment.")
            return False
        if not self.runner.running:
            return True
        answer = self.prompts.stop_run_to_edit()
        if answer == "stop":
            self.runner.stop()
            self.runner.wait(10)
        return answer != "cancel"

    def undo(self) -> None:
        if self.doc.undo_stack.canUndo() and self._may_edit():
            self.doc.undo_stack.undo()

    def redo(self) -> None:
        if self.doc.undo_stack.canRedo() and self._may_edit():
            self.doc.undo_stack.redo()

    # -- training --------------------------------------------------------------------------

    def start_training(self) -> bool:
        if self.runner.running:
            return False
        if self.blocks_loading:
            self.notify("The blocks are still loading; train in a moment.")
            return False
        # the report of the graph as it is now, if the validator has it (it usually has)
        report = self.validator.report if self.validator.fresh else None
        if report is None:
            report = self.validator.validate_now()
        if not report.ok:
            self.panel_edges.unfold("bottom", self.docks["problems"])
            self.notify(f"Fix {len(report.errors)} problem(s) before training "
                        "(see the Problems panel).")
            return False
        metric_nodes = {n for n, s in report.specs.items() if s.kind == "metric"}
        self.plots.reset(metric_nodes)
        if self.panel_edges.is_folded("bottom"):  # the plots are what training is watched by
            self.panel_edges.unfold("bottom", self.docks["plots"])
        epochs = self.epochs.value()
        self.log.log(f"Training {self.doc.title}: {epochs} epoch{'s' if epochs != 1 else ''} "
                     f"on {self.device.currentText()}")
        self.runner.start(self.doc.graph, self.doc.revision, epochs=self.epochs.value(),
                          device=self.device.currentText())
        self.run_status.starting()
        return True

    def _on_run_state(self, state: str) -> None:
        a = self.actions_by_name
        a["train"].setEnabled(state == "idle")
        a["pause"].setEnabled(state != "idle")
        a["stop"].setEnabled(state != "idle")
        a["pause"].setChecked(state == "paused")
        if state == "paused":
            self.notify("Training paused")
        elif state == "idle":
            self.run_status.idle()
            self._graph_edited()  # trained weights now: show them

    def _log_run_event(self, event) -> None:
        if isinstance(event, RunStarted):
            self.log.log(f"{event.parameters:,} trainable parameters, {event.steps_per_epoch} "
                         f"step(s) per epoch, device {event.device}")
        elif isinstance(event, EpochEnded):
            every = max(1, event.epochs // 20)
            if event.epoch % every == 0 or event.epoch == event.epochs or event.epoch == 1:
                self.log.log(f"epoch {event.epoch}/{event.epochs}: " + _numbers(event.train)
                             + (f" | val {_numbers(event.val)}" if event.val else ""))
        elif isinstance(event, Message):
            self.log.log(event.text, event.level)
        elif isinstance(event, NodeFailed):
            self.log.log(event.message, "error")
            node = self._canvas_node(event.node)
            if node:
                self.scene.mark_failed(node, event.message)
                self.focus_node(node)
        elif isinstance(event, RunFinished):
            final = " | ".join(f"{split} {_numbers(v)}" for split, v in event.final.items())
            self.log.log(self.run_status.text + (f" — {final}" if final else ""))
            self.log.flush()  # a run's last lines show when the status bar says it finished

    def _on_run_failed(self, message: str, node) -> None:
        self.log.log(message, "error")
        self.docks["log"].raise_()
        self.notify(message.splitlines()[0])
        node = self._canvas_node(node)
        if node:
            if not any(p.kind == "runtime_error" for p in self.scene.nodes[node].problems):
                self.scene.mark_failed(node, message)
            self.focus_node(node)

    def _canvas_node(self, node: str | None) -> str | None:
        """The card a run-time node id belongs to (a group's inner node: its instance)."""
        if node in self.scene.nodes:
            return node
        instance = (node or "").split("__", 1)[0]
        return instance if instance in self.scene.nodes else None

    def run_procedure(self, node: str | None = None) -> bool:
        """Run a procedure node (sampling, a forecast) on the current weights — the trained
        ones after a run — and show what it made in its node view."""
        if node is None:
            chosen = self.scene.selected_node_ids()
            node = chosen[0] if len(chosen) == 1 else None
        g = self.doc.graph
        if node is None or node not in g.nodes or g.nodes[node].type not in g.registry or \
                g.registry.get(g.nodes[node].type).kind != "procedure":
            self.notify("Select a procedure node (procedures.*) to run it.")
            return False
        if self.runner.running:
            self.notify("Wait for the run to end: a procedure runs on the trained model.")
            return False
        self.node_views.open(node)
        return True

    # -- preview ---------------------------------------------------------------------------

    def _graph_edited(self, *_) -> None:
        """Keep the Preview true: run it again shortly (edits come in bursts), or, when
        previewing on select is off, clear what no longer holds."""
        if self.preview.node is None:
            return
        if self.preview.auto.isChecked() and self.docks["preview"].isVisible():
            self._preview_timer.start()
        else:
            self.preview.mark_stale()

    def _refresh_preview(self) -> None:
        node = self.preview.node
        if node is None:
            return
        flat = self.validator.report.flat if self.validator.report is not None else None
        if node not in self.doc.graph.nodes and (flat is None or node not in flat.graph.nodes):
            self.preview.show_message("Select one node to preview its output.")
            return
        self.preview_selected(node)

    def preview_selected(self, node: str | None = None) -> None:
        if node is None:
            nodes = self.selected_for_preview()
            if len(nodes) != 1:
                self.preview.show_message("Select one node to preview its output." if
                                          self.group_tabs.current_canvas() is None or nodes
                                          else "Open this group from one of its cards to "
                                          "preview what runs inside it.")
                return
            node = nodes[0]
        if self.blocks_loading:  # compiling would import torch on the GUI thread: a click
            self.preview.show_message("Loading the blocks… select it again to preview.", node)
            return  # on a card would wait seconds for it (benchmarks/editor_startup.py)
        trained = self.runner.result if self.runner.revision == self.doc.revision else None
        try:
            if trained is not None:
                compiled, note = trained.compiled, "(trained weights)"
            else:
                compiled, note = self._untrained_compiled(), "(initial weights)"
            outputs = node_outputs(self.doc.graph, node, compiled)
        except Exception as e:  # a graph that cannot run yet: say why, in the panel
            self.preview.title.setText(f"<b>{node}</b> cannot run yet")
            self.preview.show_message(preview_error(e), node)
            return
        canvas = self.group_tabs.current_canvas()
        label = None
        if canvas is not None and canvas.prefix and node.startswith(canvas.prefix):
            label = " › ".join([*canvas.trail[1:], node[len(canvas.prefix):]])
        self.preview.show_outputs(node, outputs, note, label)

    def _untrained_compiled(self):
        if self._preview_cache is None or self._preview_cache[0] != self.doc.revision:
            began = time.perf_counter()
            compiled = compiler.compile_graph(self.doc.graph, for_training=False)
            compiled.module.eval()  # this copy only ever previews
            self._preview_cache = (self.doc.revision, compiled)
            # twice slow in a row (the first compile also pays one-time imports): keep
            # selecting snappy on a big graph by previewing only on request
            slow = time.perf_counter() - began > SLOW_PREVIEW_S
            self._slow_previews = self._slow_previews + 1 if slow else 0
            if self._slow_previews >= 2 and self.preview.auto.isChecked():
                self.preview.auto.setChecked(False)
                self.notify("Preview on select turned off: compiling this graph is slow.")
        return self._preview_cache[1]

    # -- windows ---------------------------------------------------------------------------

    def new_window(self) -> MainWindow:
        window = MainWindow(registry=self.doc.graph.base_registry, settings=self.settings,
                            prompts=None, recovery_dir=self.file_actions.recovery_dir)
        self._windows.append(window)
        window.show()
        return window

    def window_on(self, path: str) -> MainWindow:
        """A window of its own on `path` with this one's blocks, settings, questions and
        recovery folder, not shown yet (File > Compare with… opens the other file in one)."""
        return MainWindow(path, registry=self.doc.graph.base_registry, settings=self.settings,
                          prompts=self.prompts, recovery_dir=self.file_actions.recovery_dir)

    def closeEvent(self, event: QCloseEvent) -> None:
        if not self.file_actions.maybe_save():
            event.ignore()
            return
        self.save_settings()
        self.runner.shutdown(10)  # the run, its workers with it (the process, if it hangs)
        self.blocks.join()  # no thread left importing torch when the process exits
        self.validator.shutdown()
        self.autosave_timer.stop()
        self.file_actions.discard_autosave()
        event.accept()


def _numbers(values: dict) -> str:
    return ", ".join(f"{k} {v:.4g}" for k, v in values.items() if isinstance(v, int | float))

