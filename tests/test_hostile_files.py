"""Damaged and hostile graph files end in our own error, naming the node, port or JSON path.

One case per class of damage that used to crash, hang or run away (issue #12), each checking
the exact error kind and where it points, then a property-based fuzz test: random
structural and value mutations of every example (`tests/mutations.py`, shared with
`benchmarks/fuzz.py`) load and validate raising nothing but `NodegraphError`.
"""

from __future__ import annotations

import copy
import json
import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import nodegraph
from nodegraph.model import fileformat
from nodegraph.model.errors import GraphFileError, NodegraphError
from nodegraph.model.graph import Tie
from tests.mutations import EXAMPLES, mutate

XOR = json.loads(Path("examples/xor.json").read_text(encoding="utf-8"))


def xor(**changes) -> dict:
    doc = copy.deepcopy(XOR)
    doc.update(changes)
    return doc


def grouped(groups: dict, nodes: dict, edges: list | None = None) -> dict:
    """XOR with `hidden` and `act` replaced by the given group instances."""
    doc = xor()
    for n in ("hidden", "act"):
        del doc["nodes"][n]
    doc["edges"] = [e for e in doc["edges"] if not {"hidden", "act"} & {e["from"][0],
                                                                         e["to"][0]}]
    doc["groups"] = groups
    doc["nodes"].update(nodes)
    doc["edges"] += edges or []
    return doc


LAYER = {"nodes": {"fc": {"type": "layers.Linear", "params": {"out_features": 4}}},
         "edges": [], "inputs": {"input": [["fc", "input"]]}, "outputs": {"output": ["fc",
                                                                                    "output"]}}


def problems(doc: dict | str, kind: str) -> list[nodegraph.Problem]:
    """Load and validate; the problems of `kind` (the report repeats those of loading)."""
    text = doc if isinstance(doc, str) else json.dumps(doc)
    return [p for p in nodegraph.validate(nodegraph.loads(text)).problems if p.kind == kind]


# -- groups --------------------------------------------------------------------------------

def test_a_group_using_itself_is_bad_group_on_its_instance():
    body = copy.deepcopy(LAYER)
    body["nodes"]["again"] = {"type": "group.g", "params": {}}
    (p,) = problems(grouped({"g": body}, {"inst": {"type": "group.g"}}), "bad_group")
    assert p.node == "inst" and "group 'g' uses itself (g -> g, through node 'again')" in p.message


def test_groups_using_each_other_are_bad_group_naming_the_chain():
    a, b = copy.deepcopy(LAYER), copy.deepcopy(LAYER)
    a["nodes"]["inner"] = {"type": "group.b"}
    b["nodes"]["inner"] = {"type": "group.a"}
    (p,) = problems(grouped({"a": a, "b": b}, {"inst": {"type": "group.a"}}), "bad_group")
    assert p.node == "inst" and "a -> b -> a" in p.message


def test_groups_of_groups_that_would_expand_to_10_to_the_15_nodes_are_refused_at_once():
    groups = {f"g{i}": {"nodes": {f"n{j}": {"type": f"group.g{i + 1}"} for j in range(10)},
                        "edges": [], "inputs": {}, "outputs": {}} for i in range(15)}
    groups["g15"] = LAYER
    (p,) = problems(grouped(groups, {"bomb": {"type": "group.g0"}}), "bad_group")
    assert p.node == "bomb" and "more than 10,000 nodes" in p.message
    assert "'bomb' alone: 2,111,111,111,111,110" in p.message  # 10**15 leaves, the instances


def test_groups_nested_deeper_than_16_levels_are_bad_group():
    groups = {f"g{i}": {"nodes": {"n": {"type": f"group.g{i + 1}"}}} for i in range(20)}
    groups["g20"] = LAYER
    (p,) = problems(grouped(groups, {"deep": {"type": "group.g0"}}), "bad_group")
    assert p.node == "deep" and "groups nest deeper than 16 levels (g0 -> g1" in p.message


def test_a_group_input_listing_one_target_many_times_feeds_it_once():
    body = {**LAYER, "inputs": {"input": [["fc", "input"]] * 1000}}
    doc = grouped({"g": body}, {"inst": {"type": "group.g"}},
                  [{"from": ["data", "x"], "to": ["inst", "input"]},
                   {"from": ["inst", "output"], "to": ["out", "input"]}])
    graph = nodegraph.loads(json.dumps(doc))
    assert graph.groups["g"].inputs == {"input": [("fc", "input")]}
    assert nodegraph.validate(graph, for_training=True).ok


