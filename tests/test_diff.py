"""`nodegraph diff`: an example and a copy with one param, one node and one wire changed
lists exactly those three (text and --json); training settings and groups; the textconv
lines; hostile input ends in our error, never a traceback; no torch imported."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from nodegraph.cli.main import main
from nodegraph.model import diff
from nodegraph.model.fileformat import read_document

EXAMPLE = Path(__file__).parent.parent / "examples" / "cnn_digits.json"


def changed_copy(tmp_path: Path) -> Path:
    doc = json.loads(EXAMPLE.read_text())
    doc["nodes"]["conv1"]["params"]["out_channels"] = 12  # one param (was 8)
    doc["nodes"]["extra"] = {"type": "activations.ReLU", "params": {}}  # one node
    for e in doc["edges"]:  # one wire: the loss now reads the dropout's output
        if e["to"] == ["loss", "input"]:
            e["from"] = ["dropout", "output"]
    doc["ui"]["positions"]["conv1"] = [999, 999]  # a move is not a change
    path = tmp_path / "b.json"
    path.write_text(json.dumps(doc))
    return path


def test_one_param_one_node_one_wire_are_exactly_the_three_changes(tmp_path, capsys):
    b = changed_copy(tmp_path)
    before = json.loads(EXAMPLE.read_text())["nodes"]["conv1"]["params"]["out_channels"]
    changes = diff.compare(read_document(EXAMPLE), read_document(b))
    assert [(c.kind, c.action, c.node, c.name) for c in changes] == [
        ("node", "added", "extra", None),
        ("param", "changed", "conv1", "out_channels"),
        ("wire", "changed", "loss", "input"),
    ]
    assert changes[1].before == before and changes[1].after == 12
    assert changes[2].before == "out.output" and changes[2].after == "dropout.output"
    assert main(["diff", str(EXAMPLE), str(b)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].endswith("3 changes: 1 node, 1 param, 1 wire")
    assert out[1:] == ["+ node     extra (activations.ReLU)",
                       f"~ param    conv1.out_channels: {before} -> 12",
                       "~ wire     loss.input: from out.output -> from dropout.output"]
    assert main(["diff", "--json", str(EXAMPLE), str(b)]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [c["kind"] for c in data["changes"]] == ["node", "param", "wire"]
    assert main(["diff", "--exit-code", str(EXAMPLE), str(b)]) == 1
    assert main(["diff", "--exit-code", str(EXAMPLE), str(EXAMPLE)]) == 0
    assert capsys.readouterr().out.splitlines()[-1].endswith("no changes")


def test_removed_nodes_carry_their_wires_and_training_and_groups_are_compared():
    a = {"nodes": {"x": {"type": "t.A", "params": {"k": 1}}, "y": {"type": "t.B"}},
         "edges": [{"from": ["x", "out"], "to": ["y", "in"]}],
         "training": {"epochs": 5, "seed": 0},
         "groups": {"g": {"nodes": {"p": {"type": "t.A", "params": {"k": 1}}}, "edges": []},
                    "old": {"nodes": {}, "edges": []}}}
    b = {"nodes": {"x": {"type": "t.C", "params": {}}},
         "edges": [], "training": {"epochs": 7, "lr_note": "x"},
         "groups": {"g": {"nodes": {"p": {"type": "t.A", "params": {"k": 2}}}, "edges": []}}}
    got = [(c.kind, c.action, c.node, c.name, c.group, c.wires)
           for c in diff.compare(a, b)]
    assert got == [
        ("node", "removed", "y", None, None, 1),  # its wire is counted, not listed
        ("node", "changed", "x", None, None, 0),
        ("param", "removed", "x", "k", None, 0),
        ("training", "changed", None, "epochs", None, 0),
        ("training", "added", None, "lr_note", None, 0),
        ("training", "removed", None, "seed", None, 0),
        ("param", "changed", "p", "k", "g", 0),
        ("group", "removed", None, "old", None, 0),
    ]


def test_textconv_lines_are_sorted_and_other_files_pass_through(tmp_path, capsys):
    assert main(["diff", "--textconv", str(EXAMPLE)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("graph ") and out[1].startswith("training ")
    assert "node conv1  layers.Conv2d" in "\n".join(out)
    assert "wire data.x -> conv1.input" in out
    other = tmp_path / "package.json"
    other.write_text('{"name": "not a graph"}\n')
    assert main(["diff", "--textconv", str(other)]) == 0
    assert capsys.readouterr().out == '{"name": "not a graph"}\n'


def test_hostile_files_end_in_our_error(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "nodegraph", "version": 1, "nodes": {"\\u001b[31mx": '
                   '{"type": "\\u001b[2J", "params": {"a": [[[]]]}}}, "edges": [1, {"from": 3}]}')
    assert main(["diff", str(EXAMPLE), str(bad)]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\\x1b[31mx" in out
    assert main(["diff", str(EXAMPLE), str(tmp_path / "missing.json")]) == 1
    assert "no such file" in capsys.readouterr().err
    deep = tmp_path / "deep.json"
    deep.write_text('{"format": "nodegraph", "version": 1, "x": ' + "[" * 5000 + "]" * 5000
                    + "}")
    assert main(["diff", str(deep), str(EXAMPLE)]) == 1
    assert "nested" in capsys.readouterr().err
    assert main(["diff", str(EXAMPLE)]) == 1


@pytest.mark.skipif(sys.platform == "win32", reason="subprocess environment")
def test_diff_imports_no_torch(tmp_path):
    b = changed_copy(tmp_path)
    code = (f"import sys; from nodegraph.cli.main import main; main(['diff', {str(EXAMPLE)!r}, "
            f"{str(b)!r}]); print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.splitlines()[-1] == "False"


def test_textconv_writes_values_in_full(tmp_path, capsys):
    doc = json.loads(EXAMPLE.read_text())
    doc["nodes"]["conv1"]["params"]["kernel_size"] = list(range(60))  # long: past any cut
    path = tmp_path / "long.json"
    path.write_text(json.dumps(doc))
    assert main(["diff", "--textconv", str(path)]) == 0
    assert json.dumps(list(range(60))) in capsys.readouterr().out
