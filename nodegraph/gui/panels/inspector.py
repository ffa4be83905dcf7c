"""The inspector: the selected node's id, ports with their shapes, and a form of its params.

The form is generated from the block's declared params (see `param_widgets`); a value the
declaration refuses is not applied, and the reason appears under the field. With several
nodes selected it shows the params they share (same name and kind), and a value set there
is set on all of them in one undo step. A procedure node's page says what it does and has
a Run button that runs it on the current (trained) weights and opens its view. Every accepted
change is an undoable edit. With no node selected the inspector shows the graph's training
settings, declared the same way. It follows the graph: undo, redo and renames update the
fields in place, so tabbing through the form keeps its focus. A form is built once per
block type and refilled for each node shown in it, and the forms stay in one stack (showing
another is a switch, not a reparenting that restyles every field), so clicking through a big
graph is quick.
"""

from __future__ import annotations

import html
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QScrollArea,
    QStackedWidget,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from nodegraph.gui.document import commands as cmd
from nodegraph.gui.document.document import Document, EditRefused
from nodegraph.gui.panels import param_widgets as pw
from nodegraph.model import references, settings
from nodegraph.model.spec import BlockSpec, Param

if TYPE_CHECKING:
    from nodegraph.check.validate import Report


class _Field:
    """One param row: its editor, reset button and error line."""

    def __init__(self, param: Param, editor, reset: QToolButton, error: QLabel):
        self.param, self.editor, self.reset, self.error = param, editor, reset, error

    def show(self, value: Any, explicit: bool) -> None:
        self.editor.show_value(value)
        self.reset.setEnabled(explicit)
        self.set_error("")

    def set_error(self, message: str) -> None:
        if message == self.error.text():
            return
        self.error.setText(message)
        self.error.setVisible(bool(message))
        if bool(message) != bool(self.editor.property("invalid")):  # restyling is costly
            self.editor.setProperty("invalid", bool(message))
            self.editor.style().unpolish(self.editor)
            self.editor.style().polish(self.editor)


@dataclass
class _NodePage:
    """The form of one block type: built once, refilled for each node shown in it."""

    widget: QWidget
    fields: dict[str, _Field]
    id_edit: QLineEdit
    id_error: QLabel
    ports_label: QLabel
    raw: QLabel  # unknown blocks: their params as text


class _Pages(QStackedWidget):
    """The inspector's forms, one shown, sized to that one (a stack sizes to its largest)."""

    def sizeHint(self):
        page = self.currentWidget()
        return page.sizeHint() if page is not None else super().sizeHint()

    def minimumSizeHint(self):
        page = self.currentWidget()
        return page.minimumSizeHint() if page is not None else super().minimumSizeHint()


