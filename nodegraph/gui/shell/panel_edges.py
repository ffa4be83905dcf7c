"""Room for the graph: the panels on each side fold to the window's edge and come back
with one key, as Blender's T and N do.

T folds the left side (the block palette), N the right (inspector and preview), Ctrl+J the
bottom (problems, log, training plots, runs, ...); the same key brings back the panels that
were open there. Three small buttons at the foot of the window show which sides are folded
and unfold them with a click. A window opened for the first time (no saved layout) starts
with the right and bottom folded, so the canvas gets three quarters of it and more; the
bottom unfolds by itself when a run starts (its plots are the point of training) or is
refused (its Problems say why), the right when a card is picked (unless the user folded it
by hand: then it stays folded). The layout the user leaves is saved with the window's
state, as before, and which panels each folded side hides with it (so that the key brings
back the same panels on the next launch).

Qt (6.x) leaves tab bars of hidden or re-arranged dock groups shown where they last were
— over the palette on a second launch with the bottom folded. `hide_stale_tab_bars` hides
every tab bar that does not sit on the dock it names; it runs after each fold, unfold and
restore.
"""

from __future__ import annotations

import json

import shiboken6
from PySide6.QtCore import QSettings, Qt, QTimer
from PySide6.QtWidgets import QDockWidget, QTabBar, QToolButton, QWidget

from nodegraph.gui.shell.menus import _action

AREA = {"left": Qt.DockWidgetArea.LeftDockWidgetArea,
        "right": Qt.DockWidgetArea.RightDockWidgetArea,
        "bottom": Qt.DockWidgetArea.BottomDockWidgetArea}
KEYS = {"left": "T", "right": "N", "bottom": "Ctrl+J"}
NAMES = {"left": "Blocks", "right": "Inspector", "bottom": "Panels"}
ARROWS = {"left": "◂", "right": "▸", "bottom": "▾"}


class PanelEdges:
    """Folds and unfolds the docks of each side of one window."""

    def __init__(self, window):
        self.window = window
        self.folded: dict[str, list[QDockWidget]] = {}  # side -> the docks it hid
        self.buttons: dict[str, QToolButton] = {}
        self.chosen: set[str] = set()  # sides the user folded or unfolded by hand
        self._fresh: set[str] = set()  # sides folded by the first layout, never shown yet
        for side in reversed(AREA):  # each goes first: left to right, Blocks first
            button = QToolButton()
            button.setAutoRaise(True)
            button.setCheckable(True)
            button.setToolTip(f"fold or unfold the {NAMES[side].lower()} side "
                              f"({KEYS[side]})")
            button.clicked.connect(lambda _=False, s=side: self.toggle(s))
            window.statusBar().insertPermanentWidget(0, button)
            self.buttons[side] = button
        self._label_buttons()

    def docks(self, side: str) -> list[QDockWidget]:
        """The docks that live on `side` now (floating ones are nobody's)."""
        w = self.window
        return [d for d in w.findChildren(QDockWidget)
                if d.parent() is w and not d.isFloating() and w.dockWidgetArea(d) == AREA[side]]

    def is_folded(self, side: str) -> bool:
        return all(d.isHidden() for d in self.docks(side))

    def toggle(self, side: str) -> None:
        """The key or button: the user's choice, kept (no side unfolds by itself after)."""
        self.chosen.add(side)
        if self.is_folded(side):
            self.unfold(side)
        else:
            self.fold(side)

    def fold(self, side: str) -> None:
        shown = [d for d in self.docks(side) if not d.isHidden()]
        self._hold_canvas()
        if shown:
            self.folded[side] = shown
        for d in shown:
            d.hide()
        self._label_buttons()
        self._sweep_soon()
        self.window.group_tabs.focus_canvas()

    def unfold(self, side: str, raise_: QDockWidget | None = None) -> None:
        docks = [d for d in self.folded.pop(side, []) if d.parent() is self.window]
        if not docks:  # nothing remembered: the side's first panel
            docks = self.docks(side)[:1] if side != "right" else self.docks(side)
        self._hold_canvas()
        for d in docks:
            d.show()
        if raise_ is not None:
            raise_.show()
            raise_.raise_()
        elif docks:
            docks[0].raise_()
        if side in self._fresh:  # hidden since the start: give the panels their room
            self._fresh.discard(side)
            self._first_sizes(side)
        self._label_buttons()
        self._sweep_soon()

    def _hold_canvas(self) -> None:
        """The cards stay put on the screen while this side folds or unfolds."""
        for view in [self.window.view, *(c.view for c in self.window.group_tabs.canvases)]:
            view.hold_for_panels()

    def _sweep_soon(self) -> None:
        """Hide stale tab bars once the layout has settled (a bar hidden before would stay
        hidden when its docks come back: Qt shows a bar only when it starts to use it)."""
        QTimer.singleShot(0, self._sweep)

    def _sweep(self) -> None:
        if shiboken6.isValid(self.window):
            hide_stale_tab_bars(self.window)

    def save(self, settings: QSettings) -> None:
        """Remember which panels each folded side hides (the dock layout saves them only
        as hidden)."""
        folded = {side: [d.objectName() for d in docks if shiboken6.isValid(d)]
                  for side, docks in self.folded.items() if self.is_folded(side)}
        settings.setValue("panels/folded", json.dumps(folded))

    def restore(self, settings: QSettings) -> None:
        """After the dock layout is restored: the folded sides' panels, as saved, and no
        stray tab bar."""
        try:
            folded = json.loads(str(settings.value("panels/folded", "{}")))
        except ValueError:
            folded = {}
        docks = self.window.docks
        if isinstance(folded, dict):
            for side, names in folded.items():
                if side in AREA and isinstance(names, list) and self.is_folded(side):
                    kept = [docks[n] for n in names if isinstance(n, str) and n in docks]
                    if kept:
                        self.folded[side] = kept
        self._label_buttons()
        self._sweep_soon()

    def _first_sizes(self, side: str) -> None:
        """The sizes a first layout gives a side's panels when they first unfold (docks
        hidden from the start would share the room unevenly: a wide log, a thin plot)."""
        w, docks = self.window, self.window.docks
        horizontal, vertical = Qt.Orientation.Horizontal, Qt.Orientation.Vertical
        if side == "bottom":
            w.resizeDocks([docks["problems"], docks["plots"]], [560, 940], horizontal)
            w.resizeDocks([docks["plots"]], [250], vertical)
        elif side == "right":
            w.resizeDocks([docks["inspector"]], [360], horizontal)

    def _label_buttons(self) -> None:
        if not shiboken6.isValid(self.window):  # docks report hiding while the window goes
            return
        for side, button in self.buttons.items():
            folded = self.is_folded(side)
            button.setChecked(not folded)
            button.setText(f"{ARROWS[side]} {NAMES[side]}")

    def selected(self, nodes: list[str]) -> None:
        """A card was picked: its params are wanted, so a right side folded only by the
        first layout (never by the user) unfolds."""
        if len(nodes) == 1 and "right" not in self.chosen and self.is_folded("right"):
            self.unfold("right")
            # the canvas narrowed: a card picked by the right edge would sit half hidden
            QTimer.singleShot(0, lambda: self._keep_in_view(nodes[0]))

    def _keep_in_view(self, node: str) -> None:
        w = self.window
        if not shiboken6.isValid(w):
            return
        item = w.scene.nodes.get(node)
        if item is not None and item.isSelected():
            w.view.ensureVisible(item.sceneBoundingRect(), 40, 40)

    def first_layout(self) -> None:
        """No saved layout: the canvas first (right and bottom folded)."""
        for side in ("right", "bottom"):
            self.fold(side)
        self._fresh = {"right", "bottom"}


