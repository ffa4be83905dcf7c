"""Synthetic data generators behind the data blocks: plain numpy, seeded, documented formulas.

Every generator takes a `numpy.random.Generator` and returns arrays; the blocks in
`nodes/data/core.py` turn them into datasets. Noise levels are percentages so one slider means
the same thing on every set: for a 1-D regression, the noise standard deviation as a share
of the clean signal's standard deviation; for a 2-D point set, the standard deviation of the
jitter as a share of the set's unit length (a radius of 1, or the side of the unit square).
With noise 0 every generator returns its formula exactly.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from nodegraph.model.errors import NodegraphError

Arrays = tuple[np.ndarray, np.ndarray]


# -- 1-D regression ----------------------------------------------------------------------

def sample_x(n: int, x_min: float, x_max: float, spacing: str,
             rng: np.random.Generator) -> np.ndarray:
    """n inputs in [x_min, x_max] as a column: evenly spaced (ends included) or uniform."""
    if x_max <= x_min:
        raise NodegraphError(f"x_max ({x_max}) must be larger than x_min ({x_min})")
    if spacing == "grid":
        x = np.linspace(x_min, x_max, n)
    else:
        x = rng.uniform(x_min, x_max, size=n)
    return x[:, None]


def add_noise(clean: np.ndarray, percent: float, rng: np.random.Generator) -> np.ndarray:
    """`clean` plus Gaussian noise whose std is `percent` % of the std of `clean`."""
    sigma = percent / 100.0 * float(np.std(clean))
    return clean + rng.normal(0.0, 1.0, size=clean.shape) * sigma


def regression(f: Callable[[np.ndarray], np.ndarray], n: int, x_min: float, x_max: float,
               spacing: str, noise: float, seed: int) -> Arrays:
    """Inputs x and noisy targets y = f(x) + noise, both float32 columns (N, 1)."""
    rng = np.random.default_rng(seed)
    x = sample_x(n, x_min, x_max, spacing, rng)
    y = add_noise(f(x), noise, rng)
    return x.astype(np.float32), y.astype(np.float32)


def polynomial(coefficients: list[float]) -> Callable[[np.ndarray], np.ndarray]:
    """x -> c0 + c1 x + c2 x² + ... (lowest order first)."""
    if not coefficients:
        raise NodegraphError("give at least one coefficient (c0 + c1 x + c2 x² ...)")
    return lambda x: np.polynomial.polynomial.polyval(x, coefficients)


# -- 2-D point sets ----------------------------------------------------------------------

def jitter(x: np.ndarray, percent: float, rng: np.random.Generator) -> np.ndarray:
    """Points plus isotropic Gaussian noise of std `percent` % of the unit length."""
    return x + rng.normal(0.0, percent / 100.0, size=x.shape)


def truth_table(gate: Callable[[np.ndarray, np.ndarray], np.ndarray], n: int, noise: float,
                seed: int) -> Arrays:
    """The corners of {0,1}² in the order 00, 01, 10, 11, repeated to n rows, with the
    gate's output as y (float 0/1); noise jitters the inputs only."""
    corners = np.array([[0, 0], [0, 1], [1, 0], [1, 1]], dtype=np.float64)
    x = corners[np.arange(n) % 4]
    y = gate(x[:, 0] == 1, x[:, 1] == 1).astype(np.float32)
    if noise:
        x = jitter(x, noise, np.random.default_rng(seed))
    return x.astype(np.float32), y


def _shuffled(x: np.ndarray, y: np.ndarray, rng: np.random.Generator) -> Arrays:
    order = rng.permutation(len(x))
    return x[order].astype(np.float32), y[order].astype(np.int64)


def _sklearn_order(x: np.ndarray, y: np.ndarray, noise: float, seed: int) -> Arrays:
    """Shuffle, then jitter with std `noise`, as scikit-learn's make_moons and make_circles
    do with `random_state=seed` (a legacy RandomState: shuffled indices, then normal draws):
    the same numbers, without importing scikit-learn (a second of start-up)."""
    rng = np.random.RandomState(seed)
    order = np.arange(len(x))
    rng.shuffle(order)
    x, y = x[order], y[order]
    if noise:
        x = x + rng.normal(scale=noise, size=x.shape)
    return x.astype(np.float32), y.astype(np.int64)


def _halves(n: int) -> tuple[int, int]:
    return n // 2, n - n // 2


def moons(n: int, noise: float, seed: int) -> Arrays:
    """Two interleaved half circles of radius 1 (scikit-learn's make_moons, number for
    number): class 0 on (cos t, sin t), class 1 on (1 - cos t, 0.5 - sin t), t in [0, π]."""
    n_out, n_in = _halves(n)
    t_out, t_in = np.linspace(0, np.pi, n_out), np.linspace(0, np.pi, n_in)
    x = np.vstack([np.append(np.cos(t_out), 1 - np.cos(t_in)),
                   np.append(np.sin(t_out), 1 - np.sin(t_in) - 0.5)]).T
    y = np.hstack([np.zeros(n_out, dtype=np.int64), np.ones(n_in, dtype=np.int64)])
    return _sklearn_order(x, y, noise / 100.0, seed)


