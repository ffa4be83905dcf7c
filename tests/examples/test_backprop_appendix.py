"""backprop_appendix.json: seed 004 Appendix B. The forward tables T7-T11 come out as
printed; the gradients are autograd's, equal to a hand-written PyTorch computation and to
the consistent values of the seed's digest (the notes' own T12-T17 multiply the linear
output's error by σ′ and so belong to no single network); one full-batch step with η = 1
gives the digest's new weights. The sigmoid-output network is checked too."""

from __future__ import annotations

import pytest
import torch
from classic_support import example

import nodegraph
from nodegraph.runtime.probes import trace_batch

X = torch.tensor([[1.0, 1.0], [0.0, -2.0], [-1.0, 1.0]])  # Table 5, patterns as rows
T = torch.tensor([[-1.0], [1.0], [1.0]])  # Table 11
W1, B1 = torch.tensor([[0.2, -1.2], [-0.7, -0.7]]), torch.tensor([0.4, 0.7])  # Table 6
W2, B2 = torch.tensor([[-0.5, 2.3]]), torch.tensor([0.4])  # Table 9


def appendix(sigmoid_output: bool = False) -> nodegraph.Graph:
    g = example("backprop_appendix")
    if sigmoid_output:  # the network the notes' δ² = (y − t)σ′(ξ²) would belong to
        g.disconnect(g.source_of("mse", "input"))
        g.add("activations.Sigmoid", id="squash")
        g.connect(("out", "output"), ("squash", "input"))
        g.connect(("squash", "output"), ("mse", "input"))
    return g


def traced(g: nodegraph.Graph) -> dict:
    return {r.node: r for r in trace_batch(nodegraph.compile(g))}


def close(a, b, tol):
    return torch.allclose(a, torch.as_tensor(b, dtype=torch.float32), atol=tol)


def test_forward_tables_t7_to_t11():
    g = appendix()
    assert torch.equal(nodegraph.compile(g).datasets["data"].tensors("train")["x"], X)
    t = traced(g)
    assert close(t["hidden"].outputs["output"].T, [[-0.6, 2.8, -1.0], [-0.7, 2.1, 0.7]], 1e-6)
    # printed to 3 decimals, not always rounded: 0.942 is σ(2.8) = 0.94267
    assert close(t["sigmoid"].outputs["output"].T, [[0.354, 0.942, 0.269],
                                                    [0.332, 0.891, 0.668]], 1e-3)
    xi2 = t["out"].outputs["output"]
    assert close(xi2.T, [[0.986, 1.978, 1.802]], 5e-4)
    assert close(0.5 * (xi2 - T).T ** 2, [[1.972, 0.478, 0.322]], 1e-3)  # E_p
    assert close(t["loss"].outputs["loss"], 0.924, 5e-4)  # E = mean E_p (not printed)


def reference_deltas(sigmoid_output: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """δ² and δ¹ per pattern (∂E_p/∂ξ), by autograd on plain PyTorch."""
    xi1 = (X @ W1.T + B1).requires_grad_(True)
    xi2 = (torch.sigmoid(xi1) @ W2.T + B2)
    xi2.retain_grad()
    y = torch.sigmoid(xi2) if sigmoid_output else xi2
    (0.5 * (y - T) ** 2).sum().backward()
    return xi2.grad, xi1.grad


@pytest.mark.parametrize("sigmoid_output, delta2, delta1", [
    (False, [1.986, 0.9777, 0.8024], [[-0.2272, -0.0264, -0.0789], [1.0127, 0.2186, 0.4092]]),
    (True, [0.3420, -0.0130, -0.0172], [[-0.0391, 0.0004, 0.0017], [0.1744, -0.0029, -0.0088]]),
])
def test_deltas_are_autograds_and_the_digests(sigmoid_output, delta2, delta1):
    t = traced(appendix(sigmoid_output))
    # the graph's gradients are of the mean E, so each pattern's δ is P = 3 times larger
    d2, d1 = 3 * t["out"].grads["output"], 3 * t["hidden"].grads["output"]
    ref2, ref1 = reference_deltas(sigmoid_output)
    assert close(d2, ref2, 1e-6) and close(d1, ref1, 1e-6)
    assert close(d2.T, [delta2], 1e-4) and close(d1.T, delta1, 1e-4)


def test_the_notes_delta2_mixes_a_linear_output_with_a_sigmoid_slope():
    xi2 = traced(appendix())["out"].outputs["output"]
    s = torch.sigmoid(xi2)
    assert close(((xi2 - T) * s * (1 - s)).T, [[0.393, 0.104, 0.098]], 5e-4)  # T12 as printed


@pytest.mark.parametrize("sigmoid_output, new_w2, new_w1", [
    (False, [-0.8554, -1.1137, 1.6113], [[0.5108, 0.2494, -1.1156], [0.1532, -0.9012, -1.0283]]),
    (True, [0.2961, -0.5348, 2.2699], [[0.4124, 0.2136, -1.1873], [0.6458, -0.7611, -0.7571]]),
])
def test_one_full_batch_step_gives_the_digests_weights(sigmoid_output, new_w2, new_w1):
    blocks = nodegraph.train(appendix(sigmoid_output)).module.blocks  # 1 epoch = 1 step
    w1 = torch.cat([blocks["hidden"].bias[:, None], blocks["hidden"].weight], 1)
    w2 = torch.cat([blocks["out"].bias, blocks["out"].weight[0]])
    assert close(w2, new_w2, 1e-4) and close(w1, new_w1, 1e-4)  # bias first, as in T16-T17
