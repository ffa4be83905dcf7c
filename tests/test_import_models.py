"""Real architectures through `nodegraph import` and every way out of the graph.

Each case imports a torchvision or timm model (random weights, small configurations and
inputs), or a small module that shows one failure class of issue #15, and holds the graph
to the model: validation's output shape, the compiled graph (relative 1e-5), the Python
export, ONNX through onnxruntime (relative 1e-4), and one training step in which every
weight gets a gradient. torchvision and timm come with the `models` extra (`make setup`
installs it); without them those cases are skipped, saying so.
"""

from __future__ import annotations

import importlib.util

import pytest
import torch
from torch import nn

from nodegraph.interop.fx_roundtrip import round_trip
from nodegraph.model.groups import flatten

HAVE_TORCHVISION = importlib.util.find_spec("torchvision") is not None
HAVE_TIMM = importlib.util.find_spec("timm") is not None
needs_torchvision = pytest.mark.skipif(not HAVE_TORCHVISION, reason="torchvision is not "
                                       "installed: pip install -e '.[models]' (make setup)")
needs_timm = pytest.mark.skipif(not HAVE_TIMM, reason="timm is not installed: pip install "
                                "-e '.[models]' (make setup)")
COMPILED, PYTHON, ONNX = 1e-5, 1e-5, 1e-4


# -- small modules, one failure class each ------------------------------------------------------


class LstmHead(nn.Module):
    """`out, _ = lstm(x)` (an unused tuple element) and nn.LSTM(16, 32, num_layers=2)
    (positional constructor arguments through *args)."""

    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(16, 32, num_layers=2, batch_first=True)
        self.head = nn.Linear(32, 3)

    def forward(self, x):
        out, _ = self.lstm(x)
        return self.head(out[:, -1])


class Encoder(nn.Module):
    """nn.TransformerEncoder: under no_grad its fused path has no ONNX form."""

    def __init__(self):
        super().__init__()
        layer = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.head = nn.Linear(16, 2)

    def forward(self, x):
        return self.head(self.encoder(x).mean(dim=1))


class NormMlp(nn.Module):
    """BatchNorm1d on (N, C), imported on one sample."""

    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(16, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 3))

    def forward(self, x):
        return self.net(x)


class Huge(nn.Module):
    """Outputs near 1e5: ONNX's float rounding is relative."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(32, 10)

    def forward(self, x):
        return self.fc(x) * 1e5


class Gated(nn.Module):
    """chunk / split / unbind: tuple-returning methods read element by element."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 16)

    def forward(self, x):
        a, b = self.fc(x).chunk(2, dim=-1)
        c, d = torch.split(x, 4, dim=1)
        first = x.unbind(1)[0]
        return a * torch.sigmoid(b) + torch.cat([c, d], 1) + first[:, None]


class Recurrent(nn.Module):
    """nn.LSTM and nn.MultiheadAttention mapped to library blocks when they fit exactly
    (batch first, self-attention without a mask); `mapped=False` builds them time first,
    which the blocks are not: they stay opaque."""

    def __init__(self, mapped: bool = True):
        super().__init__()
        self.mapped = mapped
        self.lstm = nn.LSTM(8, 16, num_layers=2, bidirectional=True, batch_first=mapped)
        self.attention = nn.MultiheadAttention(32, 4, batch_first=mapped)
        self.head = nn.Linear(32, 3)

    def forward(self, x):
        if self.mapped:
            out, _ = self.lstm(x)
            a, _ = self.attention(out, out, out, need_weights=False)
        else:
            out, _ = self.lstm(x.transpose(0, 1))
            a, _ = self.attention(out, out, out)
            a = a.transpose(0, 1)
        return self.head(a.mean(1))


