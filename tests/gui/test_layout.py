"""Auto-layout: layered, no overlaps, long chains wrap, both directions; wires around cards."""

from __future__ import annotations

import itertools

import pytest
from PySide6.QtCore import QPointF, Qt

import nodegraph
from nodegraph.gui.canvas import layout
from nodegraph.gui.canvas.layout import auto_layout, card_sizes
from nodegraph.gui.canvas.routing import route
from nodegraph.gui.document.files import example_files


def chain(n: int) -> nodegraph.Graph:
    g = nodegraph.Graph("chain")
    prev = g.add("data.XOR", "data")
    for i in range(n - 1):
        node = g.add("activations.Tanh", f"t{i}")
        g.connect((prev, "x" if prev == "data" else "output"), (node, "input"))
        prev = node
    return g


def rects(graph, positions):
    sizes = card_sizes(graph)
    return {n: (x, y, x + sizes[n][0], y + sizes[n][1]) for n, (x, y) in positions.items()}


def overlapping(boxes: dict) -> list[tuple[str, str]]:
    return [(a, b) for (a, p), (b, q) in itertools.combinations(boxes.items(), 2)
            if p[0] < q[2] and q[0] < p[2] and p[1] < q[3] and q[1] < p[3]]


@pytest.mark.parametrize("direction", ["LR", "TB"])
def test_no_two_cards_overlap_in_any_example(direction):
    for path in example_files():
        g = nodegraph.load(path)
        positions = auto_layout(g, direction=direction)
        assert set(positions) == set(g.nodes)
        assert overlapping(rects(g, positions)) == [], path.name


def test_every_wire_runs_with_the_flow_left_to_right_or_top_down():
    g = nodegraph.load(example_files()[0].parent / "cnn_digits.json")
    lr, tb = auto_layout(g, direction="LR", aspect=100.0), auto_layout(g, direction="TB",
                                                                          aspect=0.01)
    for e in g.edges:  # an aspect this extreme leaves one band: nothing wraps
        assert lr[e.src][0] < lr[e.dst][0], e
        assert tb[e.src][1] < tb[e.dst][1], e


def test_a_300_node_chain_wraps_into_bands_that_fill_the_screen():
    g = chain(300)
    positions = auto_layout(g, aspect=1.6)
    boxes = rects(g, positions)
    assert overlapping(boxes) == []
    width = max(b[2] for b in boxes.values()) - min(b[0] for b in boxes.values())
    height = max(b[3] for b in boxes.values()) - min(b[1] for b in boxes.values())
    rows = {round(y) for _, y in positions.values()}
    assert len(rows) > 5  # not one row
    assert 0.5 < width / height < 4  # about the screen's shape
    tb = auto_layout(g, direction="TB", aspect=1.6)
    assert len({round(x) for x, _ in tb.values()}) > 5  # columns, side by side


def test_the_answers_wire_gets_its_own_lane_and_losses_sit_after_what_they_read():
    g = nodegraph.load(example_files()[0].parent / "xor.json")
    positions = auto_layout(g, aspect=100.0)
    assert positions["loss"][0] > positions["out"][0]
    assert positions["accuracy"][0] > positions["out"][0]
    assert positions["opt"][0] > positions["loss"][0]


def test_a_wrong_direction_is_refused():
    with pytest.raises(ValueError, match="LR"):
        auto_layout(chain(3), direction="up")


def test_route_goes_around_a_card_in_the_way_and_keeps_the_curve_when_clear():
    card = (100.0, -50.0, 276.0, 50.0)
    assert route((0, 200), (400, 200), [card]) is None  # the S-curve passes below
    points = route((0, 0), (400, 0), [card])
    assert points is not None
    for p, q in itertools.pairwise(points):
        if p[1] == q[1]:  # a horizontal run: not through the card
            assert not (card[1] < p[1] < card[3] and min(p[0], q[0]) < card[2]
                        and max(p[0], q[0]) > card[0])
        else:
            assert not (card[0] < p[0] < card[2] and min(p[1], q[1]) < card[3]
                        and max(p[1], q[1]) > card[1])


def _through_a_card(window) -> list[tuple[str, str]]:
    """(wire, card) pairs where a wire's drawn path passes through another card."""
    hits = []
    for edge, wire in window.scene.wires.items():
        path = wire.path()
        points = [path.pointAtPercent(i / 60) for i in range(1, 60)]
        for node_id, item in window.scene.nodes.items():
            if node_id in (edge.src, edge.dst):
                continue
            r = item.sceneBoundingRect().adjusted(2, 2, -2, -2)
            if any(r.contains(p) for p in points):
                hits.append((str(edge), node_id))
    return hits


@pytest.mark.parametrize("name", ["xor", "cnn_digits", "dcgan_digits", "vit_digits"])
def test_ctrl_l_lays_out_with_no_card_on_another_and_no_wire_under_a_card(make_window, qtbot,
                                                                         name):
    w = make_window(str(example_files()[0].parent / f"{name}.json"))
    w.resize(1600, 1000)
    w.view.setFocus()
    before = dict(w.doc.positions())
    qtbot.keyClick(w.view, Qt.Key.Key_L, Qt.KeyboardModifier.ControlModifier)
    assert w.doc.undo_stack.count() == 1 or before == w.doc.positions()
    boxes = {n: (i.x(), i.y(), i.x() + i.rect.width(), i.y() + i.rect.height())
             for n, i in w.scene.nodes.items()}
    assert overlapping(boxes) == []
    assert _through_a_card(w) == []


