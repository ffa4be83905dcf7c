"""Groups in the editor: group the selection, and open a group's body in a tab to edit it.

The canvas sits in a tab widget whose first tab is the graph itself; opening a group
instance (double-click it, or Edit > Open Group) adds a tab with the group's body, titled
with the path to it (`xor › block`), and nested groups open further tabs; a body's tab
marks the inner ports that stand for the group's inputs and outputs (`group_ports`).
A body tab edits the group's definition itself (`graph.groups[name].body`) through a
document of its own that shares the window's undo stack, so Undo steps through edits on
every level in order
and Save writes the body into the file's groups section. Each edit in a body revalidates
the whole graph; the body's canvas then shows the shapes and problems of the instance it was
opened from (a body has no shapes of its own: they come from what feeds the instance), and
the graph's canvas shows them on the instance. Closing the tab,
or Edit > Back to Parent, returns to the graph; a group that an undo removes closes its tab.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Protocol, cast

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QTabBar, QTabWidget, QWidget

from nodegraph.gui.canvas.group_ports import GroupPorts
from nodegraph.gui.canvas.scene import GraphScene
from nodegraph.gui.canvas.view import GraphView
from nodegraph.gui.document.document import Document, EditRefused
from nodegraph.gui.shell.edit_actions import EditActions
from nodegraph.model import groups
from nodegraph.model.errors import Problem
from nodegraph.model.graph import GraphChanged

if TYPE_CHECKING:
    from nodegraph.check.validate import Report
    from nodegraph.gui.base.prompts import Prompts
    from nodegraph.gui.document.validator import Validator
    from nodegraph.gui.panels.find_panel import FindPanel
    from nodegraph.gui.panels.inspector import Inspector
    from nodegraph.gui.panels.palette import Palette

SEPARATOR = " › "


class Window(Protocol):
    """What group tabs ask of the window they sit in (`main_window.MainWindow`, a
    QMainWindow): a Protocol, because the window imports this module to make its tabs."""

    doc: Document
    scene: GraphScene
    view: GraphView
    edit_actions: EditActions
    validator: Validator
    finder: FindPanel
    inspector: Inspector
    palette: Palette
    prompts: Prompts
    actions_by_name: dict[str, QAction]

    def notify(self, text: str) -> None: ...

    def preview_on_select(self) -> None: ...

    def takeCentralWidget(self) -> QWidget | None: ...

    def setCentralWidget(self, widget: QWidget) -> None: ...


class BodyDocument(Document):
    """A group's body being edited: the window's undo stack, and port nodes kept."""

    refused = Signal(str)

    def __init__(self, defn: groups.GroupDef, root: Document):
        # the definition's ui is its body's: positions set here are saved with the group
        super().__init__(defn.body, parent=root)
        self.defn, self.root = defn, root
        self.undo_stack = root.undo_stack  # one history for the graph and its groups
        self.edit_guard = root.edit_guard

    # a body has no training of its own: with nothing selected, the inspector shows (and
    # edits, through the graph's document) the graph's training settings
    def training(self):
        return self.root.training()

    def set_training(self, key: str, value) -> bool:
        return self.root.set_training(key, value)

    def port_nodes(self) -> set[str]:
        """Inner nodes the group's ports name: deleting one would break every instance."""
        inner = {n for refs in self.defn.inputs.values() for n, _ in refs}
        return inner | {n for n, _ in self.defn.outputs.values()}

    def delete(self, nodes, edges=(), notes=()) -> bool:
        nodes = list(nodes)
        kept = [n for n in nodes if n in self.port_nodes()]
        if kept:
            self.refused.emit(f"{', '.join(kept)} stand(s) for the group's ports; kept")
        return super().delete([n for n in nodes if n not in kept], edges, notes)

    def _on_graph_event(self, event: GraphChanged) -> None:
        # the ports follow a renamed inner node
        if event.kind == "node_renamed" and event.name is not None and event.node is not None:
            self._rename_in_ports(event.name, event.node)
        super()._on_graph_event(event)

    def _rename_in_ports(self, old: str, new: str) -> None:
        d = self.defn
        d.inputs = {p: [(new if n == old else n, q) for n, q in refs]
                    for p, refs in d.inputs.items()}
        d.outputs = {p: (new if n == old else n, q) for p, (n, q) in d.outputs.items()}


