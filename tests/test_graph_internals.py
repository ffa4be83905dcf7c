"""The graph owns its state: ties, groups, training settings, UI data and node params.

Each is shown read-only (a tuple, or a `ReadOnlyDict`) so a write that goes around the
graph's methods fails where it is made; each method checks what it is given and emits its
`GraphChanged` event; the file loader, the copies and the editor's undoable commands go
through the same methods (the editor part needs PySide6 and pytest-qt).
"""

from __future__ import annotations

import ast
import copy
import json
import pickle
from pathlib import Path

import pytest

import nodegraph
from nodegraph.model import fileformat
from nodegraph.model.errors import GraphError
from nodegraph.model.graph import Graph, GraphChanged, Node, Tie
from nodegraph.model.groups import GroupDef, make_group

TIE = Tie("hidden", "bias", "out", "bias")


def xor() -> Graph:
    g = Graph("xor")
    g.add("data.XOR", "data")
    g.add("layers.Linear", "hidden", out_features=4)
    g.add("activations.Tanh", "act")
    g.add("layers.Linear", "out", out_features=1)
    g.add("losses.BCEWithLogits", "loss")
    g.add("optimizers.Adam", "opt", lr=0.05)
    for source, target in [(("data", "x"), ("hidden", "input")),
                           (("hidden", "output"), ("act", "input")),
                           (("act", "output"), ("out", "input")),
                           (("out", "output"), ("loss", "input")),
                           (("data", "y"), ("loss", "target")),
                           (("loss", "loss"), ("opt", "loss"))]:
        g.connect(source, target)
    return g


def with_everything() -> Graph:
    """XOR with a tie, a group, training settings and UI data: every kind of state."""
    g = xor()
    g.add_tie(TIE)
    g.set_training("epochs", 3)
    g.set_ui("layout_direction", "TB")
    g.set_positions({"data": (0, 0), "hidden": (200, 0)})
    make_group(g, ["act"], "squash")
    return g


def recorded(g: Graph) -> list[GraphChanged]:
    events: list[GraphChanged] = []
    g.events.subscribe(events.append)
    return events


# -- direct writes fail ------------------------------------------------------------------

WRITES = {
    "ties.append": lambda g: g.ties.append(TIE),
    "ties =": lambda g: setattr(g, "ties", []),
    "groups[...] =": lambda g: g.groups.__setitem__("x", g.groups["squash"]),
    "groups.pop": lambda g: g.groups.pop("squash"),
    "del groups[...]": lambda g: g.groups.__delitem__("squash"),
    "groups =": lambda g: setattr(g, "groups", {}),
    "training[...] =": lambda g: g.training.__setitem__("epochs", 5),
    "training.update": lambda g: g.training.update(epochs=5),
    "training.setdefault": lambda g: g.training.setdefault("seed", 1),
    "training |=": lambda g: g.training.__ior__({"seed": 1}),
    "training.clear": lambda g: g.training.clear(),
    "training =": lambda g: setattr(g, "training", {}),
    "ui[...] =": lambda g: g.ui.__setitem__("layout_direction", "LR"),
    "ui.setdefault": lambda g: g.ui.setdefault("comments", []),
    "ui.pop": lambda g: g.ui.pop("positions"),
    "ui.popitem": lambda g: g.ui.popitem(),
    "ui =": lambda g: setattr(g, "ui", {}),
    "params[...] =": lambda g: g.node("hidden").params.__setitem__("out_features", 8),
    "params.update": lambda g: g.node("hidden").params.update(out_features=8),
    "params.pop": lambda g: g.node("hidden").params.pop("out_features"),
    "del params[...]": lambda g: g.node("hidden").params.__delitem__("out_features"),
    "params =": lambda g: setattr(g.node("hidden"), "params", {}),
    "nodes[...] =": lambda g: g.nodes.__setitem__("x", g.node("hidden")),  # as before
}


@pytest.mark.parametrize("write", list(WRITES), ids=list(WRITES))
def test_a_direct_write_to_graph_state_fails_and_changes_nothing(write):
    g = with_everything()
    before = fileformat.dumps(g)
    with pytest.raises((TypeError, AttributeError)):
        WRITES[write](g)
    assert fileformat.dumps(g) == before


def test_the_guard_says_what_to_use_instead():
    g = xor()
    with pytest.raises(TypeError, match="set_param, set_training, set_ui"):
        g.node("hidden").params["out_features"] = 8


@pytest.mark.parametrize("how", ["copy", "deepcopy", "loaded", "group body"])
def test_copies_and_loaded_graphs_are_guarded_too(how):
    g = with_everything()
    other = {"copy": lambda: g.copy(),
             "deepcopy": lambda: copy.deepcopy(g),
             "loaded": lambda: fileformat.loads(fileformat.dumps(g)),
             "group body": lambda: g.groups["squash"].body}[how]()
    for write in ("training[...] =", "ui[...] =", "ties.append", "groups[...] ="):
        with pytest.raises((TypeError, AttributeError)):
            WRITES[write](other)
    node = next(iter(other))
    with pytest.raises(TypeError):
        node.params["x"] = 1
    if how != "group body":
        assert fileformat.dumps(other) == fileformat.dumps(g)


