"""Edit menu actions on the canvas selection: add, delete, copy, paste, duplicate, layout,
comments and backdrops.

These are the gestures of the canvas turned into document edits: a block dropped from the
palette or chosen in the search popup, a wire dropped loose (add a compatible block and
wire it in one step), delete, the clipboard (JSON, so it works between windows; a paste
lands under the mouse when it is on the canvas), select all, auto-layout, the knife, and
arranging a selection (align, distribute, straighten, snap to the grid). Refused edits
are shown in the status bar, never raised at the user.
"""

from __future__ import annotations

from PySide6.QtCore import QPointF
from PySide6.QtGui import QCursor
from PySide6.QtWidgets import QApplication

from nodegraph.gui.canvas import arrange, knife
from nodegraph.gui.canvas.layout import DIRECTION_KEY, auto_layout, saved_direction
from nodegraph.gui.canvas.rename_editor import CanvasRename
from nodegraph.gui.canvas.reroute import Reroutes
from nodegraph.gui.canvas.scene import GraphScene
from nodegraph.gui.canvas.view import GraphView
from nodegraph.gui.document import annotations as canvas_notes  # `annotations` is __future__'s
from nodegraph.gui.document import clipboard
from nodegraph.gui.document import commands as cmd
from nodegraph.gui.document.document import Document, EditRefused
from nodegraph.gui.document.wiring import (
    blocks_for_source,
    blocks_for_target,
    compatible_input,
    compatible_output,
)
from nodegraph.gui.panels import ranking
from nodegraph.gui.panels.search_popup import SearchPopup
from nodegraph.model.errors import GraphError

CARD_OFFSET = QPointF(90, 30)  # a new card is centred on the cursor, not hung from it


