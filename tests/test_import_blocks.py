"""The blocks added for imported models, against formulas and PyTorch, and the torch
equivalents every block declares (`BlockSpec.torch`), read back from real modules."""

from __future__ import annotations

from contextlib import contextmanager

import pytest
import torch
from blockcheck import run_op
from torch import nn
from torch.nn import functional as F

from nodegraph.model.errors import PortError
from nodegraph.model.spec import default_registry, torch_functions, torch_modules


@pytest.mark.parametrize("name, formula", [
    ("ReLU6", lambda x: x.clamp(0, 6)),
    ("Hardswish", lambda x: x * (x + 3).clamp(0, 6) / 6),
    ("Hardsigmoid", lambda x: (x + 3).clamp(0, 6) / 6),
])
def test_hard_activations_follow_their_formulas(name, formula):
    x = torch.linspace(-8, 8, 161)
    assert torch.allclose(run_op(f"activations.{name}", {"input": x}), formula(x), atol=1e-6)


def test_adaptive_avg_pool_matches_torch_and_averages_windows():
    x = torch.randn(2, 3, 7, 5)
    out = run_op("layers.AdaptiveAvgPool2d", {"input": x}, output_size=[2, 3])
    assert torch.allclose(out, F.adaptive_avg_pool2d(x, (2, 3)))
    # window i covers rows floor(i·H/H_out) .. ceil((i+1)·H/H_out): rows 0..3 for i = 0
    assert torch.allclose(out[:, :, 0, 0], x[:, :, 0:4, 0:2].mean((2, 3)))
    whole = run_op("layers.AdaptiveAvgPool2d", {"input": x})
    assert whole.shape == (2, 3, 1, 1) and torch.allclose(whole[..., 0, 0], x.mean((2, 3)))


def test_concat_joins_up_to_eight_parts_in_port_order():
    parts = {p: torch.full((2, i + 1), float(i)) for i, p in enumerate("abcde")}
    out = run_op("layers.Concat", parts, dim=1)
    assert torch.equal(out, torch.cat(list(parts.values()), 1))
    with pytest.raises(PortError, match="'c'"):
        run_op("layers.Concat", {"a": torch.randn(2, 3), "b": torch.randn(2, 3),
                                 "c": torch.randn(3, 3)}, dim=1)


def test_declared_torch_equivalents_give_params_that_rebuild_the_module():
    """For each declared module class: the block built from the params it declares for a
    module computes what the module computes, with the module's weights."""
    registry = default_registry()
    examples = {nn.Linear: (nn.Linear(4, 3), (2, 4)), nn.Conv2d: (nn.Conv2d(2, 4, 3, 2, 1),
                                                                   (2, 2, 9, 9)),
                nn.Hardswish: (nn.Hardswish(), (2, 5)), nn.ReLU6: (nn.ReLU6(), (2, 5)),
                nn.AdaptiveAvgPool2d: (nn.AdaptiveAvgPool2d((3, 2)), (2, 2, 7, 6)),
                nn.LayerNorm: (nn.LayerNorm(6), (2, 6)), nn.MaxPool2d: (nn.MaxPool2d(3, 2, 1),
                                                                       (2, 1, 8, 8))}
    modules = torch_modules(registry)
    for cls, (module, shape) in examples.items():
        spec = modules[cls]
        params = spec.torch.params(module)
        x = torch.randn(shape)
        values, problems = spec.resolve_params(params)
        assert not problems, (spec.id, problems)
        block = spec.build(values, {"input": torch.empty(shape, device="meta")})
        block.load_state_dict(module.state_dict())
        assert torch.allclose(block(x), module(x), atol=1e-6), spec.id
    functions = torch_functions(registry)
    assert [s.id for s in functions[F.hardswish]] == ["activations.Hardswish"]
    assert [s.id for s in functions["add"]] == ["layers.Add"]


@pytest.mark.parametrize("module", [
    nn.Linear(3, 4, bias=False), nn.Conv2d(3, 8, 3, stride=2, padding=1, bias=False),
    nn.LayerNorm(8, eps=1e-3), nn.BatchNorm2d(4, momentum=0.3),
    nn.Embedding(10, 4, padding_idx=0), nn.MaxPool2d(3, 2, 1), nn.GELU("tanh"),
    nn.Softmax(dim=1), nn.Dropout(0.3), nn.ConvTranspose2d(3, 4, 2, stride=2), nn.PReLU(3),
    nn.Flatten(2), nn.ReLU(inplace=True)], ids=lambda m: type(m).__name__)
def test_the_python_export_writes_declared_modules_from_the_declaration(module):
    """The export's constructor call comes from `BlockSpec.torch` and the module's own
    attributes (no recording): rebuilt from it, the module is the same."""
    from nodegraph.interop.export.declared import torch_call

    spec = torch_modules(default_registry())[type(module)]
    call = torch_call(spec, module)
    assert call is not None and call.cls is type(module)
    rebuilt = call.cls(**call.args)
    assert rebuilt.extra_repr() == module.extra_repr()
    assert spec.torch.params(rebuilt) == spec.torch.params(module)


def test_modules_the_declaration_does_not_describe_are_left_to_the_recording():
    """A subclass of a declared class (the LSTM block's own, which returns (output,
    last)) or a configuration the attributes do not show is not written from it."""
    from nodegraph.interop.export.declared import torch_call
    from nodes.recurrent import TorchLSTM

    modules = torch_modules(default_registry())
    assert torch_call(modules[nn.LSTM], TorchLSTM(4, 8, batch_first=True)) is None
    assert torch_call(modules[nn.Linear], nn.Conv2d(2, 2, 1)) is None
    assert torch_call(None, nn.Linear(2, 2)) is None


def test_an_exported_graph_writes_torch_layers_from_their_declarations(tmp_path, monkeypatch):
    """Built while nothing is recorded, a graph's Linear and LayerNorm are still written as
    nn.Linear / nn.LayerNorm calls, and the file computes what the graph computes."""
    import nodegraph
    from nodegraph.interop.export import python as exporter
    from nodegraph.interop.export.record import Recorder

    g = nodegraph.Graph("declared")
    g.add("data.Blobs", "data", n=64)
    g.add("layers.Linear", "fc", out_features=8)
    g.add("norm.LayerNorm", "ln")
    g.connect(("data", "x"), ("fc", "input"))
    g.connect(("fc", "output"), ("ln", "input"))

    class Blind(Recorder):  # sees every constructor call but the two layers'
        def get(self, obj):
            return None if isinstance(obj, nn.Linear | nn.LayerNorm) else super().get(obj)

    @contextmanager
    def blind(*bases):
        with real(*bases) as recorder:
            recorder.__class__ = Blind
            yield recorder

    real = exporter.recording
    monkeypatch.setattr(exporter, "recording", blind)
    exported = exporter.to_python(g, tmp_path / "declared.py")
    text = exported.path.read_text()
    assert "self.fc = nn.Linear(2, 8)" in text and "self.ln = nn.LayerNorm((8,))" in text
