"""`nodegraph import` as a new user meets it (issue #15): targets as torchvision and timm
name them, token inputs, weights that travel with the graph, exports that say which
weights they carry, a graph that trains at once, files that can move."""

from __future__ import annotations

import importlib.util
import json
import shutil
import textwrap

import numpy as np
import pytest
import torch

import nodegraph
from nodegraph.cli.main import main

MODELS = textwrap.dedent('''
    import torch
    from torch import nn


    class MLP(nn.Module):
        def __init__(self, width, classes=3):
            super().__init__()
            self.net = nn.Sequential(nn.Linear(16, width), nn.BatchNorm1d(width), nn.ReLU(),
                                     nn.Linear(width, classes))

        def forward(self, x):
            return self.net(x)


    def make_mlp(width=8):
        """A factory, as torchvision and timm expose their models."""
        return MLP(width)


    class Tokens(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(50, 8)
            self.head = nn.Linear(8, 2)

        def forward(self, t):
            return self.head(self.emb(t).mean(dim=1))


    class Branchy(nn.Module):
        def __init__(self):
            super().__init__()
            self.gate = Gate()
            self.out = nn.Linear(4, 2)

        def forward(self, x):
            return self.out(self.gate(x))


    class Gate(nn.Module):
        def forward(self, x):
            if x.sum() > 0:  # control flow on a tensor's value: fx cannot follow it
                return x
            return -x
''')


@pytest.fixture
def models(tmp_path, monkeypatch):
    """mymodels.py in its own folder; the commands run from another one."""
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "mymodels.py").write_text(MODELS)
    (tmp_path / "work").mkdir()
    monkeypatch.chdir(tmp_path / "work")
    monkeypatch.syspath_prepend(str(tmp_path / "lib"))  # as the import puts it, undone after
    yield tmp_path / "lib" / "mymodels.py"


def _module(path, name, **kwargs):
    spec = importlib.util.spec_from_file_location("mymodels", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, name)(**kwargs)


def test_a_file_path_target_a_factory_and_missing_arguments(models, capsys):
    assert main(["import", "elsewhere_models:MLP", "-o", "m.json", "--input-shape", "4,16"]) == 1
    err = capsys.readouterr().err
    assert "cannot import 'elsewhere_models'" in err and "path/to/elsewhere_models.py" in err
    assert main(["import", f"{models}:MLP", "-o", "m.json", "--input-shape", "4,16"]) == 1
    err = capsys.readouterr().err
    assert "needs the constructor argument width" in err and "--kwargs" in err
    assert "internal error" not in err
    assert main(["import", f"{models}:make_mlp", "-o", "m.json", "--input-shape", "4,16",
                 "--kwargs", '{"width": 5}']) == 0
    graph = nodegraph.load("m.json")
    assert graph.nodes["net_0"].params["out_features"] == 5


def test_token_inputs_from_a_shape_and_a_vocabulary(models):
    assert main(["import", f"{models}:Tokens", "-o", "t.json", "--input-shape", "4,7",
                 "--input-dtype", "long", "--vocab", "50"]) == 0
    with np.load("t.inputs.npz") as archive:
        tokens = archive["t"]
    assert tokens.dtype == np.int64 and tokens.shape == (4, 7)
    assert 0 <= tokens.min() and tokens.max() < 50
    assert nodegraph.validate(nodegraph.load("t.json")).ok


def test_the_graph_references_its_weights_relatively_and_compile_loads_them(models, tmp_path):
    assert main(["import", f"{models}:MLP", "-o", "m.json", "--input-shape", "4,16",
                 "--kwargs", '{"width": 8}']) == 0
    text = json.loads((tmp_path / "work" / "m.json").read_text())
    assert text["imported"]["weights"] == "m.safetensors"
    assert str(tmp_path) not in json.dumps(text)  # no absolute paths: the folder can move
    shutil.move(tmp_path / "work", tmp_path / "moved")
    graph = nodegraph.load(tmp_path / "moved" / "m.json")
    with np.load(tmp_path / "moved" / "m.inputs.npz") as archive:
        x, expected = torch.as_tensor(archive["x"]), torch.as_tensor(archive["output"])
    compiled = nodegraph.compile(graph, device="cpu", for_training=False)
    compiled.module.eval()
    with torch.no_grad():
        got = compiled.module.run(compiled.module.full_plan, {("x", "x"): x})
    assert torch.allclose(got[("net_3", "output")], expected, atol=1e-6)


def test_exports_carry_the_imported_weights_and_say_so(models, capsys):
    import onnxruntime

    assert main(["import", f"{models}:MLP", "-o", "m.json", "--input-shape", "4,16",
                 "--kwargs", '{"width": 8}']) == 0
    capsys.readouterr()
    assert main(["export", "m.json", "--to", "onnx", "-o", "m.onnx"]) == 0
    out = capsys.readouterr()
    assert "weights: the imported weights in m.safetensors" in out.out
    assert "untrained" not in out.err
    with np.load("m.inputs.npz") as archive:
        x, expected = archive["x"], archive["output"]
    got = onnxruntime.InferenceSession("m.onnx").run(None, {"x": x})[0]
    assert np.allclose(got, expected, atol=1e-5)
    assert main(["export", "m.json", "--to", "weights", "-o", "w.safetensors"]) == 0
    assert "imported weights" in capsys.readouterr().out