class Inspector(QScrollArea):
    """Params of the selected node, or training settings when none is selected."""

    def __init__(self, doc: Document, parent=None):
        super().__init__(parent)
        self.doc = doc
        self.node_id: str | None = None
        self.fields: dict[str, _Field] = {}
        self.report: Report | None = None
        self.graph_report: Report | None = None  # the whole graph's, before `report_view`
        # a group's tab: the graph's report as its body sees it, and the shape a group input
        # brings to an inner port (set with the document; None on the graph itself)
        self.report_view: Callable[[Report], Report] | None = None
        self.fed_shape: Callable[[str, str], str | None] | None = None
        self.id_edit: QLineEdit | None = None
        self.id_error: QLabel | None = None
        self.ports_label: QLabel | None = None
        self.setWidgetResizable(True)
        self.setMinimumWidth(280)
        self._stack = _Pages()
        self.setWidget(self._stack)
        # the training page is built once per graph and kept: clicking empty canvas is common
        self._training_page: QWidget | None = None
        self._training_fields: dict[str, _Field] = {}
        self._pages: dict[str, _NodePage] = {}  # node forms by block type
        self.multi_nodes: list[str] = []  # the nodes a shared-params page edits
        # set by the window: runs a procedure node, opens its view
        self.run_procedure: Callable[[str], bool] | None = None
        doc.changed.connect(self._on_change)
        doc.graph_replaced.connect(self._new_graph)
        self._new_graph()

    def set_document(self, doc: Document,
                     report_view: Callable[[Report], Report] | None = None,
                     fed_shape: Callable[[str, str], str | None] | None = None) -> None:
        """Show `doc` (a group's body opened in its tab, or the graph again); `report_view`
        maps the graph's report to the body's node ids, so ports show their shapes there too."""
        self.report_view, self.fed_shape = report_view, fed_shape
        if self.graph_report is not None:
            self.report = report_view(self.graph_report) if report_view else self.graph_report
        if doc is self.doc:
            return
        self.doc.changed.disconnect(self._on_change)
        self.doc.graph_replaced.disconnect(self._new_graph)
        self.doc = doc
        doc.changed.connect(self._on_change)
        doc.graph_replaced.connect(self._new_graph)
        self._new_graph()

    def _new_graph(self) -> None:
        # group blocks are the graph's own: forms built for the last graph may not fit
        old = [p.widget for p in self._pages.values()] + [self._training_page]
        self._pages = {}
        self._training_page = self._build_training()
        self.show_node(None)
        for page in old:
            if page is not None:
                self._stack.removeWidget(page)
                page.deleteLater()

    # -- what is shown ---------------------------------------------------------------------

    def show_selection(self, node_ids: list[str]) -> None:
        if len(node_ids) > 1 and self._show_shared(node_ids):
            return
        self.show_node(node_ids[0] if len(node_ids) == 1 else None, len(node_ids))

    # -- several nodes: their shared params ------------------------------------------------

    def shared_params(self, node_ids: list[str]) -> list[Param]:
        """The params every one of `node_ids` has, with the same kind and choices, in the
        first node's declaration order."""
        g = self.doc.graph
        specs = [g.registry.get(g.nodes[n].type) if g.nodes[n].type in g.registry else None
                 for n in node_ids if n in g.nodes]
        known = [s for s in specs if s is not None]
        if not specs or len(known) < len(specs):
            return []
        shared = []
        for param in known[0].params:
            others = [s.param(param.name) for s in known[1:]]
            if all(o is not None and (o.kind, tuple(o.choices), o.nullable) == (
                    param.kind, tuple(param.choices), param.nullable) for o in others):
                shared.append(param)
        return shared

    def _show_shared(self, node_ids: list[str]) -> bool:
        params = self.shared_params(node_ids)
        if not params:
            return False
        self.node_id = None
        self.id_edit = self.id_error = self.ports_label = None
        self.multi_nodes = list(node_ids)
        page = QWidget()
        layout = QVBoxLayout(page)
        layout.setAlignment(Qt.AlignmentFlag.AlignTop)
        title = QLabel(f"{len(node_ids)} nodes selected")
        title.setProperty("role", "title")
        types = sorted({self.doc.graph.nodes[n].type for n in node_ids})
        hint = QLabel("Shared params of " + ", ".join(types) + ": a value set here is set "
                      "on every selected node (one undo step). A field left blank differs "
                      "between them.")
        hint.setProperty("role", "dim")
        hint.setWordWrap(True)
        layout.addWidget(title)
        layout.addWidget(hint)
        form = self._form(layout)
        self.fields = {}
        for param in params:
            self._add_field(form, param, lambda v, p=param: self._commit_shared(p, v),
                            lambda *_, p=param: self._commit_shared(p, pw.UNSET))
        self._refill_shared()
        self._show_page(page)
        return True

    def _refill_shared(self) -> None:
        for name, f in self.fields.items():
            values = [self.doc.graph.nodes[n].params.get(name, pw.UNSET)
                      for n in self.multi_nodes if n in self.doc.graph.nodes]
            same = bool(values) and all(v == values[0] for v in values)
            shown = values[0] if same else pw.UNSET
            if shown is pw.UNSET and same and not f.param.required:
                shown = f.param.default
            f.show(shown, same and values[0] is not pw.UNSET)

    def _commit_shared(self, param: Param, value: Any) -> None:
        f = self.fields[param.name]
        if pw.is_parse_error(value):
            f.set_error(str(value))
            return
        g, commands = self.doc.graph, []
        for n in self.multi_nodes:
            if n not in g.nodes:
                continue
            own = g.registry.get(g.nodes[n].type).param(param.name)
            if own is None:  # not expected: a shared param is every node's
                continue
            if value is pw.UNSET:
                if param.name in g.nodes[n].params:
                    commands.append(cmd.SetParam(self.doc, n, param.name, cmd.SetParam.RESET))
                continue
            try:
                checked = own.check(value)
            except Exception as e:  # the declaration's own words: shown under the field
                f.set_error(str(e))
                return
            if g.nodes[n].params.get(param.name, cmd.SetParam.RESET) != checked:
                commands.append(cmd.SetParam(self.doc, n, param.name, checked))
        self.doc.push_macro(f"Set {param.name} on {len(commands)} nodes", commands)
        f.set_error("")

    def show_node(self, node_id: str | None, count: int = 0) -> None:
        self.multi_nodes = []
        self.node_id = node_id if node_id in self.doc.graph.nodes else None
        self.id_edit = self.id_error = self.ports_label = None
        if self.node_id is None:
            self.fields = self._training_fields
            self._training_title.setText("Training settings" if count < 2
                                         else f"{count} nodes selected")
            self._training_hint.setText("Select a node to edit its params." if count < 2 else
                                        "Select one node to edit its params. Training settings:")
            if self._training_page is not None:  # built with each graph
                self._show_page(self._training_page)
            return
        node = self.doc.graph.node(self.node_id)
        known = node.type in self.doc.graph.registry
        page = self._pages.get(node.type) if known else None
        if page is None:
            page = self._build_node(node.type)
            if known:  # one form per block type, refilled for each node of that type
                self._pages[node.type] = page
        self.fields, self.id_edit, self.id_error, self.ports_label = (
            page.fields, page.id_edit, page.id_error, page.ports_label)
        self.id_edit.setText(self.node_id)
        self.id_error.setVisible(False)
        if known:
            spec = self.doc.graph.registry.get(node.type)
            self._show_params(spec)
            self._show_ports(spec)
        else:
            page.raw.setText("params: " + html.escape(str(node.params)))
        self._show_page(page.widget)

    def _show_page(self, page: QWidget) -> None:
        stack = self._stack
        if stack.currentWidget() is page:
            return
        old = stack.currentWidget()
        if stack.indexOf(page) < 0:
            stack.addWidget(page)
        stack.setCurrentWidget(page)
        stack.updateGeometry()
        kept = [self._training_page, *(p.widget for p in self._pages.values())]
        if old is not None and not any(old is k for k in kept):  # an unknown block's form
            stack.removeWidget(old)
            old.deleteLater()

    def _build_training(self) -> QWidget:
        page = QWidget()
        layout = QVBoxLayout(page)
        layout.setAlignment(Qt.AlignmentFlag.AlignTop)
        self._training_title = QLabel()
        self._training_title.setProperty("role", "title")
        self._training_hint = QLabel()
        self._training_hint.setProperty("role", "dim")
        self._training_hint.setWordWrap(True)
        layout.addWidget(self._training_title)
        layout.addWidget(self._training_hint)
        values = settings.resolve(self.doc.training())[0]
        form = self._form(layout)
        self.fields = self._training_fields = {}
        for param in settings.TRAINING_PARAMS:
            self._add_field(form, param, lambda v, p=param: self._commit_training(p, v))
            self.fields[param.name].show(values[param.name], param.name in self.doc.training())
        return page

    def _build_node(self, block_type: str) -> _NodePage:
        registry = self.doc.graph.registry
        spec = registry.get(block_type) if block_type in registry else None
        widget = QWidget()
        layout = QVBoxLayout(widget)
        layout.setAlignment(Qt.AlignmentFlag.AlignTop)
        page = _NodePage(widget, {}, QLineEdit(), _error_label(), QLabel(), QLabel())
        page.id_edit.setToolTip("the node's id: letters, digits and _; press Enter to rename")
        page.id_edit.editingFinished.connect(self._commit_rename)
        kind = QLabel(f"<b>{html.escape(block_type)}</b>" + (
            f" — {html.escape(spec.summary)}" if spec else " — unknown block type"))
        kind.setWordWrap(True)
        kind.setToolTip(spec.doc if spec else "")
        if spec is not None and spec.kind == "procedure":
            more = _first_paragraph(spec.doc)
            more = "" if more.rstrip(".") == spec.summary.rstrip(".") else html.escape(more)
            kind.setText(kind.text() + "<br><br>" + (more + "<br>" if more else "")
                         + "<i>A procedure runs after training, on the trained model; "
                           "it is not part of the forward pass, so it has no wires.</i>")
            run = QPushButton("Run on the trained model")
            run.setObjectName("run_procedure")
            run.setToolTip("run this procedure on the current weights (trained ones after "
                           "a run) and open its view")
            run.clicked.connect(lambda *_: self.run_procedure and self.node_id
                                and self.run_procedure(self.node_id))
        page.ports_label.setProperty("role", "dim")
        page.ports_label.setWordWrap(True)
        page.ports_label.setTextFormat(Qt.TextFormat.RichText)
        for w in (page.id_edit, page.id_error, kind, page.ports_label):
            layout.addWidget(w)
        if spec is not None and spec.kind == "procedure":
            layout.addWidget(run)
        if spec is None:
            page.raw.setWordWrap(True)
            layout.addWidget(page.raw)
            return page
        form = self._form(layout)
        self.fields = page.fields
        for param in spec.params:
            self._add_field(form, param,
                            lambda v, p=param, f=page.fields: self._commit_param(p, v, f),
                            lambda *_, p=param: self._reset_param(p),
                            lambda p=param: references.choices(self.doc.graph, p,
                                                               self.node_id))
        return page

    def _form(self, layout: QVBoxLayout) -> QFormLayout:
        form = QFormLayout()
        form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)
        form.setLabelAlignment(Qt.AlignmentFlag.AlignRight)
        layout.addLayout(form)
        return form

    def _add_field(self, form: QFormLayout, param: Param, commit, reset=None,
                   choices=None) -> _Field:
        editor = pw.make_editor(param, commit, choices)
        button = QToolButton()
        button.setText("↺")
        button.setToolTip(f"reset {param.name} to its default")
        button.clicked.connect(lambda *_: (reset or (lambda: commit(None)))())
        if param.required and reset is not None:
            button.setToolTip(f"clear {param.name}")
        row = QHBoxLayout()
        row.addWidget(editor, 1)
        row.addWidget(button)
        label = QLabel(param.name)
        label.setToolTip(pw.tooltip(param))
        error = _error_label()
        form.addRow(label, row)
        form.addRow("", error)
        self.fields[param.name] = _Field(param, editor, button, error)
        return self.fields[param.name]

    def _show_params(self, spec: BlockSpec) -> None:
        if self.node_id is None:  # the training page shows no block params
            return
        node = self.doc.graph.node(self.node_id)
        for name, f in self.fields.items():
            explicit = name in node.params
            value = node.params[name] if explicit else (
                pw.UNSET if f.param.required else f.param.default)
            f.show(value, explicit)
        self._show_param_problems()

    def _show_ports(self, spec: BlockSpec) -> None:
        node_id = self.node_id
        if self.ports_label is None or node_id is None:
            return
        r = self.report

        def shape(port: str, output: bool) -> str:
            if r is None:
                return ""
            if output:
                return r.shown_shape(node_id, port)
            e = self.doc.graph.source_of(node_id, port)
            if e is not None:
                return r.shown_shape(*e.source)
            fed = self.fed_shape(node_id, port) if self.fed_shape else None
            return fed if fed is not None else "not connected"

        ins = ", ".join(f"{p.name} {shape(p.name, False)}" for p in spec.inputs) or "none"
        outs = ", ".join(f"{p.name} {shape(p.name, True)}" for p in spec.outputs) or "none"
        count = r.param_counts.get(node_id) if r else None
        text = f"in: {html.escape(ins)}<br>out: {html.escape(outs)}"
        if count:
            text += f"<br>{count:,} trainable parameters"
        self.ports_label.setText(text)

    def _show_param_problems(self) -> None:
        if self.report is None or self.node_id is None:
            return
        for p in self.report.for_node(self.node_id):
            if p.port in self.fields and p.kind in ("bad_param", "missing_param"):
                self.fields[p.port].set_error(p.message)

    # -- follow the graph and validation ---------------------------------------------------

    def set_report(self, report: Report) -> None:
        self.graph_report = report
        self.report = self.report_view(report) if self.report_view else report
        if self.node_id is not None and self.node_id in self.doc.graph.nodes:
            node = self.doc.graph.node(self.node_id)
            if node.type in self.doc.graph.registry:
                self._show_ports(self.doc.graph.registry.get(node.type))
                self._show_param_problems()

    def _on_change(self, event) -> None:
        if self.multi_nodes and event.kind in ("param_changed", "node_removed",
                                               "node_renamed"):
            if event.kind == "param_changed" and event.node in self.multi_nodes:
                self._refill_shared()
            elif event.kind != "param_changed":
                self.show_node(None)
            return
        if event.kind == "node_renamed" and event.name == self.node_id:
            self.node_id = event.node
            if self.id_edit is not None:
                self.id_edit.setText(event.node)
        elif (event.kind == "node_renamed" and self.node_id is not None
              and self.node_id in self.doc.graph.nodes):
            node = self.doc.graph.node(self.node_id)  # its params may name the renamed node
            if node.type in self.doc.graph.registry:
                self._show_params(self.doc.graph.registry.get(node.type))
        elif event.kind == "node_removed" and event.node == self.node_id:
            self.show_node(None)
        elif (event.kind == "param_changed" and self.node_id is not None
              and event.node == self.node_id):
            node = self.doc.graph.node(self.node_id)
            self._show_params(self.doc.graph.registry.get(node.type))
        elif event.kind == "training_changed":
            values = settings.resolve(self.doc.training())[0]
            f = self._training_fields.get(event.name)
            if f is not None:
                f.show(values[event.name], event.name in self.doc.training())

    # -- commits ---------------------------------------------------------------------------

    def _commit_param(self, param: Param, value: Any, fields: dict | None = None) -> None:
        if fields is not None and fields is not self.fields:
            return  # a late editingFinished of a page no longer shown (its focus left after
            # another block's page replaced it): its node is not the one shown now
        f = self.fields[param.name]
        if pw.is_parse_error(value):
            f.set_error(str(value))
            return
        if self.node_id is None:  # a node's field, and no node shown: nothing to set
            return
        try:
            if value is pw.UNSET:
                self.doc.reset_param(self.node_id, param.name)
            else:
                self.doc.set_param(self.node_id, param.name, value,
                                   getattr(f.editor, "merge_key", None))
        except EditRefused as e:
            f.set_error(str(e))
            return
        f.set_error("")

    def _reset_param(self, param: Param) -> None:
        if self.node_id is None:
            return
        self.doc.reset_param(self.node_id, param.name)
        node = self.doc.graph.node(self.node_id)
        self._show_params(self.doc.graph.registry.get(node.type))

    def _commit_training(self, param: Param, value: Any) -> None:
        f = self.fields[param.name]
        if pw.is_parse_error(value):
            f.set_error(str(value))
            return
        try:
            value = None if value is None else param.check(value)
        except Exception as e:
            f.set_error(str(e))
            return
        self.doc.set_training(param.name, value)
        f.set_error("")

    def _commit_rename(self) -> None:
        if self.id_edit is None or self.id_error is None or self.node_id is None:
            return
        try:
            self.doc.rename(self.node_id, self.id_edit.text())
            self.id_error.setVisible(False)
        except EditRefused as e:
            self.id_error.setText(str(e))
            self.id_error.setVisible(True)


def _error_label() -> QLabel:
    label = QLabel()
    label.setProperty("role", "error")
    label.setWordWrap(True)
    label.setVisible(False)
    return label


def _first_paragraph(doc: str) -> str:
    return doc.strip().split("\n\n", 1)[0].replace("\n", " ")