def test_a_node_copied_or_pickled_keeps_its_params_read_only_and_its_own():
    node = Node("fc", "layers.Linear", {"out_features": 3})
    for twin in (copy.deepcopy(node), pickle.loads(pickle.dumps(node)), copy.copy(node)):
        assert twin == node and twin.params == {"out_features": 3}
        with pytest.raises(TypeError):
            twin.params["out_features"] = 4
    given = {"out_features": 3}
    node = Node("fc", "layers.Linear", given)
    given["out_features"] = 9  # the node took a copy
    assert node.params == {"out_features": 3}
    assert json.loads(json.dumps(node.params)) == {"out_features": 3}


# -- each method emits its event ---------------------------------------------------------

def test_tie_methods_check_their_tie_and_emit_events():
    g = xor()
    events = recorded(g)
    g.add_tie(TIE)
    g.remove_tie(TIE)
    g.set_ties([TIE])
    g.set_ties([])
    assert [(e.kind, e.node, e.name, e.value) for e in events] == [
        ("tie_added", "out", "bias", TIE), ("tie_removed", "out", "bias", TIE),
        ("tie_added", "out", "bias", TIE), ("tie_removed", "out", "bias", TIE)]
    g.add_tie(TIE)
    with pytest.raises(GraphError, match="already tied"):
        g.add_tie(TIE)
    with pytest.raises(GraphError, match="no node 'ghost'"):
        g.add_tie(Tie("ghost", "weight", "out", "weight"))
    with pytest.raises(GraphError, match="must be a Tie"):
        g.add_tie(("hidden", "bias", "out", "bias"))  # type: ignore[arg-type]
    with pytest.raises(GraphError, match="no tie"):
        g.remove_tie(Tie("hidden", "weight", "out", "weight"))
    g.set_ties([])
    g.add_tie(Tie("ghost", "weight", "out", "weight"), strict=False)  # a file's: validated
    (p,) = nodegraph.validate(g).problems
    assert p.kind == "bad_tie" and "'ghost'" in p.message


def test_a_tie_may_name_a_node_inside_a_group_instance():
    g = xor()
    make_group(g, ["hidden"], "layer", instance="block")
    g.add_tie(Tie("block__hidden", "bias", "out", "bias"))
    with pytest.raises(GraphError, match="no node 'act__hidden'"):
        g.add_tie(Tie("act__hidden", "bias", "out", "bias"))  # act is no group


def test_removing_or_renaming_a_node_takes_its_ties_along():
    g = xor()
    g.add_tie(TIE)
    g.rename("out", "head")
    assert g.ties == (Tie("hidden", "bias", "head", "bias"),)
    g.remove("head")
    assert g.ties == ()


def test_group_methods_check_the_definition_and_emit_events():
    g = xor()
    events = recorded(g)
    body = Graph("pair")
    body.add("layers.Linear", "fc", out_features=4)
    g.define_group(GroupDef("pair", body, {"input": [("fc", "input")]},
                            {"output": ("fc", "output")}, ui={"positions": {"fc": [1, 2]}}))
    assert body.groups is g.groups  # nested groups resolve against the graph's set
    assert g.groups["pair"].ui == {"positions": {"fc": [1, 2]}}  # the body's ui
    with pytest.raises(GraphError, match="already exists"):
        g.define_group(GroupDef("pair", Graph("pair")))
    with pytest.raises(GraphError, match="not a valid group name"):
        g.define_group(GroupDef("2pair", Graph("2pair")))
    g.add("group.pair", "p")
    with pytest.raises(GraphError, match="used by p"):
        g.remove_group("pair")
    g.remove("p")
    g.remove_group("pair")
    with pytest.raises(GraphError, match="no group 'pair'"):
        g.remove_group("pair")
    assert [(e.kind, e.name) for e in events if e.kind.startswith("group")] == [
        ("group_defined", "pair"), ("group_removed", "pair")]
    assert "pair" not in g.groups and "group.pair" not in g.registry


def test_training_methods_emit_one_event_per_setting():
    g = xor()
    events = recorded(g)
    g.set_training("epochs", 5)
    g.update_training({"seed": 1}, device="cpu")
    g.set_training("seed", None)  # removes it
    assert dict(g.training) == {"epochs": 5, "device": "cpu"}
    g.replace_training({"epochs": "many"})  # kept as given: the validator judges values
    assert dict(g.training) == {"epochs": "many"}
    assert [(e.kind, e.name, e.value) for e in events] == [
        ("training_changed", "epochs", 5), ("training_changed", "seed", 1),
        ("training_changed", "device", "cpu"), ("training_changed", "seed", None),
        ("training_changed", None, None)]
    with pytest.raises(GraphError, match="must be a string"):
        g.set_training(3, 1)  # type: ignore[arg-type]


