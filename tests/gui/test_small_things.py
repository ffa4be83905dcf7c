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
