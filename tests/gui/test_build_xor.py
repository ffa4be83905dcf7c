"""Build the XOR model by hand in the editor, undo and redo every step, save, compare.

Blocks are dragged from the palette, wires dragged port to port, params typed into the
inspector and nodes renamed there — the events a user makes. The saved file must equal
the same model built with the Python API, and every step must undo and redo exactly.
"""

from __future__ import annotations

import json

from PySide6.QtCore import QPointF, Qt

from nodegraph.model.fileformat import to_document
from tests.gui.driver import XOR_WIRES, drag_wire, drop_block, model_state, xor_graph

BLOCKS = [  # (block, id to rename it to, where to drop it)
    ("data.XOR", "data", (0, 60)), ("layers.Linear", "hidden", (240, 0)),
    ("activations.Tanh", "act", (480, 0)), ("layers.Linear", "out", (720, 0)),
    ("losses.BCEWithLogits", "loss", (960, 60)), ("optimizers.Adam", "opt", (1200, 60)),
    ("metrics.Accuracy", "accuracy", (960, 240)),
]
PARAMS = [("hidden", "out_features", 4), ("out", "out_features", 1), ("opt", "lr", 0.05)]


def rename_in_inspector(window, qtbot, node: str, new: str) -> None:
    window.scene.select_nodes([node])
    edit = window.inspector.id_edit
    edit.selectAll()
    qtbot.keyClicks(edit, new)
    qtbot.keyClick(edit, Qt.Key.Key_Return)


def set_in_inspector(window, node: str, name: str, value) -> None:
    window.scene.select_nodes([node])
    window.inspector.fields[name].editor.setValue(value)  # as the spin box's arrows do


def test_build_xor_by_hand_undo_redo_and_save(window, qtbot, tmp_path, prompts):
    window.view.set_zoom(0.5)
    window.view.centerOn(QPointF(600, 150))
    states = [model_state(window.doc.graph)]

    def step() -> None:
        states.append(model_state(window.doc.graph))
        assert window.doc.undo_stack.count() == len(states) - 1  # one undo step per edit

    for block, new_id, (x, y) in BLOCKS:
        node = drop_block(window, block, QPointF(x + 90, y + 30))
        step()
        if node != new_id:  # metrics.Accuracy is called 'accuracy' already
            rename_in_inspector(window, qtbot, node, new_id)
            assert new_id in window.doc.graph.nodes and node not in window.doc.graph.nodes
            step()
    for source, target in XOR_WIRES:
        drag_wire(window, source, target)
        assert window.doc.graph.source_of(*target).source == source
        step()
    for node, name, value in PARAMS:
        set_in_inspector(window, node, name, value)
        assert window.doc.graph.node(node).params[name] == value
        step()

    assert model_state(window.doc.graph) == model_state(xor_graph())
    stack = window.doc.undo_stack
    for expected in reversed(states[:-1]):
        window.undo()
        assert model_state(window.doc.graph) == expected
    assert not window.scene.nodes and not window.scene.wires
    for expected in states[1:]:
        window.redo()
        assert model_state(window.doc.graph) == expected
    assert stack.index() == stack.count()
    assert len(window.scene.wires) == len(XOR_WIRES)

    prompts.save_to = str(tmp_path / "xor.json")
    assert window.file_actions.save_as()
    saved = json.loads((tmp_path / "xor.json").read_text())
    positions = saved.pop("ui")["positions"]
    expected = to_document(xor_graph())
    expected.pop("ui")
    expected["name"] = "xor"  # a new graph saved takes its file's name, not "untitled"
    assert saved == expected
    assert set(positions) == {b[1] for b in BLOCKS}
    assert not window.doc.dirty and window.recent.list()[0] == str(tmp_path / "xor.json")
