"""Every shape visible: at the zoom an example fits at, each wire's shape shows on the wire,
on a wire of the same output beside it, or as a compact tag by its input's dot; and the
cards with several inputs or outputs keep their port names readable zoomed out."""

from __future__ import annotations

import pytest
from PySide6.QtWidgets import QApplication

from nodegraph.gui.canvas.canvas_check import unseen
from nodegraph.gui.document.files import examples_dir


@pytest.mark.parametrize("name", ["xor", "cnn_digits", "yolo_shapes"])
def test_every_wire_shows_its_shape_and_every_port_its_name_at_fit(make_window, name, qtbot):
    w = make_window(str(examples_dir() / f"{name}.json"))
    w.resize(1600, 1000)
    assert w.validator.wait(120)
    w.view.fit()
    for _ in range(5):
        QApplication.processEvents()
    w.view.viewport().grab()  # the cards paint: their port names are drawn (or not)
    assert any(wire.label for wire in w.scene.wires.values())
    wires, ports = unseen(w.scene, w.view.zoom)
    assert wires == [] and ports == []


def test_a_crowded_wire_gets_a_compact_tag_by_its_port(xor_window):
    w = xor_window
    assert w.validator.wait(120)
    w.view.set_zoom(1.0)
    tagged = [wire for wire in w.scene.wires.values()
              if wire.label_at in ("port", "port_inside")]
    for wire in tagged:
        assert wire.shown_text == wire.label.replace(" ", "")  # `(N,4)`, no spaces
    assert all(wire.label_at is not None for wire in w.scene.wires.values() if wire.label)