def circles(n: int, factor: float, noise: float, seed: int) -> Arrays:
    """Two concentric circles (scikit-learn's make_circles, number for number): class 0 of
    radius 1, class 1 of radius `factor`."""
    n_out, n_in = _halves(n)
    t_out = np.linspace(0, 2 * np.pi, n_out, endpoint=False)
    t_in = np.linspace(0, 2 * np.pi, n_in, endpoint=False)
    x = np.vstack([np.append(np.cos(t_out), np.cos(t_in) * factor),
                   np.append(np.sin(t_out), np.sin(t_in) * factor)]).T
    y = np.hstack([np.zeros(n_out, dtype=np.int64), np.ones(n_in, dtype=np.int64)])
    return _sklearn_order(x, y, noise / 100.0, seed)


def blob_centres(k: int) -> np.ndarray:
    """k centres evenly spaced on the unit circle (one centre sits at the origin)."""
    if k == 1:
        return np.zeros((1, 2))
    angle = 2 * np.pi * np.arange(k) / k
    return np.stack([np.cos(angle), np.sin(angle)], axis=1)


def blobs(n: int, k: int, noise: float, seed: int) -> Arrays:
    """Isotropic Gaussian blobs around `blob_centres(k)`, std `noise` % (make_blobs)."""
    from sklearn import datasets as skd

    x, y = skd.make_blobs(n, centers=blob_centres(k), cluster_std=noise / 100.0,
                          random_state=seed)
    return x.astype(np.float32), y.astype(np.int64)


def spirals(n: int, k: int, turns: float, noise: float, seed: int) -> Arrays:
    """k interleaved spiral arms: arm c has points r (cos a, sin a) with r uniform in
    (0, 1] and a = 2π (turns r + c / k)."""
    rng = np.random.default_rng(seed)
    y = np.arange(n) % k
    r = 1.0 - rng.uniform(0.0, 1.0, size=n)  # in (0, 1]: no point sits on every arm at once
    a = 2 * np.pi * (turns * r + y / k)
    x = jitter(np.stack([r * np.cos(a), r * np.sin(a)], axis=1), noise, rng)
    return _shuffled(x, y, rng)


def _in_annulus(n: int, r_in: float, r_out: float, rng: np.random.Generator) -> np.ndarray:
    """n points uniform in area between radii r_in and r_out."""
    r = np.sqrt(rng.uniform(r_in ** 2, r_out ** 2, size=n))
    a = rng.uniform(0.0, 2 * np.pi, size=n)
    return np.stack([r * np.cos(a), r * np.sin(a)], axis=1)


def disc_ring(n: int, inner_radius: float, outer_radius: float, noise: float,
              seed: int) -> Arrays:
    """Class 0 uniform in the unit disc, class 1 uniform in the ring between the radii
    (half the samples each): separable by r² = x1² + x2² but by no straight line."""
    if not 1.0 <= inner_radius < outer_radius:
        raise NodegraphError(f"the ring needs 1 <= inner_radius < outer_radius, got "
                             f"{inner_radius} and {outer_radius}")
    rng = np.random.default_rng(seed)
    n_disc = (n + 1) // 2
    x = np.concatenate([_in_annulus(n_disc, 0.0, 1.0, rng),
                        _in_annulus(n - n_disc, inner_radius, outer_radius, rng)])
    y = np.repeat([0, 1], [n_disc, n - n_disc])
    return _shuffled(jitter(x, noise, rng), y, rng)


def mixture_components(k: int, weights: list[float], noise: float,
                       rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Random means in [-1, 1]², square roots A of the covariances A Aᵀ (A = R diag(s)
    with s uniform in [0.5, 1.5] × noise % and R a random rotation), and the mixing
    weights (equal if none are given)."""
    if weights and len(weights) != k:
        raise NodegraphError(f"give one weight per component: {k} components, "
                             f"{len(weights)} weights")
    w = np.asarray(weights if weights else [1.0] * k, dtype=np.float64)
    if (w < 0).any() or w.sum() <= 0:
        raise NodegraphError("mixing weights must be >= 0 and not all zero")
    means = rng.uniform(-1.0, 1.0, size=(k, 2))
    scales = rng.uniform(0.5, 1.5, size=(k, 2)) * noise / 100.0
    angle = rng.uniform(0.0, np.pi, size=k)
    c, s = np.cos(angle), np.sin(angle)
    rot = np.stack([np.stack([c, -s], -1), np.stack([s, c], -1)], axis=1)  # (k, 2, 2)
    return means, rot * scales[:, None, :], w / w.sum()


def gaussian_mixture(n: int, k: int, weights: list[float], noise: float,
                     seed: int) -> tuple[np.ndarray, np.ndarray, tuple]:
    """Samples of a 2-D Gaussian mixture, the component as class, and the components
    (means, covariances, weights) they were drawn from."""
    rng = np.random.default_rng(seed)
    means, roots, w = mixture_components(k, weights, noise, rng)
    y = rng.choice(k, size=n, p=w)
    x = means[y] + np.einsum("nij,nj->ni", roots[y], rng.normal(size=(n, 2)))
    covs = roots @ roots.transpose(0, 2, 1)
    return x.astype(np.float32), y.astype(np.int64), (means, covs, w)
