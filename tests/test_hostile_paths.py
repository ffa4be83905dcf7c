"""Hostile files of three classes (issue #24, items 3-5): escape sequences that would reach
the terminal, data paths that lead out of the graph's folder, and files that are not files.

Each goes through `validate`, `info`, `run` and `export`: nothing raw reaches the terminal,
nothing outside the graph's folder is read (or quoted) without --data-root or --trust, a
device or FIFO is refused by name without a read, and every refusal names the file.
"""

from __future__ import annotations

import json
import os
import threading

import pytest

from nodegraph.cli.main import main
from nodegraph.model.sanitize import clean, clean_lines
from tests.test_data_paths import line_graph

ESC = "\x1b]52;c;cHduZWQ=\x07\x1b[2J\x1b]8;;http://x\x07\r\x9b\u202e"
RAW = ("\x1b", "\x07", "\r", "\x9b", "\u202e")
SECRET = "root:x:0:0:secret-line"


def run_cli(capsys, *argv) -> tuple[int, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out + out.err


def assert_clean(text: str) -> None:
    assert not any(ch in text for ch in RAW), repr(text)
    assert "internal error" not in text


def test_clean_escapes_controls_and_keeps_names():
    assert clean("a\x1b[2Jb\u202e\r\n") == "a\\x1b[2Jb\\u202e\\x0d\\x0a"
    assert clean("réseau 日本 ✓") == "réseau 日本 ✓"
    assert clean_lines("one\ntwo\x07\tx") == "one\ntwo\\x07\tx"


def escape_graph() -> dict:
    doc = line_graph("data.csv")
    doc["name"] = "evil" + ESC
    doc["nodes"]["data"]["params"]["bad" + ESC] = 1
    doc["nodes"]["n" + ESC] = {"type": "layers.Nope" + ESC, "params": {}}
    doc["edges"].append({"from": ["line", "out" + ESC], "to": ["loss", "in" + ESC]})
    doc["training"]["device"] = "cuda" + ESC
    doc["training"]["key" + ESC] = 1
    doc["ui"] = {"groups": [{"name": "g" + ESC, "nodes": ["line"]}]}
    return doc


@pytest.mark.parametrize("command", [["validate"], ["info"], ["validate", "--json"],
                                     ["run", "--quiet"], ["export", "--to", "python", "-o",
                                                          "out.py"]])
def test_escape_sequences_from_a_file_never_reach_the_terminal(tmp_path, capsys, command,
                                                               monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "data.csv").write_text("x,y\n1,2\n2,3\n3,4\n4,5\n")
    path = tmp_path / "g.json"
    path.write_text(json.dumps(escape_graph()))
    code, text = run_cli(capsys, command[0], str(path), *command[1:])
    assert code != 0
    assert_clean(text)
    assert "\\x1b" in text or "\\u001b" in text  # shown, escaped: the reader sees it is there


@pytest.fixture
def fenced(tmp_path, monkeypatch):
    """project/ holds the graph; outside/ holds a 'secret' CSV the graph tries to read."""
    project, outside = tmp_path / "project", tmp_path / "outside"
    project.mkdir()
    outside.mkdir()
    (outside / "passwd").write_text(SECRET + "\n1:2:3:4:5\n")
    monkeypatch.chdir(tmp_path)
    return project, outside


def csv_graph(project, path: str, **params) -> str:
    doc = line_graph(path)
    doc["nodes"]["data"]["params"].update({"delimiter": ":", "targets": ["nosuch"], **params})
    target = project / "graph.json"
    target.write_text(json.dumps(doc))
    return str(target)


@pytest.mark.parametrize("how", ["relative", "absolute", "symlink", "home"])
def test_data_outside_the_graphs_folder_is_refused_without_an_opt_in(fenced, capsys, how):
    project, outside = fenced
    given = {"relative": "../outside/passwd", "absolute": str(outside / "passwd"),
             "symlink": "link.csv", "home": "~/../../" + str(outside / "passwd")}[how]
    if how == "symlink":
        (project / "link.csv").symlink_to(outside / "passwd")
    graph = csv_graph(project, given)
    for command in (["validate"], ["info"], ["run", "--quiet"],
                    ["export", "--to", "python", "-o", "x.py"]):
        code, text = run_cli(capsys, command[0], graph, *command[1:])
        assert code != 0 and "leads outside the graph's folder" in text, text
        assert "secret" not in text and "data" in text  # the node is named, nothing quoted
        assert_clean(text)


def test_data_root_and_trust_open_the_fence_and_contents_stay_unquoted(fenced, capsys):
    project, outside = fenced
    graph = csv_graph(project, "../outside/passwd")
    code, text = run_cli(capsys, "validate", "--data-root", str(outside), graph)
    assert "no column 'nosuch' (columns: root, x, 0, 0, secret-line)" in text  # allowed
    code, text = run_cli(capsys, "validate", "--trust", graph)
    assert "no column 'nosuch'" in text and "secret" not in text  # read, not shown
    (project / "inside.csv").write_text("a:b\n1:2\n3:4\n")
    code, text = run_cli(capsys, "validate", csv_graph(project, "inside.csv"))
    assert "(columns: a, b)" in text  # the graph's own file: its header helps


def test_a_graph_file_that_is_a_device_or_fifo_is_refused_by_name(tmp_path, capsys):
    link = tmp_path / "zero.json"
    link.symlink_to("/dev/zero")
    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)
    for path, kind in ((link, "character device"), (fifo, "FIFO")):
        for command in ("validate", "info", "run", "export"):
            done: list = []
            worker = threading.Thread(target=lambda p=path, c=command, d=done: d.append(
                run_cli(capsys, c, str(p), *(["--to", "python", "-o", "o.py"]
                                             if c == "export" else []))), daemon=True)
            worker.start()
            worker.join(10)  # a FIFO read would wait for a writer forever
            assert done, f"{command} {path} still reading"
            code, text = done[0]
            assert code != 0 and kind in text and str(path) in text, text


