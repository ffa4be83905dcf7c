"""Files: save and open, recent files and examples, unsaved-changes prompt, autosave and
recovery after a crash, and damaged files opening with what could be read."""

from __future__ import annotations

import json
import os

from PySide6.QtCore import QPointF

import nodegraph
from nodegraph.gui.document import files
from tests.gui.driver import model_state, xor_graph


def test_close_with_unsaved_changes_asks_and_cancel_keeps_the_window(window, prompts):
    window.edit_actions.add_block("layers.Linear", QPointF(0, 0))
    assert window.isWindowModified()
    prompts.unsaved = "cancel"
    assert not window.close()
    assert window.isVisible() and prompts.kinds() == ["unsaved"]
    prompts.unsaved = "discard"
    assert window.close()


def test_open_recent_and_examples(window, xor_file, prompts):
    window.edit_actions.add_block("layers.Linear", QPointF(0, 0))
    prompts.unsaved = "discard"
    assert window.file_actions.open(str(xor_file))
    assert model_state(window.doc.graph) == model_state(xor_graph("xor"))
    assert window.windowTitle().startswith("xor.json") and not window.isWindowModified()
    window.recent_menu.aboutToShow.emit()
    assert [a.text() for a in window.recent_menu.actions()] == [str(xor_file)]
    names = [a.text() for a in window.examples_menu.actions()]
    assert names == [p.stem for p in files.example_files()] and "xor" in names
    next(a for a in window.examples_menu.actions() if a.text() == "xor").trigger()
    assert window.doc.path == str(files.examples_dir() / "xor.json")
    assert len(window.scene.nodes) == len(window.doc.graph.nodes) > 0


def test_autosave_is_offered_back_after_a_crash(make_window, xor_file, prompts, tmp_path):
    crashed = make_window(str(xor_file))
    crashed.doc.set_param("opt", "lr", 0.2)
    auto = crashed.file_actions.autosave()
    assert auto.parent == tmp_path / "recovery" and auto.exists()  # not beside the file
    assert auto.name.startswith("xor-") and sorted(p.name for p in xor_file.parent.glob(
        "xor*")) == ["xor.json"]
    crashed.file_actions.autosaved = None  # a crash: the autosave stays behind
    os.utime(xor_file, (1, 1))  # the file is older than its autosave

    prompts.restore = True
    again = make_window(str(xor_file))
    assert ("restore", str(auto)) in prompts.asked
    assert again.doc.graph.node("opt").params["lr"] == 0.2
    assert again.doc.dirty and not auto.exists()
    assert again.file_actions.save()
    assert json.loads(xor_file.read_text())["nodes"]["opt"]["params"]["lr"] == 0.2


def test_declining_the_autosave_opens_the_file_and_drops_it(make_window, xor_file, prompts,
                                                            tmp_path):
    auto = files.autosave_path(str(xor_file), tmp_path / "recovery")
    auto.parent.mkdir()
    auto.write_text(xor_file.read_text().replace('"lr": 0.05', '"lr": 0.3'))
    os.utime(xor_file, (1, 1))
    prompts.restore = False
    w = make_window(str(xor_file))
    assert w.doc.graph.node("opt").params["lr"] == 0.05 and not auto.exists()


def test_an_older_editors_autosave_beside_the_file_is_offered_too(make_window, xor_file,
                                                                  prompts):
    beside = xor_file.with_name("xor.autosave.json")
    beside.write_text(xor_file.read_text().replace('"lr": 0.05', '"lr": 0.3'))
    os.utime(xor_file, (1, 1))
    w = make_window(str(xor_file))
    assert ("restore", str(beside)) in prompts.asked and not beside.exists()
    assert w.doc.graph.node("opt").params["lr"] == 0.3 and w.doc.dirty


def test_files_of_one_name_in_two_folders_autosave_apart(tmp_path):
    a, b = tmp_path / "a" / "g.json", tmp_path / "b" / "g.json"
    assert files.autosave_path(str(a), tmp_path) != files.autosave_path(str(b), tmp_path)
    assert files.autosave_path(str(a), tmp_path) == files.autosave_path(
        str(tmp_path / "b" / ".." / "a" / "g.json"), tmp_path)


def test_the_state_folder_and_interval_come_from_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv(files.STATE_DIR_ENV, str(tmp_path / "state"))
    monkeypatch.setenv(files.AUTOSAVE_MS_ENV, "250")
    assert files.state_dir() == tmp_path / "state" and files.autosave_interval_ms() == 250
    monkeypatch.setenv(files.AUTOSAVE_MS_ENV, "soon")
    assert files.autosave_interval_ms() == files.AUTOSAVE_MS
    monkeypatch.delenv(files.STATE_DIR_ENV)
    assert files.state_dir().name == "recovery" and files.state_dir().is_absolute()