ALL = ("validate", "python", "onnx", "train")
# (id, class, input shape, ways out): batch norm cannot train on one sample (in PyTorch too)
CASES = [
    ("lstm", LstmHead, (2, 5, 16), ALL),
    ("transformer_encoder", Encoder, (2, 6, 16), ALL),
    ("batchnorm_batch1", NormMlp, (1, 16), ALL[:3]),
    ("huge_outputs", Huge, (2, 32), ALL),
    ("tuple_methods", Gated, (3, 8), ALL),
]
TV = "torchvision.models"
TORCHVISION = [  # (id, target, kwargs, input shape, slow)
    ("resnet18", f"{TV}:resnet18", {"num_classes": 10}, (2, 3, 32, 32), False),
    ("mobilenet_v3_small", f"{TV}:mobilenet_v3_small", {"num_classes": 10}, (2, 3, 32, 32),
     False),
    ("squeezenet1_1", f"{TV}:squeezenet1_1", {"num_classes": 10}, (2, 3, 64, 64), False),
    ("shufflenet_v2_x0_5", f"{TV}:shufflenet_v2_x0_5", {"num_classes": 10}, (2, 3, 32, 32),
     False),
    ("efficientnet_b0", f"{TV}:efficientnet_b0", {"num_classes": 10}, (2, 3, 32, 32), True),
    ("mnasnet0_5", f"{TV}:mnasnet0_5", {"num_classes": 10}, (2, 3, 32, 32), True),
    ("regnet_x_400mf", f"{TV}:regnet_x_400mf", {"num_classes": 10}, (2, 3, 32, 32), True),
    ("densenet_small_config", "torchvision.models.densenet:DenseNet",  # a 10-way cat
     {"growth_rate": 4, "block_config": [9, 2], "num_init_features": 8, "bn_size": 2,
      "num_classes": 10}, (2, 3, 32, 32), False),
    ("googlenet", f"{TV}:googlenet", {"num_classes": 10, "init_weights": False},  # aux heads
     (2, 3, 64, 64), True),
    ("convnext_tiny", f"{TV}:convnext_tiny", {"num_classes": 10}, (2, 3, 32, 32), True),
    ("vit_small_config", "torchvision.models.vision_transformer:VisionTransformer",
     {"image_size": 32, "patch_size": 8, "num_layers": 2, "num_heads": 2, "hidden_dim": 32,
      "mlp_dim": 64, "num_classes": 10}, (2, 3, 32, 32), False),
    ("swin_small_config", "torchvision.models.swin_transformer:SwinTransformer",
     {"patch_size": [4, 4], "embed_dim": 16, "depths": [2, 2], "num_heads": [2, 2],
      "window_size": [4, 4], "num_classes": 10}, (2, 3, 32, 32), False),
    ("lraspp_segmentation", "torchvision.models.segmentation:lraspp_mobilenet_v3_large",
     {"num_classes": 3, "weights_backbone": None}, (2, 3, 64, 64), True),
]
TIMM = [
    ("timm_resnet10t", "timm:resnet10t", {"num_classes": 10}, (2, 3, 32, 32), False),
    ("timm_mobilenetv3_small", "timm:mobilenetv3_small_050", {"num_classes": 10},
     (2, 3, 32, 32), False),
    ("timm_efficientnet_b0", "timm:efficientnet_b0", {"num_classes": 10}, (2, 3, 32, 32),
     True),
    ("timm_vit_small_config", "timm.models.vision_transformer:VisionTransformer",
     {"img_size": 32, "patch_size": 8, "embed_dim": 32, "depth": 2, "num_heads": 2,
      "num_classes": 10}, (2, 3, 32, 32), False),
    ("timm_mixer_small_config", "timm.models.mlp_mixer:MlpMixer",
     {"num_classes": 10, "img_size": 32, "patch_size": 8, "num_blocks": 2, "embed_dim": 32},
     (2, 3, 32, 32), False),
    ("timm_convmixer_small_config", "timm.models.convmixer:ConvMixer",
     {"dim": 32, "depth": 2, "kernel_size": 3, "patch_size": 4, "num_classes": 10},
     (2, 3, 32, 32), False),
    ("timm_levit", "timm:levit_128s", {"num_classes": 10}, (2, 3, 224, 224), True),
    ("timm_mobilevitv2", "timm:mobilevitv2_050", {"num_classes": 10}, (2, 3, 64, 64), True),
]


def _check(result, ways=ALL) -> None:
    assert not result.errors, result.errors
    assert result.shape_ok
    assert result.compiled <= COMPILED
    assert result.python <= PYTHON
    assert result.onnx <= ONNX
    assert result.trained or "train" not in ways


