"""examples/poly_bias_variance.json shows the pattern of seed 002 Table 1 (L223-229).

The notes' exact losses are not reproducible (N, x range and split are unstated; the digest
notes they are inconsistent with unit-variance noise), so the test checks the pattern on the
file's draw — training loss falls with every degree, test loss is best at degree 3-5 and
explodes at the highest degree — and that each fit is the exact least-squares solution
(numpy's float64 lstsq on the same z-scored training inputs), up to degree 15 on 30
training points, where the float32 solver of the first version was off from degree 9.
"""

from __future__ import annotations

import numpy as np
import pytest
from classic_support import assert_builder_writes_files, run

DEGREES = (1, 3, 5, 10, 15)  # the notes' 1, 3, 5 and 300 (out of reach of monomials)


def exact_mse(result, degree: int) -> dict[str, float]:
    """Train and test MSE of the float64 least-squares polynomial fit on the same splits."""
    data = result.compiled.datasets["data"]

    def design(split):
        x, y = (t.double().numpy()[:, 0] for t in data.tensors(split).values())
        return np.vander(x, degree + 1, increasing=True), y

    x_train, y_train = design("train")
    coef = np.linalg.lstsq(x_train, y_train, rcond=None)[0]
    return {s: float(np.mean((x @ coef - y) ** 2))
            for s, (x, y) in (("train", (x_train, y_train)), ("test", design("test")))}


@pytest.fixture(scope="module")
def fits() -> dict[int, object]:
    return {d: run("poly_bias_variance", poly__degree=d) for d in DEGREES}


def test_each_degree_is_the_exact_least_squares_fit(fits):
    for degree, result in fits.items():
        exact = exact_mse(result, degree)
        # the model predicts in float32: x¹⁵ costs the 4th digit at most
        assert result.final["train"]["mse"] == pytest.approx(exact["train"], rel=2e-4)
        assert result.final["test"]["mse"] == pytest.approx(exact["test"], rel=2e-4)


def test_training_loss_falls_with_the_degree(fits):
    train = [fits[d].final["train"]["mse"] for d in DEGREES]
    assert all(a > b for a, b in zip(train, train[1:], strict=False)), train
    # the measured values, for the README's table
    assert train == pytest.approx([0.8651, 0.4153, 0.4088, 0.3760, 0.2180], rel=2e-3)


def test_test_loss_is_best_near_the_true_degree_and_explodes_at_the_highest(fits):
    test = {d: fits[d].final["test"]["mse"] for d in DEGREES}
    best = min(test, key=test.get)
    assert best in (3, 5)
    assert test[1] > 1.2 * test[best]  # the line underfits
    assert test[10] > 2 * test[best]  # overfitting has begun
    assert test[15] > 1000 * test[best]  # degree 15 on 30 points: wild between them
    assert [test[d] for d in DEGREES] == pytest.approx([0.9807, 0.7702, 0.7557, 1.630,
                                                       2283], rel=2e-3)


def test_the_file_is_what_the_builder_writes():
    assert_builder_writes_files("poly_bias_variance")
