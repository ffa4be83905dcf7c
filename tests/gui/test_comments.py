"""Comments and backdrops: made from the menu, edited in place, moved (a backdrop with the
nodes inside it), resized, deleted, copied, undone, and kept in the graph file."""

from __future__ import annotations

import json

from PySide6.QtCore import QPointF

from nodegraph.gui.document import annotations
from nodegraph.model import fileformat
from tests.gui.driver import drag, model_state


def _note(window, note_id: str) -> dict:
    return annotations.by_id(window.doc.graph.ui)[note_id]


def test_comment_text_is_edited_in_place_undone_and_saved(xor_window, tmp_path):
    w = xor_window
    before = model_state(w.doc.graph)
    w.actions_by_name["comment"].trigger()
    (note_id,) = w.scene.notes
    assert _note(w, note_id)["kind"] == "comment"
    assert w.scene.selected_note_ids() == [note_id]
    editor = w.scene.notes[note_id].edit_text()
    editor.setPlainText("XOR is not linearly separable:\nthe hidden layer bends the plane")
    w.scene.notes[note_id].finish_edit()
    assert _note(w, note_id)["text"].startswith("XOR is not linearly")
    assert w.scene.notes[note_id].text == _note(w, note_id)["text"]
    w.undo()
    assert _note(w, note_id)["text"] == "Comment" and w.scene.notes[note_id].text == "Comment"
    w.redo()
    w.prompts.save_to = str(tmp_path / "with_comment.json")
    w.file_actions.save_as()
    saved = json.loads((tmp_path / "with_comment.json").read_text())
    assert saved["ui"]["comments"][0]["text"].endswith("bends the plane")
    assert model_state(w.doc.graph) == before  # a note changes nothing that runs
    w.undo()
    w.undo()
    assert not w.scene.notes and not w.doc.notes()


def test_backdrop_around_selection_carries_its_nodes_in_one_undo_step(xor_window):
    w = xor_window
    w.scene.select_nodes(["hidden", "act"])
    note_id = w.edit_actions.add_backdrop("Hidden layer")
    backdrop = w.scene.notes[note_id]
    frame = backdrop.scene_rect()
    for node in ("hidden", "act"):
        assert frame.contains(w.scene.nodes[node].sceneBoundingRect())
    positions = {n: tuple(p) for n, p in w.doc.positions().items()}
    x, y = _note(w, note_id)["rect"][:2]
    title = QPointF(x + 40, y + annotations.TITLE_HEIGHT / 2)
    drag(w, title, title + QPointF(120, 60))
    new_x, new_y = _note(w, note_id)["rect"][:2]
    dx, dy = new_x - x, new_y - y  # the mouse moves in whole screen pixels: about 120, 60
    assert abs(dx - 120) < 3 / w.view.zoom and abs(dy - 60) < 3 / w.view.zoom
    for node in ("hidden", "act"):  # carried by the backdrop, exactly as far
        assert w.doc.positions()[node] == [round(positions[node][0] + dx, 1),
                                           round(positions[node][1] + dy, 1)]
    assert tuple(w.doc.positions()["data"]) == positions["data"]  # outside: stays
    w.undo()  # one step: the backdrop and its nodes go back together
    assert _note(w, note_id)["rect"][:2] == [x, y]
    assert {n: tuple(p) for n, p in w.doc.positions().items()} == positions
    assert (w.scene.nodes["hidden"].pos().x(), w.scene.nodes["hidden"].pos().y()) == \
        positions["hidden"]


def test_resize_from_the_corner_handle_and_recolour(xor_window):
    w = xor_window
    note_id = w.edit_actions.add_backdrop()
    x, y, width, height = _note(w, note_id)["rect"]
    corner = QPointF(x + width - 4, y + height - 4)
    drag(w, corner, corner + QPointF(80, 50))
    new = _note(w, note_id)["rect"]
    assert new[:2] == [x, y]
    slack = 3 / w.view.zoom  # the mouse moves in whole screen pixels
    assert abs(new[2] - width - 80) < slack and abs(new[3] - height - 50) < slack
    assert w.scene.notes[note_id].rect() == new
    colour = _note(w, note_id)["color"]
    w.scene.notes[note_id].setSelected(True)
    w.edit_actions.recolour_backdrops()
    assert _note(w, note_id)["color"] != colour
    w.undo()
    w.undo()
    assert _note(w, note_id)["rect"] == [x, y, width, height]
    assert _note(w, note_id)["color"] == colour


def test_delete_copy_and_paste_notes_with_nodes(xor_window, make_window):
    w = xor_window
    w.scene.select_nodes(["hidden"])
    backdrop = w.edit_actions.add_backdrop("Hidden")
    comment = w.edit_actions.add_comment(QPointF(0, -200), "a note")
    w.scene.select_nodes(["hidden"])
    for note in (backdrop, comment):
        w.scene.notes[note].setSelected(True)
    assert w.edit_actions.copy()
    other = make_window()
    other.edit_actions.paste(QPointF(500, 500))
    pasted = other.doc.notes()
    assert sorted(n["kind"] for n in pasted) == ["backdrop", "comment"]
    assert "hidden" in other.doc.graph.nodes
    hidden_at = other.doc.positions()["hidden"]
    (frame,) = [n["rect"] for n in pasted if n["kind"] == "backdrop"]
    assert frame[0] < hidden_at[0] and frame[1] < hidden_at[1]  # still around its node
    assert sorted(other.scene.selected_note_ids()) == sorted(n["id"] for n in pasted)
    w.edit_actions.delete_selection()
    assert not w.doc.notes() and "hidden" not in w.doc.graph.nodes
    w.undo()
    assert [n["id"] for n in w.doc.notes()] == [backdrop, comment]
    assert set(w.scene.notes) == {backdrop, comment} and "hidden" in w.doc.graph.nodes


def test_notes_reopen_from_the_file(make_window, xor_file, tmp_path):
    w = make_window(str(xor_file))
    w.scene.select_nodes(["out", "loss"])
    note_id = w.edit_actions.add_backdrop("Output")
    path = tmp_path / "again.json"
    fileformat.save(w.doc.graph, path)
    again = make_window(str(path))
    assert annotations.by_id(again.doc.graph.ui)[note_id]["text"] == "Output"
    assert again.scene.notes[note_id].rect() == _note(w, note_id)["rect"]
