"""Optimizer blocks: one or two steps against hand-computed updates, and the solvers on the
cholesterol regression of seed 000 §2.1.3."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from nodegraph.kinds.optim import OPTIMIZER_PARAMS
from nodegraph.model.errors import NodegraphError, ParamError
from nodegraph.model.graph import Graph
from nodegraph.model.spec import default_registry
from nodegraph.runtime.train import train

THETA0 = [1.0, -2.0]
G1, G2 = torch.tensor([0.5, -1.0]), torch.tensor([2.0, 0.25])


def make(block_id: str, params: list[tuple[str, torch.nn.Parameter]], **values):
    spec = default_registry().get(block_id)
    resolved, problems = spec.resolve_params(values)
    assert not problems, problems
    return spec.build(resolved, params)


def two_steps(block_id: str, grads=(G1, G2), **values) -> list[torch.Tensor]:
    """θ after each step of `block_id` fed the gradients `grads` (independent of θ)."""
    theta = torch.nn.Parameter(torch.tensor(THETA0))
    opt = make(block_id, [("w.weight", theta)], **values)
    out = []
    for g in grads:
        theta.grad = g.clone()
        opt.step()
        out.append(theta.detach().clone())
    return out


def same(got: list[torch.Tensor], expected: list, tol: float = 1e-6) -> None:
    for a, b in zip(got, expected, strict=True):
        assert torch.allclose(a, torch.as_tensor(b, dtype=torch.float32), atol=tol), (a, b)


def test_every_optimizer_takes_the_shared_params(registry):
    shared = {p.name for p in OPTIMIZER_PARAMS}
    optimizers = [s for s in registry if s.kind == "optimizer"]
    assert len(optimizers) >= 12
    for spec in optimizers:
        assert shared <= {p.name for p in spec.params}, spec.id
        assert spec.param("lr") is not None, spec.id  # the trainer logs param_groups[0]["lr"]


def test_gd_with_and_without_weight_decay():
    t0 = torch.tensor(THETA0)
    same(two_steps("optimizers.GD", lr=0.1), [t0 - 0.1 * G1, t0 - 0.1 * G1 - 0.1 * G2])
    t1 = t0 - 0.1 * (G1 + 0.5 * t0)
    same(two_steps("optimizers.GD", lr=0.1, weight_decay=0.5),
         [t1, t1 - 0.1 * (G2 + 0.5 * t1)])


@pytest.mark.parametrize("form", ["pytorch", "classical"])
def test_momentum_torch_and_textbook_forms_agree_at_fixed_lr(form):
    lr, mu, t0 = 0.1, 0.9, torch.tensor(THETA0)
    if form == "pytorch":  # v = μv + g, θ -= lr·v
        v1 = G1
        t1 = t0 - lr * v1
        t2 = t1 - lr * (mu * v1 + G2)
    else:  # v = μv − lr·g, θ += v
        v1 = -lr * G1
        t1 = t0 + v1
        t2 = t1 + (mu * v1 - lr * G2)
    same(two_steps("optimizers.Momentum", lr=lr, momentum=mu, form=form), [t1, t2])
    same([t1, t2], [t0 - lr * G1, t0 - lr * G1 - lr * (mu * G1 + G2)])


def momentum_with_lr_change(form: str) -> torch.Tensor:
    theta = torch.nn.Parameter(torch.tensor(THETA0))
    opt = make("optimizers.Momentum", [("w.weight", theta)], lr=0.1, momentum=0.5, form=form)
    for g, lr in ((G1, 0.1), (G2, 0.01)):
        opt.param_groups[0]["lr"] = lr
        theta.grad = g.clone()
        opt.step()
    return theta.detach()


def test_momentum_forms_differ_when_the_lr_changes():
    t0 = torch.tensor(THETA0)
    # pytorch: the new lr scales the whole velocity; classical: the old step keeps its lr
    same([momentum_with_lr_change("pytorch")], [t0 - 0.1 * G1 - 0.01 * (0.5 * G1 + G2)])
    same([momentum_with_lr_change("classical")],
         [t0 - 0.1 * G1 + 0.5 * (-0.1 * G1) - 0.01 * G2])


def test_momentum_moving_average_form():
    lr, mu, t0 = 0.1, 0.8, torch.tensor(THETA0)
    v1 = (1 - mu) * G1
    v2 = mu * v1 + (1 - mu) * G2
    same(two_steps("optimizers.Momentum", lr=lr, momentum=mu, form="ema"),
         [t0 - lr * v1, t0 - lr * v1 - lr * v2])


def test_nesterov_torch_form():
    lr, mu, t0 = 0.1, 0.9, torch.tensor(THETA0)
    v1 = G1
    t1 = t0 - lr * (G1 + mu * v1)
    v2 = mu * v1 + G2
    same(two_steps("optimizers.Nesterov", lr=lr, momentum=mu), [t1, t1 - lr * (G2 + mu * v2)])
    with pytest.raises(ParamError):
        two_steps("optimizers.Nesterov", momentum=0.0)


def test_adagrad():
    lr, decay, eps, t0 = 0.5, 0.1, 1e-10, torch.tensor(THETA0)
    s1 = G1 ** 2
    t1 = t0 - lr * G1 / (s1.sqrt() + eps)
    s2 = s1 + G2 ** 2
    t2 = t1 - lr / (1 + decay) * G2 / (s2.sqrt() + eps)
    same(two_steps("optimizers.AdaGrad", lr=lr, lr_decay=decay), [t1, t2])


def test_rmsprop():
    lr, alpha, eps, t0 = 0.01, 0.9, 1e-8, torch.tensor(THETA0)
    v1 = (1 - alpha) * G1 ** 2
    t1 = t0 - lr * G1 / (v1.sqrt() + eps)
    v2 = alpha * v1 + (1 - alpha) * G2 ** 2
    same(two_steps("optimizers.RMSProp", lr=lr, alpha=alpha), [t1, t1 - lr * G2 / (v2.sqrt()
                                                                                    + eps)])


def test_adadelta():
    rho, eps, t0 = 0.9, 1e-6, torch.tensor(THETA0)
    v, u, t, out = torch.zeros(2), torch.zeros(2), t0, []
    for g in (G1, G2):
        v = rho * v + (1 - rho) * g ** 2
        delta = (u + eps).sqrt() / (v + eps).sqrt() * g
        u = rho * u + (1 - rho) * delta ** 2
        t = t - 1.0 * delta
        out.append(t)
    same(two_steps("optimizers.Adadelta"), out)


def adam_by_hand(lr, b1, b2, eps, decoupled_decay=0.0):
    m, v, t, out = torch.zeros(2), torch.zeros(2), torch.tensor(THETA0), []
    for i, g in enumerate((G1, G2), 1):
        t = t * (1 - lr * decoupled_decay)
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g ** 2
        t = t - lr * (m / (1 - b1 ** i)) / ((v / (1 - b2 ** i)).sqrt() + eps)
        out.append(t)
    return out


def test_adam_and_adamw():
    same(two_steps("optimizers.Adam", lr=0.01, betas=[0.8, 0.9]),
         adam_by_hand(0.01, 0.8, 0.9, 1e-8))
    same(two_steps("optimizers.AdamW", lr=0.01, betas=[0.8, 0.9], weight_decay=0.1),
         adam_by_hand(0.01, 0.8, 0.9, 1e-8, decoupled_decay=0.1))


def test_normalized_gd_uses_the_norm_of_the_whole_gradient():
    a = torch.nn.Parameter(torch.tensor([1.0, 2.0]))
    b = torch.nn.Parameter(torch.tensor([3.0]))
    opt = make("optimizers.NormalizedGD", [("x.weight", a), ("x.bias", b)], lr=0.5)
    a.grad, b.grad = torch.tensor([3.0, 0.0]), torch.tensor([4.0])  # ‖g‖ = 5
    opt.step()
    same([a.detach(), b.detach()], [[1.0 - 0.5 * 0.6, 2.0], [3.0 - 0.5 * 0.8]])
    a.grad, b.grad = torch.zeros(2), torch.zeros(1)
    opt.step()  # a zero gradient gives no step, not NaN
    same([a.detach(), b.detach()], [[0.7, 2.0], [2.6]])


def quadratic_closure(theta, opt, a: torch.Tensor, center: torch.Tensor):
    """L(θ) = (θ − c)ᵀA(θ − c), with the trainer's closure signature."""
    def closure(backward: bool = True):
        opt.zero_grad()
        with torch.enable_grad():
            loss = (theta - center) @ a @ (theta - center)
            if backward:
                loss.backward()
        return loss
    return closure