def test_an_export_of_untrained_weights_warns_and_train_is_honoured(tmp_path, capsys):
    xor = str(nodegraph.__path__[0]).rsplit("/", 1)[0] + "/examples/xor.json"
    assert main(["export", xor, "--to", "onnx", "-o", str(tmp_path / "a.onnx")]) == 0
    out = capsys.readouterr()
    assert "UNTRAINED" in out.out and "warning: these weights are untrained" in out.err
    assert main(["export", xor, "--to", "onnx", "--train", "-o", str(tmp_path / "b.onnx")]) == 0
    out = capsys.readouterr()
    assert "trained here (--train)" in out.out and "warning" not in out.err


def test_loss_and_optimizer_on_import_make_it_trainable(models, capsys):
    assert main(["import", f"{models}:MLP", "-o", "m.json", "--input-shape", "4,16",
                 "--kwargs", '{"width": 8}']) == 0
    capsys.readouterr()
    assert main(["validate", "m.json"]) == 0
    assert "forward-only" in capsys.readouterr().out
    assert main(["import", f"{models}:MLP", "-o", "m.json", "--input-shape", "4,16",
                 "--kwargs", '{"width": 8}', "--loss", "cross_entropy",
                 "--optimizer", "adam"]) == 0
    capsys.readouterr()
    assert main(["validate", "m.json"]) == 0
    assert "forward-only" not in capsys.readouterr().out
    assert main(["run", "m.json", "--epochs", "2", "--quiet"]) == 0


def test_positions_follow_a_layered_layout(models):
    assert main(["import", f"{models}:MLP", "-o", "m.json", "--input-shape", "4,16",
                 "--kwargs", '{"width": 8}']) == 0
    graph = nodegraph.load("m.json")
    positions = graph.ui["positions"]
    assert set(positions) == set(graph.nodes)
    for edge in graph.edges:
        assert positions[edge.src][0] < positions[edge.dst][0]


def test_control_flow_keeps_its_module_whole_and_leaf_names_more(models, capsys):
    assert main(["import", f"{models}:Branchy", "-o", "b.json", "--input-shape", "4,4"]) == 0
    graph = nodegraph.load("b.json")
    assert graph.nodes["gate"].type == "opaque.Module"
    assert main(["import", f"{models}:MLP", "-o", "m.json", "--input-shape", "4,16",
                 "--kwargs", '{"width": 8}', "--leaf", "net"]) == 0
    assert nodegraph.load("m.json").nodes["net"].type == "opaque.Module"
    assert main(["import", f"{models}:MLP", "-o", "m.json", "--input-shape", "4,16",
                 "--kwargs", '{"width": 8}', "--leaf", "nope"]) == 1
    assert "--leaf nope" in capsys.readouterr().err


def test_batch_norm_on_one_sample_validates(models):
    assert main(["import", f"{models}:MLP", "-o", "m.json", "--input-shape", "1,16",
                 "--kwargs", '{"width": 8}']) == 0
    assert nodegraph.validate(nodegraph.load("m.json")).ok


@pytest.mark.skipif(importlib.util.find_spec("torchvision") is None,
                    reason="torchvision is not installed: pip install -e '.[models]'")
def test_a_torchvision_factory(models, capsys):
    assert main(["import", "torchvision.models:squeezenet1_1", "-o", "s.json",
                 "--input-shape", "2,3,64,64", "--kwargs", '{"num_classes": 5}']) == 0
    assert "0 opaque" not in capsys.readouterr().out
    assert nodegraph.validate(nodegraph.load("s.json")).ok


@pytest.mark.skipif(importlib.util.find_spec("timm") is None,
                    reason="timm is not installed: pip install -e '.[models]'")
def test_a_timm_name(models):
    assert main(["import", "timm:resnet10t", "-o", "r.json", "--input-shape", "2,3,32,32",
                 "--kwargs", '{"num_classes": 4}']) == 0
    graph = nodegraph.load("r.json")
    assert graph.extra["imported"]["source"] == "timm:create_model"


def test_a_node_changed_after_the_import_starts_fresh_the_rest_keeps_its_weights(models):
    assert main(["import", f"{models}:MLP", "-o", "m.json", "--input-shape", "4,16",
                 "--kwargs", '{"width": 8}']) == 0
    graph = nodegraph.load("m.json")
    graph.set_param("net_3", "out_features", 5)  # a new head
    from safetensors.torch import load_file

    saved = load_file("m.safetensors")
    with pytest.warns(UserWarning, match="net_3"):
        compiled = nodegraph.compile(graph, device="cpu", for_training=False)
    state = compiled.module.block_state()
    assert torch.equal(state["net_0.weight"], saved["net_0.weight"])
    assert state["net_3.weight"].shape == (5, 8)