def _params(cases, needs):
    return [pytest.param(target, kwargs, shape, id=name,
                         marks=[needs, *([pytest.mark.slow] if slow else [])])
            for name, target, kwargs, shape, slow in cases]


@pytest.mark.parametrize("cls,shape,ways", [pytest.param(c, s, w, id=n)
                                            for n, c, s, w in CASES])
def test_failure_class_modules_round_trip(cls, shape, ways, tmp_path):
    torch.manual_seed(0)
    _check(round_trip(cls, (torch.randn(*shape),), tmp_path, ways=ways), ways)


@pytest.mark.parametrize("target,kwargs,shape", _params(TORCHVISION, needs_torchvision)
                         + _params(TIMM, needs_timm))
def test_architectures_round_trip(target, kwargs, shape, tmp_path):
    torch.manual_seed(0)
    _check(round_trip(target, (torch.randn(*shape),), tmp_path, dict(kwargs)))


@pytest.mark.parametrize("mapped", [True, False], ids=["blocks", "opaque"])
def test_lstm_and_attention_become_library_blocks_when_they_fit(mapped, tmp_path):
    """nn.LSTM -> recurrent.LSTM and nn.MultiheadAttention -> MultiHeadSelfAttention with
    the module's own weights (outputs equal); a call or a configuration the block does not
    compute stays an opaque module, equally exact."""
    from nodegraph.model.fileformat import load

    torch.manual_seed(0)
    result = round_trip(lambda: Recurrent(mapped), (torch.randn(2, 5, 8),), tmp_path)
    _check(result)
    types = {n.id: n.type for n in load(tmp_path / "model.json")}
    blocks = ("recurrent.LSTM", "attention.MultiHeadSelfAttention")
    assert (types["lstm"], types["attention"]) == (blocks if mapped else ("opaque.Module",) * 2)


@needs_torchvision
def test_library_blocks_replace_opaque_ones(tmp_path):
    """Hardswish, Hardsigmoid, AdaptiveAvgPool2d, SiLU and a 5-way cat are blocks."""
    from nodegraph.interop.fx_import import import_graph

    torch.manual_seed(0)
    graph = import_graph("torchvision.models:mobilenet_v3_small", torch.randn(2, 3, 32, 32),
                         tmp_path / "m.json", {"num_classes": 10}).graph
    types = {n.type for n in flatten(graph).graph}  # (the stages are groups)
    assert {"activations.Hardswish", "activations.Hardsigmoid",
            "layers.AdaptiveAvgPool2d"} <= types
    assert not any(t in ("opaque.Module", "opaque.Function") for t in types)
    text = (tmp_path / "m.json").read_text()
    assert "torch.nn:Hardswish" not in text


@needs_timm
def test_drop_path_keeps_its_train_eval_difference(tmp_path):
    """The trace runs in eval mode; a module that reads self.training stays a module."""
    import nodegraph
    from nodegraph.interop.fx_import import import_graph

    torch.manual_seed(0)
    imported = import_graph("timm:resnet10t", torch.randn(2, 3, 32, 32), tmp_path / "r.json",
                            {"num_classes": 4, "drop_path_rate": 0.5, "zero_init_last": False})
    graph = imported.graph
    assert any(n.params.get("target") == "timm.layers.drop:DropPath"
               for n in flatten(graph).graph)
    compiled = nodegraph.compile(graph, device="cpu", for_training=False)
    x, key = torch.randn(16, 3, 32, 32), imported.outputs[0]

    def run():
        return compiled.module.run(compiled.module.full_plan, {("x", "x"): x})[key]

    compiled.module.eval()
    assert torch.equal(run(), run())
    compiled.module.train()
    assert not torch.equal(run(), run())


class Shortcut(nn.Module):
    """A residual branch with torchvision's StochasticDepth: an opaque torchvision module."""

    def __init__(self):
        super().__init__()
        from nodegraph.model.packages import load_torchvision

        self.fc = nn.Linear(8, 8)
        self.drop = load_torchvision().ops.StochasticDepth(0.2, "row")

    def forward(self, x):
        return x + self.drop(self.fc(x))


