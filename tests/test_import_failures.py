"""The failure classes of issue #26, item 2, one regression test each: what used to be
refused or silently wrong on modules written the usual way now imports and equals the
module in the graph, the Python export and ONNX, or is refused naming the user's line."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
import torch
from torch import nn
from torch.nn import functional as F

import nodegraph
from nodegraph.interop.fx_import import import_graph
from nodegraph.interop.fx_roundtrip import round_trip
from nodegraph.model.errors import NodegraphError

ALL = ("validate", "python", "onnx", "train")


def _ok(result, ways=ALL):
    assert not result.errors, result.errors
    assert result.compiled <= 1e-5 and result.python <= 1e-5 and result.onnx <= 1e-4
    assert result.trained or "train" not in ways


class DictOut(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)

    def forward(self, x):
        return {"logits": self.fc(x), "features": torch.relu(x)}


@dataclass
class Output:
    logits: torch.Tensor
    hidden: torch.Tensor


class DataclassOut(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)

    def forward(self, x):
        return Output(logits=self.fc(x), hidden=x * 2)


@pytest.mark.parametrize("cls", [DictOut, DataclassOut])
def test_every_output_of_a_dict_or_dataclass_is_kept(cls, tmp_path):
    result = round_trip(cls, (torch.randn(2, 4),), tmp_path)
    _ok(result)  # round_trip compares every output: graph, Python export and ONNX
    graph = nodegraph.load(tmp_path / "model.json")
    assert len(graph.extra["imported"]["outputs"]) == 2


class Masked(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x, mask):
        return self.fc(x).masked_fill(~mask, 0.0)


def test_a_boolean_input_stays_boolean(tmp_path):
    inputs = (torch.randn(2, 5, 4), torch.rand(2, 5, 4) > 0.5)
    _ok(round_trip(Masked, inputs, tmp_path))
    report = nodegraph.validate(nodegraph.load(tmp_path / "model.json"))
    assert report.outputs[("mask", "x")].dtype == torch.bool


class SquareOnly(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)

    def forward(self, x):
        h, w = x.shape[-2:]
        if h != w:
            raise ValueError("square images only")
        return self.conv(x)


def test_a_shape_check_in_the_roots_forward_is_decided_at_import_and_recorded(tmp_path):
    result = round_trip(SquareOnly, (torch.randn(2, 3, 8, 8),), tmp_path,
                        others=[(torch.randn(2, 3, 16, 16),)])
    _ok(result)
    assert result.resized <= 1e-5
    checks = nodegraph.load(tmp_path / "model.json").extra["imported"]["size_checks"]
    assert len(checks) == 1 and "test_import_failures.py" in checks[0]
    assert "if h != w:" in checks[0] and "False" in checks[0]
    # the guard holds the check: a size that takes the other branch is refused, by name
    refused = round_trip(SquareOnly, (torch.randn(2, 3, 8, 8),), tmp_path / "again",
                         ways=(), others=[(torch.randn(2, 3, 8, 12),)])
    assert refused.errors["resized"].startswith("refused:")
    assert "if h != w:" in refused.errors["resized"]
    assert "take the other one" in refused.errors["resized"]


class CheckAfterLayers(nn.Module):
    """RAFT's check: sizes of a tensor the root's layers made, read entry by entry
    (`any(s < m for s in f.shape[-2:])`); the layers run for the check must give tensors,
    not fx's proxies (which sent the check into itself for minutes)."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, stride=2, padding=1)
        self.fc = nn.Linear(4, 2)

    def forward(self, x):
        features = self.conv(x)
        if any(size < 2 for size in features.shape[-2:]):
            raise ValueError("images of 4 pixels at least")
        return self.fc(features.mean((2, 3)))


def test_a_size_check_after_the_roots_layers_iterates_the_shape(tmp_path):
    result = round_trip(CheckAfterLayers, (torch.randn(2, 3, 8, 8),), tmp_path,
                        others=[(torch.randn(5, 3, 8, 8),), (torch.randn(2, 3, 12, 10),)])
    refused = result.errors.pop("resized")  # the check reads a layer's output: no
    _ok(result)  # expression of the inputs' sizes, so they stay the example's (the batch
    assert result.resized <= 1e-5  # follows)
    assert refused.startswith("refused:") and "imported at size 8 in dim 2" in refused
    graph = nodegraph.load(tmp_path / "model.json")
    checks = graph.extra["imported"]["size_checks"]
    assert len(checks) == 2 and all("size < 2" in c and "False" in c for c in checks)


class Branchy(nn.Module):
    """A size check in a submodule keeps that submodule whole (right at every size)."""

    def __init__(self):
        super().__init__()
        self.inner = SquareOnly()

    def forward(self, x):
        return self.inner(x) * 2


