"""examples/poly_bias_variance.json shows the pattern of seed 002 Table 1 (L223-229).

The notes' exact losses are not reproducible (N, x range and split are unstated; the digest
notes they are inconsistent with unit-variance noise), so the test checks the pattern on the
file's draw — training loss falls with every degree, test loss is best at degree 3-5 and
explodes at the highest degree — and that each fit is the exact least-squares solution
(numpy's float64 lstsq on the same z-scored training inputs).
"""

from __future__ import annotations

import numpy as np
import pytest
from classic_support import assert_builder_writes_files, run

DEGREES = (1, 3, 5, 8)  # the notes' 1, 3, 5, 300, with 8 the highest exact float32 fit


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
        assert result.final["train"]["mse"] == pytest.approx(exact["train"], rel=1e-4)
        assert result.final["test"]["mse"] == pytest.approx(exact["test"], rel=1e-2)


def test_training_loss_falls_with_the_degree(fits):
    train = [fits[d].final["train"]["mse"] for d in DEGREES]
    assert all(a > b for a, b in zip(train, train[1:], strict=False)), train
    # the measured values, for the README's table
    assert train == pytest.approx([1.250, 0.6621, 0.6257, 0.1625], rel=2e-3)


def test_test_loss_is_best_near_the_true_degree_and_explodes_at_the_highest(fits):
    test = {d: fits[d].final["test"]["mse"] for d in DEGREES}
    best = min(test, key=test.get)
    assert best in (3, 5)
    assert test[1] > 1.4 * test[best]  # the line underfits
    assert test[8] > 100 * test[best]  # degree 8 on 15 points: wild between and beyond them
    assert test[3] == pytest.approx(1.482, rel=2e-3)
    assert test[5] == pytest.approx(1.443, rel=2e-3)


def test_the_file_is_what_the_builder_writes():
    assert_builder_writes_files("poly_bias_variance")
