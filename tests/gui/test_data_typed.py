"""Typing a data path outside the graph's folder asks the question opening such a file asks
(not a bare validation error), and the answer is remembered for that file: the next edit
and the next open do not ask again."""

from __future__ import annotations

import json

from tests.test_data_paths import line_graph


def _project(tmp_path):
    folder, outside = tmp_path / "project", tmp_path / "outside"
    (folder / "data").mkdir(parents=True)
    outside.mkdir()
    rows = "\n".join(f"{a},{3 * a - 1}" for a in range(-8, 8))
    for where in (folder / "data", outside):
        (where / "line.csv").write_text("x,y\n" + rows + "\n")
    path = folder / "graph.json"
    path.write_text(json.dumps(line_graph("data/line.csv")))
    return path, outside


def _checked(window):
    window.validator.schedule()
    assert window.validator.wait(60)
    return window.validator.report


def test_a_typed_path_outside_asks_and_the_yes_is_remembered(make_window, prompts, tmp_path,
                                                              qtbot):
    path, outside = _project(tmp_path)
    w = make_window()
    assert w.file_actions.open(str(path))
    assert _checked(w).ok and "allow_data" not in prompts.kinds()  # inside: nothing asked
    prompts.allow = True
    assert w.doc.set_param("data", "path", "../outside/line.csv")  # as the inspector does
    qtbot.waitUntil(lambda: "allow_data" in prompts.kinds(), timeout=5000)
    [(_, where, files)] = [a for a in prompts.asked if a[0] == "allow_data"]
    assert where == str(path) and files == [f"data.path: {outside / 'line.csv'}"]
    assert w.doc.graph.data_roots == (outside,)
    report = _checked(w)
    assert report.ok, report.errors
    w.prompts.save_to = str(path)
    assert w.file_actions.save()
    prompts.asked.clear()
    prompts.allow = False  # it would be refused now: it must not be asked
    again = make_window()
    assert again.file_actions.open(str(path))
    assert "allow_data" not in prompts.kinds()
    assert again.doc.graph.data_roots == (outside,)
    assert _checked(again).ok


def test_a_typed_path_refused_is_a_problem_and_not_asked_twice(make_window, prompts,
                                                               tmp_path, qtbot):
    path, outside = _project(tmp_path)
    w = make_window()
    assert w.file_actions.open(str(path))
    assert w.doc.set_param("data", "path", str(outside / "line.csv"))
    qtbot.waitUntil(lambda: "allow_data" in prompts.kinds(), timeout=5000)
    report = _checked(w)
    assert [(p.node, "leads outside the graph's folder" in p.message)
            for p in report.errors] == [("data", True)]
    assert w.doc.graph.data_roots == ()
    assert w.doc.set_param("data", "val_fraction", 0.5)  # another edit: no second question
    qtbot.wait(50)
    assert prompts.kinds().count("allow_data") == 1