def test_a_size_check_in_a_submodule_keeps_the_submodule_whole(tmp_path):
    result = round_trip(Branchy, (torch.randn(2, 3, 8, 8),), tmp_path,
                        others=[(torch.randn(2, 3, 12, 12),)])
    _ok(result)
    assert result.resized <= 1e-5
    types = {n.type for n in nodegraph.load(tmp_path / "model.json")}
    assert "opaque.Module" in types


class ValueBranch(nn.Module):
    def forward(self, x):
        if x.sum() > 0:  # on values: no size check
            return x
        return -x


def test_a_branch_on_values_is_still_refused_at_the_users_line(tmp_path):
    with pytest.raises(NodegraphError, match=r"test_import_failures.py:\d+ \(`if x.sum"):
        import_graph(ValueBranch, (torch.randn(2, 3),), tmp_path / "v.json")


class Rearranged(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 5)

    def forward(self, x):
        import einops

        return self.fc(einops.rearrange(x, "b c h w -> b (h w) c"))


def test_einops_is_refused_at_the_users_line_with_what_to_do(tmp_path):
    pytest.importorskip("einops")
    with pytest.raises(NodegraphError, match=r"at test_import_failures.py:\d+ "
                       r"\(`return self.fc\(einops.rearrange.*flatten\(2\).*--leaf"):
        import_graph(Rearranged, (torch.randn(2, 3, 4, 4),), tmp_path / "e.json")


class TwiceCalled(nn.Module):
    """One Linear applied twice: the graph ties its two blocks' weights."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        return self.fc(torch.tanh(self.fc(x)))


def test_a_module_called_twice_shares_its_weights(tmp_path):
    _ok(round_trip(TwiceCalled, (torch.randn(3, 4),), tmp_path))
    graph = nodegraph.load(tmp_path / "model.json")
    assert {(t.src, t.src_param, t.dst, t.dst_param) for t in graph.ties} == {
        ("fc", "weight", "fc_1", "weight"), ("fc", "bias", "fc_1", "bias")}


class Folded(nn.Module):
    def forward(self, x):
        return F.fold(x, output_size=(4, 4), kernel_size=2, stride=2)


def test_onnx_opset_is_an_option(tmp_path):
    from nodegraph.interop.export import to_onnx

    imported = import_graph(Folded, (torch.randn(2, 12, 4),), tmp_path / "f.json")
    outputs = [f"{n}.{p}" for n, p in imported.outputs]
    with pytest.raises(NodegraphError, match="--opset 3"):
        to_onnx(imported.graph, tmp_path / "f.onnx", outputs=outputs, opset=3)
    exported = to_onnx(imported.graph, tmp_path / "f.onnx", outputs=outputs, opset=18)
    assert exported.max_difference is not None and exported.max_difference < 1e-5
    import onnx

    assert onnx.load(str(exported.path)).opset_import[0].version == 18


def test_inputs_npz_keeps_boolean_and_integer_dtypes(tmp_path):
    from nodegraph.cli.main import main

    np.savez(tmp_path / "in.npz", x=np.random.randn(2, 5, 4).astype("float32"),
             mask=np.random.rand(2, 5, 4) > 0.5)
    assert main(["import", "test_import_failures:Masked", "-o", str(tmp_path / "m.json"),
                 "--inputs", str(tmp_path / "in.npz")]) == 0
    report = nodegraph.validate(nodegraph.load(tmp_path / "m.json"))
    assert report.ok, report.problems


needs_timm = pytest.mark.skipif(not __import__("importlib").util.find_spec("timm"),
                                reason="timm is not installed")


def _timm_layers():
    from nodegraph.model.packages import load_torchvision

    load_torchvision()  # timm imports torchvision, which needs help beside a CPU torch
    import timm.layers

    return timm.layers


@needs_timm
def test_timm_same_padding_norm_act_and_channels_last_norm(tmp_path):
    """Dynamic 'SAME' padding (Conv2dSame) keeps its padding at every size; BatchNormAct2d
    becomes BatchNorm2d + ReLU and LayerNorm2d permute + LayerNorm + permute blocks."""
    layers = _timm_layers()

    class TimmBits(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = layers.create_conv2d(3, 8, 3, stride=2, padding="same")
            self.bn = layers.BatchNormAct2d(8, act_layer=nn.ReLU)
            self.ln = layers.LayerNorm2d(8)

        def forward(self, x):
            return self.ln(self.bn(self.conv(x)))

    torch.manual_seed(0)
    model = TimmBits()
    model.bn.running_mean.uniform_(-1, 1)
    result = round_trip(model, (torch.randn(2, 3, 15, 15),), tmp_path,
                        others=[(torch.randn(2, 3, 20, 17),), (torch.randn(1, 3, 8, 9),)])
    _ok(result)
    assert result.resized <= 1e-5 and result.resized_onnx <= 1e-4
    types = [n.type for n in nodegraph.load(tmp_path / "model.json")]
    assert types.count("norm.BatchNorm2d") == 1 and "activations.ReLU" in types
    assert types.count("layers.Permute") == 2 and "norm.LayerNorm" in types


class Features(nn.Module):
    """The features are an output and also feed the logits: no sink, so no 'head'."""

    def __init__(self):
        super().__init__()
        self.fc, self.head = nn.Linear(4, 6), nn.Linear(6, 3)

    def forward(self, x):
        features = torch.relu(self.fc(x))
        return {"logits": self.head(features), "features": features}


def test_the_onnx_export_of_an_import_has_every_output_by_default(tmp_path):
    from nodegraph.cli.main import main

    assert main(["import", "test_import_failures:Features", "-o", str(tmp_path / "d.json"),
                 "--input-shape", "2,4", "--loss", "mse", "--optimizer", "adam"]) == 0
    assert main(["export", str(tmp_path / "d.json"), "--to", "onnx",
                 "-o", str(tmp_path / "d.onnx")]) == 0
    import onnx

    assert len(onnx.load(str(tmp_path / "d.onnx")).graph.output) == 2


def test_the_python_export_of_an_import_returns_every_output(tmp_path):
    from nodegraph.interop.export import to_python

    imported = import_graph(Features, (torch.randn(2, 4),), tmp_path / "f.json", loss="mse",
                            optimizer="adam")
    exported = to_python(imported.graph, tmp_path / "f.py")
    namespace: dict = {"__name__": "exported"}
    exec(compile(exported.path.read_text(), str(exported.path), "exec"), namespace)
    model = namespace[exported.class_name]()
    model.load_state_dict(imported.weights, strict=False)
    x = torch.randn(3, 4)
    with torch.no_grad():
        got, want = model.eval()(x), imported.module(x)
    assert len(got) == 2
    assert torch.allclose(got[0], want["logits"]) and torch.allclose(got[1], want["features"])


class AdaptiveHead(nn.Module):
    """AdaptiveAvgPool2d((7, 7)) as VGG ends: ONNX writes it only for a known input size."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        self.pool = nn.AdaptiveAvgPool2d((7, 7))
        self.fc = nn.Linear(196, 2)

    def forward(self, x):
        return self.fc(self.pool(self.conv(x)).flatten(1))