def test_lbfgs_first_iteration_is_a_scaled_gradient_step():
    theta = torch.nn.Parameter(torch.tensor(THETA0))
    opt = make("optimizers.LBFGS", [("w.weight", theta)], max_iter=1, lr=0.5)
    a, c = torch.tensor([[2.0, 0.0], [0.0, 1.0]]), torch.tensor([0.5, 0.5])
    g = 2 * a @ (torch.tensor(THETA0) - c)  # (2, -5); first step length min(1, 1/‖g‖₁)·lr
    opt.step(quadratic_closure(theta, opt, a, c))
    same([theta.detach()], [torch.tensor(THETA0) - 0.5 / g.abs().sum() * g])


def test_least_squares_solves_a_quadratic_in_one_step():
    theta = torch.nn.Parameter(torch.tensor(THETA0))
    opt = make("optimizers.LeastSquares", [("w.weight", theta)])
    a, c = torch.tensor([[3.0, 1.0], [1.0, 2.0]]), torch.tensor([0.25, -4.0])
    loss = opt.step(quadratic_closure(theta, opt, a, c))
    same([theta.detach()], [c], 1e-5)
    assert loss.item() > 1  # the loss before the step


def test_least_squares_solves_an_ill_conditioned_design_in_float64():
    """Raw monomials x..x¹⁴ on [−1.7, 1.7]: cond(X) ≈ 5·10⁵, so the normal equations have
    cond ≈ 2.5·10¹¹ — float32 solves them with no correct digit, float64 with room to spare.
    The step must equal numpy's float64 lstsq to the float32 rounding of the weights."""
    x = torch.linspace(-1.7, 1.7, 30, dtype=torch.float64)
    y = (torch.sin(2 * x) + 0.1 * torch.cos(7 * x))[:, None]
    design = torch.cat([torch.ones(30, 1, dtype=torch.float64),
                        torch.stack([x**k for k in range(1, 15)], 1)], 1)
    features, target = design[:, 1:].float(), y.float()  # what the model sees: float32
    layer = torch.nn.Linear(14, 1)
    opt = make("optimizers.LeastSquares", [("l.weight", layer.weight), ("l.bias", layer.bias)])
    before = ((layer(features) - target) ** 2).mean()
    loss = opt.step(lambda backward=True: ((layer(features) - target) ** 2).mean())
    assert loss.dtype == torch.float32 and loss.item() == pytest.approx(before.item())
    assert layer.weight.dtype == torch.float32  # back to the model's dtype after the solve
    seen = torch.cat([torch.ones(30, 1, dtype=torch.float64), features.double()], 1)
    exact = np.linalg.lstsq(seen.numpy(), target.double().numpy()[:, 0], rcond=None)[0]
    got = torch.cat([layer.bias, layer.weight[0]]).detach().double().numpy()
    assert np.linalg.norm(got - exact) < 3e-7 * np.linalg.norm(exact)
    d32 = design.float()  # the same normal equations in float32 are hopeless
    naive = torch.linalg.solve(d32.T @ d32, d32.T @ target)[:, 0].double().numpy()
    assert np.linalg.norm(naive - exact) > 0.5 * np.linalg.norm(exact)


