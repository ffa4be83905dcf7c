"""Validation: structural problems and shape inference, as data keyed by node and port."""

from __future__ import annotations

import gc
import importlib
import json
import time

import pytest

import nodegraph
from nodegraph.model.graph import Graph


def xor() -> Graph:
    return nodegraph.load("examples/xor.json")


def kinds(report):
    return {(p.kind, p.node, p.port) for p in report.problems}


def test_example_is_clean_and_every_wire_has_a_shape():
    report = nodegraph.validate(xor(), for_training=True)
    assert report.ok, report.problems
    assert report.shape_text("data", "x") == "(N, 2)"
    assert report.shape_text("hidden", "output") == "(N, 4)"
    assert report.shape_text("loss", "loss") == "()"
    assert report.param_counts["hidden"] == 2 * 4 + 4 and report.param_counts["out"] == 5


def test_linear_needs_only_out_features():
    g = Graph()
    g.add("data.Table", id="t", columns=["a", "b", "c", "y"], rows=[[1, 2, 3, 4]] * 5,
          inputs=["a", "b", "c"], targets=["y"])
    g.add("layers.Linear", id="fc", out_features=7)
    g.connect(("t", "x"), ("fc", "input"))
    report = nodegraph.validate(g)
    assert report.shape("fc", "output") == (5, 7)
    assert report.param_counts["fc"] == 3 * 7 + 7


def test_shape_mismatch_between_two_linears_names_node_port_and_both_shapes():
    g = xor()
    g.set_param("out", "in_features", 8)  # 'hidden' gives 4 features
    report = nodegraph.validate(g)
    (p,) = report.problems
    assert (p.kind, p.node, p.port) == ("shape_mismatch", "out", "input")
    assert "expects (N, 8) but receives (N, 4)" in p.message and p.hint


def test_cycle_names_its_nodes():
    g = xor()
    g.connect(("act", "output"), ("hidden", "input"), strict=False)
    g.disconnect(g.edges[0])  # data.x -> hidden.input
    report = nodegraph.validate(g)
    cycle = [p for p in report.problems if p.kind == "cycle"]
    assert len(cycle) == 1 and "hidden -> act -> hidden" in cycle[0].message.replace(
        "act -> hidden -> act", "hidden -> act -> hidden")


def test_missing_required_input():
    g = xor()
    g.disconnect(g.source_of("loss", "target"))
    assert ("missing_input", "loss", "target") in kinds(nodegraph.validate(g))


def test_incompatible_port_types():
    g = xor()
    g.connect(("hidden", "output"), ("opt", "schedule"), strict=False)
    assert ("type_mismatch", "opt", "schedule") in kinds(nodegraph.validate(g))


def test_two_wires_into_one_input():
    g = xor()
    g.connect(("data", "y"), ("hidden", "input"), strict=False)
    assert ("multiple_inputs", "hidden", "input") in kinds(nodegraph.validate(g))


@pytest.mark.parametrize("param, value, kind, text", [
    ("out_features", "four", "bad_param", "must be an integer >= 1, got the text 'four'"),
    ("out_features", 2.5, "bad_param", "must be an integer"),
    ("out_features", -3, "bad_param", "must be >= 1"),
    ("bias", 1, "bad_param", "must be true or false"),
    ("widht", 3, "unknown_param", "has no param 'widht'"),
])
def test_bad_param_values(param, value, kind, text):
    g = xor()
    g.set_param("hidden", param, value, strict=False)  # as a hand-edited file would hold it
    (p,) = nodegraph.validate(g).problems
    assert (p.kind, p.node, p.port) == (kind, "hidden", param) and text in p.message


def test_missing_required_param_and_bad_choice():
    g = xor()
    g.reset_param("hidden", "out_features")
    g.set_param("loss", "reduction", "median", strict=False)
    found = kinds(nodegraph.validate(g))
    assert ("missing_param", "hidden", "out_features") in found
    assert ("bad_param", "loss", "reduction") in found


def test_unknown_block_does_not_cascade():
    g = xor()
    g.node("act").type = "activations.Swishy"
    report = nodegraph.validate(g)
    assert [(p.kind, p.node) for p in report.problems] == [("unknown_block", "act")]


def test_loss_target_shape_and_dtype_checks():
    g = xor()
    g.set_param("out", "out_features", 3)  # (N, 3) logits against (N, 1) targets
    (p,) = nodegraph.validate(g).problems
    assert (p.kind, p.node, p.port) == ("shape_mismatch", "loss", "target")
    assert "(N, 3)" in p.message and "(N, 1)" in p.message


def test_training_requirements():
    g = xor()
    g.remove("opt")
    assert nodegraph.validate(g).ok
    assert ("no_optimizer", None, None) in kinds(nodegraph.validate(g, for_training=True))


def test_bad_training_settings_are_reported():
    g = xor()
    g.update_training({"epochs": "many", "colour": 1})
    found = kinds(nodegraph.validate(g))
    assert ("bad_param", None, "training.epochs") in found
    assert ("unknown_param", None, "training.colour") in found


def test_load_problems_reach_the_validator():
    text = json.loads(open("examples/xor.json").read())
    text["edges"].append({"from": ["nowhere", "x"], "to": ["hidden", "input"]})
    g = nodegraph.loads(json.dumps(text))
    assert ("dangling_edge", "hidden", None) in kinds(nodegraph.validate(g))


def big_graph(n: int) -> Graph:
    """A chain of n blocks: Linear / ReLU alternating after one data block."""
    g = Graph("big")
    g.add("data.NoisyLine", id="data", n=64)
    prev = ("data", "x")
    for i in range(n - 1):
        node = f"n{i}"
        if i % 2:
            g.add("activations.ReLU", id=node)
        else:
            g.add("layers.Linear", id=node, out_features=8)
        g.connect(prev, (node, "input"))
        prev = (node, "output")
    return g


def test_a_thousand_nodes_validate_load_and_save_within_budget(tmp_path):
    validate_module = importlib.import_module("nodegraph.check.validate")  # the function shadows it

    nodegraph.validate(big_graph(3))  # torch loads its meta kernels on first use, once
    cache = validate_module.OpCache()  # nothing of the big graph is known yet
    g = big_graph(1000)
    # the worker's heap (thousands of tests' objects) frozen as the CLI's tuned process
    # freezes its own, so a full collection of it is not timed as the graph's cost
    gc.collect()
    gc.freeze()
    try:
        start = time.process_time()  # CPU time: other processes on a busy machine do not count
        report = nodegraph.validate(g, cache=cache)
        elapsed = time.process_time() - start
        assert report.ok and len(report.outputs) > 1000
        assert elapsed < 0.5, f"validate took {elapsed:.3f}s of CPU"
        start = time.process_time()
        nodegraph.save(g, tmp_path / "big.json")
        again = nodegraph.load(tmp_path / "big.json")
        elapsed = time.process_time() - start
    finally:
        gc.unfreeze()
    assert len(again) == 1000 and elapsed < 0.5, f"save+load took {elapsed:.3f}s of CPU"


def test_optimizer_and_schedule_refusals_are_reported_on_their_nodes():
    g = nodegraph.load("examples/line_fit.json")
    g.set_param("opt", "nesterov", True)  # torch refuses Nesterov without momentum
    (p,) = nodegraph.validate(g).problems
    assert (p.kind, p.node) == ("bad_config", "opt") and "Nesterov" in p.message
    g.set_param("opt", "momentum", 0.9)
    assert nodegraph.validate(g).ok
