"""Every panel of the window is a dock made one way (`MainWindow.add_dock`): named, kept in
`docks`, placed where it belongs and listed under View > Panels (the floating node view
dock only named and kept)."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QDockWidget


def test_every_dock_is_named_kept_and_listed(window):
    made = window.findChildren(QDockWidget)
    assert sorted(d.objectName() for d in made) == sorted(window.docks)
    assert {"palette", "inspector", "preview", "problems", "log", "plots", "animation",
            "stepthrough", "runs", "compare", "node_view"} <= set(window.docks)
    listed = set(window.docks_menu.actions())
    for name, dock in window.docks.items():
        assert dock.objectName() == name and dock.widget() is not None
        assert (dock.toggleViewAction() in listed) == (not dock.isFloating()), name
    assert window.docks["node_view"].isFloating()
    assert window.docks["node_view"].widget() is window.node_views.panel


def test_docks_sit_where_they_belong(window):
    d = window.docks
    area = Qt.DockWidgetArea
    for dock in d.values():  # a first layout folds the right and bottom sides away
        if not dock.isFloating():
            dock.show()
    assert window.dockWidgetArea(d["palette"]) == area.LeftDockWidgetArea
    assert window.dockWidgetArea(d["inspector"]) == area.RightDockWidgetArea
    assert window.dockWidgetArea(d["preview"]) == area.RightDockWidgetArea
    for name in ("problems", "log", "plots", "animation", "stepthrough", "runs", "compare"):
        assert window.dockWidgetArea(d[name]) == area.BottomDockWidgetArea, name
    assert set(window.tabifiedDockWidgets(d["problems"])) == {
        d["log"], d["animation"], d["stepthrough"], d["compare"]}
    assert window.tabifiedDockWidgets(d["plots"]) == [d["runs"]]
