"""Search that knows ML: abbreviations, what follows, recents and favourites (ranking is
Qt-free; the popup and palette are driven with real key presses and a real wire drag)."""

from __future__ import annotations

from PySide6.QtCore import QPointF, Qt

import nodegraph
from nodegraph.gui.document.files import example_files
from nodegraph.gui.document.wiring import blocks_for_source
from nodegraph.gui.panels.ranking import Context, context_for, rank
from tests.gui.driver import drag, port_pos


def ids(specs) -> list[str]:
    return [s.id for s in specs]


def registry():
    return list(nodegraph.Graph("r").registry)


def test_words_people_use_find_the_block_first():
    specs = registry()
    expected = {"xent": "losses.CrossEntropy", "ce": "losses.CrossEntropy",
                "bn": "norm.BatchNorm2d", "mha": "attention.MultiHeadSelfAttention",
                "fc": "layers.Linear", "dense": "layers.Linear", "conv": "layers.Conv2d",
                "mse": "losses.MSE", "adam": "optimizers.Adam", "bcel": "losses.BCEWithLogits"}
    for query, block in expected.items():
        assert ids(rank(query, specs))[0] == block, query
    assert "norm.BatchNorm1d" in ids(rank("bn", specs))[:2]


def test_after_a_linear_output_losses_and_metrics_come_first():
    g = nodegraph.load(example_files()[0].parent / "xor.json")
    specs = blocks_for_source(g, ("hidden", "output"))
    top = ids(rank("", specs, context_for(g, ("hidden", "output"), True, specs)))[:3]
    assert all(b.split(".")[0] in ("losses", "metrics") for b in top), top
    plain = ids(rank("", specs))[:3]  # without the context: nothing puts them first
    assert plain != top
    after_loss = ids(rank("", blocks_for_source(g, ("loss", "loss")),
                          Context("losses.BCEWithLogits", True)))
    assert after_loss[0].startswith("optimizers.")


def test_favourites_and_recent_blocks_rise_among_equals():
    specs = registry()
    base = ids(rank("relu", specs))
    assert base[0] == "activations.ReLU"
    starred = ids(rank("relu", specs, favourites={"activations.PReLU"}))
    assert starred[0] == "activations.ReLU"  # a favourite does not beat a better match
    assert starred.index("activations.PReLU") < base.index("activations.PReLU")  # its equals
    assert ids(rank("", specs, recent=["layers.Embedding"]))[0] == "layers.Embedding"


def test_typing_xent_in_the_tab_search_picks_cross_entropy(window, qtbot):
    w = window
    w.view.setFocus()
    qtbot.keyClick(w.view, Qt.Key.Key_Tab)
    popup = w.edit_actions.popup
    qtbot.keyClicks(popup.edit, "xent")
    assert popup.shown_ids()[0] == "losses.CrossEntropy"
    assert "CrossEntropy" in popup.list.item(0).toolTip()  # the block's doc on hover
    qtbot.keyClick(popup.edit, Qt.Key.Key_Return)
    assert [n.type for n in w.doc.graph] == ["losses.CrossEntropy"]
    assert w.block_prefs.recent[0] == "losses.CrossEntropy"


def test_a_wire_dropped_loose_from_a_linear_offers_a_loss_or_metric_in_the_top_3(xor_window):
    w = xor_window
    w.view.fit()
    empty = w.scene.nodes["opt"].sceneBoundingRect().bottomRight() + QPointF(150, 200)
    drag(w, port_pos(w, "out", "output", True), empty)
    top = w.edit_actions.popup.shown_ids()[:3]
    assert any(b.split(".")[0] in ("losses", "metrics") for b in top), top
    assert top[0].startswith("losses.")


def test_ctrl_d_stars_a_block_and_the_palette_lists_it_first(window, qtbot):
    w = window
    w.view.setFocus()
    qtbot.keyClick(w.view, Qt.Key.Key_Tab)
    popup = w.edit_actions.popup
    qtbot.keyClicks(popup.edit, "gelu")
    qtbot.keyClick(popup.edit, Qt.Key.Key_D, Qt.KeyboardModifier.ControlModifier)
    assert w.block_prefs.favourites == ["activations.GELU"]
    assert popup.list.item(0).text().startswith("★")
    qtbot.keyClick(popup.edit, Qt.Key.Key_Escape)
    assert w.palette.visible_ids()[0] == "activations.GELU"
    w.palette.search.setText("xent")
    assert w.palette.visible_ids()[0] == "losses.CrossEntropy"