@needs_torchvision
def test_exported_python_imports_torchvision_on_its_own(tmp_path):
    """The exported file of a graph with opaque torchvision blocks runs in a fresh Python
    without nodegraph's help (torchvision's ops declared by the file itself) and says what
    it needs."""
    import subprocess
    import sys

    torch.manual_seed(0)
    x = torch.randn(4, 8)
    result = round_trip(Shortcut, (x,), tmp_path, ways=("python",))
    assert not result.errors and result.opaque == 1 and result.python <= PYTHON
    code = (tmp_path / "model_export.py").read_text()
    assert "pip install torchvision" in code and "load_torchvision()" in code
    script = (
        "import runpy, sys, numpy, torch\n"
        "from safetensors.torch import load_file\n"
        f"ns = runpy.run_path({str(tmp_path / 'model_export.py')!r})\n"
        "assert 'nodegraph' not in sys.modules\n"
        "model = ns['Shortcut']().eval()\n"
        f"model.load_state_dict(load_file({str(tmp_path / 'model.safetensors')!r}))\n"
        f"x = torch.as_tensor(numpy.load({str(tmp_path / 'model.inputs.npz')!r})['x'])\n"
        "with torch.no_grad():\n"
        "    print(float(model(x).sum()))\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          cwd=tmp_path, env={"PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"},
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    import numpy as np

    want = float(np.load(tmp_path / "model.inputs.npz")["output"].sum())  # the module's own
    assert abs(float(done.stdout.split()[-1]) - want) <= 1e-4 * max(1.0, abs(want))


@needs_torchvision
@pytest.mark.slow
def test_googlenet_keeps_its_training_only_aux_heads(tmp_path):
    """googlenet computes its two auxiliary classifiers only while training: the graph has
    them as extra outputs after the logits, with their weights; in eval mode its logits are
    the module's, and a training step gives every weight, the aux heads' too, a gradient."""
    from nodegraph.interop.fx_import import import_graph

    torch.manual_seed(0)
    x = torch.randn(2, 3, 64, 64)
    imported = import_graph("torchvision.models:googlenet", x, tmp_path / "g.json",
                            {"num_classes": 10, "init_weights": False})
    assert len(imported.outputs) == 3 and len(imported.reference) == 1
    assert len(imported.graph.extra["imported"]["training_outputs"]) == 2
    assert any(k.startswith("aux1_fc2") for k in imported.weights)
    result = round_trip("torchvision.models:googlenet", (x,), tmp_path / "rt",
                        {"num_classes": 10, "init_weights": False}, ways=("validate", "train"))
    assert not result.errors and result.compiled <= COMPILED and result.trained


class TrainScaled(nn.Module):
    """A head only training computes, but training also changes the main output: the
    training trace is not the eval one plus heads, so the eval trace is kept."""

    def __init__(self):
        super().__init__()
        self.fc, self.aux = nn.Linear(4, 4), nn.Linear(4, 2)

    def forward(self, x):
        x = self.fc(x)
        if self.training:
            return x * 2, self.aux(x)
        return x


def test_training_heads_are_kept_only_when_the_eval_outputs_stay_the_same(tmp_path):
    from nodegraph.interop.fx_import import import_graph

    torch.manual_seed(0)
    imported = import_graph(TrainScaled, torch.randn(3, 4), tmp_path / "t.json")
    assert len(imported.outputs) == 1 and "training_outputs" not in imported.graph.extra[
        "imported"]
    assert not any(k.startswith("aux") for k in imported.weights)


class AddsIndex(nn.Module):
    """Makes a large tensor in forward (not a buffer): fx turns it into a constant."""

    def forward(self, x):
        return x + torch.arange(2048.0).reshape(1, 2048) / 2048


class Indexed(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc, self.index = nn.Linear(4, 2048), AddsIndex()

    def forward(self, x):
        return self.index(self.fc(x)).mean(1, keepdim=True)


def test_a_large_tensor_made_in_forward_keeps_its_module_whole(tmp_path):
    """timm's swin made a 2401-value index while traced: its module is one opaque block."""
    from nodegraph.model.fileformat import load

    torch.manual_seed(0)
    _check(round_trip(Indexed, (torch.randn(3, 4),), tmp_path))
    assert load(tmp_path / "model.json").node("index").type == "opaque.Module"