def test_a_group_instance_sharing_with_itself_is_bad_group_not_a_hang():
    doc = grouped({"g": LAYER}, {"inst": {"type": "group.g", "params": {"share": "inst"}}})
    (p,) = problems(doc, "bad_group")
    assert p.node == "inst" and "shares weights with itself" in p.message


def test_sharing_with_an_instance_of_another_group_is_bad_group():
    doc = grouped({"g": LAYER, "h": copy.deepcopy(LAYER)},
                  {"one": {"type": "group.h"}, "two": {"type": "group.g",
                                                       "params": {"share": "one"}}})
    (p,) = problems(doc, "bad_group")
    assert p.node == "two" and "'one', which is not an instance of group 'g'" in p.message


@pytest.mark.parametrize("share", [3, ["x"], {"a": 1}, True])
def test_a_share_that_is_not_text_is_bad_group_on_the_node(share):
    doc = grouped({"g": LAYER}, {"one": {"type": "group.g"},
                                 "two": {"type": "group.g", "params": {"share": share}}})
    (p,) = problems(doc, "bad_group")
    assert p.node == "two" and "'share' must be the id of another instance" in p.message


@pytest.mark.parametrize("name", ["é", "../up", "with space", "group.x", "_x", "1a", ""])
def test_a_group_name_that_is_not_an_identifier_is_skipped_with_its_path(name):
    doc = grouped({name: LAYER}, {"inst": {"type": f"group.{name}"}})
    (p,) = problems(doc, "bad_entry")
    assert p.message.startswith(f"groups/{name}: '{name}' is not a valid group name")
    (unknown,) = problems(doc, "unknown_block")
    assert unknown.node == "inst"


@pytest.mark.parametrize("key,value", [("nodes", []), ("nodes", "x"), ("edges", {}),
                                       ("edges", 3), ("inputs", []), ("outputs", "fc"),
                                       ("ties", {"a": 1})])
def test_a_group_part_of_the_wrong_json_type_is_reported_with_its_path(key, value):
    body = {**LAYER, key: value}
    found = problems(grouped({"g": body}, {"inst": {"type": "group.g"}}), "bad_entry")
    assert any(p.message.startswith(f"groups/g/{key} must be") for p in found), found


@pytest.mark.parametrize("port,refs", [("Bad Port", [["fc", "input"]]), ("x", 5),
                                       ("x", {"fc": "input"}), ("x", [["gone", "input"]]),
                                       ("x", [[1, 2]])])
def test_a_bad_group_input_is_reported_with_its_path(port, refs):
    body = {**LAYER, "inputs": {port: refs}}
    found = problems(grouped({"g": body}, {"inst": {"type": "group.g"}}), "bad_entry")
    assert any(p.message.startswith(f"groups/g/inputs/{port}") for p in found), found


# -- JSON text -----------------------------------------------------------------------------

def test_json_nested_100000_deep_is_a_graph_file_error():
    text = json.dumps(xor()).replace('"ui": ', '"ui": ' + "[" * 100_000 + "]" * 100_000
                                     + ', "was": ', 1)
    with pytest.raises(GraphFileError, match="nested more than 64 levels"):
        nodegraph.loads(text, source="deep.json")


def test_json_nested_deeper_than_the_format_needs_names_the_path():
    doc = xor()
    doc["ui"]["deep"] = json.loads("[" * 100 + "]" * 100)
    with pytest.raises(GraphFileError, match=r"deep.json: ui/deep/0/0/0/.*nested more than"):
        nodegraph.loads(json.dumps(doc), source="deep.json")


def test_a_utf8_bom_is_accepted(tmp_path):
    path = tmp_path / "bom.json"
    path.write_text(json.dumps(xor()), encoding="utf-8-sig")
    assert path.read_bytes().startswith(b"\xef\xbb\xbf")
    graph = nodegraph.load(path)
    assert graph.load_problems == [] and nodegraph.validate(graph).ok


def test_trailing_garbage_is_malformed_json_with_its_position():
    with pytest.raises(GraphFileError, match=r"^g.json:1:\d+: malformed JSON: Extra data"):
        nodegraph.loads(json.dumps(xor()) + " }", source="g.json")


