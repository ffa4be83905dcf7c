"""ridge_lasso.json and ridge_path.json: on collinear features (x2 = x1) plain least
squares is singular and ridge is not; the ridge block lands on the closed form
(XᵀX + λD)⁻¹Xᵀy, the lasso on scikit-learn's Lasso(alpha = l1/2) with the noise feature's
weight exactly 0, and the ridge path shrinks every weight as λ grows."""

from __future__ import annotations

import numpy as np
import pytest
from classic_support import assert_builder_writes_files, builder, reference_fit, run

from nodegraph.runtime.procedure import run_procedure


@pytest.fixture(scope="module")
def result():
    return run("ridge_lasso", epochs=300)


def weights(result, node: str) -> np.ndarray:
    layer = result.module.blocks[node]
    return np.array([*layer.weight.detach().double().numpy()[0], float(layer.bias.detach())])


def design(result, split: str = "train"):
    t = result.compiled.datasets["data"].tensors(split)
    x, y = t["x"].double().numpy(), t["y"].double().numpy()[:, 0]
    return np.hstack([x, np.ones((len(x), 1))]), y


def test_least_squares_is_singular_and_ridge_is_not(result):
    a, y = design(result)
    gram = a.T @ a
    d = np.diag([1.0, 1.0, 1.0, 1.0, 0.0])
    assert np.linalg.matrix_rank(gram) == 4  # of 5: x2 = x1
    ridge = builder("ridge").RIDGE
    assert np.linalg.matrix_rank(gram + ridge * d) == 5
    closed = np.linalg.solve(gram + ridge * d, a.T @ y)
    assert weights(result, "ridge") == pytest.approx(closed, abs=1e-4)
    assert closed[0] == pytest.approx(closed[1])  # the copies share the weight
    # least squares: the fit of numpy's lstsq, but not its weights — only w1 + w2 is
    # determined; the split between the copies is whatever the initial weights left there
    lstsq = np.linalg.lstsq(a, y, rcond=None)[0]
    ls = weights(result, "ls")
    assert a @ ls == pytest.approx(a @ lstsq, abs=1e-3)
    assert ls[0] + ls[1] == pytest.approx(lstsq[0] + lstsq[1], abs=1e-3)
    assert abs(ls[0] - ls[1]) > 0.01


def test_the_lasso_is_scikit_learns_and_zeroes_the_noise_feature(result):
    from sklearn.linear_model import Lasso

    a, y = design(result)
    l1 = builder("ridge").L1
    ref = reference_fit(Lasso(alpha=l1 / 2, tol=1e-10, max_iter=100000), a[:, :4], y)
    w = weights(result, "lasso")
    # x1 and x2 are copies: only their sum is determined, as with any L1 fit
    assert w[0] + w[1] == pytest.approx(ref.coef_[0] + ref.coef_[1], abs=2e-3)
    assert w[2:4] == pytest.approx(ref.coef_[2:], abs=2e-3)
    assert w[4] == pytest.approx(ref.intercept_, abs=2e-3)
    assert ref.coef_[3] == 0 and w[3] == 0.0  # exactly zero, not just small


def test_all_three_predict_the_test_split(result):
    test = result.final["test"]
    for name in ("ls", "ridge", "lasso"):
        assert test[f"{name}_mse"] < 0.6, name  # the noise variance is 0.25


def test_the_ridge_path_shrinks_every_weight_as_lambda_grows():
    from classic_support import example

    frames = run_procedure(example("ridge_path"), "path")
    values = [f["value"] for f in frames]
    assert values == builder("ridge").PATH
    norms = [np.linalg.norm(f["weights"]) for f in frames]
    assert all(a >= b for a, b in zip(norms, norms[1:], strict=False))
    assert norms[-1] < 0.05 * norms[0]
    first, second = np.array(frames[0]["weights"]), np.array(frames[1]["weights"])
    assert abs(first[0] - first[1]) > 0.01  # λ = 0: the copies split as initialised
    assert second[0] == pytest.approx(second[1], abs=1e-6)  # any λ > 0: equal shares
    train = [f["train_loss"] for f in frames]
    assert all(a <= b + 1e-9 for a, b in zip(train, train[1:], strict=False))


def test_the_files_are_what_the_builder_writes():
    assert_builder_writes_files("ridge")
