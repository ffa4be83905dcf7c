"""Opening a file that cannot be opened ends in a message; the window, every open graph and
the file itself stay as they were (issue #12)."""

from __future__ import annotations

import json

import pytest
from PySide6.QtCore import QPointF

from tests.gui.driver import model_state

XOR = json.loads(open("examples/xor.json").read())


def _nodes_as_list() -> str:
    return json.dumps({**XOR, "nodes": list(XOR["nodes"].values())})


def _group(name: str, uses: str) -> dict:
    return {"nodes": {"inner": {"type": f"group.{uses}", "params": {}}}, "edges": [],
            "inputs": {"x": [["inner", "x"]]}, "outputs": {"y": ["inner", "y"]}}


def _groups(**uses: str) -> str:
    return json.dumps({"format": "nodegraph", "version": 1, "name": "loop",
                       "groups": {name: _group(name, other) for name, other in uses.items()},
                       "nodes": {"a": {"type": f"group.{next(iter(uses))}", "params": {}}},
                       "edges": []})


BAD = {  # file name: contents (None: a directory of that name)
    "garbage.json": b"\x00\xff garbage, not JSON at all",
    "truncated.json": json.dumps(XOR).encode()[:150],
    "folder.json": None,
    "array.json": b"[1, 2, 3]",
    "nodes_list.json": _nodes_as_list().encode(),
    "deep.json": b"[" * 100_000 + b"]" * 100_000,
    "empty.json": b"",
}


@pytest.fixture
def bad_files(tmp_path):
    folder = tmp_path / "bad"
    folder.mkdir()
    for name, data in BAD.items():
        if data is None:
            (folder / name).mkdir()
        else:
            (folder / name).write_bytes(data)
    return folder


def test_bad_files_end_in_a_message_and_change_nothing(make_window, xor_file, bad_files,
                                                       prompts):
    first = make_window(str(xor_file))
    first.edit_actions.add_block("activations.ReLU", QPointF(0, 400))  # unsaved work
    other = make_window("examples/line_fit.json")
    states = {w: (model_state(w.doc.graph), w.doc.path, w.doc.undo_stack.count(),
                  w.windowTitle()) for w in (first, other)}
    for name in BAD:
        path = bad_files / name
        before = None if path.is_dir() else path.read_bytes()
        for w in (first, other):
            prompts.asked.clear()
            assert not w.file_actions.open(str(path)), name
            (asked,) = prompts.asked  # one message; no save question for a bad file
            assert asked[:2] == ("error", "Cannot open the file") and str(path) in asked[2]
            for window, (state, doc_path, undo, title) in states.items():
                assert model_state(window.doc.graph) == state, name
                assert (window.doc.path, window.doc.undo_stack.count()) == (doc_path, undo)
                assert window.windowTitle() == title
                assert len(window.scene.nodes) == len(window.doc.graph.nodes)
        assert before is None or path.read_bytes() == before, name
    assert first.doc.dirty and "relu" in first.doc.graph.nodes
    first.file_actions.autosave()  # autosave and save still go to the graph's own places
    assert first.file_actions.save()
    assert {p.name: p.read_bytes() for p in bad_files.iterdir() if p.is_file()} == {
        n: d for n, d in BAD.items() if d is not None}


def test_the_messages_say_what_is_wrong(window, bad_files, prompts):
    expected = {"truncated.json": "malformed JSON", "folder.json": "is a folder",
                "array.json": "not a nodegraph file", "nodes_list.json": "'nodes' must be"}
    for name, words in expected.items():
        window.file_actions.open(str(bad_files / name))
        assert words in prompts.asked[-1][2], prompts.asked[-1]


@pytest.mark.parametrize("uses", [{"loop": "loop"}, {"ping": "pong", "pong": "ping"}],
                         ids=["itself", "each_other"])
def test_groups_that_use_themselves_open_with_the_problem_listed(window, tmp_path, uses):
    """What could be read is shown; the loop is a problem on the instance, not a crash."""
    path = tmp_path / "loop.json"
    path.write_text(_groups(**uses))
    assert window.file_actions.open(str(path))
    assert window.validator.wait(60)
    assert [(p.node, p.kind) for p in window.problems.problems] == [("a", "bad_group")]
    assert not window.start_training()


def test_a_part_of_the_window_failing_on_a_graph_puts_the_open_one_back(
        make_window, xor_file, tmp_path, prompts, monkeypatch):
    w = make_window(str(xor_file))
    w.doc.set_param("opt", "lr", 0.3)
    state = model_state(w.doc.graph)
    other = tmp_path / "other.json"
    other.write_text(xor_file.read_text().replace('"lr": 0.05', '"lr": 0.7'))

    def broken(registry):
        raise ValueError("the palette cannot show this")

    monkeypatch.setattr(w.palette, "set_registry", broken)
    prompts.unsaved = "discard"
    assert not w.file_actions.open(str(other))
    assert prompts.asked[-1][0] == "error" and "the palette cannot show this" in \
        prompts.asked[-1][2]
    assert model_state(w.doc.graph) == state and w.doc.path == str(xor_file)
    assert w.doc.dirty and w.doc.undo_stack.canUndo()  # the history is still there
    assert sorted(w.scene.nodes) == sorted(w.doc.graph.nodes)
    w.undo()
    assert w.doc.graph.node("opt").params["lr"] == 0.05
    monkeypatch.undo()
    assert w.file_actions.open(str(other))
    assert w.doc.graph.node("opt").params["lr"] == 0.7 and not w.doc.undo_stack.canUndo()


def test_a_damaged_layout_is_laid_out_again(window, tmp_path):
    path = tmp_path / "layout.json"
    path.write_text(json.dumps({**XOR, "ui": {"positions": [1, 2]}}))
    assert window.file_actions.open(str(path))
    assert sorted(window.scene.nodes) == sorted(XOR["nodes"])
    assert set(window.doc.positions()) == set(XOR["nodes"])


def test_a_file_the_validator_fails_on_opens_with_the_failure_listed(window, xor_file,
                                                                    monkeypatch):
    from nodegraph.gui.document import validator

    def fails(graph):
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setattr(validator, "validate_graph", fails)
    assert window.file_actions.open(str(xor_file))
    assert window.validator.wait(60)
    (problem,) = window.problems.problems
    assert problem.kind == "internal_error" and "RecursionError" in problem.message
    assert not window.start_training()  # validated again on this thread: listed, not raised
    assert len(window.scene.nodes) == len(window.doc.graph.nodes) > 0


def test_the_real_message_box_shows_the_failure(make_window, bad_files, monkeypatch):
    from nodegraph.gui.base import prompts as prompts_module

    shown = []
    monkeypatch.setattr(prompts_module.QMessageBox, "critical",
                        lambda parent, title, text: shown.append((parent, title, text)))
    w = make_window("examples/xor.json", prompts_=prompts_module.Prompts())
    w.file_actions.prompts.parent = w
    assert not w.file_actions.open(str(bad_files / "garbage.json"))
    ((parent, title, text),) = shown
    assert parent is w and title == "Cannot open the file" and "garbage.json" in text
    assert w.doc.path.endswith("xor.json")
