"""`nodegraph info --json` and `validate --json` keep to their published schema
(docs/describe.schema.json): every example, forward-only graphs and graphs with problems, and
the totals agree with the per-node figures."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nodegraph.cli.main import main

jsonschema = pytest.importorskip("jsonschema")

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = json.loads((ROOT / "docs" / "describe.schema.json").read_text(encoding="utf-8"))
VALIDATOR = jsonschema.Draft202012Validator(SCHEMA)
EXAMPLES = sorted((ROOT / "examples").glob("*.json"))


def described(capsys, *argv: str) -> dict:
    main([*argv, "--json"])
    return json.loads(capsys.readouterr().out)


def test_the_schema_is_a_valid_draft_2020_12_schema():
    jsonschema.Draft202012Validator.check_schema(SCHEMA)


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_every_example_is_described_by_the_schema(path, capsys):
    doc = described(capsys, "info", str(path))
    VALIDATOR.validate(doc)
    assert doc["parameters"] == sum(n["parameters"] for n in doc["nodes"])
    shaped = {(w["from"][0], w["from"][1]) for w in doc["wires"] if "shape" in w}
    outputs = {(n["id"], port) for n in doc["nodes"] for port in n["outputs"]}
    assert shaped <= outputs  # a wire's shape is its source port's
    assert described(capsys, "validate", str(path)) == doc


def test_a_graph_with_problems_and_no_optimizer_is_described_too(tmp_path, capsys):
    graph = json.loads((ROOT / "examples" / "xor.json").read_text(encoding="utf-8"))
    graph["nodes"]["hidden"]["params"]["out_features"] = -3
    graph["nodes"] = {k: v for k, v in graph["nodes"].items() if k != "opt"}
    graph["edges"] = [e for e in graph["edges"] if "opt" not in json.dumps(e)]
    path = tmp_path / "broken.json"
    path.write_text(json.dumps(graph), encoding="utf-8")
    doc = described(capsys, "validate", str(path))
    VALIDATOR.validate(doc)
    assert not doc["ok"] and doc["can"]["train"] is False
    assert any(p["node"] == "hidden" for p in doc["problems"])


def test_the_schema_refuses_what_the_format_does_not_say(capsys):
    doc = described(capsys, "info", str(ROOT / "examples" / "xor.json"))
    for broken in ({**doc, "parameters": -1}, {**doc, "extra": 1},
                   {**doc, "wires": [{"from": ["a"], "to": ["b", "c"]}]}):
        assert not VALIDATOR.is_valid(broken)
