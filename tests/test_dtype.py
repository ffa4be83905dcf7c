"""The dtype option: training.dtype for the whole graph, a node's dtype param to override it.

float64 is checked against a hand-written float64 PyTorch model (same seed: identical
weights after training), validation reports dtypes on wires and refuses mixed ones on the
receiving port, the Python export builds the same dtypes, and old files stay float32.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

import nodegraph
from nodegraph.check.validate import validate
from nodegraph.model.fileformat import loads

ROOT = Path(__file__).resolve().parents[1]
ROWS = [[0.1 * i, (-1) ** i * 0.05 * i, 0.3 * i - 1.0] for i in range(12)]


def graph(dtype: str | None = None, node_dtypes: dict[str, str] | None = None,
          epochs: int = 5):
    """A 2-3-1 tanh MLP on a typed-in table, full-batch SGD, unshuffled."""
    node_dtypes = node_dtypes or {}
    nodes = {
        "data": {"type": "data.Table", "params": {
            "columns": ["a", "b", "t"], "rows": ROWS, "inputs": ["a", "b"], "targets": ["t"],
            "batch_size": 0, "shuffle": False, "val_fraction": 0.0, "test_fraction": 0.0}},
        "fc1": {"type": "layers.Linear", "params": {"out_features": 3}},
        "act": {"type": "activations.Tanh", "params": {}},
        "fc2": {"type": "layers.Linear", "params": {"out_features": 1}},
        "loss": {"type": "losses.MSE", "params": {}},
        "opt": {"type": "optimizers.SGD", "params": {"lr": 0.1}},
    }
    for node, name in node_dtypes.items():
        nodes[node]["params"]["dtype"] = name
    training = {"epochs": epochs, "seed": 3, "device": "cpu"}
    if dtype is not None:
        training["dtype"] = dtype
    doc = {"format": "nodegraph", "version": 1, "name": "dtype-mlp", "nodes": nodes,
           "edges": [{"from": ["data", "x"], "to": ["fc1", "input"]},
                     {"from": ["fc1", "output"], "to": ["act", "input"]},
                     {"from": ["act", "output"], "to": ["fc2", "input"]},
                     {"from": ["fc2", "output"], "to": ["loss", "input"]},
                     {"from": ["data", "y"], "to": ["loss", "target"]},
                     {"from": ["loss", "loss"], "to": ["opt", "loss"]}],
           "training": training}
    return loads(json.dumps(doc))


def hand_written(dtype: torch.dtype, epochs: int = 5) -> nn.Module:
    """The same model and loop in plain PyTorch."""
    torch.manual_seed(3)
    model = nn.Sequential(nn.Linear(2, 3, dtype=dtype), nn.Tanh(), nn.Linear(3, 1, dtype=dtype))
    data = torch.tensor(ROWS, dtype=torch.float32).to(dtype)
    x, y = data[:, :2], data[:, 2:]
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(epochs):
        opt.zero_grad()
        nn.functional.mse_loss(model(x), y).backward()
        opt.step()
    return model


def weights(module) -> dict[str, torch.Tensor]:
    state = module.block_state()
    return {"0.weight": state["fc1.weight"], "0.bias": state["fc1.bias"],
            "2.weight": state["fc2.weight"], "2.bias": state["fc2.bias"]}


def test_float64_graph_equals_hand_written_float64_model():
    result = nodegraph.train(graph("float64"))
    ours = weights(result.module)
    theirs = hand_written(torch.float64).state_dict()
    assert all(t.dtype == torch.float64 for t in ours.values())
    for key, value in theirs.items():
        assert torch.equal(ours[key], value), key  # identical, not merely close
    x = result.compiled.datasets["data"].tensors("train")["x"]
    assert x.dtype == torch.float64
    # float32 training differs from float64 in the last bits: the dtype is really used
    ours32 = weights(nodegraph.train(graph()).module)
    assert ours32["0.weight"].dtype == torch.float32
    assert not torch.equal(ours32["0.weight"].double(), ours["0.weight"])


def test_old_files_build_the_same_float32_modules():
    """No dtype anywhere: the modules and their initial weights are what they were."""
    plain = nodegraph.compile(graph(), device="cpu")
    explicit = nodegraph.compile(graph("float32"), device="cpu")
    torch.manual_seed(3)
    reference = nn.Sequential(nn.Linear(2, 3), nn.Tanh(), nn.Linear(3, 1)).state_dict()
    for compiled in (plain, explicit):
        got = weights(compiled.module)
        assert all(torch.equal(got[k], v) and got[k].dtype == torch.float32
                   for k, v in reference.items())


def test_a_node_overrides_the_graph_dtype():
    """All float64 but the data and first layer float32: fc2 then receives float32, from
    a weightless Tanh, and says so on its input port."""
    report = validate(graph("float64", {"data": "float32", "fc1": "float32"}))
    problems = [p for p in report.problems if p.kind == "dtype_mismatch"]
    assert [(p.node, p.port) for p in problems] == [("fc2", "input")]
    message = problems[0].message
    assert "float32" in message and "float64" in message and "fc2" in message
    assert "dtype" in problems[0].hint


def test_mixed_dtype_message_on_the_receiving_port():
    report = validate(graph(None, {"fc2": "float64"}))
    (problem,) = report.problems
    assert (problem.node, problem.port, problem.kind) == ("fc2", "input", "dtype_mismatch")
    assert problem.message == ("layers.Linear 'fc2' receives float32 on input 'input' but "
                               "holds its weights in float64")
    with pytest.raises(nodegraph.ValidationError, match="fc2"):
        nodegraph.compile(graph(None, {"fc2": "float64"}), device="cpu")


def test_unknown_dtype_is_a_param_problem():
    report = validate(graph("float16"))
    assert any(p.port == "training.dtype" and p.kind == "bad_param" for p in report.problems)


def test_validate_json_carries_dtypes_on_wires(tmp_path):
    path = tmp_path / "g.json"
    nodegraph.save(graph("float64", {"fc2": "float64"}), path)
    out = subprocess.run([sys.executable, "-m", "nodegraph", "validate", str(path), "--json"],
                         capture_output=True, text=True, cwd=ROOT, check=False)
    assert out.returncode == 0, out.stderr
    wires = json.dumps(json.loads(out.stdout))
    assert '"float64"' in wires and '"float32"' not in wires
    doc = json.loads(out.stdout)
    found = _dtypes(doc)
    assert found and set(found) == {"float64"}


def _dtypes(doc) -> list[str]:
    """Every "dtype" value anywhere in a JSON document."""
    if isinstance(doc, dict):
        return [*([doc["dtype"]] if isinstance(doc.get("dtype"), str) else []),
                *(d for v in doc.values() for d in _dtypes(v))]
    if isinstance(doc, list):
        return [d for v in doc for d in _dtypes(v)]
    return []


def test_bfloat16_where_the_cpu_supports_it():
    compiled = nodegraph.compile(graph("bfloat16"), device="cpu")
    assert {t.dtype for t in compiled.module.parameters()} == {torch.bfloat16}
    out = nodegraph.forward(graph("bfloat16"), compiled=compiled)
    assert out["fc2", "output"].dtype == torch.bfloat16


def test_python_export_builds_float64(tmp_path):
    from nodegraph.interop.export.python import to_python

    g = graph("float64", epochs=3)
    export = to_python(g, tmp_path / "model.py")
    text = export.path.read_text()
    assert "nn.Linear(2, 3, dtype=torch.float64)" in text
    with np.load(export.npz) as arrays:  # a typed-in table travels as saved arrays
        assert arrays["data/train/x"].dtype == np.float64
    namespace: dict = {"__name__": "exported"}
    exec(compile(text, str(export.path), "exec"), namespace)
    torch.manual_seed(3)
    model = namespace[export.class_name]()
    assert {p.dtype for p in model.parameters()} == {torch.float64}
    initial = nodegraph.compile(g, device="cpu").module.block_state()
    assert all(torch.equal(initial[k], v) for k, v in model.state_dict().items())


def test_onnx_export_refuses_bfloat16(tmp_path):
    pytest.importorskip("onnx")
    from nodegraph.interop.export.onnx import to_onnx

    with pytest.raises(nodegraph.ValidationError, match="bfloat16") as info:
        to_onnx(graph("bfloat16"), tmp_path / "m.onnx")
    assert "float32 or float64" in str(info.value)


def test_python_export_of_a_data_recipe_makes_float64_tensors(tmp_path):
    """A data block the exporter writes as code (NoisyLine) makes its tensors in the
    graph's dtype, checked against nodegraph's own by the exporter."""
    from nodegraph.interop.export.python import to_python

    g = nodegraph.load(ROOT / "examples" / "line_fit.json")
    g.update_training(dtype="float64", epochs=1)
    export = to_python(g, tmp_path / "line.py")
    text = export.path.read_text()
    assert export.npz is None  # written as code, not saved arrays
    assert 'torch.as_tensor(x[rows], dtype=torch.float64)' in text
    namespace: dict = {"__name__": "exported"}
    exec(compile(text, str(export.path), "exec"), namespace)
    data = namespace["load_data"]()
    assert data["train"]["x"].dtype == torch.float64
    ours = nodegraph.compile(g, device="cpu").datasets["data"].tensors("train")["x"]
    assert torch.equal(data["train"]["x"], ours)


def test_onnx_export_carries_float64(tmp_path):
    onnx = pytest.importorskip("onnx")
    pytest.importorskip("onnxruntime")
    from nodegraph.interop.export.onnx import to_onnx

    result = to_onnx(graph("float64"), tmp_path / "m.onnx")
    model = onnx.load(str(result.path))
    assert [i.type.tensor_type.elem_type for i in model.graph.input] == [onnx.TensorProto.DOUBLE]
    assert result.max_difference is not None and result.max_difference < 1e-12


def test_python_export_of_bfloat16_saved_data(tmp_path):
    """numpy has no bfloat16: the saved arrays are float32 and the script casts them back,
    giving nodegraph's tensors exactly."""
    from nodegraph.interop.export.python import to_python

    g = graph("bfloat16")
    export = to_python(g, tmp_path / "bf.py")
    namespace: dict = {"__name__": "exported", "__file__": str(export.path)}
    exec(compile(export.path.read_text(), str(export.path), "exec"), namespace)
    data = namespace["load_data"]()
    ours = nodegraph.compile(g, device="cpu").datasets["data"].tensors("train")
    for port in ("x", "y"):
        assert data["train"][port].dtype == torch.bfloat16
        assert torch.equal(data["train"][port], ours[port])