def test_a_50_mb_file_is_refused_before_it_is_read(tmp_path):
    path = tmp_path / "big.json"
    doc = xor()
    doc["ui"]["blob"] = "x" * (50 * 2**20)
    path.write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(GraphFileError, match=r"big.json: 50.0 MB is more than a graph file"):
        nodegraph.load(path)
    with pytest.raises(GraphFileError, match="more than a graph file may hold"):
        nodegraph.loads(path.read_text(encoding="utf-8"))


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity", "1e999"])
def test_nan_and_infinity_for_an_int_param_name_the_json_path(literal):
    text = json.dumps(xor()).replace('"out_features": 4', f'"out_features": {literal}')
    with pytest.raises(GraphFileError, match=r"nodes/hidden/params/out_features: .* not a "
                                             r"number JSON allows"):
        nodegraph.loads(text)


def test_an_int_param_refuses_nan_and_infinity_set_in_code():
    graph = nodegraph.loads(json.dumps(xor()))
    graph.set_param("hidden", "out_features", float("inf"), strict=False)
    (p,) = nodegraph.validate(graph).problems
    assert (p.kind, p.node, p.port) == ("bad_param", "hidden", "out_features")


@pytest.mark.parametrize("end", [[1, "output"], ["hidden", 2], [None, None], ["hidden"], {}])
def test_non_string_ids_in_a_wire_are_a_bad_entry_naming_the_edge(end):
    doc = xor()
    doc["edges"][1]["from"] = end
    (p,) = problems(doc, "bad_entry")
    assert p.message.startswith("edge #2 must look like")


def test_a_node_id_that_is_not_an_identifier_is_a_bad_entry_naming_it():
    doc = xor()
    doc["nodes"]["../x"] = {"type": "layers.Linear", "params": {"out_features": 1}}
    (p,) = problems(doc, "bad_entry")
    assert p.node == "../x" and "not a valid node id" in p.message


@pytest.mark.parametrize("where,value,kind,node,port", [
    (("nodes", "hidden", "type"), ["layers.Linear"], "bad_entry", "hidden", None),
    (("nodes", "opt", "params", "scope"), [{"a": 1}], "bad_param", "opt", "scope"),
    (("nodes", "loss", "params", "reduction"), {"mean": 1}, "bad_param", "loss", "reduction"),
    (("training", "stages"), [{"epochs": 1, "optimizers": [["opt"]]}], "bad_param", None,
     "training.stages"),
])
def test_unhashable_values_where_a_name_is_expected_are_reported(where, value, kind, node,
                                                                 port):
    doc = xor()
    holder = doc
    for key in where[:-1]:
        holder = holder[key]
    holder[where[-1]] = value
    found = problems(doc, kind)
    assert any((p.node, p.port) == (node, port) for p in found), found


def test_ties_that_are_not_a_list_are_a_bad_entry():
    (p,) = problems(xor(ties={"from": ["hidden", "weight"]}), "bad_entry")
    assert p.message == "'ties' must be a list; it was ignored"


def test_unhashable_tie_ends_are_a_bad_entry():
    (p,) = problems(xor(ties=[{"from": [{"a": 1}, "weight"], "to": ["out", ["w"]]}]),
                    "bad_entry")
    assert "a tie must look like" in p.message


@pytest.mark.parametrize("stages,message", [
    ([{"epochs": 1, "frozen": True}], "stage 1: 'frozen' must be a list of node ids"),
    ([{"epochs": 1, "optimizers": 5}], "stage 1: 'optimizers' must be a list of node ids"),
    (3, "'stages' must be a list of objects"),
    ([{"epochs": 1, "frozen": [[1]]}], "stage 1: 'frozen' must be a list of node ids"),
])
def test_bad_training_stages_are_bad_param_on_training_stages(stages, message):
    found = problems(xor(training={"epochs": 1, "stages": stages}), "bad_param")
    assert any(p.port == "training.stages" and message in p.message for p in found), found


# -- retyped nodes -------------------------------------------------------------------------

def test_a_node_retyped_to_a_group_with_other_ports_reports_the_old_wires():
    doc = xor()
    doc["nodes"]["act"]["type"] = "group.UNet"
    found = problems(doc, "unknown_port")
    ports = {(p.node, p.port) for p in found}
    assert ports == {("act", "input"), ("act", "output")}, found
    assert all("group.UNet 'act' has no" in p.message for p in found)


def test_a_wire_to_a_missing_inner_port_of_a_nested_group_names_the_top_node():
    doc = grouped({"g": LAYER}, {"inst": {"type": "group.g"}},
                  [{"from": ["data", "x"], "to": ["inst", "nope"]}])
    (p,) = problems(doc, "unknown_port")
    assert (p.node, p.port) == ("inst", "nope") and "(inputs: input)" in p.message


# -- what validation accepts, compile accepts ----------------------------------------------

