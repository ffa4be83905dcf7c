"""`with torch.no_grad():` in forward keeps its meaning in the imported graph (issue #34
gap (a)): fx runs the context manager but records nothing, so a frozen backbone imported
as trainable. Each value leaving the region is now detached (a StopGradient block); one
training step's gradients must be the module's own, weight by weight (None where the
module gives none)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from nodegraph.interop.export.weights import load_weights
from nodegraph.interop.importing import import_graph
from nodegraph.runtime.compile import compile_graph


class FrozenMiddle(nn.Module):
    """A stem trained through a skip path only, a frozen block, a trained head."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Linear(4, 8)
        self.backbone = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 8))
        self.head = nn.Linear(8, 2)

    def forward(self, x):
        h = self.stem(x)
        with torch.no_grad():
            feats = self.backbone(h).relu()
        return self.head(feats) + h[:, :2]


class GradToggled(nn.Module):
    """`torch.set_grad_enabled(False)` around one layer, gradients back on inside."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(4, 4)
        self.b = nn.Linear(4, 4)
        self.c = nn.Linear(4, 3)

    def forward(self, x):
        with torch.set_grad_enabled(False):
            y = self.a(x)
            with torch.enable_grad():
                z = self.b(x)
        return self.c(y * z)


def _gradients(module: nn.Module, x: torch.Tensor, tmp_path, tracer: str):
    """(the module's gradients, the imported graph's) of one loss, matched by value."""
    torch.manual_seed(0)
    imported = import_graph(module, (x,), tmp_path / "g.json", tracer=tracer)
    module.zero_grad(set_to_none=True)
    (module(x).float() - 1).pow(2).mean().backward()
    compiled = compile_graph(imported.graph, device="cpu", for_training=False)
    load_weights(compiled, imported.weights)
    compiled.module.train()
    values = {(p, "x"): v for p, v in zip(imported.placeholders, (x,), strict=True)}
    got = compiled.module.run(compiled.module.full_plan, values)
    [key] = imported.outputs
    (got[key].float() - 1).pow(2).mean().backward()
    theirs = list(compiled.module.parameters())
    pairs = []
    for name, p in module.named_parameters():
        [twin] = [q for q in theirs if q.shape == p.shape and torch.equal(q.detach(), p.detach())]
        pairs.append((name, p.grad, twin.grad))
    return pairs


@pytest.mark.parametrize("tracer", ["fx", "export"])
def test_a_no_grad_region_gives_the_module_s_gradients(tmp_path, tracer):
    pairs = _gradients(FrozenMiddle(), torch.randn(3, 4), tmp_path, tracer)
    frozen = [n for n, want, _ in pairs if want is None]
    assert frozen == ["backbone.0.weight", "backbone.0.bias", "backbone.2.weight",
                      "backbone.2.bias"]
    for name, want, got in pairs:
        if want is None:
            assert got is None, f"{name} got a gradient the module does not give it"
        else:
            assert got is not None and torch.allclose(got, want, atol=1e-6), name


def test_grad_turned_back_on_inside_a_region_is_followed(tmp_path):
    pairs = _gradients(GradToggled(), torch.randn(2, 4), tmp_path, "fx")
    assert [n for n, want, _ in pairs if want is None] == ["a.weight", "a.bias"]
    for name, want, got in pairs:
        assert (got is None) == (want is None), name
        if want is not None:
            assert torch.allclose(got, want, atol=1e-6), name
