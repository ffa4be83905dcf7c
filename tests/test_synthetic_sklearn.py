"""Moons and circles are generated with numpy alone (no scikit-learn import on a first fit),
and give scikit-learn's own numbers for the same seed, noise and size."""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from sklearn import datasets as skd

from nodes.data import _synthetic

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("n", [1, 2, 7, 200, 201])
@pytest.mark.parametrize("noise", [0.0, 10.0, 35.0])
@pytest.mark.parametrize("seed", [0, 3, 2 ** 31 - 1])
def test_moons_equal_sklearn(n, noise, seed):
    x, y = _synthetic.moons(n, noise, seed)
    sx, sy = skd.make_moons(n, noise=noise / 100.0 or None, random_state=seed)
    np.testing.assert_array_equal(x, sx.astype(np.float32))
    np.testing.assert_array_equal(y, sy)
    assert x.dtype == np.float32 and y.dtype == np.int64


@pytest.mark.parametrize("n", [2, 9, 100])
@pytest.mark.parametrize("noise", [0.0, 5.0])
@pytest.mark.parametrize("factor", [0.3, 0.8])
def test_circles_equal_sklearn(n, noise, factor):
    x, y = _synthetic.circles(n, factor, noise, 11)
    sx, sy = skd.make_circles(n, noise=noise / 100.0 or None, factor=factor, random_state=11)
    np.testing.assert_array_equal(x, sx.astype(np.float32))
    np.testing.assert_array_equal(y, sy)


def test_moons_block_does_not_import_sklearn():
    code = ("import sys, nodegraph\n"
            "nodegraph.fit(nodegraph.load('examples/logistic_binary.json'), epochs=1)\n"
            "print('sklearn' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=ROOT)
    assert out.stdout.strip().splitlines()[-1] == "False"
