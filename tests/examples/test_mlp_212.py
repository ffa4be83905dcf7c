"""mlp_212.json: the 2-1-2 ReLU network of seed 000 §4.1.2 gives the notes' hidden value
1.6 and outputs 1.32 and 0.28 for the input (5, 2)."""

from __future__ import annotations

import torch
from classic_support import example

import nodegraph
from nodegraph.runtime.probes import trace_batch


def test_forward_pass_gives_the_notes_values():
    g = example("mlp_212")
    out = {r.node: r.outputs.get("output") for r in trace_batch(nodegraph.compile(g))}
    assert torch.allclose(out["relu1"], torch.tensor([[1.6]]))
    assert torch.allclose(out["relu2"], torch.tensor([[1.32, 0.28]]))
    # the pre-activation of the second output is 0.3·1.6 − 0.2: positive, so ReLU keeps it
    assert torch.allclose(out["out"], torch.tensor([[1.32, 0.28]]))
    result = nodegraph.train(g)  # 0 epochs: one evaluation against the printed outputs
    assert result.final["train"]["loss"] < 1e-12
    assert sum(nodegraph.validate(g).param_counts.values()) == 7