def test_ui_methods_emit_ui_changed():
    g = xor()
    events = recorded(g)
    g.set_ui("layout_direction", "TB")
    g.update_ui({"collapsed": ["loss"]})
    g.set_positions({"data": (1.5, 2), "hidden": [3, 4]})
    g.forget_positions(["data"])
    g.set_ui("collapsed", None)
    g.replace_ui({"zoom": 2})
    assert [(e.kind, e.name) for e in events] == [
        ("ui_changed", "layout_direction"), ("ui_changed", "collapsed"),
        ("ui_changed", "positions"), ("ui_changed", "positions"), ("ui_changed", "collapsed"),
        ("ui_changed", None)]
    assert dict(g.ui) == {"zoom": 2}
    with pytest.raises(GraphError, match="position of 'data' must be two numbers"):
        g.set_positions({"data": "here"})
    g.replace_ui({"positions": "damaged"})  # a file's: kept as it was until placed again
    g.set_positions({"data": (0, 0)})
    assert g.ui["positions"] == {"data": [0.0, 0.0]}


def test_param_methods_check_unless_told_not_to_and_emit_events():
    g = xor()
    events = recorded(g)
    g.set_param("hidden", "out_features", 8)
    g.reset_param("hidden", "out_features")
    assert [(e.kind, e.node, e.name) for e in events] == [
        ("param_changed", "hidden", "out_features"), ("param_changed", "hidden", "out_features")]
    with pytest.raises(GraphError, match="has no param 'bogus'"):
        g.set_param("hidden", "bogus", 1)
    g.set_param("hidden", "out_features", "four", strict=False)  # as a file would hold it
    (p,) = nodegraph.validate(g).problems
    assert (p.kind, p.node, p.port) == ("bad_param", "hidden", "out_features")


def test_the_file_round_trips_what_the_methods_set():
    g = with_everything()
    again = fileformat.loads(fileformat.dumps(g))
    assert again.ties == g.ties and dict(again.training) == dict(g.training)
    assert dict(again.ui) == dict(g.ui)
    assert dict(again.groups["squash"].ui) == dict(g.groups["squash"].ui)
    assert again.groups["squash"].body.groups is again.groups


def test_flattening_copies_the_settings_instead_of_sharing_them():
    from nodegraph.model.groups import flatten

    g = with_everything()
    flat = flatten(g).graph
    assert dict(flat.training) == dict(g.training) and flat.ties == g.ties
    flat.set_training("epochs", 9)
    assert g.training["epochs"] == 3


# -- the editor's undoable commands use the methods ----------------------------------------

@pytest.fixture
def doc(qtbot):
    pytest.importorskip("PySide6")
    from nodegraph.gui.document.document import Document

    return Document(xor())


def test_undo_of_a_delete_puts_the_tie_back_with_its_events(doc):
    g = doc.graph
    g.add_tie(TIE)
    events = recorded(g)
    doc.delete(["out"])
    assert g.ties == ()
    doc.undo_stack.undo()
    assert g.ties == (TIE,) and ("tie_added", TIE) in [(e.kind, e.value) for e in events]
    doc.undo_stack.redo()
    assert g.ties == ()


def test_undo_and_redo_of_grouping_round_trip_ties_groups_and_positions(doc):
    g = doc.graph
    g.add_tie(TIE)
    doc.set_positions({"hidden": (10, 20), "act": (30, 40)})
    before = fileformat.dumps(g)
    events = recorded(g)
    instance = doc.group(["hidden", "act"], "block")
    assert instance in g.nodes and "block" in g.groups
    assert g.ties == (Tie(f"{instance}__hidden", "bias", "out", "bias"),)
    assert g.groups["block"].ui["positions"] == {"hidden": [10, 20], "act": [30, 40]}
    defn = g.groups["block"]
    doc.undo_stack.undo()
    # as it was (the positions put back come last in their table: compared as dicts)
    assert json.loads(fileformat.dumps(g)) == json.loads(before) and "block" not in g.groups
    doc.undo_stack.redo()
    assert g.groups["block"] is defn  # an open tab's body is the same object again
    kinds = [e.kind for e in events]
    assert "group_defined" in kinds and kinds.count("group_removed") == 1
    assert "tie_added" in kinds and "tie_removed" in kinds