def test_onnx_falls_back_to_the_examples_sizes_where_an_op_needs_them(tmp_path):
    result = round_trip(AdaptiveHead, (torch.randn(2, 3, 16, 16),), tmp_path)
    _ok(result)  # the ONNX file is exact at the example's size (dynamic batch only)


class BufferFlag(nn.Module):
    """Branches on a buffer's value: with buffers as nodes fx cannot follow it, so the
    import traces again with buffers read as the tensors they are."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.register_buffer("initialized", torch.tensor(True))

    def forward(self, x):
        if self.initialized:
            return self.fc(x)
        return x


def test_a_branch_on_a_buffer_value_imports_through_the_cautious_trace(tmp_path):
    result = round_trip(BufferFlag, (torch.randn(2, 4),), tmp_path,
                        others=[(torch.randn(5, 4),)])
    _ok(result)
    assert result.resized == 0.0


class WeightDevice(nn.Module):
    """edgenext's positional encoding: a tensor made on `self.proj.weight.device`."""

    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 4)

    def forward(self, x):
        device, dtype = self.proj.weight.device, self.proj.weight.dtype
        steps = torch.arange(x.shape[1], device=device, dtype=dtype)
        return self.proj(x + steps)


def test_a_weight_read_for_its_device_is_no_second_copy_of_it(tmp_path):
    result = round_trip(WeightDevice, (torch.randn(2, 4),), tmp_path)
    _ok(result)  # every weight trains: no untrained copy of proj.weight
    graph = nodegraph.load(tmp_path / "model.json")
    assert "layers.Parameter" not in {n.type for n in graph}
    [arange] = [n for n in graph if n.params.get("function") == "torch:arange"]
    assert arange.params["kwargs"]["device"] == {"device": 0}  # the input's device


class FixedSize(nn.Module):
    def forward(self, x):
        assert x.shape[-1] == 8, "this model takes 8 features"
        return x * 2


def test_inputs_the_module_itself_refuses_are_named_as_such(tmp_path):
    with pytest.raises(NodegraphError, match=r"FixedSize itself fails on the example inputs "
                       r"\[\(2, 5\)\] at test_import_failures.py:\d+ .*takes 8 features.*"
                       r"--input-shape"):
        import_graph(FixedSize, (torch.randn(2, 5),), tmp_path / "f.json")