class EditActions:
    """What the Edit menu and the canvas gestures do."""

    def __init__(self, doc: Document, scene: GraphScene, view: GraphView, notify):
        self.doc, self.scene, self.view = doc, scene, view
        self.notify = notify  # shows a one-line message (the status bar)
        self.popup = SearchPopup(view)
        self.popup.chosen.connect(self._popup_chosen)
        self._pending: dict | None = None  # what the open popup's choice will do
        scene.wire_requested.connect(self.connect)
        scene.wire_rewired.connect(self.rewire)
        scene.wire_detached.connect(self.doc.disconnect)
        scene.wire_dropped.connect(self.offer_for_loose_wire)
        scene.nodes_moved.connect(self._moved)
        scene.notes_moved.connect(self.doc.move_with_notes)
        scene.note_text_edited.connect(lambda note, text: self.doc.edit_note(note, text))
        view.block_dropped.connect(self.add_block)
        view.search_requested.connect(self.offer_any_block)
        view.knife_cut.connect(self.cut_wires)
        self.snap_to_grid = False
        self.grid = 24.0
        self.renamer = CanvasRename(doc, scene, view, notify)
        self.reroutes = Reroutes(doc, scene)

    # -- adding ----------------------------------------------------------------------------

    def add_block(self, block_id: str, pos: QPointF | None = None, **wire) -> str | None:
        """Add `block_id` with its card centred at `pos` (default: the middle of the view)."""
        if pos is None:
            pos = self.view.mapToScene(self.view.viewport().rect().center())
        corner = pos - CARD_OFFSET
        node = self.doc.add_block(block_id, (corner.x(), corner.y()), **wire)
        if node is not None:
            self.scene.select_nodes([node])
            self.show_in_view([node])
        return node

    def show_in_view(self, nodes: list[str]) -> None:
        """The view follows new cards: scrolled to them when they landed outside it (a
        wire's far end, a paste at the copied place), zoomed out when they do not fit."""
        items = [self.scene.nodes[n] for n in nodes if n in self.scene.nodes]
        if not items:
            return
        rect = items[0].sceneBoundingRect()
        for item in items[1:]:
            rect = rect.united(item.sceneBoundingRect())
        shown = self.view.mapToScene(self.view.viewport().rect()).boundingRect()
        if shown.contains(rect):
            return
        if rect.width() < shown.width() * 0.9 and rect.height() < shown.height() * 0.9:
            self.view.ensureVisible(rect, 40, 40)
        else:
            self.view.fit(rect.united(shown))

    def offer_any_block(self, pos: QPointF, screen=None) -> None:
        self._pending = {"pos": pos}
        selected = self.scene.selected_node_ids()
        context = ranking.context_after(self.doc.graph, selected[0] if len(selected) == 1
                                        else None)
        self.popup.open_at(screen or QCursor.pos(), list(self.doc.graph.registry),
                           context=context)

    def offer_for_loose_wire(self, ref: tuple, output: bool, pos: QPointF) -> None:
        """A wire dropped on empty canvas: offer only blocks it fits, and wire the choice."""
        g = self.doc.graph
        specs = blocks_for_source(g, ref) if output else blocks_for_target(g, ref)
        self._pending = {"pos": pos, "ref": tuple(ref), "output": output}
        where = f"{ref[0]}.{ref[1]}"
        title = f"Blocks that take {where}" if output else f"Blocks that can feed {where}"
        screen = self.view.viewport().mapToGlobal(self.view.mapFromScene(pos))
        self.popup.open_at(screen, specs, title,
                           context=ranking.context_for(g, tuple(ref), output, specs))

    def _popup_chosen(self, block_id: str) -> None:
        pending, self._pending = self._pending or {}, None
        self.add_for(block_id, pending)

    def add_for(self, block_id: str, pending: dict) -> str | None:
        """Add `block_id` as the popup was asked (at a point, maybe wired to a loose end)."""
        pos = pending.get("pos")
        ref = pending.get("ref")
        if ref is None:
            return self.add_block(block_id, pos)
        spec = self.doc.graph.registry.get(block_id)
        drop: QPointF = pending["pos"]  # a loose end always comes with where it was dropped
        if pending["output"]:
            port = compatible_input(self.doc.graph, ref, spec)
            wire = {"connect_from": ref, "port": port.name if port else None}
            return self.add_block(block_id, drop + CARD_OFFSET, **wire)
        port = compatible_output(self.doc.graph, ref, spec)
        wire = {"connect_to": ref, "port": port.name if port else None}
        # a card feeding an input sits to the left of the point, its output at the point
        return self.add_block(block_id, drop + CARD_OFFSET - QPointF(200, 0), **wire)

    # -- wiring ----------------------------------------------------------------------------

    def connect(self, source: tuple, target: tuple) -> bool:
        try:
            return self.doc.connect(tuple(source), tuple(target))
        except EditRefused as e:
            self.notify(f"Cannot wire: {e}")
            return False

    def rewire(self, old, source: tuple, target: tuple) -> None:
        """A picked-up wire dropped on another input: one undo step for both changes."""
        self.doc.push_macro("Move wire", [cmd.Disconnect(self.doc, old),
                                          cmd.Connect(self.doc, tuple(source), tuple(target))])

    # -- selection edits -------------------------------------------------------------------

    def delete_selection(self) -> None:
        self.reroutes.delete_selected()
        self.doc.delete(self.scene.selected_node_ids(), self.scene.selected_edges(),
                        self.scene.selected_note_ids())

    def rename_selected(self) -> bool:
        """Open the rename field over the selected card (F2)."""
        return self.renamer.start()

    def select_all(self) -> None:
        self.scene.select_nodes(list(self.scene.nodes))

    def copy(self) -> bool:
        nodes, notes = self.scene.selected_node_ids(), self.scene.selected_note_ids()
        if not nodes and not notes:
            return False
        # plain text, marked as a clip inside: any window or process can paste it, and a
        # QMimeData handed to the clipboard crashes some platforms (offscreen) at exit
        QApplication.clipboard().setText(clipboard.copy_nodes(self.doc.graph, nodes, notes))
        return True

    def cut(self) -> None:
        if self.copy():
            self.delete_selection()

    def paste(self, at: QPointF | None = None) -> list[str]:
        """Paste the clip with its top-left corner at `at`, under the mouse when it is on
        the canvas, else in the middle of the view (never at the copied place off-screen)."""
        doc = clipboard.parse(QApplication.clipboard().text())
        if doc is None:
            self.notify("The clipboard holds no nodes to paste.")
            return []
        if at is None:
            at = self.view.cursor_scene_pos()
        if at is None:
            at = self.view.mapToScene(self.view.viewport().rect().center()) - CARD_OFFSET
        return self._paste(doc, at)

    def duplicate(self) -> list[str]:
        nodes, notes = self.scene.selected_node_ids(), self.scene.selected_note_ids()
        if not nodes and not notes:
            return []
        clip = clipboard.parse(clipboard.copy_nodes(self.doc.graph, nodes, notes))
        if clip is None:  # not expected: a copy of a selection always parses
            return []
        return self._paste(clip, None, "Duplicate")

    def _paste(self, clip: dict, at: QPointF | None, text: str = "Paste") -> list[str]:
        plan = clipboard.plan_paste(self.doc.graph, clip, (at.x(), at.y()) if at else None)
        ids = self.doc.paste(plan, text)
        self.scene.select_nodes(ids)
        self.show_in_view(ids)
        for note in plan.notes:  # pasted notes are selected with the pasted nodes
            if note["id"] in self.scene.notes:
                self.scene.notes[note["id"]].setSelected(True)
        return ids

    # -- comments and backdrops ------------------------------------------------------------

    def add_comment(self, pos: QPointF | None = None, text: str = "Comment") -> str:
        """A comment at `pos` (default: free canvas nearest the middle of the view, never
        on top of a card), its text ready to type."""
        if pos is None:
            centre = self.view.mapToScene(self.view.viewport().rect().center())
            rect = self._free_rect(centre, 200, 80)
        else:
            rect = (pos.x() - 100, pos.y() - 40, 200, 80)
        note = self.doc.add_note("comment", rect, text)
        self._select_note(note)
        return note

    def add_backdrop(self, text: str = "Backdrop") -> str:
        """A backdrop around the selected nodes (or in the middle of the view)."""
        items = [self.scene.nodes[n] for n in self.scene.selected_node_ids()]
        rect = canvas_notes.around((r.x(), r.y(), r.width(), r.height())
                                  for r in (i.sceneBoundingRect() for i in items))
        if rect is None:
            c = self.view.mapToScene(self.view.viewport().rect().center())
            rect = (c.x() - 200, c.y() - 120, 400, 240)
        note = self.doc.add_note("backdrop", rect, text)
        self._select_note(note)
        return note

    def recolour_backdrops(self) -> None:
        """Give the selected backdrops the next colour of the backdrop palette."""
        colours = canvas_notes.BACKDROP_COLORS
        current = canvas_notes.by_id(self.doc.graph.ui)
        for note_id in self.scene.selected_note_ids():
            note = current[note_id]
            if note["kind"] == "backdrop":
                at = colours.index(note["color"]) if note.get("color") in colours else -1
                self.doc.edit_note(note_id, color=colours[(at + 1) % len(colours)])

    def _select_note(self, note_id: str) -> None:
        self.scene.select_nodes([])
        item = self.scene.notes.get(note_id)
        if item is not None:
            item.setSelected(True)

    def _free_rect(self, centre: QPointF, w: float, h: float) -> tuple:
        """A w × h rectangle clear of every card, as near `centre` as a spiral search of
        grid steps finds (the middle itself when it is free)."""
        from PySide6.QtCore import QRectF
        cards = [i.sceneBoundingRect().adjusted(-12, -12, 12, 12)
                 for i in self.scene.nodes.values()]
        step = self.grid
        for ring in range(0, 60):
            for dx in range(-ring, ring + 1):
                for dy in range(-ring, ring + 1):
                    if max(abs(dx), abs(dy)) != ring:
                        continue
                    r = QRectF(centre.x() - w / 2 + dx * step * 2,
                               centre.y() - h / 2 + dy * step, w, h)
                    if not any(r.intersects(c) for c in cards):
                        return (r.x(), r.y(), w, h)
        return (centre.x() - w / 2, centre.y() - h / 2, w, h)

    # -- the knife and arranging -----------------------------------------------------------

    def cut_wires(self, points: list) -> int:
        """Cut every wire the knife stroke through `points` crosses: one undo step."""
        edges = knife.cut(self.scene.wires.values(), points)
        if edges and self.doc.push_macro(f"Cut {len(edges)} wire(s)",
                                         [cmd.Disconnect(self.doc, e) for e in edges]):
            self.notify(f"Cut {len(edges)} wire(s)")
        return len(edges)

    def _moved(self, before: dict, after: dict) -> None:
        if self.snap_to_grid:
            after = arrange.snap(after, self.grid)
        self.doc.move(before, after)

    def set_snap(self, on: bool) -> None:
        self.snap_to_grid = bool(on)

    def _selected_rects(self) -> dict:
        rects = {}
        for n in self.scene.selected_node_ids():
            r = self.scene.nodes[n].sceneBoundingRect()
            p = self.scene.nodes[n].pos()
            rects[n] = (p.x(), p.y(), r.width(), r.height())
        return rects

    def _arrange(self, after: dict, text: str) -> bool:
        if not after:
            self.notify("Select the cards to arrange first (two or more; three to "
                        "distribute).")
            return False
        if self.snap_to_grid and text != "Straighten":
            after = arrange.snap(after, self.grid)
        return self.doc.move(self.scene.item_positions(after), after, text)

    def align(self, edge: str) -> bool:
        return self._arrange(arrange.align(self._selected_rects(), edge), f"Align {edge}")

    def distribute(self, axis: str) -> bool:
        return self._arrange(arrange.distribute(self._selected_rects(), axis),
                             "Distribute " + ("horizontally" if axis == "x" else "vertically"))

    def straighten(self) -> bool:
        """Level the wires among the selected cards (or all cards when none is selected)."""
        chosen = self.scene.selected_node_ids() or list(self.scene.nodes)
        corners = self.scene.item_positions(chosen)
        wires = []
        for e, wire in self.scene.wires.items():
            if e.src in corners and e.dst in corners:
                src, dst = self.scene.nodes[e.src], self.scene.nodes[e.dst]
                wires.append((e.src, wire.source.anchor().y() - src.pos().y(),
                              e.dst, wire.target.anchor().y() - dst.pos().y()))
        try:
            order = [n for n in self.doc.graph.topological_order() if n in corners]
        except GraphError:  # a cycle the validator reports: keep the graph's order
            order = list(corners)
        return self._arrange(arrange.straighten(corners, wires, order), "Straighten")

    @property
    def layout_direction(self) -> str:
        """The direction Auto-layout used last ("LR" or "TB"), saved in the file's `ui`."""
        return saved_direction(self.doc.graph.ui)

    def auto_layout(self, direction: str | None = None) -> None:
        """Arrange the graph in layers, in `direction` (else the last one chosen), shaped to
        fill the canvas as it is now; a new direction is kept in the file (one undo step
        with the moves)."""
        old = self.layout_direction
        direction = direction or old
        heights = {n: item.height for n, item in self.scene.nodes.items()}
        size = self.view.viewport().size()
        aspect = size.width() / max(1, size.height()) if size.height() > 50 else 1.6
        after = auto_layout(self.doc.graph, heights, direction, aspect)
        stack = self.doc.undo_stack
        if direction != old:
            stack.beginMacro("Auto-layout")
            stack.push(cmd.SetUiValue(self.doc, DIRECTION_KEY, direction, "Layout direction"))
        self.doc.move(self.scene.item_positions(), after, "Auto-layout")
        if direction != old:
            stack.endMacro()
        self.view.fit()
