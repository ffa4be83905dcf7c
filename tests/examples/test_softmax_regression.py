"""examples/softmax_regression.json: multinomial logistic regression on the 8x8 digits.

The objective, mean cross-entropy + λ·Σw² over the weights, is strictly convex in the
weights; L-BFGS must reach the minimum that scikit-learn's LogisticRegression finds with
C = 1/(2λn) (its ½‖w‖² + C·Σ CE, divided by C·n) and predict the same probabilities. With
unpenalised biases the score equations Σ_i (p_ik − t_ik) = 0 hold for every class k.
Accuracy (argmax) and the ECE bins are recomputed from the probabilities.
"""

from __future__ import annotations

import numpy as np
import pytest
from classic_support import (
    assert_builder_writes_files,
    calibration,
    example,
    linear_scores,
    reference_fit,
    run,
    split_arrays,
)
from sklearn.linear_model import LogisticRegression


def softmax(z):
    e = np.exp(z - z.max(1, keepdims=True))
    return e / e.sum(1, keepdims=True)


@pytest.fixture(scope="module")
def result():
    return run("softmax_regression")


@pytest.fixture(scope="module")
def reference(result):
    x, y = split_arrays(result)
    ridge = example("softmax_regression").node("ridge").params["weight"]
    model = LogisticRegression(C=1 / (2 * ridge * len(y)), tol=1e-10, max_iter=100_000)
    return reference_fit(model, x, y)


def test_lbfgs_reaches_the_penalised_maximum_likelihood_fit(result, reference):
    x, y = split_arrays(result)
    ridge = example("softmax_regression").node("ridge").params["weight"]
    p = reference.predict_proba(x)
    best = -np.log(p[np.arange(len(y)), y]).mean() + ridge * (reference.coef_ ** 2).sum()
    assert result.final["train"]["objective"] == pytest.approx(best, rel=1e-4)
    x_test, y_test = split_arrays(result, "test")
    ours = softmax(linear_scores(result, x_test))
    assert np.abs(ours - reference.predict_proba(x_test)).max() < 2e-3
    assert result.final["test"]["accuracy"] == pytest.approx(reference.score(x_test, y_test))
    # the biases are free, so predicted and true class counts agree on the training data
    counts = np.bincount(y, minlength=10)
    assert softmax(linear_scores(result, x)).sum(0) == pytest.approx(counts, abs=0.05)


def test_accuracy_and_calibration_match_their_formulas(result):
    for split in ("train", "test"):
        x, y = split_arrays(result, split)
        p = softmax(linear_scores(result, x))
        correct = p.argmax(1) == y
        final = result.final[split]
        assert final["accuracy"] == pytest.approx(correct.mean())
        expected = calibration(p.max(1), correct, n_bins=10)
        assert final["ece.ece"] == pytest.approx(expected["ece"], abs=1e-5)
        assert final["ece.count"] == expected["count"]
    # the measured values the README reports
    assert result.final["test"]["accuracy"] == pytest.approx(0.9499, abs=1e-4)
    assert result.final["test"]["ece.ece"] == pytest.approx(0.0260, abs=2e-3)


def test_the_file_is_what_the_builder_writes():
    assert_builder_writes_files("softmax_regression")
