"""The blocks added for imported models, against formulas and PyTorch, and the torch
equivalents every block declares (`BlockSpec.torch`), read back from real modules."""

from __future__ import annotations

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
