"""Help: the shortcut sheet and a block's documentation page.

The sheet is generated from the window's actions (their menus, texts and shortcuts) and
the canvas gestures, so it stays true when a shortcut changes. A block's page (F1 on a
node, or Help > Block Documentation) is generated from its declaration: summary and doc,
each input and output with its type, each param with its kind, range and default.
"""

from __future__ import annotations

import html

from PySide6.QtWidgets import QDialog, QDialogButtonBox, QTextBrowser, QVBoxLayout, QWidget

from nodegraph.model.spec import BlockSpec, Param

# gestures no QAction carries: the canvas handles them itself
GESTURES = [
    ("Tab / double-click the canvas", "search blocks to add at the cursor"),
    ("Drag from a port, drop on the canvas", "add a block that fits, wired to that port"),
    ("Drag from a port onto a port", "wire an output to an input"),
    ("Drag an input's wire away", "pick the wire up: drop it elsewhere or on nothing"),
    ("Shift+click, Shift+drag", "add to the selection"),
    ("Ctrl+right-drag", "knife: cut the wires the stroke crosses"),
    ("Double-click a wire", "add a reroute point there (drag it to bend the wire; "
                            "double-click it to remove it)"),
    ("Wheel", "zoom about the cursor"),
    ("Middle or right drag, Space+drag", "pan"),
    ("Double-click a group", "open its body in a tab"),
    ("Drop a .json file on the canvas", "open it"),
]


def shortcut_rows(menu_bar) -> list[tuple[str, str, str]]:
    """(menu, action, shortcut) for every action with a shortcut, in menu order."""
    rows: list[tuple[str, str, str]] = []

    def walk(menu, title: str) -> None:
        for action in menu.actions():
            if action.menu() is not None:
                walk(action.menu(), f"{title} › {action.menu().title().replace('&', '')}")
                continue
            text, _, tab_key = action.text().replace("&", "").partition("\t")
            keys = ", ".join(k.toString() for k in action.shortcuts()) or tab_key
            if keys and text:
                rows.append((title, text.rstrip("…").strip(), keys))

    for top in menu_bar.actions():
        if top.menu() is not None:
            walk(top.menu(), top.menu().title().replace("&", ""))
    return rows


def shortcut_html(menu_bar) -> str:
    rows = "".join(f"<tr><td>{html.escape(m)}</td><td>{html.escape(a)}</td>"
                   f"<td><b>{html.escape(k)}</b></td></tr>" for m, a, k in shortcut_rows(menu_bar))
    gestures = "".join(f"<tr><td><b>{html.escape(g)}</b></td><td>{html.escape(d)}</td></tr>"
                       for g, d in GESTURES)
    return (f"<h2>Keyboard shortcuts</h2><table cellspacing=6>{rows}</table>"
            f"<h2>Mouse gestures</h2><table cellspacing=6>{gestures}</table>")


def _param_line(p: Param) -> str:
    default = "" if p.required else f"; default <code>{html.escape(repr(p.default))}</code>"
    return (f"<li><b>{html.escape(p.name)}</b> <i>({html.escape(p.describe())}{default})</i>"
            + (f" — {html.escape(p.doc)}" if p.doc else "") + "</li>")


def block_html(spec: BlockSpec, node: str | None = None) -> str:
    """The documentation page of a block, generated from its declaration."""
    title = html.escape(spec.id) + (f" <small>(node {html.escape(node)})</small>" if node else "")
    parts = [f"<h2>{title}</h2>", f"<p><i>{html.escape(spec.kind)} · "
             f"{html.escape(spec.category or spec.id.split('.')[0])}</i></p>"]
    doc = spec.doc.strip() or spec.summary
    parts += [f"<p>{html.escape(par.strip())}</p>" for par in doc.split("\n\n") if par.strip()]
    for heading, ports in (("Inputs", spec.inputs), ("Outputs", spec.outputs)):
        if ports:
            items = "".join(
                f"<li><b>{html.escape(p.name)}</b> <i>{html.escape(p.type.name)}"
                f"{', optional' if p.optional else ''}</i>"
                + (f" — {html.escape(p.doc)}" if p.doc else "") + "</li>" for p in ports)
            parts.append(f"<h3>{heading}</h3><ul>{items}</ul>")
    if spec.params:
        parts.append("<h3>Params</h3><ul>" + "".join(_param_line(p) for p in spec.params)
                     + "</ul>")
    if spec.keywords:
        parts.append(f"<p><i>also found as: {html.escape(', '.join(spec.keywords))}</i></p>")
    return "".join(parts)


class HelpDialog(QDialog):
    """A non-modal page of rich text (kept open beside the canvas)."""

    def __init__(self, title: str, text: str, parent: QWidget | None = None):
        super().__init__(parent)
        self.setWindowTitle(title)
        self.browser = QTextBrowser()
        self.browser.setOpenExternalLinks(False)
        self.browser.setHtml(text)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(self.close)
        layout = QVBoxLayout(self)
        layout.addWidget(self.browser)
        layout.addWidget(buttons)
        self.resize(640, 640)


class Help:
    """The window's help pages: one dialog each, reused."""

    def __init__(self, window):
        self.window = window
        self.dialog: HelpDialog | None = None

    def _show(self, title: str, text: str) -> HelpDialog:
        if self.dialog is None:
            self.dialog = HelpDialog(title, text, self.window)
        self.dialog.setWindowTitle(title)
        self.dialog.browser.setHtml(text)
        self.dialog.show()
        self.dialog.raise_()
        return self.dialog

    def shortcuts(self) -> HelpDialog:
        return self._show("Shortcuts — nodegraph", shortcut_html(self.window.menuBar()))

    def block(self) -> HelpDialog | None:
        """The documentation of the selected node's block (F1)."""
        scene = self.window.group_tabs.current_scene()
        doc = self.window.group_tabs.current_doc()
        chosen = scene.selected_node_ids()
        if len(chosen) != 1:
            self.window.notify("Select one node, then press F1 for its documentation.")
            return None
        node = doc.graph.nodes[chosen[0]]
        if node.type not in doc.graph.registry:
            self.window.notify(f"'{node.type}' is not a known block: no documentation.")
            return None
        spec = doc.graph.registry.get(node.type)
        return self._show(f"{spec.id} — nodegraph", block_html(spec, chosen[0]))
