"""Canvas craft driven by real mouse and keyboard events: Shift+click, frame selected,
paste at the cursor, F2 rename, shared params, the knife, align, snapping, drop-to-open,
image export, themes and what the window remembers between sessions."""

from __future__ import annotations

from PySide6.QtCore import QMimeData, QPointF, Qt, QUrl
from PySide6.QtGui import QColor, QDragEnterEvent, QDropEvent, QImage, QMouseEvent
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication

from nodegraph.gui.base import theme
from nodegraph.model.graph import Edge
from tests.gui.driver import NONE, click_node, drag, model_state, mouse

CTRL = Qt.KeyboardModifier.ControlModifier
SHIFT = Qt.KeyboardModifier.ShiftModifier
ALT = Qt.KeyboardModifier.AltModifier
RIGHT = Qt.MouseButton.RightButton


def _focus_canvas(w, qtbot):
    w.activateWindow()
    w.view.setFocus()
    qtbot.waitUntil(lambda: w.view.hasFocus(), timeout=30_000)


def test_shift_click_adds_to_the_selection_and_plain_click_replaces_it(xor_window):
    w = xor_window
    click_node(w, "hidden")
    click_node(w, "out", SHIFT)
    click_node(w, "loss", SHIFT)
    assert sorted(w.scene.selected_node_ids()) == ["hidden", "loss", "out"]
    click_node(w, "act")
    assert w.scene.selected_node_ids() == ["act"]


def test_f_frames_the_selection(xor_window, qtbot):
    w = xor_window
    _focus_canvas(w, qtbot)
    w.view.set_zoom(0.3)
    w.view.centerOn(5000, 5000)
    w.scene.select_nodes(["out"])
    QTest.keyClick(w.view, Qt.Key.Key_F)
    visible = w.view.mapToScene(w.view.viewport().rect()).boundingRect()
    assert visible.contains(w.scene.nodes["out"].sceneBoundingRect())
    assert w.view.zoom == 1.0  # one card: framed at 1:1, not blown up
    QTest.keyClick(w.view, Qt.Key.Key_Home)  # Home shows everything
    visible = w.view.mapToScene(w.view.viewport().rect()).boundingRect()
    assert all(visible.contains(i.sceneBoundingRect()) for i in w.scene.nodes.values())


def test_paste_lands_under_the_mouse(xor_window, qtbot):
    w = xor_window
    _focus_canvas(w, qtbot)
    w.scene.select_nodes(["hidden"])
    QTest.keyClick(w.view, Qt.Key.Key_C, CTRL)
    free = w.scene.itemsBoundingRect().bottomRight() + QPointF(150, 150)
    w.view.centerOn(free)
    mouse(w, QMouseEvent.Type.MouseMove, free, button=NONE, buttons=NONE)
    QTest.keyClick(w.view, Qt.Key.Key_V, CTRL)
    assert "hidden_2" in w.doc.graph.nodes
    x, y = w.doc.positions()["hidden_2"]
    pixel = 1 / w.view.transform().m11()  # the mouse is exact to one screen pixel
    assert abs(x - free.x()) < 1.5 * pixel and abs(y - free.y()) < 1.5 * pixel
    visible = w.view.mapToScene(w.view.viewport().rect()).boundingRect()
    assert visible.contains(w.scene.nodes["hidden_2"].sceneBoundingRect().topLeft())


def test_f2_renames_on_the_canvas_and_escape_cancels(xor_window, qtbot):
    w = xor_window
    _focus_canvas(w, qtbot)
    click_node(w, "hidden")
    QTest.keyClick(w.view, Qt.Key.Key_F2)
    field = w.edit_actions.renamer.field
    assert field.isVisible() and field.selectedText() == "hidden"
    QTest.keyClicks(field, "encoder")
    QTest.keyClick(field, Qt.Key.Key_Return)
    assert "encoder" in w.doc.graph.nodes and "hidden" not in w.doc.graph.nodes
    assert not field.isVisible()
    click_node(w, "encoder")
    QTest.keyClick(w.view, Qt.Key.Key_F2)
    QTest.keyClicks(field, "data")  # taken: refused, the field stays to correct it
    QTest.keyClick(field, Qt.Key.Key_Return)
    assert field.isVisible() and "encoder" in w.doc.graph.nodes
    QTest.keyClick(field, Qt.Key.Key_Escape)
    assert not field.isVisible() and "encoder" in w.doc.graph.nodes
    w.undo()
    assert "hidden" in w.doc.graph.nodes


