"""Every window is whole: Compare puts the other window beside this one on the same screen
(never on top), and each window sizes its wire labels for its own zoom."""

from __future__ import annotations

import json
from pathlib import Path

from PySide6.QtCore import QRect

from nodegraph.gui.shell.compare_view import MIN_SIDE, side_by_side

EXAMPLES = Path(__file__).parent.parent.parent / "examples"


def test_side_by_side_uses_the_free_room_or_halves_the_screen():
    screen = QRect(0, 0, 2560, 1400)
    mine, theirs = side_by_side(QRect(100, 50, 1400, 900), screen)
    assert mine == QRect(100, 50, 1400, 900)
    assert theirs == QRect(1500, 50, 1060, 900)  # the room to the right, all of it
    mine, theirs = side_by_side(QRect(1200, 50, 1300, 900), screen)
    assert theirs == QRect(1200 - 1200, 50, 1200, 900)  # the room on the left
    mine, theirs = side_by_side(QRect(200, 40, 1800, 1000), screen)  # no room: halves
    assert mine == QRect(0, 0, 1280, 1400) and theirs == QRect(1280, 0, 1280, 1400)
    for this in (QRect(0, 0, 900, 700), QRect(-300, 900, 3000, 900), QRect(5000, 0, 900, 900)):
        mine, theirs = side_by_side(this, screen)
        assert not mine.intersects(theirs), this
        assert screen.contains(mine) and screen.contains(theirs), this
        assert theirs.width() >= min(MIN_SIDE, screen.width() // 2)


def test_compare_opens_the_other_window_beside_not_on_top(make_window, tmp_path, qtbot):
    doc = json.loads((EXAMPLES / "xor.json").read_text())
    before = tmp_path / "before.json"
    before.write_text(json.dumps(doc))
    doc["nodes"]["hidden"]["params"]["out_features"] = 9
    after = tmp_path / "after.json"
    after.write_text(json.dumps(doc))
    w = make_window(str(after))
    w.prompts.open_from = str(before)
    w.actions_by_name["compare"].trigger()
    other = w.compare.other_window
    assert other is not None
    qtbot.waitExposed(other)
    screen = w.screen().availableGeometry()
    assert other.screen() is w.screen()
    a, b = w.frameGeometry(), other.frameGeometry()
    assert not a.intersects(b), (a, b)
    assert screen.contains(a.topLeft()) and screen.contains(b.topLeft()), (screen, a, b)
    if screen.width() >= 1600:  # (the offscreen test screen, 800 wide, is narrower than
        # two windows at their smallest: there they only must not overlap)
        assert screen.contains(a) and screen.contains(b), (screen, a, b)


def test_each_window_sizes_its_labels_for_its_own_zoom(make_window, qtbot):
    path = str(EXAMPLES / "xor.json")
    near, far = make_window(path), make_window(path)
    # two windows check at once: on a loaded machine their labels took over 20 s (CI)
    qtbot.waitUntil(lambda: all(x.label for x in near.scene.wires.values())
                    and all(x.label for x in far.scene.wires.values()), timeout=120000)
    near.view.set_zoom(1.0)
    far.view.set_zoom(0.45)
    assert far.scene.label_style.scale == 2.0 and near.scene.label_style.scale == 1.0
    wire_near, wire_far = next((x, far.scene.wires[e]) for e, x in near.scene.wires.items()
                               if x.label_at == far.scene.wires[e].label_at == "wire")
    h_near = wire_near.shown_label_rect().height()
    h_far = wire_far.shown_label_rect().height()
    assert h_near > 0 and h_far > 0
    assert abs(h_far / h_near - 2.0) < 1e-6  # each label 14 px x its own window's scale
    # zooming one window again leaves the other's labels as they were
    far.view.set_zoom(0.9)
    assert near.scene.label_style.scale == 1.0
    assert wire_near.shown_label_rect().height() == h_near
