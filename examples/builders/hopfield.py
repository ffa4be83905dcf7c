"""Hopfield recall graphs: the classic 2-D and 3-D attractor exercises and noisy digits.

No training: the newhop design (energy.HopfieldNewhop, Li–Michel–Porod, as MATLAB's
`newhop`) fixes the weights from the targets, and the graphs are only evaluated
(epochs 0). The starting states are a table typed into the file: the exercises' named points
(the two starts of the 2-D exercise, the unstable fixed points, the spurious
equilibria) and 1000 starts drawn uniformly from [−1, 1]^units with a fixed seed, as
the course's rands(S, 1). The
Hopfield node emits each start's trajectory and energy per iteration and the iteration at
which it settled; metrics report the mean settling time and how far the final states are
from the expected attractor (y).

2-D: W = e^0.15·I, b = 0, so every unit grows on its own and a start settles at the corner
sign(start), the spurious [−1, 1] included; y is that corner (a start on an axis stays on
it: [0, 0], [1, 0], [0, 1] are fixed points). 3-D: y is the nearest target, which every
uniform start reaches (none ends at a spurious point: they are unstable).

hopfield_digits: the newhop design stores the first 8x8 digit of each class
(binarised at half ink, ±1) — written into the file as the node's targets — and recalls
noisy probes (the digit plus Gaussian noise of sd 0.2 to 2.0); y is the clean digit.

    python examples/builders/hopfield.py
    nodegraph run examples/hopfield_2d.json    # also hopfield_3d, hopfield_digits
    nodegraph sample examples/hopfield_3d.json recall    # recall step by step, W and b saved
"""

from __future__ import annotations

import numpy as np
from _classic import save_example, wire

from nodegraph.model.graph import Graph

TARGETS_2D = [[1, 1], [-1, -1], [1, -1]]  # the 2-D exercise's targets
TARGETS_3D = [[-1, -1, 1], [1, -1, -1], [1, 1, 1]]  # the 3-D exercise's targets
STARTS = 1000
LEVELS = (0.2, 0.4, 0.6, 0.8, 1.0, 1.5, 2.0)  # hopfield_digits: the noise sd
DRAWS = 2  # hopfield_digits: probes per digit and level
NAMED_2D = [[0.5, -0.75], [-0.5, 0.75],  # to the target [1, −1], to the spurious [−1, 1]
            [0.0, 0.0], [1.0, 0.0], [0.0, 1.0]]  # unstable fixed points
NAMED_3D = [[-0.0605, -1, -0.0605], [-0.0605, 0.0605, 1], [1, 0.0605, -0.0605],
            [0.3667, -0.3667, 0.3667]]  # the spurious equilibria


def uniform_starts(units: int, seed: int = 0) -> np.ndarray:
    """STARTS points uniform in [−1, 1]^units, rounded to 4 decimals for the file."""
    return np.round(np.random.default_rng(seed).uniform(-1, 1, (STARTS, units)), 4)


def nearest(starts: np.ndarray, targets: list[list[int]]) -> np.ndarray:
    t = np.asarray(targets, dtype=float)
    return t[np.linalg.norm(starts[:, None] - t[None], axis=-1).argmin(1)]


def recall_graph(name: str, starts: np.ndarray, expected: np.ndarray,
                 targets: list[list[int]]) -> Graph:
    """Table of starts → HopfieldNewhop → mean settling iterations, distance to y."""
    units = starts.shape[1]
    xs, ys = [f"x{i + 1}" for i in range(units)], [f"a{i + 1}" for i in range(units)]
    rows = [[float(v) for v in (*s, *e)] for s, e in zip(starts, expected, strict=True)]
    g = Graph(name)
    g.add("data.Table", id="data", columns=xs + ys, rows=rows, inputs=xs, targets=ys,
          val_fraction=0.0, test_fraction=0.0, batch_size=0)
    g.add("energy.HopfieldNewhop", id="hopfield", targets=targets, steps=60)
    g.add("metrics.Mean", id="iterations")
    g.add("metrics.MSE", id="distance")
    wire(g, "data.x -> hopfield.input", "hopfield.iterations -> iterations.input",
         "hopfield.output -> distance.input", "data.y -> distance.target")
    g.update_training(epochs=0, seed=0, device="auto")
    return g


def hopfield_2d() -> Graph:
    starts = np.concatenate([np.asarray(NAMED_2D), uniform_starts(2)])
    return recall_graph("hopfield-2d", starts, np.sign(starts), TARGETS_2D)


def hopfield_3d() -> Graph:
    starts = np.concatenate([np.asarray(NAMED_3D), uniform_starts(3)])
    g = recall_graph("hopfield-3d", starts, nearest(starts, TARGETS_3D), TARGETS_3D)
    # `nodegraph sample examples/hopfield_3d.json recall`: 8 uniform starts, step by step
    g.add("procedures.HopfieldRecall", id="recall", model="hopfield", count=8, steps=60)
    return g


def digit_patterns() -> np.ndarray:
    """The first 8x8 digit of each class 0–9, a pixel +1 where its ink is above half."""
    from sklearn.datasets import load_digits

    digits = load_digits()
    first = [int(np.flatnonzero(digits.target == k)[0]) for k in range(10)]
    return np.where(digits.data[first] / 16 > 0.5, 1.0, -1.0)


def noisy_probes(patterns: np.ndarray, seed: int = 0) -> np.ndarray:
    """For each noise level, DRAWS probes of every digit: pattern + level·N(0, 1) (the digit
    additive Gaussian noise, sd = level·max|x|), rounded to 3 decimals; rows ordered by
    level, then digit, then draw."""
    rng = np.random.default_rng(seed)
    clean = np.repeat(patterns, DRAWS, 0)
    return np.concatenate([np.round(clean + level * rng.standard_normal(clean.shape), 3)
                           for level in LEVELS])


def hopfield_digits() -> Graph:
    patterns = digit_patterns()
    probes = noisy_probes(patterns)
    clean = np.tile(np.repeat(patterns, DRAWS, 0), (len(LEVELS), 1))
    return recall_graph("hopfield-digits", probes, clean, patterns.astype(int).tolist())


def build() -> dict[str, Graph]:
    return {"hopfield_2d": hopfield_2d(), "hopfield_3d": hopfield_3d(),
            "hopfield_digits": hopfield_digits()}


if __name__ == "__main__":
    for file_name, graph in build().items():
        save_example(graph, file_name)