def body_report(report: Report, prefix: str) -> Report:
    """What a validation report says about one instance's body, keyed by the body's own node
    ids: `prefix` is the instance's flat id and separator (``block__``)."""
    from nodegraph.check.validate import Report  # torch: not before the window is drawn
    out = Report(batch_size=report.batch_size, seconds=report.seconds)
    for (node, port), tensor in report.outputs.items():
        inner = node[len(prefix):]
        if node.startswith(prefix) and groups.SEP not in inner:
            out.outputs[(inner, port)] = tensor
    flat = report.flat  # a group instance inside this body: its outputs are its inner nodes'
    for (node, port) in flat.outputs if flat is not None else ():
        inner = node[len(prefix):]
        source = groups._resolve_out(flat, (node, port)) if flat is not None else None
        if node.startswith(prefix) and groups.SEP not in inner and source in report.outputs:
            out.outputs[(inner, port)] = report.outputs[source]
    instance = prefix[:-len(groups.SEP)].split(groups.SEP)[-1]
    inside = re.compile(r"^inside, at '([^'/]+)': (.*)$", re.S)
    for p in report.problems:
        found = inside.match(p.message) if p.node == instance else None
        if found:
            out.problems.append(Problem(found[1], p.port, p.kind, found[2], p.hint,
                                        p.severity))
    return out


class GroupCanvas:
    """One open body: its document, scene, view and edit actions."""

    ports: GroupPorts  # the group's own ports, set by the tabs once the canvas shows

    def __init__(self, window: Window, name: str, trail: list[str], prefix: str | None):
        self.name, self.trail = name, trail
        self.prefix = prefix  # the flat id of the instance it shows shapes of, and "__"
        self.doc = BodyDocument(window.doc.graph.groups[name], window.doc)
        self.scene = GraphScene(self.doc, window)
        self.view = GraphView(self.scene)
        self.edit_actions = EditActions(self.doc, self.scene, self.view, window.notify)
        self.doc.refused.connect(window.notify)
        self.edit_actions.popup.find_requested.connect(window.finder.open)
        self.edit_actions.popup.offers_find = True
        # the window's canvas shortcuts (Delete, F, ...) work on this canvas too
        self.view.addActions([a for a in window.actions_by_name.values()
                              if a.shortcutContext() == Qt.ShortcutContext.
                              WidgetWithChildrenShortcut])
        self.view.zoom_changed.connect(
            lambda z: self.scene.set_zoom(z * self.view.devicePixelRatioF()))

    @property
    def title(self) -> str:
        return SEPARATOR.join(self.trail)