def test_an_untitled_graph_is_recovered_after_a_crash(make_window, tmp_path, prompts):
    w = make_window()
    w.edit_actions.add_block("layers.Linear", QPointF(0, 0))
    auto = w.file_actions.autosave()
    assert auto.parent == tmp_path / "recovery"
    crashed = auto.with_name(f"untitled-999999{files.AUTOSAVE_SUFFIX}")
    auto.rename(crashed)  # as a crashed editor process leaves it
    w.file_actions.autosaved = None
    again = make_window()
    assert ("restore", str(crashed)) in prompts.asked
    assert [n.type for n in again.doc.graph] == ["layers.Linear"] and again.doc.dirty


def test_saving_clears_the_autosave(window, tmp_path, prompts):
    window.edit_actions.add_block("data.XOR", QPointF(0, 0))
    auto = window.file_actions.autosave()
    assert auto.exists()
    prompts.save_to = str(tmp_path / "new.json")
    assert window.file_actions.save()  # untitled: save asks where
    assert not auto.exists() and (tmp_path / "new.json").exists()
    assert window.file_actions.autosave() is None  # nothing unsaved, nothing written


def test_a_damaged_file_opens_with_what_could_be_read_and_a_report(window, tmp_path, prompts):
    doc = json.loads(json.dumps({
        "format": "nodegraph", "version": 1, "name": "damaged",
        "nodes": {"data": {"type": "data.XOR", "params": {}},
                  "mystery": {"type": "layers.DoesNotExist", "params": {"k": 3}},
                  "hidden": {"type": "layers.Linear", "params": {"out_features": 4,
                                                                 "colour": "red"}}},
        "edges": [{"from": ["data", "x"], "to": ["hidden", "input"]},
                  {"from": ["hidden", "output"], "to": ["mystery", "input"]},
                  {"from": ["ghost", "out"], "to": ["hidden", "input"]}]}))
    path = tmp_path / "damaged.json"
    path.write_text(json.dumps(doc))
    assert window.file_actions.open(str(path))
    (report,) = [a for a in prompts.asked if a[0] == "load_report"]
    kinds = {p.kind for p in report[2]}
    assert {"unknown_block", "unknown_param", "dangling_edge"} <= kinds
    g = window.doc.graph
    assert sorted(g.nodes) == ["data", "hidden", "mystery"] and len(g.edges) == 2
    assert not window.scene.nodes["mystery"].known
    assert ("hidden", "output", "mystery", "input") in {(*e.source, *e.target)
                                                        for e in window.scene.wires}
    assert window.validator.wait(60)
    shown = {(p.node, p.kind) for p in window.problems.problems}
    assert ("mystery", "unknown_block") in shown and ("hidden", "unknown_param") in shown

    path.write_text("{ not json")
    assert not window.file_actions.open(str(path))
    assert prompts.asked[-1][0] == "error" and "malformed JSON" in prompts.asked[-1][2]
    assert sorted(window.doc.graph.nodes) == ["data", "hidden", "mystery"]  # nothing lost


def test_a_graph_reads_its_data_beside_its_file_in_the_editor(make_window, tmp_path,
                                                               monkeypatch):
    """A CSV named by a relative path is found next to the graph file, wherever the editor
    was started; training in the editor reads it too."""
    folder = tmp_path / "project"
    (folder / "data").mkdir(parents=True)
    rows = "\n".join(f"{x / 10:.2f},{3 * x / 10 - 1:.2f}" for x in range(-10, 11))
    (folder / "data" / "line.csv").write_text("x,y\n" + rows + "\n")
    g = nodegraph.Graph("csv")
    g.add("data.CSV", id="data", path="data/line.csv", val_fraction=0.25)
    g.add("layers.Linear", id="line", out_features=1)
    g.add("losses.MSE", id="loss")
    g.add("optimizers.SGD", id="opt", lr=0.1)
    g.connect(("data", "x"), ("line", "input"))
    g.connect(("line", "output"), ("loss", "input"))
    g.connect(("data", "y"), ("loss", "target"))
    g.connect(("loss", "loss"), ("opt", "loss"))
    nodegraph.save(g, folder / "graph.json")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    w = make_window(str(folder / "graph.json"))
    w.validator.wait(60)
    assert w.validator.report.ok, w.validator.report.problems
    w.epochs.setValue(2)
    assert w.start_training()
    assert w.runner.wait(180)
    assert w.runner.result is not None and len(w.runner.result.history) == 2
