"""optimizers.ProximalGD: soft thresholding and one ISTA step, against their formulas."""

from __future__ import annotations

import torch

from nodes.optimizers.proximal import ProximalGD, soft_threshold


def test_soft_threshold_shrinks_and_zeroes():
    z = torch.tensor([-3.0, -0.5, 0.0, 0.2, 2.0])
    assert soft_threshold(z, 1.0).tolist() == [-2.0, 0.0, 0.0, 0.0, 1.0]


def test_one_ista_step_is_the_prox_of_a_gradient_step_and_spares_the_bias():
    w = torch.nn.Parameter(torch.tensor([[1.0, -0.05, 0.3]]))
    b = torch.nn.Parameter(torch.tensor([0.02]))
    opt = ProximalGD([{"params": [w], "l1": 0.5}, {"params": [b], "l1": 0.0}], lr=0.2,
                     accelerated=False)
    w.grad = torch.tensor([[1.0, 0.0, -1.0]])
    b.grad = torch.tensor([0.1])
    opt.step()
    z = torch.tensor([[1.0 - 0.2, -0.05, 0.3 + 0.2]])
    expected = z.sign() * (z.abs() - 0.1).clamp(min=0)
    assert torch.allclose(w, expected) and w[0, 1] == 0
    assert torch.allclose(b, torch.tensor([0.02 - 0.02]))


def test_fista_extrapolates_from_the_second_step():
    w = torch.nn.Parameter(torch.tensor([1.0]))
    opt = ProximalGD([{"params": [w], "l1": 0.0}], lr=0.1, accelerated=True)
    w.grad = torch.tensor([1.0])
    opt.step()  # t: 1 → (1+√5)/2, β = 0: plain step
    assert torch.allclose(w, torch.tensor([0.9]))
    w.grad = torch.tensor([1.0])
    t1 = (1 + 5 ** 0.5) / 2
    t2 = (1 + (1 + 4 * t1 ** 2) ** 0.5) / 2
    opt.step()  # x = 0.8; y = x + (t1 − 1)/t2 · (x − 0.9)
    assert torch.allclose(w, torch.tensor([0.8 + (t1 - 1) / t2 * (0.8 - 0.9)]))
