"""The published JSON schema of the graph file (docs/graph.schema.json) and the loader agree:
every example and every saved graph validates; the structurally wrong files the loader
refuses or reports are rejected by the schema too."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

import nodegraph
from nodegraph.model import fileformat, groups, settings, spec
from nodegraph.model.errors import GraphFileError
from nodegraph.model.graph import NODE_ID

jsonschema = pytest.importorskip("jsonschema")

SCHEMA = json.loads(Path("docs/graph.schema.json").read_text(encoding="utf-8"))
VALIDATOR = jsonschema.Draft202012Validator(SCHEMA)
EXAMPLES = sorted(Path("examples").glob("*.json"))
XOR = json.loads(Path("examples/xor.json").read_text(encoding="utf-8"))
LAYER = {"nodes": {"fc": {"type": "layers.Linear", "params": {"out_features": 4}}},
         "edges": [], "inputs": {"input": [["fc", "input"]]},
         "outputs": {"output": ["fc", "output"]}}


def test_the_schema_is_a_valid_draft_2020_12_schema():
    assert SCHEMA["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    jsonschema.Draft202012Validator.check_schema(SCHEMA)


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_every_example_and_its_saved_form_validate(path):
    doc = json.loads(path.read_text(encoding="utf-8"))
    VALIDATOR.validate(doc)
    VALIDATOR.validate(json.loads(fileformat.dumps(nodegraph.loads(json.dumps(doc)))))


def test_the_schema_states_what_the_loader_and_the_settings_declare():
    d = SCHEMA["$defs"]
    assert d["nodeId"]["pattern"] == NODE_ID.pattern
    assert d["groupName"]["pattern"] == groups.GROUP_NAME.pattern
    assert d["portName"]["pattern"] == spec.NAME.pattern
    assert SCHEMA["properties"]["format"]["const"] == fileformat.FORMAT
    assert SCHEMA["properties"]["version"]["maximum"] == fileformat.VERSION
    assert SCHEMA["properties"]["nodes"]["maxProperties"] == fileformat.MAX_NODES
    assert SCHEMA["properties"]["edges"]["maxItems"] == fileformat.MAX_EDGES
    # every training setting, with its JSON type, its bounds and its choices
    props = d["training"]["properties"]
    assert set(props) == {p.name for p in settings.TRAINING_PARAMS}
    json_type = {"int": "integer", "float": "number", "bool": "boolean", "str": "string",
                 "json": "array"}
    for p in settings.TRAINING_PARAMS:
        entry = props[p.name]
        entry = d[entry["$ref"].rsplit("/", 1)[1]] if "$ref" in entry else entry
        if p.kind == "choice":
            assert entry["enum"] == list(p.choices), p.name
            continue
        want = [json_type[p.kind], "null"] if p.nullable else json_type[p.kind]
        assert entry["type"] == want, p.name
        assert entry.get("minimum") == p.min and entry.get("maximum") == p.max, p.name


def xor(**changes) -> dict:
    doc = copy.deepcopy(XOR)
    doc.update(changes)
    return doc


def with_value(where: tuple, value) -> dict:
    doc = xor()
    holder = doc
    for key in where[:-1]:
        holder = holder[key]
    holder[where[-1]] = value
    return doc


def grouped(name: str = "g", body: dict | None = None) -> dict:
    """XOR with `hidden` replaced by an instance of a one-layer group."""
    doc = xor()
    doc["groups"] = {name: body if body is not None else LAYER}
    doc["nodes"]["hidden"] = {"type": f"group.{name}"}
    return doc


def many_nodes() -> dict:
    doc = xor()
    doc["nodes"] = {f"n{i}": {"type": "activations.ReLU"} for i in range(10_001)}
    return doc


# The hostile-file cases of tests/test_hostile_files.py and tests/test_fileformat.py that
# are wrong in the file's structure (not in what a value means to a block)
HOSTILE = {
    "not an object": [1, 2],
    "no format": {k: v for k, v in XOR.items() if k != "format"},
    "another format": xor(format="other"),
    "newer version": xor(version=99),
    "version as text": xor(version="1"),
    "version true": xor(version=True),
    "nodes a list": xor(nodes=[]),
    "edges an object": xor(edges={}),
    "more nodes than a graph may hold": many_nodes(),
    "node id a path": with_value(("nodes", "../x"),
                                 {"type": "layers.Linear", "params": {"out_features": 1}}),
    "node without a type": with_value(("nodes", "hidden"), {"params": {}}),
    "node type a list": with_value(("nodes", "hidden", "type"), ["layers.Linear"]),
    "node not an object": with_value(("nodes", "hidden"), "layers.Linear"),
    "params a list": with_value(("nodes", "hidden", "params"), [4]),
    **{f"wire end {end!r}": with_value(("edges", 1, "from"), end)
       for end in ([1, "output"], ["hidden", 2], [None, None], ["hidden"], {})},
    "wire without a target": with_value(("edges", 1), {"from": ["hidden", "output"]}),
    "ties an object": xor(ties={"from": ["hidden", "weight"]}),
    "tie ends unhashable": xor(ties=[{"from": [{"a": 1}, "weight"], "to": ["out", ["w"]]}]),
    "training a list": xor(training=[]),
    "unknown training key": xor(training={"epochs": 1, "epoch": 3}),
    "stages a number": xor(training={"epochs": 1, "stages": 3}),
    "stage optimizers nested": xor(training={"epochs": 1, "stages": [
        {"epochs": 1, "optimizers": [["opt"]]}]}),
    "stage frozen true": xor(training={"epochs": 1, "stages": [{"epochs": 1, "frozen": True}]}),
    "stage optimizers a number": xor(training={"epochs": 1, "stages": [
        {"epochs": 1, "optimizers": 5}]}),
    "stage frozen numbers": xor(training={"epochs": 1, "stages": [{"epochs": 1,
                                                                  "frozen": [[1]]}]}),
    "stage without epochs": xor(training={"epochs": 1, "stages": [{"name": "a"}]}),
    "stage unknown key": xor(training={"epochs": 1, "stages": [{"epochs": 1, "lr": 2}]}),
    "ui a list": xor(ui=[]),
    **{f"group name {name!r}": grouped(name)
       for name in ("é", "../up", "with space", "group.x", "_x", "1a", "")},
    "group not an object": grouped(body=[]),  # type: ignore[arg-type]
    **{f"group {key} {value!r}": grouped(body={**LAYER, key: value})
       for key, value in (("nodes", []), ("nodes", "x"), ("edges", {}), ("edges", 3),
                          ("inputs", []), ("outputs", "fc"), ("ties", {"a": 1}))},
    **{f"group input {port!r}: {refs!r}": grouped(body={**LAYER, "inputs": {port: refs}})
       for port, refs in (("Bad Port", [["fc", "input"]]), ("x", 5), ("x", {"fc": "input"}),
                          ("x", [[1, 2]]))},
    "group output a name": grouped(body={**LAYER, "outputs": {"output": "fc"}}),
}


@pytest.mark.parametrize("case", HOSTILE)
def test_a_structurally_wrong_file_is_rejected_by_the_schema_and_by_the_loader(case):
    doc = HOSTILE[case]
    assert not VALIDATOR.is_valid(doc)
    # the loader refuses it, or loading and validation report a problem
    try:
        graph = nodegraph.loads(json.dumps(doc))
    except GraphFileError:
        return
    report = nodegraph.validate(graph)
    structural = {"bad_entry", "bad_param", "unknown_param", "bad_group", "unknown_block",
                  "too_big"}
    assert [p for p in report.problems if p.kind in structural], report.problems


def test_the_schema_says_where_a_file_goes_wrong():
    doc = with_value(("edges", 1, "from"), ["hidden", 2])
    (error,) = VALIDATOR.iter_errors(doc)
    assert list(error.absolute_path) == ["edges", 1, "from", 1]