class GroupTabs(QTabWidget):
    """The window's central widget: the graph's canvas, then one tab per open group."""

    def __init__(self, window: Window):
        super().__init__(cast(QWidget, window))  # the window, a QMainWindow, owns the tabs
        self.window_ = window
        self.canvases: list[GroupCanvas] = []
        self.setDocumentMode(True)
        self.setTabsClosable(True)
        self.setTabBarAutoHide(True)  # one canvas: no tab bar at all
        view = window.takeCentralWidget()  # the graph's own view (not deleted: moved)
        if view is not None:  # the window made it before its tabs
            self.addTab(view, window.doc.title)
        self.tabBar().setTabButton(0, QTabBar.ButtonPosition.RightSide, None)
        window.setCentralWidget(self)
        self.tabCloseRequested.connect(self.close_tab)
        self.currentChanged.connect(self._on_current)
        self._watch(window.scene)
        window.doc.changed.connect(self._prune)
        window.doc.graph_replaced.connect(self.close_all)
        window.doc.path_changed.connect(lambda: self.setTabText(0, window.doc.title))
        window.validator.finished.connect(self.show_report)

    def _watch(self, scene: GraphScene) -> None:
        scene.open_requested.connect(lambda node: self.open_instance(scene, node))

    # -- what is current -------------------------------------------------------------------

    def current_canvas(self) -> GroupCanvas | None:
        i = self.currentIndex()
        return self.canvases[i - 1] if i > 0 else None

    def current_doc(self) -> Document:
        c = self.current_canvas()
        return c.doc if c else self.window_.doc

    def current_scene(self) -> GraphScene:
        c = self.current_canvas()
        return c.scene if c else self.window_.scene

    def current_view(self) -> GraphView:
        c = self.current_canvas()
        return c.view if c else self.window_.view

    def current_edit_actions(self) -> EditActions:
        c = self.current_canvas()
        return c.edit_actions if c else self.window_.edit_actions

    # -- grouping --------------------------------------------------------------------------

    def group_selection(self, name: str | None = None) -> str | None:
        """Group the selected nodes of the current canvas; asks for the group's name."""
        w, doc, scene = self.window_, self.current_doc(), self.current_scene()
        nodes = scene.selected_node_ids()
        if not nodes:
            w.notify("Select the nodes to group first.")
            return None
        reason = doc.why_not_group(nodes)
        if reason:  # before asking for a name the grouping could not use
            w.notify(f"Cannot group: {reason}")
            return None
        if name is None:
            taken = w.doc.graph.groups
            name = next(f"block_{i}" if i > 1 else "block" for i in range(1, 10_000)
                        if (f"block_{i}" if i > 1 else "block") not in taken)
            name = w.prompts.group_name(name)
            if not name:
                return None
        try:
            instance = doc.group(nodes, name)
        except EditRefused as e:
            w.notify(f"Cannot group: {e}")
            return None
        w.palette.set_registry(w.doc.graph.registry)  # the new group.NAME block
        if instance is not None:
            scene.select_nodes([instance])
        return instance

    # -- opening and closing bodies --------------------------------------------------------

    def open_selected(self) -> GroupCanvas | None:
        scene = self.current_scene()
        nodes = scene.selected_node_ids()
        if len(nodes) != 1:
            self.window_.notify("Select one group instance to open it.")
            return None
        return self.open_instance(scene, nodes[0])

    def open_instance(self, scene: GraphScene, node_id: str) -> GroupCanvas | None:
        """Open the body of group instance `node_id` (of `scene`'s graph) in a tab."""
        node = scene.doc.graph.nodes.get(node_id)
        if node is None or not groups.is_group(node.type):
            self.window_.notify(f"{node_id} is not a group instance.")
            return None
        name = node.type[len(groups.PREFIX):]
        if name not in self.window_.doc.graph.groups:
            self.window_.notify(f"'{name}' ships with the block library; it cannot be edited "
                                "here.")
            return None
        parent = self.current_canvas() if scene is not self.window_.scene else None
        trail = [*(parent.trail if parent else [self.window_.doc.title]), name]
        prefix: str | None
        if parent is None:  # flat ids of an instance: its path of ids, joined by "__"
            prefix = node_id + groups.SEP
        else:
            prefix = parent.prefix + node_id + groups.SEP if parent.prefix else None
        return self.open_group(name, trail, prefix)

    def open_group(self, name: str, trail: list[str] | None = None,
                   prefix: str | None = None) -> GroupCanvas:
        for i, c in enumerate(self.canvases):
            if c.name == name:  # one tab a body; it shows the instance opened last
                if prefix is not None and prefix != c.prefix:
                    c.prefix, c.trail = prefix, trail or c.trail
                    self.setTabText(i + 1, c.title)
                    if self.window_.validator.report is not None:
                        self._paint(c, self.window_.validator.report)
                self.setCurrentIndex(i + 1)
                return c
        if prefix is None:  # shapes from the graph's first instance of the group
            first = next((n.id for n in self.window_.doc.graph
                          if n.type == groups.PREFIX + name), None)
            prefix = first + groups.SEP if first else None
        canvas = GroupCanvas(self.window_, name, trail or [self.window_.doc.title, name],
                             prefix)
        canvas.doc.changed.connect(self._body_changed)
        canvas.scene.selectionChanged.connect(self._show_selection)
        self._watch(canvas.scene)
        self.canvases.append(canvas)
        self.addTab(canvas.view, canvas.title)
        self.setCurrentIndex(self.count() - 1)
        canvas.ports = GroupPorts(canvas)  # the group's own ports, marked in its body
        canvas.edit_actions.set_snap(self.window_.edit_actions.snap_to_grid)
        canvas.view.fit()
        self.focus_canvas()
        report = self.window_.validator.report
        if report is not None:
            self._paint(canvas, report)
        return canvas

    def show_report(self, report: Report) -> None:
        """Paint a fresh report of the graph on every open body."""
        for canvas in self.canvases:
            self._paint(canvas, report)

    @staticmethod
    def _paint(canvas: GroupCanvas, report: Report) -> None:
        if canvas.prefix is not None:
            canvas.scene.set_report(body_report(report, canvas.prefix))

    def back(self) -> None:
        """Back to the graph (or group) this body was opened from."""
        c = self.current_canvas()
        if c is not None:
            self.close_tab(self.currentIndex())

    def close_tab(self, index: int) -> None:
        if index <= 0:
            return
        canvas = self.canvases.pop(index - 1)
        parent_trail = canvas.trail[:-1]
        self.removeTab(index)
        canvas.view.deleteLater()
        for i, c in enumerate(self.canvases):
            if c.trail == parent_trail:
                self.setCurrentIndex(i + 1)
                break
        else:
            self.setCurrentIndex(0)
        self.focus_canvas()

    def close_all(self) -> None:
        while self.count() > 1:
            self.close_tab(self.count() - 1)

    def _prune(self, event: GraphChanged) -> None:
        """Close the tabs of groups that no longer exist (an undone grouping)."""
        if event.kind in ("node_removed", "node_added"):
            for i in reversed(range(len(self.canvases))):
                if self.canvases[i].name not in self.window_.doc.graph.groups:
                    self.close_tab(i + 1)

    # -- keeping the rest of the window in step --------------------------------------------

    def _body_changed(self, event: GraphChanged) -> None:
        """An edit inside a group changes the graph: new revision, validate again."""
        root = self.window_.doc
        root.revision += 1
        self.window_.validator.schedule()

    def _on_current(self, index: int) -> None:
        canvas = self.current_canvas()
        prefix = canvas.prefix if canvas is not None else None
        if canvas is None or prefix is None:
            self.window_.inspector.set_document(self.current_doc())
        else:  # the body's ports show the shapes its wires show
            body = canvas

            def view(report: Report) -> Report:
                return body_report(report, prefix)

            def fed(node: str, port: str) -> str | None:
                return self._fed_shape(body, node, port)
            self.window_.inspector.set_document(self.current_doc(), view, fed)
        self._show_selection()
        self.focus_canvas()

    def _fed_shape(self, canvas: GroupCanvas, node: str, port: str) -> str | None:
        """What a group input brings to an inner port (`x ← input (N, 4)`), read where the
        instance is wired in the graph (an instance nested deeper: in the flat graph)."""
        defn = canvas.doc.defn
        outer = next((p for p, refs in defn.inputs.items() if (node, port) in
                      [tuple(r) for r in refs]), None)
        if outer is None:
            return None
        report = self.window_.validator.report
        instance = (canvas.prefix or "")[:-len(groups.SEP)]
        graph = self.window_.doc.graph
        if report is not None and report.flat is not None and groups.SEP in instance:
            fed = report.flat.graph.source_of(f"{canvas.prefix}{node}", port)  # nested: flat
            shape = report.shown_shape(*fed.source) if fed is not None else "not connected"
            return f"← group input {outer} {shape}"
        if report is None or groups.SEP in instance or instance not in graph.nodes:
            return f"← group input {outer}"
        source = graph.source_of(instance, outer)
        shape = report.shown_shape(*source.source) if source is not None else "not connected"
        return f"← group input {outer} {shape}"

    def focus_canvas(self) -> None:
        """Keys go to the canvas in front after a tab opens or closes (else focus lands on
        whatever Qt picks next, a dock's field, and the window's shortcuts seem dead)."""
        view = self.current_view()
        if view.isVisible():
            view.setFocus(Qt.FocusReason.OtherFocusReason)

    def _show_selection(self) -> None:
        self.window_.inspector.show_selection(self.current_scene().selected_node_ids())
        if self.current_canvas() is not None:
            self.window_.preview_on_select()  # the inner card, not the instance around it
