"""Activation blocks: each against its formula (or PyTorch), train vs eval where it differs."""

from __future__ import annotations

import math

import pytest
import torch
from blockcheck import build, run_op
from torch.nn import functional as F

from nodegraph.model.errors import PortError

X = torch.tensor([-3.0, -1.0, -0.5, 0.0, 0.5, 1.0, 3.0])


def act(name: str, x: torch.Tensor = X, **params) -> torch.Tensor:
    return run_op(f"activations.{name}", {"input": x}, **params)


def close(a, b, tol=1e-6):
    return torch.allclose(a, torch.as_tensor(b, dtype=a.dtype), atol=tol)


PHI = lambda x: 0.5 * (1 + torch.erf(x / math.sqrt(2)))  # standard normal CDF

FORMULAS = [
    ("Identity", {}, lambda x: x),
    ("Sign", {}, lambda x: torch.tensor([-1.0, -1, -1, 0, 1, 1, 1])),
    ("Sigmoid", {}, lambda x: 1 / (1 + torch.exp(-x))),
    ("Sigmoid", {"slope": 2.5}, lambda x: 1 / (1 + torch.exp(-2.5 * x))),
    ("Tanh", {}, lambda x: (torch.exp(x) - torch.exp(-x)) / (torch.exp(x) + torch.exp(-x))),
    ("ReLU", {}, lambda x: torch.where(x > 0, x, 0.0)),
    ("LeakyReLU", {"negative_slope": 0.3}, lambda x: torch.where(x > 0, x, 0.3 * x)),
    ("ELU", {"alpha": 2.0}, lambda x: torch.where(x > 0, x, 2.0 * (torch.exp(x) - 1))),
    ("GELU", {}, lambda x: x * PHI(x)),
    ("GELU", {"approximate": "tanh"}, lambda x: 0.5 * x * (1 + torch.tanh(
        math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))),
    ("Softplus", {"beta": 2.0}, lambda x: torch.log1p(torch.exp(2 * x)) / 2),
    ("Softplus", {"beta": 1.0, "threshold": 0.75}, lambda x: torch.where(
        x > 0.75, x, torch.log1p(torch.exp(x)))),
    ("Satlins", {}, lambda x: torch.tensor([-1.0, -1, -0.5, 0, 0.5, 1, 1])),
    ("SiLU", {}, lambda x: x / (1 + torch.exp(-x))),
]


@pytest.mark.parametrize("name, params, formula", FORMULAS,
                         ids=[f"{n}{p or ''}" for n, p, _ in FORMULAS])
def test_elementwise_formulas(name, params, formula):
    assert close(act(name, **params), formula(X), 1e-5)


@pytest.mark.parametrize("value", [0.0, 0.5, 1.0])
def test_step_is_heaviside_with_chosen_value_at_zero(value):
    assert close(act("Step", value_at_zero=value), [0, 0, 0, value, 1, 1, 1])


@pytest.mark.parametrize("threshold, value, expected", [
    (0.5, 0.0, [0, 0, 0, 0, 0, 1, 1]),  # X = −3, −1, −0.5, 0, 0.5, 1, 3: fires above 0.5
    (0.5, 1.0, [0, 0, 0, 0, 1, 1, 1]),  # value_at_zero is the output at x = θ
    (-1.0, 0.5, [0, 0.5, 1, 1, 1, 1, 1]),
    (0.1, 0.5, [0, 0, 0, 0, 1, 1, 1]),  # no X equals θ: no 0.5 anywhere
])
def test_step_fires_above_its_threshold(threshold, value, expected):
    assert close(act("Step", threshold=threshold, value_at_zero=value), expected)
    # the same unit as a bias of −θ before a step at 0
    assert close(act("Step", X - threshold, value_at_zero=value), expected)


@pytest.mark.parametrize("name", ["Step", "Sign"])
def test_step_and_sign_backpropagate_a_zero_gradient(name):
    x = X.clone().requires_grad_(True)
    act(name, x).sum().backward()  # no error: the graph reaches x, with slope 0
    assert torch.equal(x.grad, torch.zeros_like(X))


def test_prelu_learns_its_slope_shared_or_per_channel():
    _, _, m = build("activations.PReLU", {"input": X}, init=0.1)
    y = m(X)
    assert close(y, torch.where(X > 0, X, 0.1 * X))
    y.sum().backward()
    assert close(m.weight.grad, [X[X < 0].sum()])  # d/dα of α·x summed over x < 0
    x = torch.randn(4, 3, 5)
    _, _, m = build("activations.PReLU", {"input": x}, num_parameters=None)
    with torch.no_grad():
        m.weight.copy_(torch.tensor([0.0, 0.5, 1.0]))
    slope = torch.tensor([0.0, 0.5, 1.0]).view(1, 3, 1)
    assert close(m(x), torch.where(x > 0, x, slope * x))
    with pytest.raises(PortError, match="num_parameters"):
        build("activations.PReLU", {"input": x}, num_parameters=4)


def test_rrelu_random_slope_in_training_mean_slope_in_eval():
    torch.manual_seed(0)
    x = -torch.ones(2000)
    _, _, m = build("activations.RReLU", {"input": x}, lower=0.1, upper=0.3)
    slopes = -m.train()(x)
    assert slopes.min() >= 0.1 and slopes.max() <= 0.3 and slopes.std() > 0.03
    assert abs(slopes.mean() - 0.2) < 0.01
    assert close(m.eval()(X), torch.where(X > 0, X, 0.2 * X))


@pytest.mark.parametrize("temperature", [1.0, 2.0, 0.5])
def test_softmax_and_log_softmax_with_temperature(temperature):
    x = torch.tensor([[1.0, 2.0, 4.0], [0.0, 0.0, 3.0]])
    e = torch.exp(x / temperature)
    p = e / e.sum(1, keepdim=True)
    assert close(act("Softmax", x, temperature=temperature), p)
    assert close(act("LogSoftmax", x, temperature=temperature), p.log(), 1e-5)
    assert close(act("Softmax", x, dim=0, temperature=temperature),
                 e / e.sum(0, keepdim=True))


def test_softmax_dim_must_exist():
    with pytest.raises(PortError, match="no dim 2"):
        build("activations.Softmax", {"input": torch.zeros(4, 3)}, dim=2)


def test_activations_want_real_numbers():
    e = pytest.raises(PortError, build, "activations.ReLU", {"input": torch.zeros(3,
                                                              dtype=torch.long)})
    assert e.value.kind == "dtype_mismatch"


def test_sigmoid_gradient_is_slope_times_s_times_one_minus_s():
    x = X.clone().requires_grad_()
    s = act("Sigmoid", x, slope=2.0)
    s.sum().backward()
    assert close(x.grad, 2.0 * s.detach() * (1 - s.detach()))
    assert torch.equal(F.sigmoid(X), act("Sigmoid"))
