"""Normalisation blocks against their formulas and torch (train-mode batch statistics vs
eval-mode running statistics), and the L1/L2 penalties on a compiled graph."""

from __future__ import annotations

import pytest
import torch
from blockcheck import build, run_op
from torch import nn

import nodegraph
from nodegraph.model.errors import PortError


def close(a, b, tol=1e-5):
    return torch.allclose(a, torch.as_tensor(b, dtype=a.dtype), atol=tol)


def standardise(x, dims, eps=1e-5):
    mean = x.mean(dims, keepdim=True)
    var = x.var(dims, unbiased=False, keepdim=True)
    return (x - mean) / torch.sqrt(var + eps)


@pytest.mark.parametrize("block_id, shape, dims, reference", [
    ("norm.BatchNorm1d", (8, 3), (0,), nn.BatchNorm1d),
    ("norm.BatchNorm1d", (8, 3, 5), (0, 2), nn.BatchNorm1d),
    ("norm.BatchNorm2d", (8, 3, 4, 5), (0, 2, 3), nn.BatchNorm2d)])
def test_batch_norm_train_uses_batch_stats_eval_uses_running(block_id, shape, dims,
                                                             reference):
    torch.manual_seed(0)
    x = 3 * torch.randn(shape) + 2
    _, _, m = build(block_id, {"input": x}, momentum=0.2)
    ref = reference(3, momentum=0.2)
    with torch.no_grad():
        m.weight.copy_(torch.tensor([1.0, 2.0, 0.5]))
        m.bias.copy_(torch.tensor([0.0, -1.0, 3.0]))
        ref.load_state_dict(m.state_dict())
    gamma = m.weight.detach().view(1, 3, *[1] * (len(shape) - 2))
    beta = m.bias.detach().view_as(gamma)

    out = m.train()(x)
    assert close(out, gamma * standardise(x, dims) + beta)
    assert close(out, ref.train()(x))
    n = x.numel() / 3
    assert close(m.running_mean, 0.2 * x.mean(dims))  # from 0, momentum 0.2
    assert close(m.running_var, 0.8 + 0.2 * x.var(dims, unbiased=False) * n / (n - 1))
    assert close(m.running_var, ref.running_var)

    y = torch.randn(shape)
    rm, rv = (t.view_as(gamma) for t in (m.running_mean, m.running_var))
    out = m.eval()(y)
    assert close(out, gamma * (y - rm) / torch.sqrt(rv + 1e-5) + beta)
    assert close(out, ref.eval()(y))


def test_batch_norm_without_running_stats_uses_batch_stats_in_eval():
    x = torch.randn(16, 4)
    _, _, m = build("norm.BatchNorm1d", {"input": x}, track_running_stats=False,
                    affine=False)
    assert list(m.parameters()) == [] and close(m.eval()(x), standardise(x, (0,)))


def test_batch_norm_momentum_none_is_a_cumulative_average():
    batches = [torch.randn(10, 2) + i for i in range(3)]
    _, _, m = build("norm.BatchNorm1d", {"input": batches[0]}, momentum=None)
    for b in batches:
        m.train()(b)
    assert close(m.running_mean, torch.stack([b.mean(0) for b in batches]).mean(0))


def test_batch_norm_layout_errors_point_at_the_other_block():
    with pytest.raises(PortError) as e:
        build("norm.BatchNorm2d", {"input": torch.zeros(4, 10)})
    assert "(N, C, H, W)" in str(e.value) and "BatchNorm1d" in e.value.hint
    with pytest.raises(PortError) as e:
        build("norm.BatchNorm1d", {"input": torch.zeros(4, 3, 8, 8)})
    assert "BatchNorm2d" in e.value.hint


def test_layer_norm_over_trailing_dims_same_in_train_and_eval():
    x = torch.randn(4, 3, 5)
    _, _, m = build("norm.LayerNorm", {"input": x}, dims=2)
    assert m.normalized_shape == (3, 5)
    assert close(m.train()(x), standardise(x, (1, 2)))
    assert close(m.eval()(x), standardise(x, (1, 2)))
    assert close(run_op("norm.LayerNorm", {"input": x}), standardise(x, (2,)))
    with pytest.raises(PortError, match="batch"):
        build("norm.LayerNorm", {"input": x}, dims=3)


def test_instance_norm_per_image_per_channel(registry):
    x = torch.randn(2, 3, 4, 4) * torch.tensor([1.0, 5.0, 0.1]).view(1, 3, 1, 1)
    _, _, m = build("norm.InstanceNorm2d", {"input": x})
    assert list(m.parameters()) == [] and close(m(x), standardise(x, (2, 3)))
    assert registry.canonical("norm.InstanceNorm") == "norm.InstanceNorm2d"


# -- penalties --------------------------------------------------------------------------------

def penalty_graph(kind: str, nodes: list[str], weight: float = 0.1) -> nodegraph.Compiled:
    """Constant -> Linear 'lin' -> Linear 'head', plus a penalty block 'pen'."""
    g = nodegraph.Graph()
    g.add("layers.Constant", id="x", value=[[1.0, -2.0, 0.5]])
    g.add("layers.Linear", id="lin", out_features=4)
    g.add("layers.Linear", id="head", out_features=1)
    g.add(f"norm.{kind}", id="pen", weight=weight, nodes=nodes)
    g.connect(("x", "output"), ("lin", "input"))
    g.connect(("lin", "output"), ("head", "input"))
    return nodegraph.compile(g, device="cpu", for_training=False)


@pytest.mark.parametrize("kind, term, grad", [
    ("L1Penalty", lambda w: w.abs().sum(), lambda w: w.sign()),
    ("L2Penalty", lambda w: w.pow(2).sum(), lambda w: 2 * w)])
def test_penalty_on_named_node_excludes_bias(kind, term, grad):
    compiled = penalty_graph(kind, ["lin"], weight=0.1)
    blocks = compiled.module.blocks
    lin = blocks["lin"]
    loss = blocks["pen"]()
    assert close(loss, 0.1 * term(lin.weight.detach()))
    loss.backward()
    assert close(lin.weight.grad, 0.1 * grad(lin.weight.detach()))
    assert lin.bias.grad is None and blocks["head"].weight.grad is None


def test_penalty_without_nodes_covers_every_weighted_block():
    compiled = penalty_graph("L2Penalty", [], weight=0.5)
    blocks = compiled.module.blocks
    expected = 0.5 * sum(blocks[n].weight.detach().pow(2).sum() for n in ("lin", "head"))
    assert close(blocks["pen"](), expected)
    # bound, not owned: the weights are not registered (or saved) a second time
    assert not [k for k in compiled.module.block_state() if k.startswith("pen.")]
    assert sum(p.numel() for p in blocks["pen"].parameters()) == 0


def test_penalty_has_a_loss_output_and_infers_a_scalar():
    report = nodegraph.validate(penalty_graph("L1Penalty", ["lin"]).graph)
    assert report.shape("pen", "loss") == ()
    assert build("norm.L1Penalty", weight=1.0)[2]().item() == 0.0  # nothing bound yet
