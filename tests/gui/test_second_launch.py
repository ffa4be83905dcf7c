"""A second launch with saved settings draws the panels as they were left: no stray dock
tab bar over the palette or the canvas (Qt leaves one where a folded group's bar was), the
folded sides still folded, and each side's key brings back the panels it hid."""

from __future__ import annotations

import itertools

import pytest
from PySide6.QtWidgets import QDockWidget, QTabBar

SIDES = ("left", "right", "bottom")


def _shown_tab_bars(w) -> list[QTabBar]:
    return [b for b in w.findChildren(QTabBar)
            if b.parent() is w and b.isVisible() and w.rect().intersects(b.geometry())]


def _check_layout(w) -> None:
    """Every shown tab bar lies outside the canvas and the other docks and lists shown
    docks; each shown group of tabbed docks has one."""
    central = w.centralWidget().geometry()
    docks = [d for d in w.findChildren(QDockWidget) if d.parent() is w and d.isVisible()
             and not d.isFloating()]
    bars = _shown_tab_bars(w)
    for bar in bars:
        g = bar.geometry()
        names = [bar.tabText(i) for i in range(bar.count())]
        assert not g.intersects(central), f"tab bar {names} over the canvas"
        for d in docks:
            assert not g.intersects(d.geometry()), f"tab bar {names} over {d.objectName()}"
        shown = {d.windowTitle() for d in docks}
        tabbed = {d.windowTitle() for d in w.findChildren(QDockWidget) if not d.isHidden()}
        assert set(names) <= tabbed and shown & set(names), names
    groups = {frozenset([d, *w.tabifiedDockWidgets(d)]) for d in docks}
    tabbed_groups = [g for g in groups if len([d for d in g if not d.isHidden()]) > 1]
    assert len(bars) == len(tabbed_groups), ([b.tabText(0) for b in bars], tabbed_groups)


def _settle(qtbot) -> None:
    qtbot.wait(50)


@pytest.mark.parametrize("folded", [set(c) for n in range(4)
                                    for c in itertools.combinations(SIDES, n)],
                         ids=lambda f: "+".join(sorted(f)) or "none")
def test_second_launch_restores_every_fold_state(make_window, qtbot, folded):
    w = make_window()
    edges = w.panel_edges
    for side in SIDES:  # the first layout folds right and bottom: open all, then fold
        if edges.is_folded(side):
            edges.toggle(side)
    _settle(qtbot)
    opened = {side: {d.objectName() for d in edges.docks(side) if not d.isHidden()}
              for side in SIDES}
    _check_layout(w)
    for side in folded:
        edges.toggle(side)
    _settle(qtbot)
    _check_layout(w)
    w.save_settings()
    w.close()

    again = make_window()
    _settle(qtbot)
    _check_layout(again)
    for side in SIDES:
        assert again.panel_edges.is_folded(side) == (side in folded), side
    for side in folded:  # the key brings back what was folded, tab bars and all
        again.panel_edges.toggle(side)
        _settle(qtbot)
        assert {d.objectName() for d in again.panel_edges.docks(side)
                if not d.isHidden()} == opened[side], side
        _check_layout(again)


def test_second_launch_with_a_closed_panel_and_the_bottom_folded(make_window, qtbot):
    w = make_window()
    w.panel_edges.toggle("bottom")  # unfolded by hand
    _settle(qtbot)
    w.docks["log"].close()  # its own close button: the rest of its tab group stays
    w.panel_edges.toggle("bottom")
    _settle(qtbot)
    w.save_settings()
    w.close()
    again = make_window()
    _settle(qtbot)
    _check_layout(again)
    again.panel_edges.toggle("bottom")
    _settle(qtbot)
    shown = {d.objectName() for d in again.panel_edges.docks("bottom") if not d.isHidden()}
    assert "log" not in shown and "problems" in shown and "plots" in shown
    _check_layout(again)
