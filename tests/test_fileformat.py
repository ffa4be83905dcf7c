"""Graph files: round trips, load reports, one-line errors, atomic saves, migrations."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nodegraph.model import fileformat
from nodegraph.model.errors import GraphFileError
from nodegraph.model.graph import Graph

ids = st.from_regex(r"[a-z][a-z0-9_]{0,8}", fullmatch=True)
json_scalars = st.one_of(st.integers(-10**6, 10**6), st.booleans(), st.text(max_size=8),
                         st.floats(allow_nan=False, allow_infinity=False), st.none())
json_values = st.recursive(json_scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=5), inner, max_size=3)),
    max_leaves=6)
LAYERS = [("layers.Linear", {"out_features": st.integers(1, 64), "bias": st.booleans()}),
          ("activations.ReLU", {}), ("activations.Tanh", {}),
          ("losses.MSE", {"reduction": st.sampled_from(["mean", "sum"])})]


@st.composite
def graphs(draw):
    """Chains of random blocks with random (valid) params, UI data and unknown extra keys."""
    g = Graph(draw(st.text(max_size=10)))
    g.add("data.NoisyLine", id="data", n=draw(st.integers(2, 100)))
    prev = ("data", "x")
    for node_id in draw(st.lists(ids.filter(lambda s: s != "data"), unique=True, max_size=6)):
        block, params = draw(st.sampled_from(LAYERS))
        g.add(block, id=node_id, **{k: draw(v) for k, v in params.items()
                                    if draw(st.booleans())})
        g.connect(prev, (node_id, "input"))
        prev = (node_id, "loss" if block == "losses.MSE" else "output")
        if block == "losses.MSE":
            break
    g.replace_training(draw(st.dictionaries(st.sampled_from(["epochs", "seed"]),
                                            st.integers(0, 9))))
    g.replace_ui({"positions": {n: [draw(st.integers(-999, 999)), 0] for n in g.nodes},
                  "zoom": draw(json_values)})
    g.extra = draw(st.dictionaries(st.sampled_from(["author", "notes"]), json_values))
    return g


@settings(max_examples=60, deadline=None)
@given(graphs())
def test_save_load_save_round_trips_exactly(g):
    text = fileformat.dumps(g)
    again = fileformat.loads(text)
    assert fileformat.dumps(again) == text
    assert fileformat.to_document(again) == json.loads(text)
    assert again.load_problems == []
    assert list(again.nodes) == list(g.nodes) and again.edges == g.edges


def test_example_file_round_trips_byte_for_byte(tmp_path):
    src = open("examples/xor.json").read()
    g = fileformat.load("examples/xor.json")
    out = tmp_path / "x.json"
    fileformat.save(g, out)
    assert out.read_text() == src


def doc(**changes):
    d = {"format": "nodegraph", "version": 1, "name": "t",
         "nodes": {"data": {"type": "data.XOR", "params": {}},
                   "fc": {"type": "layers.Linear", "params": {"out_features": 2}}},
         "edges": [{"from": ["data", "x"], "to": ["fc", "input"]}]}
    d.update(changes)
    return json.dumps(d)


def test_unknown_blocks_params_and_dangling_edges_are_reported_not_dropped():
    text = doc(nodes={"data": {"type": "data.XOR", "params": {"colour": "red"}},
                      "mystery": {"type": "vendor.Magic", "params": {"power": 9}}},
               edges=[{"from": ["data", "x"], "to": ["mystery", "input"]},
                      {"from": ["data", "x"], "to": ["ghost", "input"]},
                      {"from": "data", "to": 3}])
    g = fileformat.loads(text)
    kinds = {(p.kind, p.node) for p in g.load_problems}
    assert ("unknown_param", "data") in kinds
    assert ("unknown_block", "mystery") in kinds
    assert ("dangling_edge", "data") in kinds
    assert any(p.kind == "bad_entry" for p in g.load_problems)
    # what could be held is kept, so saving loses nothing of it
    assert g.node("mystery").type == "vendor.Magic" and g.node("data").params == {"colour": "red"}
    assert len(g.edges) == 1
    assert json.loads(fileformat.dumps(g))["nodes"]["mystery"]["params"] == {"power": 9}


@pytest.mark.parametrize("text, message", [
    ('{"format": "nodegraph", "version": 1, "nodes": {', r"g.json:1:\d+: malformed JSON"),
    ('[1, 2]', "not a nodegraph file"),
    ('{"format": "nodegraph", "version": 99}', "version 99 is newer"),
    ('{"format": "nodegraph", "version": "1"}', "'version' must be a positive integer"),
    ('{"format": "nodegraph", "version": 1, "nodes": []}', "'nodes' must be an object"),
])
def test_unreadable_files_give_one_line_errors(tmp_path, text, message):
    path = tmp_path / "g.json"
    path.write_text(text)
    with pytest.raises(GraphFileError, match=message) as err:
        fileformat.load(path)
    assert "\n" not in str(err.value)


def test_truncated_file_names_the_line_and_column(tmp_path):
    path = tmp_path / "cut.json"
    path.write_text(open("examples/xor.json").read()[:300])
    with pytest.raises(GraphFileError, match=r"cut.json:\d+:\d+: malformed JSON"):
        fileformat.load(path)


def test_missing_file():
    with pytest.raises(GraphFileError, match="no such file"):
        fileformat.load("does/not/exist.json")


def test_save_is_atomic(tmp_path, monkeypatch):
    path = tmp_path / "g.json"
    path.write_text("precious")
    g = fileformat.loads(doc())

    def crash(fd):
        raise OSError("disk full")

    monkeypatch.setattr(fileformat.os, "fsync", crash)  # dies after writing, before the rename
    with pytest.raises(OSError, match="disk full"):
        fileformat.save(g, path)
    assert path.read_text() == "precious"
    assert [p.name for p in tmp_path.iterdir()] == ["g.json"]
    monkeypatch.undo()
    fileformat.save(g, path)
    assert fileformat.load(path).node("fc").params == {"out_features": 2}


def test_old_versions_migrate(monkeypatch):
    def v0_to_v1(d):
        d["nodes"] = {k: {"type": v["block"], "params": v.get("args", {})}
                      for k, v in d.pop("blocks").items()}
        return d

    monkeypatch.setattr(fileformat, "VERSION", 2)
    monkeypatch.setitem(fileformat.MIGRATIONS, 1, v0_to_v1)
    old = {"format": "nodegraph", "version": 1,
           "blocks": {"fc": {"block": "layers.Linear", "args": {"out_features": 3}}}}
    g = fileformat.loads(json.dumps(old))
    assert g.node("fc").params == {"out_features": 3}
    assert fileformat.to_document(g)["version"] == 2


def test_never_evaluates_strings():
    g = fileformat.loads(doc(name="__import__('os').system('false')"))
    assert g.name.startswith("__import__")


def test_comments_and_backdrops_round_trip_and_do_not_change_a_run(tmp_path):
    """The editor's notes live in the `ui` section; `nodegraph run` ignores them."""
    from nodegraph.cli.main import main

    doc = json.loads(open("examples/xor.json").read())
    doc["ui"]["comments"] = [
        {"id": "note_1", "kind": "backdrop", "rect": [-20.5, -60, 420, 200],
         "text": "Hidden layer", "color": "#3f6f9e"},
        {"id": "note_2", "kind": "comment", "rect": [0, 300, 200, 80],
         "text": "XOR needs\na hidden layer ✓", "color": "#c9b458"}]
    plain, noted = tmp_path / "plain.json", tmp_path / "noted.json"
    plain.write_text(open("examples/xor.json").read())
    noted.write_text(json.dumps(doc))
    g = fileformat.load(noted)
    assert g.ui["comments"] == doc["ui"]["comments"] and g.load_problems == []
    again = fileformat.loads(fileformat.dumps(g))
    assert again.ui == g.ui and fileformat.dumps(again) == fileformat.dumps(g)
    histories = []
    for path in (plain, noted):
        out = tmp_path / f"{path.stem}.metrics.json"
        assert main(["run", str(path), "--set", "training.epochs=3", "--quiet",
                     "--metrics-out", str(out)]) == 0
        histories.append([h["train"] for h in json.loads(out.read_text())["history"]])
    assert histories[0] == histories[1]