def test_least_squares_refuses_big_models():
    big = torch.nn.Parameter(torch.zeros(100, 100))
    with pytest.raises(NodegraphError, match="Hessian"):
        make("optimizers.LeastSquares", [("w.weight", big)])


# -- seed 000 §2.1.3: cholesterol from age and BMI, rows 1,3,5,7,9 train ------------------

ROWS = [(25, 22.5, 180), (30, 24.0, 190), (35, 26.5, 210), (40, 28.0, 220),
        (45, 29.5, 240), (50, 30.0, 250), (55, 31.5, 260), (60, 32.0, 270),
        (65, 33.5, 280), (70, 34.0, 290)]
THETA_STAR = (25.6842, 0.93684, 5.78947)  # (intercept, age, BMI), digest: numpy check


def cholesterol(optimizer: str, loss: str = "losses.MSE", normalize: str = "none",
                epochs: int = 1, **opt_params) -> Graph:
    g = Graph("cholesterol")
    rows = [[a, b, c, "train" if i % 2 == 0 else "test"] for i, (a, b, c) in enumerate(ROWS)]
    g.add("data.Table", id="data", columns=["age", "bmi", "chol", "split"], rows=rows,
          inputs=["age", "bmi"], targets=["chol"], split_column="split", normalize=normalize)
    g.add("layers.Linear", id="lin", out_features=1)
    g.add(loss, id="loss")
    g.add(optimizer, id="opt", **opt_params)
    g.connect(("data", "x"), ("lin", "input"))
    g.connect(("lin", "output"), ("loss", "input"))
    g.connect(("data", "y"), ("loss", "target"))
    g.connect(("loss", "loss"), ("opt", "loss"))
    g.update_training(epochs=epochs, device="cpu")
    return g


