"""Importing PyTorch modules with torch.fx: graphs that validate and compute what the
module computes, known layers as blocks, the rest as opaque blocks; and the opaque blocks
themselves, checked against torch."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from blockcheck import build, run_op
from torch import nn
from torch.nn import functional as F

import nodegraph
from nodegraph.cli.main import main
from nodegraph.interop.fx_import import import_graph, import_module, load_weights
from nodegraph.model import allowlist
from nodegraph.model.errors import NodegraphError


class MLP(nn.Module):
    def __init__(self, sizes=(4, 16, 3)):
        super().__init__()
        self.layers = nn.Sequential(nn.Linear(sizes[0], sizes[1]), nn.ReLU(),
                                    nn.Linear(sizes[1], sizes[2]))

    def forward(self, x):
        return self.layers(x)


class LeNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 6, 5, padding=2)
        self.pool = nn.MaxPool2d(2)
        self.conv2 = nn.Conv2d(6, 16, 5)
        self.bn = nn.BatchNorm2d(16)
        self.fc1 = nn.Linear(16 * 5 * 5, 32)
        self.fc2 = nn.Linear(32, 10)
        self.drop = nn.Dropout(0.2)

    def forward(self, x):
        x = self.pool(F.relu(self.conv1(x)))
        x = self.pool(torch.tanh(self.bn(self.conv2(x))))
        x = x.view(x.size(0), -1)
        x = self.drop(F.relu(self.fc1(x)))
        return F.log_softmax(self.fc2(x), dim=1)


class TinyEncoder(nn.Module):
    def __init__(self, vocab=20, d_model=16, nhead=2):
        super().__init__()
        self.embed = nn.Embedding(vocab, d_model)
        self.pos = nn.Parameter(torch.randn(1, 8, d_model) * 0.1)
        self.encoder = nn.TransformerEncoderLayer(d_model, nhead, 32, dropout=0.0,
                                                  batch_first=True)
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, 2)

    def forward(self, tokens):
        h = self.embed(tokens) + self.pos
        h = self.norm(self.encoder(h))
        return self.head(h.mean(dim=1))


class Branchy(nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            return x
        return -x


class BatchArithmetic(nn.Module):
    def forward(self, x):
        return x.reshape(x.size(0) * 2, -1)


def graph_outputs(graph, inputs):
    """The imported graph, compiled with its saved weights, run on `inputs`."""
    compiled = nodegraph.compile(graph, device="cpu", for_training=False)
    load_weights(compiled)
    compiled.module.eval()
    data = [n.id for n in graph if n.type == "opaque.Arrays"]
    with torch.no_grad():
        values = compiled.module.run(compiled.module.full_plan,
                                     {(d, "x"): x for d, x in zip(data, inputs, strict=True)})
    return [values[tuple(o.split("."))] for o in graph.extra["imported"]["outputs"]]


def test_an_mlp_becomes_blocks_that_compute_what_it_computes(tmp_path):
    torch.manual_seed(0)
    mlp = MLP()
    x = torch.randn(5, 4)
    result = import_graph(mlp, x, tmp_path / "mlp.json")
    graph = nodegraph.load(tmp_path / "mlp.json")
    assert nodegraph.validate(graph).ok
    types = {n.id: n.type for n in graph}
    assert types == {"x": "opaque.Arrays", "layers_0": "layers.Linear",
                     "layers_1": "activations.ReLU", "layers_2": "layers.Linear"}
    assert graph.nodes["layers_2"].params == {"out_features": 3, "bias": True}
    [out] = graph_outputs(graph, [x])
    assert torch.equal(out, mlp(x))
    assert result.max_difference == 0
    assert set(result.weights) == {"layers_0.weight", "layers_0.bias", "layers_2.weight",
                                   "layers_2.bias"}


def test_a_lenet_maps_every_layer_and_the_flattening_view(tmp_path):
    torch.manual_seed(0)
    net = LeNet().eval()
    with torch.no_grad():  # running statistics that are not the defaults
        net.bn.running_mean.uniform_(-0.5, 0.5)
        net.bn.running_var.uniform_(0.5, 2.0)
    x = torch.randn(3, 1, 28, 28)
    import_graph(net, x, tmp_path / "lenet.json")
    graph = nodegraph.load(tmp_path / "lenet.json")
    assert nodegraph.validate(graph).ok
    types = {n.id: n.type for n in graph}
    assert types["conv1"] == "layers.Conv2d" and types["bn"] == "norm.BatchNorm2d"
    assert types["view"] == "layers.Reshape" and graph.nodes["view"].params == {"shape": [-1]}
    assert types["relu"] == "activations.ReLU" and types["log_softmax"] == \
        "activations.LogSoftmax"
    assert not any(t.startswith("opaque.") and t != "opaque.Arrays" for t in types.values())
    [out] = graph_outputs(graph, [x])
    with torch.no_grad():
        assert torch.allclose(out, net(x), atol=1e-6)


def test_a_transformer_encoder_keeps_its_layer_opaque_and_its_outputs(tmp_path):
    tokens = torch.randint(0, 20, (4, 8), generator=torch.Generator().manual_seed(1))
    result = import_graph(TinyEncoder, tokens, tmp_path / "enc.json")
    graph = nodegraph.load(tmp_path / "enc.json")
    assert nodegraph.validate(graph).ok
    encoder = graph.nodes["encoder"]
    assert encoder.type == "opaque.Module"
    assert encoder.params == {"target": "torch.nn:TransformerEncoderLayer",
                              "kwargs": {"d_model": 16, "nhead": 2, "dim_feedforward": 32,
                                         "dropout": 0.0, "batch_first": True}}
    assert graph.nodes["mean"].type == "opaque.Function"
    assert graph.nodes["mean"].params["function"] == "torch:Tensor.mean"
    assert graph.nodes["pos"].type == "layers.Parameter"
    assert graph.nodes["embed"].type == "layers.Embedding"
    [out] = graph_outputs(graph, [tokens])
    assert out.shape == (4, 2) and result.max_difference < 1e-6
    # a built instance: the layer's arguments are read back from it and checked
    torch.manual_seed(3)
    model = TinyEncoder().eval()
    import_graph(model, tokens, tmp_path / "enc2.json")
    graph2 = nodegraph.load(tmp_path / "enc2.json")
    # its layer is built through this test module's class: the file runs only when trusted
    [problem] = nodegraph.validate(graph2).errors
    assert (problem.node, problem.port, problem.kind) == ("encoder", "target", "untrusted_code")
    assert "test_fx_import" in problem.message
    assert json.loads((tmp_path / "enc2.json").read_text())["imports"] == ["test_fx_import"]
    assert "imports" not in json.loads((tmp_path / "enc.json").read_text())
    assert allowlist.trust(graph2) == ["test_fx_import"]
    [out2] = graph_outputs(graph2, [tokens])
    with torch.no_grad():
        assert torch.allclose(out2, model(tokens), atol=1e-6)


def test_control_flow_on_values_is_named(tmp_path):
    with pytest.raises(NodegraphError, match=r"Branchy.forward cannot be traced at "
                       r"test_fx_import.py:\d+ \(`if x.sum\(\) > 0:`\).*control flow"):
        import_module(Branchy(), torch.randn(2, 3), tmp_path / "b.json")
    # arithmetic on the batch size is a size expression now (issue #26): it follows the batch
    graph = import_module(BatchArithmetic(), torch.randn(2, 4), tmp_path / "b.json")
    x = torch.randn(5, 4)
    [out] = graph_outputs(graph, [x])
    assert torch.equal(out, BatchArithmetic()(x))


def test_imported_graph_exports_back_to_python(tmp_path):
    from nodegraph.interop.export import to_python

    torch.manual_seed(0)
    net = LeNet().eval()
    x = torch.randn(2, 1, 28, 28)
    import_graph(net, x, tmp_path / "lenet.json")
    graph = nodegraph.load(tmp_path / "lenet.json")
    result = to_python(graph, tmp_path / "lenet.py")
    assert not result.trains
    namespace = {"__name__": "exported"}
    exec(compile((tmp_path / "lenet.py").read_text(), "lenet.py", "exec"), namespace)
    from safetensors.torch import load_file

    model = namespace[result.class_name]()
    model.load_state_dict(load_file(tmp_path / graph.extra["imported"]["weights"]))
    model.eval()
    with torch.no_grad():
        assert torch.allclose(model(x), net(x), atol=1e-6)


def test_cli_import(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "mlp.json"
    assert main(["import", "test_fx_import:MLP", "-o", str(out), "--input-shape", "6,4"]) == 0
    printed = capsys.readouterr().out
    assert "mlp.json" in printed and "mlp.safetensors" in printed
    assert main(["validate", str(out)]) == 0
    assert main(["import", "test_fx_import:MLP", "-o", str(out)]) == 1
    assert "--input-shape" in capsys.readouterr().err
    assert main(["import", "test_fx_import:Nope", "-o", str(out), "--input-shape", "6,4"]) == 1
    assert "has no Nope" in capsys.readouterr().err


# -- the opaque blocks, against torch -----------------------------------------------------------


def test_opaque_module_builds_the_class_or_a_submodule_and_picks_an_output():
    x = torch.randn(3, 4)
    _, _, linear = build("opaque.Module", {"input": x}, target="torch.nn:Linear",
                         kwargs={"in_features": 4, "out_features": 2})
    assert isinstance(linear.module, nn.Linear)
    assert torch.equal(linear(x), F.linear(x, linear.module.weight, linear.module.bias))
    assert set(linear.state_dict()) == {"module.weight", "module.bias"}
    with allowlist.trusting({"test_fx_import"}):  # a class of this test module: trusted
        _, _, relu = build("opaque.Module", {"input": x}, target="test_fx_import:MLP",
                           path="layers.1")
    assert torch.equal(relu(x), x.clamp(min=0))
    with pytest.raises(allowlist.UntrustedCodeError, match="test_fx_import"):
        build("opaque.Module", {"input": x}, target="test_fx_import:MLP", path="layers.1")
    seq = torch.randn(2, 5, 4)
    _, _, gru = build("opaque.Module", {"input": seq}, target="torch.nn:GRU",
                      kwargs={"input_size": 4, "hidden_size": 3, "batch_first": True}, index=0)
    expected, _ = gru.module(seq)
    assert torch.equal(gru(seq), expected)
    with pytest.raises(Exception, match="module:qualname"):
        build("opaque.Module", {"input": x}, target="Linear")


def test_opaque_function_decodes_inputs_sizes_and_slices():
    x = torch.randn(3, 4, 5)
    assert torch.equal(run_op("opaque.Function", {"input": x}, function="torch:Tensor.mean",
                              kwargs={"dim": 1}), x.mean(dim=1))
    out = run_op("opaque.Function", {"input": x}, function="torch:Tensor.reshape",
                 args=[{"input": 0}, {"size": [0, 0]}, 20])
    assert torch.equal(out, x.reshape(3, 20))
    out = run_op("opaque.Function", {"input": x}, function="operator:getitem",
                 args=[{"input": 0}, {"tuple": [{"slice": [None, None, None]}, 0]}])
    assert torch.equal(out, x[:, 0])
    y = torch.randn(3, 4, 5)
    out = run_op("opaque.Function", {"input": x, "input_2": y}, function="torch:cat",
                 args=[[{"input": 0}, {"input": 1}]], kwargs={"dim": 2})
    assert torch.equal(out, torch.cat([x, y], dim=2))
    with pytest.raises(allowlist.UntrustedCodeError, match="no trust opens more of 'os'"):
        run_op("opaque.Function", {"input": x}, function="os:system", args=["true"])


def test_opaque_arrays_keeps_integer_inputs(tmp_path):
    tokens = np.arange(12).reshape(4, 3)
    np.savez(tmp_path / "a.npz", x=tokens, y=np.ones((4, 2), np.float64))
    _, _, dataset = build("opaque.Arrays", path=str(tmp_path / "a.npz"))
    train = dataset.tensors("train")
    assert train["x"].dtype == torch.long and torch.equal(train["x"], torch.as_tensor(tokens))
    assert train["y"].dtype == torch.float32 and train["y"].shape == (4, 2)