def test_top_to_bottom_from_the_view_menu_puts_the_data_above_the_loss(make_window):
    w = make_window(str(example_files()[0].parent / "xor.json"))
    w.resize(1600, 1000)
    w.actions_by_name["layout_tb"].trigger()
    assert w.scene.nodes["data"].y() < w.scene.nodes["loss"].y()
    assert w.edit_actions.layout_direction == "TB"
    assert _through_a_card(w) == []
    w.actions_by_name["layout"].trigger()  # Ctrl+L keeps the direction chosen last
    assert w.scene.nodes["data"].y() < w.scene.nodes["loss"].y()


def test_a_file_without_positions_opens_laid_out(make_window, tmp_path):
    g = chain(40)
    path = tmp_path / "chain.json"
    nodegraph.save(g, path)
    w = make_window(str(path))
    boxes = {n: (i.x(), i.y(), i.x() + i.rect.width(), i.y() + i.rect.height())
             for n, i in w.scene.nodes.items()}
    assert overlapping(boxes) == []
    assert len({round(b[1]) for b in boxes.values()}) > 1  # wrapped, not one long row
    assert layout.DIRECTIONS == ("LR", "TB")
    assert QPointF(0, 0) is not None


def test_shape_labels_keep_off_cards_and_port_dots_or_stay_in_the_tooltip():
    from nodegraph.gui.canvas.routing import label_spot

    left, right = (0.0, 0.0, 176.0, 68.0), (300.0, 0.0, 476.0, 68.0)
    a, b = (176.0, 50.0), (300.0, 50.0)
    spot = label_spot([a, b], 60.0, 14.0, [left, right], [a, b])
    assert spot is not None and abs(spot[0] - 238.0) < 1  # the middle of the gap
    box = (spot[0] - 30, spot[1] - 7, spot[0] + 30, spot[1] + 7)
    assert box[0] > left[2] and box[2] < right[0]
    near = (230.0, 0.0, 406.0, 68.0)  # a gap too short for the label
    assert label_spot([a, (230.0, 50.0)], 60.0, 14.0, [left, near], [a, (230.0, 50.0)]) is None


def _focus(w, qtbot):
    w.activateWindow()
    w.view.setFocus()
    qtbot.waitUntil(lambda: w.view.hasFocus(), timeout=30_000)


def test_the_layout_direction_is_saved_in_the_file_and_restored_on_open(make_window, qtbot,
                                                                         tmp_path):
    old = tmp_path / "old.json"  # a file from before the direction was saved
    nodegraph.save(chain(6), old)
    w = make_window(str(old))
    w.resize(1600, 1000)
    assert w.edit_actions.layout_direction == "LR"  # opens as before
    _focus(w, qtbot)
    lr = w.scene.item_positions()  # laid out left to right on opening
    qtbot.keyClick(w.view, Qt.Key.Key_L, Qt.KeyboardModifier.ControlModifier
                   | Qt.KeyboardModifier.ShiftModifier)  # Auto-layout Top to Bottom
    assert w.doc.graph.ui["layout_direction"] == "TB"
    assert w.scene.nodes["data"].y() < w.scene.nodes["t4"].y()
    qtbot.keyClick(w.view, Qt.Key.Key_S, Qt.KeyboardModifier.ControlModifier)
    assert nodegraph.load(old).ui["layout_direction"] == "TB"
    w2 = make_window(str(old))
    w2.resize(1600, 1000)
    assert w2.edit_actions.layout_direction == "TB"
    _focus(w2, qtbot)
    w2.doc.set_positions({n: (0.0, 0.0) for n in w2.scene.nodes})  # a mess to tidy up
    qtbot.keyClick(w2.view, Qt.Key.Key_L, Qt.KeyboardModifier.ControlModifier)
    ys = [w2.scene.nodes[n].y() for n in ["data", "t0", "t1", "t2"]]
    assert ys == sorted(ys) and ys[0] < ys[-1]  # top to bottom, as the file said
    _focus(w, qtbot)
    qtbot.keyClick(w.view, Qt.Key.Key_Z, Qt.KeyboardModifier.ControlModifier)
    assert "layout_direction" not in w.doc.graph.ui  # one undo step with the moves
    assert w.scene.item_positions() == lr


def test_a_file_without_positions_opens_laid_out_in_its_saved_direction(make_window, tmp_path):
    g = chain(5)
    g.set_ui("layout_direction", "TB")
    path = tmp_path / "tb.json"
    nodegraph.save(g, path)
    w = make_window(str(path))
    assert w.scene.nodes["data"].y() < w.scene.nodes["t3"].y()
    assert w.scene.nodes["data"].x() == w.scene.nodes["t3"].x()


@pytest.mark.parametrize("name", ["yolo_shapes", "trees_vs_mlp", "detr_shapes"])
def test_shape_labels_sit_on_no_card_dot_or_other_label(make_window, name):
    from nodegraph.gui.canvas.canvas_check import defects

    w = make_window(str(example_files()[0].parent / f"{name}.json"))
    w.resize(1600, 1000)
    w.view.fit()
    w.validator.validate_now()
    assert sum(not wire.shown_label_rect().isEmpty() for wire in w.scene.wires.values()) > 5
    assert [d for d in defects(w.scene) if "label" in d] == []


def test_a_wire_whose_port_columns_are_blocked_still_goes_around_the_cards(make_window):
    from nodegraph.gui.canvas.canvas_check import defects

    w = make_window(str(example_files()[0].parent / "rcnn_shapes.json"))  # cards stacked
    w.resize(1600, 1000)  # right under the proposals' outputs
    w.view.fit()
    assert [d for d in defects(w.scene) if "runs under" in d] == []
    assert _through_a_card(w) == []
