"""A module's weight also read directly in forward is one tensor in the graph: diffusers'
VQModel searches its codebook (`nn.Embedding`) with `torch.cdist(z, self.embedding.weight)`
and then looks the codes up through the module. The read became a `layers.Parameter`
copy of its own, which got no gradient and would drift from the embedding's in training.
It is now tied to the module's weight; one step's gradient is the module's."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from nodegraph.interop.export.weights import load_weights
from nodegraph.interop.importing import import_graph
from nodegraph.runtime.compile import compile_graph


class Codebook(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(4, 3)
        self.embedding = nn.Embedding(8, 3)

    def forward(self, x):
        z = self.proj(x)
        codes = torch.cdist(z, self.embedding.weight).argmin(dim=1)
        zq = self.embedding(codes)
        commit = ((zq - z.detach()) ** 2).mean()
        return z + (zq - z).detach(), commit


@pytest.mark.parametrize("tracer", ["fx", "export"])
def test_a_weight_read_in_forward_is_tied_to_its_module(tmp_path, tracer):
    torch.manual_seed(0)
    module, x = Codebook(), torch.randn(6, 4)
    imported = import_graph(module, (x,), tmp_path / "g.json", tracer=tracer)
    assert any(t.src_param == "value" or t.dst_param == "value" for t in imported.graph.ties)
    sample, commit = module(x)
    ((sample - 1).pow(2).mean() + (commit - 1).pow(2)).backward()
    compiled = compile_graph(imported.graph, device="cpu", for_training=False)
    load_weights(compiled, imported.weights)
    values = {(p, "x"): v for p, v in zip(imported.placeholders, (x,), strict=True)}
    got = compiled.module.run(compiled.module.full_plan, values)
    sum((got[k] - 1).pow(2).mean() for k in imported.outputs).backward()
    params = list(dict.fromkeys(compiled.module.parameters()))
    book = [p for p in params if p.shape == (8, 3)]
    assert len(book) == 1  # one tensor, however many blocks use it
    assert book[0].grad is not None
    assert torch.allclose(book[0].grad, module.embedding.weight.grad, atol=1e-6)
