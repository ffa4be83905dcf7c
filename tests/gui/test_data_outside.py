"""The editor asks before a graph reads data outside its folder (issue #24, item 4): the
question names the files; refused, validation lists the node and nothing there is read;
allowed, the graph validates and trains in the editor's training process."""

from __future__ import annotations

import json

from tests.test_data_paths import line_graph

SECRET = "root:x:0:0:secret-line"


def project(tmp_path):
    folder, outside = tmp_path / "project", tmp_path / "outside"
    folder.mkdir()
    outside.mkdir()
    rows = "\n".join(f"{a},{3 * a - 1}" for a in range(-8, 8))
    (outside / "line.csv").write_text("x,y\n" + rows + "\n")
    doc = line_graph("../outside/line.csv")
    doc["training"]["epochs"] = 2
    path = folder / "graph.json"
    path.write_text(json.dumps(doc))
    return path, outside


def opened(window, path):
    assert window.file_actions.open(str(path))
    assert window.validator.wait(60)
    return window.validator.report


def test_refused_the_data_outside_is_a_problem_on_its_node(make_window, prompts, tmp_path):
    path, outside = project(tmp_path)
    report = opened(make_window(), path)
    [(kind, where, files)] = [a for a in prompts.asked if a[0] == "allow_data"]
    assert where == str(path) and files == [f"data.path: {outside / 'line.csv'}"]
    assert [(p.node, "leads outside the graph's folder" in p.message)
            for p in report.errors] == [("data", True)]


def test_allowed_it_validates_and_trains(make_window, prompts, tmp_path):
    path, outside = project(tmp_path)
    prompts.allow = True
    window = make_window()
    report = opened(window, path)
    assert report.ok, report.errors
    assert window.doc.graph.data_roots == (outside,)
    assert window.start_training() and window.runner.wait(180)
    assert window.runner.result is not None and len(window.runner.result.history) == 2
