"""File > Compare with…: the other file opens beside this one and both canvases colour
what `nodegraph diff` lists — the added node and the rewired input green or amber here,
the changed card amber on both sides; edits refresh the marks; Clear removes them."""

from __future__ import annotations

import json
from pathlib import Path

EXAMPLE = Path(__file__).parent.parent.parent / "examples" / "cnn_digits.json"


def test_compare_colours_the_three_changes_on_both_canvases(make_window, tmp_path, qtbot):
    before = tmp_path / "before.json"
    before.write_text(EXAMPLE.read_text())
    doc = json.loads(EXAMPLE.read_text())
    doc["nodes"]["conv1"]["params"]["out_channels"] = 12
    doc["nodes"]["extra"] = {"type": "activations.ReLU", "params": {}}
    for e in doc["edges"]:
        if e["to"] == ["loss", "input"]:
            e["from"] = ["dropout", "output"]
    after = tmp_path / "after.json"
    after.write_text(json.dumps(doc))
    w = make_window(str(after))
    w.prompts.open_from = str(before)
    w.actions_by_name["compare"].trigger()
    panel = w.compare
    assert [(c.kind, c.node) for c in panel.changes] == [
        ("node", "extra"), ("param", "conv1"), ("wire", "loss")]
    assert panel.list.count() == 3 and "3 changes" in panel.title.text()
    marks = {n: i.diff_mark for n, i in w.scene.nodes.items() if i.diff_mark}
    assert marks == {"extra": "added", "conv1": "changed"}
    wires = {(e.dst, e.dst_port): x.diff_mark for e, x in w.scene.wires.items() if x.diff_mark}
    assert wires == {("loss", "input"): "changed"}
    other = panel.other_window
    assert other is not None and other.doc.path is not None
    assert {n: i.diff_mark for n, i in other.scene.nodes.items() if i.diff_mark} == {
        "conv1": "changed"}
    assert {(e.dst, e.dst_port) for e, x in other.scene.wires.items() if x.diff_mark} == {
        ("loss", "input")}
    # an edit here is compared again: the param set back leaves two changes
    was = json.loads(EXAMPLE.read_text())["nodes"]["conv1"]["params"]["out_channels"]
    assert w.doc.set_param("conv1", "out_channels", was)
    qtbot.waitUntil(lambda: len(panel.changes) == 2, timeout=10000)
    assert w.scene.nodes["conv1"].diff_mark is None
    panel.clear()
    assert not any(i.diff_mark for i in w.scene.nodes.values())
    assert panel.other_window is None


def test_compare_with_a_bad_file_says_so(window, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    window.prompts.open_from = str(bad)
    assert not window.compare.compare_with()
    assert window.prompts.kinds()[-1] == "error"
