"""Numbers a file uses to break what validation passes (issue #24, item 6): integers too
long to convert, seeds and sizes beyond 64 bits, and devices torch would wrap or lack.
Each is refused at validation naming the file and the JSON path or node, never as an
internal error at run."""

from __future__ import annotations

import json

import pytest
import torch

from nodegraph.kinds import devices
from nodegraph.model.errors import NodegraphError
from tests.test_hostile_code import folder as folder  # noqa: F401 (the fixture)
from tests.test_hostile_code import hostile_file
from tests.test_hostile_paths import assert_clean, run_cli

XOR = {"format": "nodegraph", "version": 1, "name": "xor",
       "nodes": {"data": {"type": "data.XOR", "params": {}},
                 "out": {"type": "layers.Linear", "params": {"out_features": 1}},
                 "loss": {"type": "losses.BCEWithLogits", "params": {}},
                 "opt": {"type": "optimizers.SGD", "params": {"lr": 0.1}}},
       "edges": [{"from": ["data", "x"], "to": ["out", "input"]},
                 {"from": ["out", "output"], "to": ["loss", "input"]},
                 {"from": ["data", "y"], "to": ["loss", "target"]},
                 {"from": ["loss", "loss"], "to": ["opt", "loss"]}],
       "training": {"epochs": 1, "seed": 0, "device": "cpu"}}


def write(tmp_path, text: str):
    path = tmp_path / "g.json"
    path.write_text(text)
    return str(path)


@pytest.mark.parametrize("command", ["validate", "info", "run", "export"])
def test_an_integer_of_thousands_of_digits_names_file_and_path(tmp_path, capsys, command):
    text = json.dumps(XOR).replace('"out_features": 1', '"out_features": ' + "9" * 5000)
    path = write(tmp_path, text)
    extra = ["--to", "python", "-o", str(tmp_path / "o.py")] if command == "export" else []
    code, out = run_cli(capsys, command, path, *extra)
    assert code != 0 and path in out and "nodes/out/params/out_features" in out, out
    assert "5,000 digits" in out
    assert_clean(out)


@pytest.mark.parametrize("where,value", [("seed", 10**30), ("seed", 2**32), ("epochs", 2**70),
                                         ("seed", 1e300)])
def test_training_settings_beyond_what_torch_takes_fail_validation(tmp_path, capsys, where,
                                                                   value):
    doc = json.loads(json.dumps(XOR))
    doc["training"][where] = value
    path = write(tmp_path, json.dumps(doc))
    code, out = run_cli(capsys, "validate", path)
    assert code != 0 and f"training.{where}" in out, out
    assert_clean(out)


def test_a_node_param_beyond_64_bits_is_refused_by_node(tmp_path, capsys):
    doc = json.loads(json.dumps(XOR))
    doc["nodes"]["out"]["params"]["out_features"] = 2**64
    code, out = run_cli(capsys, "validate", write(tmp_path, json.dumps(doc)))
    assert code != 0 and "out" in out and "64-bit" in out, out


def test_device_names_are_parsed_as_the_run_takes_them():
    assert devices.parse("cuda:3") == torch.device("cuda:3")
    for bad in ("cuda:999", "cuda:-1", "cuda:128", "gpu\x1b[2J", 7, "cpu:99999"):
        with pytest.raises(NodegraphError, match="unknown device"):
            devices.parse(bad)
    if not torch.cuda.is_available():
        with pytest.raises(NodegraphError, match="no CUDA GPU"):
            devices.check_here("cuda:0")


def test_training_device_cuda_999_fails_validation(tmp_path, capsys):
    doc = json.loads(json.dumps(XOR))
    doc["training"]["device"] = "cuda:999"  # torch.device would make it cuda:-25
    code, out = run_cli(capsys, "validate", write(tmp_path, json.dumps(doc)))
    assert code != 0 and "training.device" in out and "unknown device 'cuda:999'" in out


@pytest.mark.parametrize("block,params", [
    ("opaque.Function", {"function": "torch:zeros", "args": [4, 2],
                         "kwargs": {"device": "cuda:999"}}),
    ("opaque.Module", {"target": "torch.nn:Linear", "kwargs": {
        "in_features": 2, "out_features": 1, "device": "cuda:999"}}),
])
def test_a_device_keyword_of_an_opaque_call_is_checked_at_validation(folder, capsys, block,
                                                                      params):
    path = str(hostile_file(folder, block, params))
    code, out = run_cli(capsys, "validate", path)
    assert code != 0 and "evil" in out and "device" in out and "cuda:999" in out, out
    assert "internal error" not in out