TIES = [Tie("hidden", "weight", "out", "weight"),  # shapes differ
        Tie("data", "x", "out", "weight"),  # a data block has no weights
        Tie("hidden", "nope", "out", "weight"),  # no such parameter
        Tie("hidden", "bias", "act", "weight"),  # an activation has none
        Tie("out", "bias", "out", "bias")]  # harmless: one parameter tied to itself


@pytest.mark.parametrize("tie", TIES, ids=str)
def test_a_tie_validate_accepts_compiles_and_one_it_refuses_names_node_and_param(tie):
    graph = nodegraph.loads(json.dumps(xor()))
    graph.add_tie(tie, strict=False)  # as a file may hold it
    report = nodegraph.validate(graph, for_training=True)
    if report.ok:
        nodegraph.compile(graph)
        return
    (p,) = report.problems
    assert p.kind == "bad_tie" and (p.node, p.port) in {(tie.src, tie.src_param),
                                                        (tie.dst, tie.dst_param)}
    with pytest.raises(nodegraph.ValidationError):
        nodegraph.compile(graph)


def test_a_tie_naming_a_group_instance_is_refused_by_validation_not_only_by_run():
    doc = grouped({"g": LAYER}, {"inst": {"type": "group.g"}, "other": {"type": "group.g"}},
                  [{"from": ["data", "x"], "to": ["inst", "input"]},
                   {"from": ["inst", "output"], "to": ["other", "input"]},
                   {"from": ["other", "output"], "to": ["out", "input"]}])
    doc["ties"] = [{"from": ["inst", "weight"], "to": ["other__fc", "weight"]}]
    graph = nodegraph.loads(json.dumps(doc))
    (p,) = nodegraph.validate(graph).problems
    assert (p.kind, p.node, p.port) == ("bad_tie", "inst", "weight")
    assert "is a group instance; tie a node inside it" in p.message


def test_a_penalty_naming_blocks_compile_cannot_bind_is_refused_by_validation():
    graph = nodegraph.loads(json.dumps(xor()))
    graph.add("norm.L2Penalty", id="l2", nodes=["data", "ghost", "hidden"])
    (p,) = nodegraph.validate(graph).problems
    assert (p.kind, p.node, p.port) == ("bad_param", "l2", "nodes")
    assert "['data', 'ghost']" in p.message
    graph.set_param("l2", "nodes", ["hidden"])
    assert nodegraph.validate(graph).ok
    nodegraph.compile(graph)


def test_an_unknown_device_is_refused_by_validation():
    (p,) = problems(xor(training={"device": "banana"}), "bad_param")
    assert p.port == "training.device"


# -- fuzz ----------------------------------------------------------------------------------

def load_and_validate(text: str) -> None:
    try:
        nodegraph.validate(fileformat.loads(text, source="case.json"), for_training=True)
    except NodegraphError:
        pass


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.stem)
@settings(max_examples=5, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32))  # a seed, not st.randoms: those draw near-minimal values
def test_mutated_examples_load_and_validate_to_our_own_errors(example, seed: int):
    text, done = mutate(example.read_text(encoding="utf-8"), random.Random(seed), sane=True)
    try:
        load_and_validate(text)
    except Exception as e:  # noqa: BLE001 (the failure names the mutations that made it)
        raise AssertionError(f"{example.name}: {'; '.join(done)}: {type(e).__name__}: {e}") from e


@pytest.mark.parametrize("nodes,wires", [(fileformat.MAX_NODES + 1, 0),
                                         (10, fileformat.MAX_EDGES + 1)])
def test_more_nodes_or_wires_than_a_graph_may_hold_are_refused_before_reading(nodes, wires):
    """80,000 plain nodes fit in 10 MB and took seconds to load and validate."""
    doc = {"format": "nodegraph", "version": 1,
           "nodes": {f"n{i}": {"type": "activations.Tanh"} for i in range(nodes)},
           "edges": [{"from": ["n0", "output"], "to": ["n1", "input"]}] * wires}
    with pytest.raises(GraphFileError, match="more than a graph may hold"):
        fileformat.loads(json.dumps(doc), source="big.json")


def test_a_group_instance_with_an_unknown_param_is_named():
    """Validation checks the flat graph, where instances are gone: their params are checked
    on the graph itself, at top level and inside group bodies."""
    graph = nodegraph.load(next(p for p in EXAMPLES if p.name == "ddpm_digits.json"))
    instance = next(n.id for n in graph if n.type.startswith("group."))
    graph.set_param(instance, "bogus", 3, strict=False)
    problems = {(p.node, p.port, p.kind) for p in nodegraph.validate(graph).errors}
    assert (instance, "bogus", "unknown_param") in problems
