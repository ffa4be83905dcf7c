"""Small things a daily user notices (issue #36 item 6), each checked."""

from __future__ import annotations

import json


def test_a_new_graph_saved_takes_the_files_name(window, tmp_path):
    window.doc.add_block("layers.Linear", (0.0, 0.0))
    window.prompts.save_to = str(tmp_path / "my_model.json")
    assert window.file_actions.save()
    assert json.loads((tmp_path / "my_model.json").read_text())["name"] == "my_model"
    window.prompts.save_to = str(tmp_path / "copy.json")  # a named graph keeps its name
    assert window.file_actions.save_as()
    assert json.loads((tmp_path / "copy.json").read_text())["name"] == "my_model"


class _Port:
    """A port dot as `port_names` reads it: its name and its row."""

    def __init__(self, name: str, y: float):
        from PySide6.QtCore import QPointF

        self.port = type("P", (), {"name": name})()
        self._pos = QPointF(0.0, y)

    def pos(self):
        return self._pos


def test_port_names_use_the_room_they_have_and_stay_distinct(window):
    from PySide6.QtCore import Qt
    from PySide6.QtGui import QFont, QFontMetricsF

    from nodegraph.gui.canvas.node_item import port_names

    font = QFont(window.font())
    font.setPixelSize(18)  # zoomed out: the grown letters of a far card
    metrics = QFontMetricsF(font)
    whole, half = 176.0 - 24, 176.0 / 2 - 14
    # an optimizer: `loss` faces `params`, `scheduler` faces nothing
    inputs = [_Port("loss", 10), _Port("scheduler", 30)]
    shown = port_names(inputs, [_Port("params", 10)], metrics, whole, half)
    assert metrics.horizontalAdvance("scheduler") > half  # it would be cut at half
    assert shown["scheduler"] == "scheduler" and shown["loss"] == "loss"
    # three names alike at their start, each facing an output: shown without it
    names = ["target_boxes", "target_labels", "target_masks"]
    inputs = [_Port(n, 10 + 20 * i) for i, n in enumerate(names)]
    outputs = [_Port(f"out{i}", 10 + 20 * i) for i in range(3)]
    shown = port_names(inputs, outputs, metrics, whole, half)
    cut = {n: metrics.elidedText(n, Qt.TextElideMode.ElideRight, half) for n in names}
    assert len(set(cut.values())) == 1  # the old cut: three alike
    assert len(set(shown.values())) == 3, shown
    for n, text in shown.items():
        assert metrics.horizontalAdvance(text) <= half + 0.5
        assert text.startswith("…" + n.split("_")[1][:2]), text
