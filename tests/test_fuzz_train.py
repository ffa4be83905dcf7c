"""`benchmarks/fuzz.py --train`: what validates clean trains one step, or says why in our
own words; anything else is counted as validation lying (issue #24, item 7). The bounded
smoke over two seeds runs in CI as its own step (`.ci/run`); here the classification and
a few cases, in-process."""

from __future__ import annotations

import json

import nodegraph
from benchmarks import fuzz


def test_a_clean_example_trains_one_step_and_counts_as_ok():
    graph = nodegraph.load(fuzz.ROOT / "examples" / "xor.json")
    fuzz.train_one_step(graph)  # raises on a bug


def clean_case(monkeypatch):
    """Every case is the XOR example, unmutated: it validates clean."""
    text = (fuzz.ROOT / "examples" / "xor.json").read_text()
    monkeypatch.setattr(fuzz, "case", lambda seed, index: ("xor.json", text, []))


def test_a_non_nodegraph_error_after_clean_validation_is_a_lie(monkeypatch):
    def broken(graph):
        raise OverflowError("Overflow when unpacking long long")

    clean_case(monkeypatch)
    monkeypatch.setattr(fuzz, "train_one_step", broken)
    outcome, detail = fuzz.run_case(0, 0, train_too=True)
    assert outcome == "lie" and "OverflowError" in detail and "train" in detail


def test_a_nodegraph_error_in_training_is_an_honest_refusal(monkeypatch):
    def refused(graph):
        raise nodegraph.NodegraphError("the data file is gone")

    clean_case(monkeypatch)
    monkeypatch.setattr(fuzz, "train_one_step", refused)
    assert fuzz.run_case(0, 0, train_too=True) == ("ok", "")


def test_a_table_value_beyond_float32_is_refused_at_validation_not_at_the_fit(monkeypatch):
    """What the first --train run found (seed 20261127, case 581): ridge_lasso with a table
    cell of 1e300 validated, then the least-squares fit failed inside torch (an assert)."""
    doc = json.loads((fuzz.ROOT / "examples" / "ridge_lasso.json").read_text())
    doc["nodes"]["data"]["params"]["rows"][24][1] = 1e300
    text = json.dumps(doc)
    monkeypatch.setattr(fuzz, "case", lambda seed, index: ("ridge_lasso.json", text, []))
    assert fuzz.run_case(0, 0, train_too=True) == ("ok", "")
    [problem] = nodegraph.validate(nodegraph.loads(text)).errors
    assert problem.node == "data" and "beyond what float32 holds" in problem.message