def fitted(result, normalize: bool = False) -> tuple[float, ...]:
    """(intercept, w_age, w_bmi) in the original units of the inputs."""
    lin = result.module.blocks["lin"]
    w = lin.weight.detach().double().numpy()[0]
    b = float(lin.bias.detach())
    if normalize:  # undo the z-score of the training rows
        x = np.array(ROWS, dtype=np.float32)[0::2, :2]
        mean, std = x.mean(0), x.std(0)
        b, w = b - float((w * mean / std).sum()), w / std
    return (b, *w)


def test_least_squares_reproduces_the_seed_fit():
    result = train(cholesterol("optimizers.LeastSquares"))
    assert np.allclose(fitted(result), THETA_STAR, atol=0.01)
    assert result.final["train"]["loss"] == pytest.approx(1.2632, abs=0.005)
    assert result.final["test"]["loss"] == pytest.approx(12.2438, abs=0.02)


def test_least_squares_refined_by_a_second_newton_step():
    result = train(cholesterol("optimizers.LeastSquares", iterations=2))
    assert np.allclose(fitted(result), THETA_STAR, atol=2e-4)


def ridge_solution(ridge: float, mask: list[float]) -> np.ndarray:
    """(XᵀX + λD)⁻¹Xᵀy on the training rows, D = diag(mask), the seed's form (L107)."""
    a = np.array(ROWS, dtype=np.float64)[0::2]
    x = np.c_[np.ones(5), a[:, :2]]
    return np.linalg.solve(x.T @ x + ridge * np.diag(mask), x.T @ a[:, 2])


@pytest.mark.parametrize(("decay", "mask"), [("all", [1, 1, 1]), ("weights_only", [0, 1, 1])])
def test_ridge_with_sse_is_the_seeds_stabilised_normal_equations(decay, mask):
    result = train(cholesterol("optimizers.LeastSquares", loss="losses.SSE", ridge=50.0,
                               decay=decay, iterations=2))
    expected = ridge_solution(50.0, mask)
    assert not np.allclose(expected, THETA_STAR, atol=0.01)  # the penalty matters here
    assert np.allclose(fitted(result), expected, atol=2e-3)


def test_lbfgs_reaches_the_same_fit_on_raw_inputs():
    result = train(cholesterol("optimizers.LBFGS", epochs=5, max_iter=100))
    assert np.allclose(fitted(result), THETA_STAR, atol=0.01)
    assert result.final["test"]["loss"] == pytest.approx(12.2438, abs=0.02)


def test_lbfgs_with_line_search_on_normalised_inputs(tmp_path):
    graph = cholesterol("optimizers.LBFGS", normalize="zscore", epochs=2,
                        line_search_fn="strong_wolfe")
    result = train(graph, checkpoint_dir=tmp_path)
    assert np.allclose(fitted(result, normalize=True), THETA_STAR, atol=0.01)
    # the checkpoint holds L-BFGS state without its history lists; resuming works
    resumed = train(graph, epochs=3, checkpoint_dir=tmp_path, resume=True)
    assert len(resumed.history) == 3
    assert resumed.final["train"]["loss"] == pytest.approx(1.2632, abs=0.005)

