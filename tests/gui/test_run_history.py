"""The Runs panel: runs of the open graph recorded, kept beside the file, two compared."""

from __future__ import annotations

import json

from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from nodegraph.gui.base import theme
from nodegraph.model.fileformat import save
from nodegraph.runtime.run_history import history_path
from tests.gui.driver import xor_graph


def click_run(qtbot: QtBot, panel, number: int, ctrl: bool = False) -> None:
    item = panel.item(number)
    assert item is not None, f"run {number} is not listed"
    rect = panel.list.visualItemRect(item)
    modifier = Qt.KeyboardModifier.ControlModifier if ctrl else Qt.KeyboardModifier.NoModifier
    qtbot.mouseClick(panel.list.viewport(), Qt.MouseButton.LeftButton, modifier, rect.center())


def train(window, epochs: int) -> None:
    window.epochs.setValue(epochs)
    window.actions_by_name["train"].trigger()
    assert window.runner.wait(180)


def test_two_runs_with_different_lr_are_overlaid_with_the_lr_difference(
        qtbot, make_window, xor_file, tmp_path):
    w = make_window(str(xor_file))
    panel = w.run_history
    graph_text = xor_file.read_text()
    train(w, 20)
    assert w.doc.set_param("opt", "lr", 0.2)
    train(w, 20)
    assert [r.number for r in panel.history.runs] == [1, 2]
    assert [r.status for r in panel.history.runs] == ["finished", "finished"]
    assert panel.list.count() == 2 and "run 2" in panel.list.item(1).text()
    w.docks["runs"].raise_()
    click_run(qtbot, panel, 1)
    assert [r.number for r in panel.shown] == [1]
    click_run(qtbot, panel, 2, ctrl=True)
    assert [r.number for r in panel.shown] == [1, 2]
    names = set(panel.curves)
    assert {"run 1 train loss", "run 2 train loss", "run 1 train accuracy",
            "run 2 train accuracy"} <= names
    one, two = (panel.curves[f"run {n} train loss"] for n in (1, 2))
    assert one.opts["pen"].color() != two.opts["pen"].color()  # a colour per run
    xs, ys = one.getData()
    assert list(xs) == list(range(1, 21))
    assert list(ys) == [e["train"]["loss"] for e in panel.history.runs[0].history]
    assert panel.curves["run 1 train accuracy"] in panel.metric_plot.listDataItems()
    legend = [label.text for _, label in panel.legend.items]
    assert legend == ["run 1 (opt.lr 0.05)", "run 2 (opt.lr 0.2)"]
    assert panel.differences() == {"opt.lr": ["0.05", "0.2"]}
    w.set_theme("light", remember=False)  # the panel follows the theme, its curves kept
    assert panel.canvas.backgroundBrush().color().name() == theme.BASE.lower()
    assert len(panel.curves) == len(names)
    w.set_theme("dark", remember=False)
    # the history is kept beside the graph (never in it) and read back by a new window
    assert xor_file.read_text() == graph_text
    kept = json.loads(history_path(xor_file).read_text())
    assert [r["settings"]["opt.lr"] for r in kept["runs"]] == [0.05, 0.2]
    w.grab().save(str(tmp_path / "window.png"))
    w.docks["runs"].setFloating(True)  # a wider look, for a person checking the drawing
    w.docks["runs"].resize(1000, 320)
    qtbot.wait(50)
    panel.grab().save(str(tmp_path / "runs_panel.png"))
    w.doc.undo_stack.setClean()  # close without the save prompt
    w.close()
    again = make_window(str(xor_file))
    assert [r.number for r in again.run_history.history.runs] == [1, 2]
    assert again.run_history.history.runs[1].extra["metrics"] == ["accuracy"]


def test_an_unsaved_graphs_runs_go_with_it_to_its_file_and_a_stopped_run_counts(
        qtbot, make_window, tmp_path, prompts):
    w = make_window()
    w.doc.set_graph(xor_graph("untitled"))
    train(w, 5)
    assert [r.status for r in w.run_history.history.runs] == ["finished"]
    assert w.run_history.history.path is None
    target = tmp_path / "saved.json"
    prompts.save_to = str(target)
    w.file_actions.save_as()
    assert target.exists() and history_path(target).exists()
    assert [r["number"] for r in json.loads(history_path(target).read_text())["runs"]] == [1]
    w.epochs.setValue(100_000)
    w.actions_by_name["train"].trigger()
    qtbot.waitUntil(lambda: w.run_status.done_steps > 5, timeout=120_000)
    w.actions_by_name["stop"].trigger()
    assert w.runner.wait(120)
    assert [r.status for r in w.run_history.history.runs] == ["finished", "stopped"]
    assert w.run_history.differences() == {}  # nothing picked yet
    click_run(qtbot, w.run_history, 1)
    qtbot.mouseClick(w.run_history.forget_button, Qt.MouseButton.LeftButton)
    assert [r["status"] for r in json.loads(history_path(target).read_text())["runs"]] == [
        "stopped"]
    assert w.run_history.list.count() == 1
    # opening another file shows that file's runs, not these
    other = tmp_path / "other.json"
    save(xor_graph("other"), other)
    w.doc.undo_stack.setClean()
    w.file_actions.open(str(other))
    assert w.run_history.history.runs == [] and w.run_history.list.count() == 0


def test_a_shipped_examples_runs_stay_in_memory(make_window, tmp_path):
    from nodegraph.gui.document.files import examples_dir

    example = examples_dir() / "xor.json"
    w = make_window(str(example))
    train(w, 3)
    assert [r.status for r in w.run_history.history.runs] == ["finished"]
    assert w.run_history.history.path is None and not history_path(example).exists()