def test_the_timestep_embedding_is_made_in_the_graphs_dtype():
    from nodes.generative import TimestepEmbedding

    t = torch.tensor([0, 1, 7, 999])
    module = TimestepEmbedding(8, 10_000.0, None).to(torch.float64)
    k = torch.arange(4, dtype=torch.float64)
    angles = t.double().reshape(-1, 1) * 10_000.0 ** (-2.0 * k / 8)
    expected = torch.stack([angles.sin(), angles.cos()], -1).flatten(1)
    assert module(t).dtype == torch.float64 and torch.equal(module(t), expected)
    assert TimestepEmbedding(8, 10_000.0, None)(t).dtype == torch.float32
    bf16 = TimestepEmbedding(8, 10_000.0, None).to(torch.bfloat16)(t)  # rounded at the end
    assert bf16.dtype == torch.bfloat16 and torch.equal(bf16, expected.float().bfloat16())


@pytest.mark.parametrize("dtype", ["float64", "bfloat16"])
def test_a_diffusion_graph_validates_and_trains_in_another_dtype(dtype):
    graph = nodegraph.load(ROOT / "examples" / "ddpm_toy.json")
    graph.set_training("dtype", dtype)
    assert validate(graph, for_training=True).ok  # the embedding meets its layers' dtype
    loss = nodegraph.train(graph, epochs=1).final["train"]["loss"]
    assert np.isfinite(loss) and loss < 2.0  # unit-variance noise predicted: MSE below ~1
