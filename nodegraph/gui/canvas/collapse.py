"""Collapsed cards: a node (or a selection) shown as its title bar only, as in ComfyUI.

A big network reads better when the blocks one is not working on take a line each. The
state is UI data (`graph.ui["collapsed"]`, saved with the file) and every change is one
undo step. Collapse or expand with the node's context menu or View > Collapse / Expand.
"""

from __future__ import annotations

from collections.abc import Iterable

from PySide6.QtGui import QAction, QUndoCommand

KEY = "collapsed"


def collapsed(ui: dict) -> set[str]:
    """The ids of the collapsed nodes in a graph's UI data."""
    value = ui.get(KEY)
    return {str(n) for n in value} if isinstance(value, list) else set()


class SetCollapsed(QUndoCommand):
    """Collapse or expand some nodes: one undo step."""

    def __init__(self, collapser: Collapser, nodes: set[str], on: bool):
        super().__init__(("Collapse" if on else "Expand") + f" {len(nodes)} node(s)")
        self.collapser, self.nodes, self.on = collapser, nodes, on
        self.before = collapsed(collapser.doc.graph.ui)

    def redo(self) -> None:
        after = self.before | self.nodes if self.on else self.before - self.nodes
        self.collapser.write(after)

    def undo(self) -> None:
        self.collapser.write(self.before)


class Collapser:
    """Keeps the canvas cards' collapsed state in step with the graph's UI data."""

    def __init__(self, doc, scene):
        self.doc, self.scene = doc, scene
        doc.graph_replaced.connect(self.apply)  # after the scene rebuilt its cards
        doc.changed.connect(lambda *_: self.apply())

    def write(self, nodes: set[str]) -> None:
        self.doc.graph.set_ui(KEY, sorted(nodes) if nodes else None)
        self.apply()

    def apply(self) -> None:
        """Show every card as the UI data says."""
        ids = collapsed(self.doc.graph.ui)
        for node_id, item in self.scene.nodes.items():
            item.set_collapsed(node_id in ids)

    def set(self, nodes: Iterable[str], on: bool) -> bool:
        """Collapse (`on`) or expand `nodes` as one undo step; False when nothing changes."""
        now = collapsed(self.doc.graph.ui)
        nodes = {n for n in nodes if n in self.doc.graph.nodes and (n in now) != on}
        if not nodes:
            return False
        self.doc.undo_stack.push(SetCollapsed(self, nodes, on))
        return True

    def toggle(self, nodes: Iterable[str] | None = None) -> bool:
        """Collapse `nodes` (default: the selection) unless all are collapsed: then expand."""
        nodes = list(self.scene.selected_node_ids() if nodes is None else nodes)
        now = collapsed(self.doc.graph.ui)
        return self.set(nodes, not all(n in now for n in nodes))


def install(window) -> Collapser:
    """A collapser for `window`: View > Collapse / Expand and an entry in the node menu."""
    collapser = Collapser(window.doc, window.scene)
    action = QAction("Collapse / E&xpand Cards", window)
    action.setStatusTip("show the selected cards as their title bar only, or whole again")
    action.triggered.connect(lambda *_: collapser.toggle())
    menu = next(a.menu() for a in window.menuBar().actions() if a.text() == "&View")
    menu.addAction(action)
    window.actions_by_name["collapse"] = action

    def node_menu(menu, node: str) -> None:
        selected = window.scene.selected_node_ids()
        nodes = selected if node in selected else [node]
        shut = all(n in collapsed(window.doc.graph.ui) for n in nodes)
        what = f"{len(nodes)} Cards" if len(nodes) > 1 else "Card"
        menu.addAction(("Expand " if shut else "Collapse ") + what,
                       lambda: collapser.set(nodes, not shut))

    window.node_menu_hooks = [*getattr(window, "node_menu_hooks", []), node_menu]
    collapser.apply()
    return collapser