def _sits_on_its_dock(window: QWidget, bar: QTabBar, docks: dict[str, QDockWidget]) -> bool:
    """`bar` lies along the shown, docked panel its current tab names (as a tab bar in
    use does)."""
    dock = docks.get(bar.tabText(bar.currentIndex())) if bar.count() > 1 else None
    if dock is None or dock.isHidden() or dock.isFloating():
        return False
    g, d = bar.geometry(), dock.geometry()
    return abs(g.left() - d.left()) <= 4 and (abs(g.top() - d.bottom()) <= 8
                                               or abs(g.bottom() - d.top()) <= 8)


def stale_tab_bars(window: QWidget) -> list[QTabBar]:
    """The window's shown dock tab bars that do not sit on the dock their current tab
    names (left over by Qt after docks were hidden or the layout restored)."""
    docks = {d.windowTitle(): d for d in window.findChildren(QDockWidget)
             if d.parent() is window}
    return [bar for bar in window.findChildren(QTabBar)
            if bar.parent() is window and not bar.isHidden()
            and not _sits_on_its_dock(window, bar, docks)]


def hide_stale_tab_bars(window: QWidget) -> None:
    """Hide the stale tab bars, and show again a bar in use that was hidden (Qt shows a
    bar only when it starts to use it, not when its docks come back)."""
    docks = {d.windowTitle(): d for d in window.findChildren(QDockWidget)
             if d.parent() is window}
    for bar in window.findChildren(QTabBar):
        if bar.parent() is window:
            bar.setVisible(_sits_on_its_dock(window, bar, docks))


def install(window) -> PanelEdges:
    """The edges of `window`, their keys (on the canvas: typing elsewhere is not caught)
    and the View > Panels entries."""
    edges = PanelEdges(window)
    window.panel_edges = edges
    window.docks_menu.addSeparator()
    for side in AREA:
        action = _action(window, f"Fold / Unfold {NAMES[side]}", lambda s=side: edges.toggle(s),
                         KEYS[side], f"the {side} side's panels fold to the edge and come "
                         "back", canvas_only=len(KEYS[side]) == 1)
        window.actions_by_name[f"fold_{side}"] = action
        window.docks_menu.addAction(action)
    for dock in window.findChildren(QDockWidget):
        dock.visibilityChanged.connect(lambda *_: edges._label_buttons())
        dock.visibilityChanged.connect(lambda *_: edges._sweep_soon())
        dock.dockLocationChanged.connect(lambda *_: edges._sweep_soon())
    return edges