def test_a_shared_param_is_set_on_every_selected_node_in_one_step(xor_window):
    w = xor_window
    click_node(w, "hidden")
    click_node(w, "out", SHIFT)
    fields = w.inspector.fields
    assert "out_features" in fields and "in_features" in fields
    editor = fields["out_features"].editor
    assert editor.text() not in ("4", "1")  # 4 and 1 differ: neither is shown
    count = w.doc.undo_stack.count()
    editor.setFocus()
    QTest.keyClick(editor, Qt.Key.Key_A, CTRL)
    QTest.keyClicks(editor, "6")
    QTest.keyClick(editor, Qt.Key.Key_Return)
    g = w.doc.graph
    assert g.node("hidden").params["out_features"] == 6 == g.node("out").params["out_features"]
    assert w.doc.undo_stack.count() == count + 1
    assert editor.value() == 6
    w.undo()
    assert (g.node("hidden").params["out_features"], g.node("out").params["out_features"]) == (
        4, 1)


def test_the_knife_cuts_the_wires_it_crosses_in_one_undo_step(xor_window):
    w = xor_window
    w.view.fit()
    g = w.doc.graph
    before, edges = model_state(g), list(g.edges)
    wire = w.scene.wires[Edge("hidden", "output", "act", "input")]
    mid = wire.path().pointAtPercent(0.15)  # further on, the y wire crosses it
    start, end = mid + QPointF(-2, -4), mid + QPointF(2, 4)
    mouse(w, QMouseEvent.Type.MouseButtonPress, start, button=RIGHT, buttons=RIGHT,
          modifiers=CTRL)
    for i in range(1, 5):
        mouse(w, QMouseEvent.Type.MouseMove, start + (end - start) * (i / 4), button=NONE,
              buttons=RIGHT, modifiers=CTRL)
    mouse(w, QMouseEvent.Type.MouseButtonRelease, end, button=RIGHT, buttons=NONE,
          modifiers=CTRL)
    cut = [e for e in edges if e not in g.edges]
    assert cut == [Edge("hidden", "output", "act", "input")] and len(g.nodes) == 7
    w.undo()
    assert model_state(g) == before


def test_align_column_and_snap_to_grid(xor_window, qtbot):
    w = xor_window
    _focus_canvas(w, qtbot)
    click_node(w, "hidden")
    click_node(w, "act", SHIFT)
    click_node(w, "out", SHIFT)
    QTest.keyClick(w.view, Qt.Key.Key_Up, CTRL | ALT)  # Align as Column
    xs = {round(w.scene.nodes[n].sceneBoundingRect().center().x(), 3)
          for n in ("hidden", "act", "out")}
    assert len(xs) == 1
    w.undo()
    assert len({w.scene.nodes[n].pos().x() for n in ("hidden", "act", "out")}) == 3
    QTest.keyClick(w.view, Qt.Key.Key_G, CTRL | SHIFT)  # snap on
    assert w.actions_by_name["snap"].isChecked()
    card = w.scene.nodes["loss"]
    grab = card.mapToScene(card.boundingRect().center().x(), 12)
    drag(w, grab, grab + QPointF(37, 13))
    x, y = w.doc.positions()["loss"]
    assert x % 24 == 0 and y % 24 == 0
    assert w.settings.value("view/snap") in (True, "true")


def test_ctrl_shift_c_puts_a_comment_on_free_canvas(xor_window, qtbot):
    w = xor_window
    _focus_canvas(w, qtbot)
    w.view.centerOn(w.scene.nodes["act"])  # the middle of the view is on a card
    QTest.keyClick(w.view, Qt.Key.Key_C, CTRL | SHIFT)
    (note_id,) = w.scene.notes
    rect = w.scene.notes[note_id].scene_rect()
    assert not any(rect.intersects(i.sceneBoundingRect()) for i in w.scene.nodes.values())


def _drop_file(w, path):
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(path))])
    local = w.view.viewport().rect().center()
    point = QPointF(local)
    action, mods = Qt.DropAction.CopyAction, Qt.KeyboardModifier.NoModifier
    try:
        enter = QDragEnterEvent(point, action, mime, Qt.MouseButton.LeftButton, mods)
    except TypeError:  # PySide6 before 6.12 takes a QPoint
        enter = QDragEnterEvent(local, action, mime, Qt.MouseButton.LeftButton, mods)
    QApplication.sendEvent(w.view.viewport(), enter)
    assert enter.isAccepted()
    QApplication.sendEvent(w.view.viewport(),
                           QDropEvent(point, action, mime, Qt.MouseButton.LeftButton, mods))


def test_dropping_a_json_file_on_the_canvas_opens_it(window, xor_file):
    assert window.start_page.isVisible()  # an empty canvas shows the start page
    _drop_file(window, xor_file)
    assert window.doc.path == str(xor_file) and len(window.doc.graph.nodes) == 7
    assert not window.start_page.isVisible()


