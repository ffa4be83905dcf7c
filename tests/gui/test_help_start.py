"""Help and the start page: the shortcut sheet comes from the real actions, F1 opens the
selected block's documentation, the empty canvas shows the example gallery."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtGui import QKeySequence
from PySide6.QtTest import QTest

from nodegraph.gui.document.files import example_files
from nodegraph.gui.shell import start_page
from tests.gui.driver import click_node


def _focus_canvas(w, qtbot):
    w.activateWindow()
    w.view.setFocus()
    qtbot.waitUntil(lambda: w.view.hasFocus(), timeout=30_000)


def test_shortcut_sheet_lists_the_actions_as_they_are(xor_window, qtbot):
    w = xor_window
    _focus_canvas(w, qtbot)
    QTest.keyClick(w.view, Qt.Key.Key_Slash, Qt.KeyboardModifier.ControlModifier)
    dialog = w.help.dialog
    assert dialog is not None and dialog.isVisible()
    text = dialog.browser.toPlainText()
    for words in ("Frame Selected", "Rename Node", "Export Image", "Ctrl+Alt+E",
                  "Ctrl+right-drag", "Snap to Grid", "F2"):
        assert words in text, words
    dialog.close()
    w.actions_by_name["frame"].setShortcut(QKeySequence("Ctrl+Alt+F"))  # it stays true
    w.help.shortcuts()
    assert "Ctrl+Alt+F" in w.help.dialog.browser.toPlainText()


def test_f1_opens_the_selected_blocks_documentation(xor_window, qtbot):
    w = xor_window
    _focus_canvas(w, qtbot)
    click_node(w, "opt")
    QTest.keyClick(w.view, Qt.Key.Key_F1)
    text = w.help.dialog.browser.toPlainText()
    spec = w.doc.graph.registry.get("optimizers.Adam")
    assert "optimizers.Adam" in text and "opt" in text
    for param in spec.params:
        assert param.name in text
    for port in spec.inputs:
        assert port.name in text


def test_start_page_gallery_opens_an_example_and_returns_on_new(window, qtbot, tmp_path):
    w = window
    page = w.start_page
    assert page.isVisible()
    gallery = page.gallery
    names = [Path(gallery.item(i).data(start_page.PATH_ROLE)).name
             for i in range(gallery.count())]
    assert names == [p.name for p in example_files()]
    cnn = names.index("cnn_digits.json")
    assert "Conv" in gallery.item(cnn).text()  # one line of what it teaches
    page.draw_all()
    thumbs = list((tmp_path / "thumbnails").glob("*.png"))
    assert len(thumbs) == len(names)  # cached on disk for the next start
    image = gallery.item(cnn).icon().pixmap(start_page.THUMB).toImage()
    colours = {image.pixelColor(x, y).rgb() for x in range(0, image.width(), 7)
               for y in range(0, image.height(), 7)}
    assert len(colours) > 3  # cards drawn, not a blank tile
    xor = names.index("xor.json")
    gallery.scrollToItem(gallery.item(xor))
    rect = gallery.visualItemRect(gallery.item(xor))
    qtbot.mouseClick(gallery.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
    assert Path(w.doc.path).name == "xor.json" and not page.isVisible()
    w.actions_by_name["new"].trigger()  # File > New
    assert not w.doc.graph.nodes and page.isVisible()
    assert page.recent_list.item(0).data(start_page.PATH_ROLE).endswith("xor.json")