def test_a_graph_file_larger_than_the_limit_while_read_is_refused(tmp_path, monkeypatch):
    from nodegraph.model import fileformat
    from nodegraph.model.errors import GraphFileError

    monkeypatch.setattr(fileformat, "MAX_BYTES", 100)
    path = tmp_path / "big.json"
    path.write_text(" " * 101)
    monkeypatch.setattr(fileformat.Path, "is_file", lambda self: False)  # stat check skipped
    with pytest.raises(GraphFileError, match="larger than 100 bytes"):
        fileformat.load(path)


@pytest.mark.parametrize("target", ["/dev/zero", "fifo"])
def test_weights_and_data_that_are_not_files_are_refused(tmp_path, capsys, monkeypatch,
                                                         target):
    monkeypatch.chdir(tmp_path)
    special = tmp_path / "special"
    if target == "fifo":
        os.mkfifo(special)
    else:
        special.symlink_to(target)
    (tmp_path / "g.json").write_text(json.dumps(line_graph("special")))
    code, text = run_cli(capsys, "validate", "--trust", str(tmp_path / "g.json"))
    assert code != 0 and "'special'" in text and "is not a file" in text, text
    (tmp_path / "ok.csv").write_text("x,y\n1,2\n2,3\n3,4\n4,5\n5,6\n6,7\n7,8\n8,9\n")
    (tmp_path / "g.json").write_text(json.dumps(line_graph("ok.csv")))
    code, text = run_cli(capsys, "run", str(tmp_path / "g.json"), "--quiet",
                         "--init-weights", str(special))
    assert code != 0 and "weights file" in text and "regular file" in text, text


def test_an_imported_graphs_weights_outside_its_folder_are_refused(fenced, capsys):
    from safetensors.torch import save_file

    project, outside = fenced
    save_file({"line.weight": __import__("torch").zeros(1, 1)}, str(outside / "w.safetensors"))
    (project / "data.csv").write_text("x,y\n1,2\n2,3\n3,4\n4,5\n5,6\n6,7\n7,8\n8,9\n")
    doc = line_graph("data.csv")
    doc["imported"] = {"weights": "../outside/w.safetensors"}
    (project / "graph.json").write_text(json.dumps(doc))
    for command in (["run", "--quiet"], ["export", "--to", "python", "-o", "x.py"]):
        code, text = run_cli(capsys, command[0], str(project / "graph.json"), *command[1:])
        assert code != 0 and "leads outside the graph's folder" in text, text
    code, text = run_cli(capsys, "run", "--quiet", "--data-root", str(outside),
                         str(project / "graph.json"))
    assert code == 0, text


def test_a_runs_log_shows_the_graphs_name_as_written(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "data.csv").write_text("x,y\n1,2\n2,3\n3,4\n4,5\n5,6\n6,7\n7,8\n8,9\n")
    doc = line_graph("data.csv")
    doc["name"] = "evil" + ESC + "[bold red]markup[/bold red]"
    doc["training"]["epochs"] = 1
    (tmp_path / "g.json").write_text(json.dumps(doc))
    code, text = run_cli(capsys, "run", str(tmp_path / "g.json"))
    assert code == 0, text
    assert_clean(text)
    assert "[bold red]markup" in text  # shown as written: rich markup from a file not obeyed