def test_undo_of_ui_edits_round_trips_and_they_do_not_count_as_model_changes(doc):
    from nodegraph.gui.document import commands as cmd

    g = doc.graph
    changed: list = []
    doc.changed.connect(changed.append)
    revision = doc.revision
    doc.set_positions({"data": (0, 0)})
    doc.push(cmd.MoveNodes(doc, {"data": (0, 0)}, {"data": (50, 60)}))
    doc.push(cmd.SetUiValue(doc, "layout_direction", "TB", "Layout direction"))
    note = doc.add_note("comment", (0, 0, 100, 50), "hello")
    assert g.ui["positions"]["data"] == [50, 60] and g.ui["layout_direction"] == "TB"
    assert [n["id"] for n in g.ui["comments"]] == [note]
    assert changed == [] and doc.revision == revision  # layout only: nothing to revalidate
    for _ in range(3):
        doc.undo_stack.undo()
    assert g.ui["positions"]["data"] == [0, 0] and "layout_direction" not in g.ui
    assert g.ui.get("comments") == []
    for _ in range(3):
        doc.undo_stack.redo()
    assert g.ui["positions"]["data"] == [50, 60] and g.ui["layout_direction"] == "TB"
    assert [n["id"] for n in g.ui["comments"]] == [note]


def test_a_group_body_has_its_own_training_and_edits_the_graphs_through_its_document(doc):
    from nodegraph.gui.shell.group_tabs import BodyDocument

    g = doc.graph
    doc.set_training("epochs", 7)
    doc.group(["hidden", "act"], "block")
    body_doc = BodyDocument(g.groups["block"], doc)
    assert body_doc.training() is g.training and body_doc.training()["epochs"] == 7
    assert body_doc.graph.training is not g.training and dict(body_doc.graph.training) == {}
    body_doc.set_training("epochs", 9)  # one undo step on the graph's stack
    assert g.training["epochs"] == 9 and "epochs" not in body_doc.graph.training
    doc.undo_stack.undo()
    assert g.training["epochs"] == 7


# -- the guard's blind spot, scanned: values nested inside the read-only mappings --------

STATE = {"ui", "training", "params"}
MUTATORS = {"append", "extend", "insert", "pop", "popitem", "update", "setdefault", "clear",
            "remove", "sort", "reverse"}


def _through_state(node: ast.expr, depth: int = 0) -> bool:
    """True when `node` reaches a value *inside* `x.ui`, `x.training` or `x.params` (one
    subscript or `.get()` below them): what the read-only top level cannot guard."""
    while True:
        if isinstance(node, ast.Attribute):
            if node.attr in STATE:
                return depth >= 1
            node = node.value
        elif isinstance(node, ast.Subscript):
            node, depth = node.value, depth + 1
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr == "get"):
            node, depth = node.func.value, depth + 1
        else:
            return False


def nested_writes(source: str) -> list[str]:
    """Writes in `source` to a list or dict held in a graph's ui, training or params."""
    found = []
    for n in ast.walk(ast.parse(source)):
        targets: list[ast.expr] = []
        if isinstance(n, (ast.Assign, ast.Delete)):
            targets = n.targets
        elif isinstance(n, ast.AugAssign):
            targets = [n.target]
        for t in targets:
            for item in t.elts if isinstance(t, ast.Tuple) else [t]:
                if isinstance(item, ast.Subscript) and _through_state(item.value):
                    found.append(f"{n.lineno}: {ast.unparse(item)}")
        if (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                and n.func.attr in MUTATORS and _through_state(n.func.value, 1)
                and not isinstance(n.func.value, ast.Attribute)):
            found.append(f"{n.lineno}: {ast.unparse(n)[:60]}")
    return found


def test_the_scan_finds_writes_inside_graph_state():
    assert len(nested_writes("""
g.ui["positions"]["fc"] = [0, 0]
g.ui.get("comments", []).append(note)
g.training["stages"][0]["epochs"] = 3
del graph.ui["positions"]["x"]
node.params["betas"][0] += 1
g.training["stages"].append(stage)
""")) == 6
    assert nested_writes("""
report.params[node.id] = values
positions = dict(g.ui["positions"]); positions["fc"] = [0, 0]
g.set_training("stages", [{**s, "epochs": 1} for s in g.training["stages"]])
x = g.ui["positions"]["fc"]
""") == []


def test_nothing_outside_the_model_writes_inside_graph_state():
    """The read-only mappings guard their top level at run time; a list or dict stored in
    them (positions, comments, stages, a list param) is guarded by this scan instead."""
    root = Path(__file__).resolve().parents[1]
    files = [p for folder in ("nodegraph", "nodes", "tests", "tools", "benchmarks", "examples")
             for p in (root / folder).rglob("*.py")
             if "nodegraph/model/" not in p.as_posix() and p.name != Path(__file__).name]
    found = [f"{p.relative_to(root)}:{w}" for p in files
             for w in nested_writes(p.read_text(encoding="utf-8"))]
    assert found == [], "write through the Graph's methods instead:\n" + "\n".join(found)