def test_ties_inside_a_group_body_round_trip():
    from nodegraph.model.graph import Tie
    from nodegraph.model.groups import GroupDef

    body = Graph("pair")
    body.add("layers.Linear", id="a", out_features=3)
    body.add("layers.Linear", id="b", out_features=3)
    body.connect(("a", "output"), ("b", "input"))
    body.add_tie(Tie("a", "weight", "b", "weight"))
    g = Graph("g")
    g.define_group(GroupDef("pair", body, {"input": [("a", "input")]},
                            {"output": ("b", "output")}))
    g.add("group.pair", id="p")
    doc = json.loads(fileformat.dumps(g))
    assert doc["groups"]["pair"]["ties"] == [{"from": ["a", "weight"], "to": ["b", "weight"]}]
    assert "ties" not in doc  # the top level has none of its own
    again = fileformat.loads(fileformat.dumps(g))
    assert again.groups["pair"].body.ties == body.ties and again.ties == ()
    assert fileformat.dumps(again) == fileformat.dumps(g)


def test_saving_to_a_pipe_writes_into_it_instead_of_replacing_it(tmp_path):
    """A rename over a device (/dev/stdout, run as root) would replace the device itself."""
    import os
    import stat
    import threading

    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)
    received = []
    reader = threading.Thread(target=lambda: received.append(pipe.read_text()), daemon=True)
    reader.start()
    g = Graph("piped")
    g.add("data.XOR", id="data")
    fileformat.save(g, pipe)
    reader.join(30)
    assert stat.S_ISFIFO(pipe.stat().st_mode)
    assert fileformat.loads(received[0]).name == "piped"
