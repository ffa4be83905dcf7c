"""An opaque module too large for memory is refused from its weights, counted on meta from
the constructor's arguments, before it runs (issue #33): running it on meta tensors first
imported torch._dynamo through torch's prims (the first comparison, `target >= low` in
AdaptiveLogSoftmaxWithLoss, seconds under load), then failed on `nonzero` and fell back
to a CPU copy, which the memory estimate refused only after all that.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import nodegraph

ROOT = Path(__file__).resolve().parents[1]

CHILD = """
import json, resource, sys
import torch
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
import nodegraph
report = nodegraph.validate(nodegraph.load(sys.argv[1]))
print("RESULT " + json.dumps({
    "problems": [[p.node, p.port, p.kind, p.message] for p in report.problems],
    "dynamo": "torch._dynamo" in sys.modules,
    "rise_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before}))
"""


def _als(folder: Path, features: int, classes: int, cutoff: int) -> str:
    doc = {"format": "nodegraph", "version": 1, "name": "als",
           "nodes": {"data": {"type": "data.Digits", "params": {}},
                     "lin": {"type": "layers.Linear", "params": {"out_features": features}},
                     "als": {"type": "opaque.Module", "params": {
                         "target": "torch.nn:AdaptiveLogSoftmaxWithLoss", "index": 1,
                         "kwargs": {"in_features": features, "n_classes": classes,
                                    "cutoffs": [cutoff], "div_value": 1.0}}}},
           "edges": [{"from": ["data", "x"], "to": ["lin", "input"]},
                     {"from": ["lin", "output"], "to": ["als", "input"]},
                     {"from": ["data", "y"], "to": ["als", "input_2"]}]}
    path = folder / "als.json"
    path.write_text(json.dumps(doc))
    return str(path)


def _validate_in_child(path: str, limit: str) -> dict:
    env = {**os.environ, "NODEGRAPH_MEMORY_LIMIT": limit, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-c", CHILD, path], env=env, capture_output=True,
                          text=True, timeout=300, cwd=str(ROOT))
    line = next((s for s in proc.stdout.splitlines() if s.startswith("RESULT ")), None)
    assert line is not None, proc.stdout + proc.stderr
    return json.loads(line[len("RESULT "):])


def test_a_module_whose_weights_pass_the_limit_is_refused_before_it_runs(tmp_path):
    """The issue's file: 4,096 x (150,001 + 150,000) floats and a tail, 5.0 GB, under a
    1 GB limit. Refused on the node and its kwargs, naming the class and the size, with
    torch._dynamo never imported and no weights made."""
    out = _validate_in_child(_als(tmp_path, 4096, 300_000, 150_000), "1G")
    refusals = [p for p in out["problems"] if p[2] == "too_large"]
    assert refusals, out
    node, port, _, message = refusals[0]
    assert (node, port) == ("als", "kwargs"), out
    assert "5.0 GB for the weights of torch.nn:AdaptiveLogSoftmaxWithLoss" in message
    assert "1.1 GB of memory available" in message
    assert out["dynamo"] is False, "the refusal ran the module on meta tensors first"
    assert out["rise_kb"] < 300 * 1024, out  # nothing near 5 GB (nor 0.6 GB) was made


def test_a_module_whose_weights_fit_still_runs_on_meta_then_on_a_cpu_copy(tmp_path):
    """The check before the run refuses only what the estimate would: 256 x (2,001 + 256 +
    2,000) floats (4.4 MB) are refused by name under 2 MB, and fit in 64 MB, where the
    module runs (on a CPU copy, as it reads values) and gets its shape. (Refused first:
    a shape inferred once is cached, and the estimate then refuses from the cache.)"""
    from nodegraph.kinds import footprint

    path = _als(tmp_path, 256, 4000, 2000)
    with footprint.memory_limit(2 * 2**20):
        report = nodegraph.validate(nodegraph.load(path))
    weights = 4 * 256 * (2001 + 256 + 2000)  # head (with the cluster), tail proj and out
    assert [(p.node, p.port) for p in report.problems if p.kind == "too_large"] == \
        [("als", "kwargs")], report.problems
    assert f"{footprint.size_text(weights)} for the weights" in report.problems[0].message
    with footprint.memory_limit(64 * 2**20):
        report = nodegraph.validate(nodegraph.load(path))
    assert report.ok, report.problems
    assert report.shape("als", "output") == ()
