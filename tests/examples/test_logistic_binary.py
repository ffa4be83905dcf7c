"""examples/logistic_binary.json: logistic regression reaches the maximum-likelihood fit.

The loss is convex, so full-batch GD must land where scikit-learn's unpenalised solver does
(same BCE, same θ). At that optimum the intercept's score equation Σ(σ(f_i) − y_i) = 0 holds
on the training data. Accuracy and the ECE with its reliability-diagram bins are recomputed
from the trained weights by the formulas and compared with the metric blocks.
"""

from __future__ import annotations

import numpy as np
import pytest
from classic_support import (
    assert_builder_writes_files,
    calibration,
    linear_scores,
    reference_fit,
    run,
    split_arrays,
)
from sklearn.linear_model import LogisticRegression


def sigmoid(z):
    return 1.0 / (1.0 + np.exp(-z))


@pytest.fixture(scope="module")
def result():
    return run("logistic_binary")


def test_gradient_descent_reaches_the_maximum_likelihood_fit(result):
    x, y = split_arrays(result)
    y = y[:, 0]
    reference = reference_fit(LogisticRegression(C=np.inf, tol=1e-10, max_iter=10_000), x, y)
    p = reference.predict_proba(x)[:, 1]
    best = -np.mean(y * np.log(p) + (1 - y) * np.log(1 - p))
    assert result.final["train"]["bce"] == pytest.approx(best, abs=1e-5)
    layer = result.module.blocks["linear"]
    assert layer.weight.detach().numpy()[0] == pytest.approx(reference.coef_[0], abs=2e-3)
    assert float(layer.bias.detach()) == pytest.approx(reference.intercept_[0], abs=2e-3)
    # at the optimum the predicted probabilities sum to the number of positives
    assert sigmoid(linear_scores(result, x)).mean() == pytest.approx(y.mean(), abs=1e-4)
    assert result.final["train"]["accuracy"] == pytest.approx(reference.score(x, y))


def test_accuracy_and_calibration_match_their_formulas(result):
    for split in ("train", "test"):
        x, y = split_arrays(result, split)
        p = sigmoid(linear_scores(result, x))[:, 0]
        predicted = p > 0.5
        correct = predicted == (y[:, 0] == 1)
        final = result.final[split]
        assert final["accuracy"] == pytest.approx(correct.mean())
        expected = calibration(np.maximum(p, 1 - p), correct, n_bins=10)
        assert final["ece.ece"] == pytest.approx(expected["ece"], abs=1e-6)
        assert final["ece.count"] == expected["count"]
        got = np.array(final["ece.accuracy"], dtype=float)  # None (empty bin) -> nan
        assert got == pytest.approx(expected["accuracy"], abs=1e-9, nan_ok=True)
    # the measured values the README reports
    assert result.final["test"]["accuracy"] == pytest.approx(0.825)
    assert result.final["test"]["ece.ece"] == pytest.approx(0.0827, abs=5e-4)


def test_the_file_is_what_the_builder_writes():
    assert_builder_writes_files("logistic_binary")