def test_export_image_as_png_and_svg(xor_window, prompts, tmp_path, qtbot):
    w = xor_window
    _focus_canvas(w, qtbot)
    w.scene.select_nodes(["act"])
    prompts.image_to = str(tmp_path / "xor.png")
    QTest.keyClick(w.view, Qt.Key.Key_E, CTRL | ALT)
    image = QImage(str(tmp_path / "xor.png"))
    rect = w.scene.itemsBoundingRect()
    assert image.width() >= rect.width() * 2 - 2 and image.height() >= rect.height() * 2 - 2
    assert image.pixelColor(2, 2) == QColor(theme.CANVAS)  # the theme's canvas, no grid
    assert w.scene.selected_node_ids() == ["act"]  # the selection is kept
    prompts.image_to = str(tmp_path / "xor.svg")
    QTest.keyClick(w.view, Qt.Key.Key_E, CTRL | ALT)
    svg = (tmp_path / "xor.svg").read_text()
    assert svg.lstrip().startswith("<?xml") and "<svg" in svg
    assert "hidden" in svg and "BCEWithLogits" in svg  # text stays text: searchable


def test_light_theme_repaints_and_is_remembered(xor_window, make_window, xor_file):
    w = xor_window
    try:
        w.actions_by_name["theme_light"].trigger()
        assert theme.CURRENT == "light"
        assert w.view.backgroundBrush().color() == QColor(theme.THEMES["light"]["CANVAS"])
        image = w.view.viewport().grab().toImage()
        assert image.pixelColor(3, 3).lightness() > 200
        assert w.settings.value("view/theme") == "light"
        w.set_theme("dark", remember=False)
        again = make_window(str(xor_file))
        assert theme.CURRENT == "light" and again.actions_by_name["theme_light"].isChecked()
    finally:
        w.set_theme("dark")


def test_window_size_docks_and_zoom_are_remembered(make_window, xor_file):
    first = make_window(str(xor_file))
    first.resize(1234, 777)
    first.docks["plots"].hide()
    first.view.set_zoom(1.7)
    first.view.centerOn(300, 40)
    centre = first.view.mapToScene(first.view.viewport().rect().center())
    first.close()
    second = make_window(str(xor_file))
    assert abs(second.view.zoom - 1.7) < 1e-3
    again = second.view.mapToScene(second.view.viewport().rect().center())
    assert abs(again.x() - centre.x()) < 2 and abs(again.y() - centre.y()) < 2
    assert second.docks["plots"].isHidden()
    assert second.settings.value("window/geometry") is not None


def test_shift_drag_band_adds_to_the_selection_and_ctrl_right_opens_no_menu(xor_window):
    from PySide6.QtGui import QContextMenuEvent

    w = xor_window
    w.view.fit()
    click_node(w, "hidden")
    loss = w.scene.nodes["loss"].sceneBoundingRect()
    start = loss.topLeft() - QPointF(15, 15)
    assert not w.scene.items(start)
    end = loss.bottomRight() + QPointF(5, 5)
    mouse(w, QMouseEvent.Type.MouseButtonPress, start, modifiers=SHIFT)
    for i in range(1, 5):
        mouse(w, QMouseEvent.Type.MouseMove, start + (end - start) * (i / 4), button=NONE,
              modifiers=SHIFT)
    mouse(w, QMouseEvent.Type.MouseButtonRelease, end, buttons=NONE, modifiers=SHIFT)
    assert {"hidden", "loss"} <= set(w.scene.selected_node_ids())
    viewport = w.view.viewport()
    at = w.view.mapFromScene(w.scene.nodes["act"].sceneBoundingRect().center())
    event = QContextMenuEvent(QContextMenuEvent.Reason.Mouse, at, viewport.mapToGlobal(at),
                              CTRL)
    QApplication.sendEvent(viewport, event)
    assert w.node_views.context_menu is None  # no node menu popped up over the knife


def test_the_plots_axes_ticks_and_titles_follow_the_theme(xor_window):
    w = xor_window
    w.docks["plots"].show()
    plots = w.plots
    try:
        w.actions_by_name["theme_light"].trigger()
        light = QColor(theme.THEMES["light"]["TEXT_DIM"])
        for plot in (plots.loss_plot, plots.metric_plot, plots.step_plot):
            for name in ("left", "bottom"):
                axis = plot.getAxis(name)
                assert axis.textPen().color() == light == axis.pen().color()
            assert light.name() in plot.titleLabel.item.toHtml()
        axis = plots.loss_plot.getAxis("left")  # the tick labels, drawn: dark on light
        rect = axis.mapRectToScene(axis.boundingRect())
        image = plots.canvas.grab(plots.canvas.mapFromScene(rect).boundingRect()).toImage()
        inked = [image.pixelColor(x, y) for x in range(image.width())
                 for y in range(image.height())]
        assert min(c.lightness() for c in inked) < 140  # text, darker than the background
        assert max(c.lightness() for c in inked) > 200  # on the light background
        w.actions_by_name["theme_dark"].trigger()
        dark = QColor(theme.THEMES["dark"]["TEXT_DIM"])
        assert plots.step_plot.getAxis("bottom").textPen().color() == dark
    finally:
        w.set_theme("dark")
