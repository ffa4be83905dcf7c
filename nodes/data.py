"""Data sources: blocks that hand the trainer a whole dataset, split and ready to batch.

Every source outputs `x` (inputs) and `y` (targets) and shares the split, batching and
normalisation params of `nodegraph.dataset.DATA_PARAMS`.
"""

from __future__ import annotations

import numpy as np

from nodegraph.dataset import data_params, from_arrays
from nodegraph.errors import NodegraphError
from nodegraph.spec import Param, Port, block, choice_param, float_param, int_param, str_param

X = Port("x", doc="inputs, one row per sample")
Y = Port("y", doc="targets, one row per sample")


def _xor(p):
    x = np.array([[0, 0], [0, 1], [1, 0], [1, 1]], dtype=np.float32)
    y = (x[:, 0] != x[:, 1]).astype(np.float32)
    y = y[:, None] if p.target == "binary" else y.astype(np.int64)
    return from_arrays({"x": x, "y": y}, p)


def _noisy_line(p):
    rng = np.random.default_rng(p.seed)
    x = rng.uniform(p.x_min, p.x_max, size=(p.n, 1)).astype(np.float32)
    y = p.slope * x + p.intercept + rng.normal(0.0, p.noise, size=(p.n, 1))
    return from_arrays({"x": x, "y": y.astype(np.float32)}, p)


def _table(p):
    cols = list(p.columns)
    rows = p.rows
    if not rows or any(not isinstance(r, list) or len(r) != len(cols) for r in rows):
        raise NodegraphError(f"every row must be a list of {len(cols)} values ({cols})")
    missing = [c for c in [*p.inputs, *p.targets, *([p.split_column] if p.split_column else [])]
               if c not in cols]
    if missing:
        raise NodegraphError(f"columns {missing} are not in the table (columns: {cols})")
    if not p.inputs or not p.targets:
        raise NodegraphError("name at least one input column and one target column")

    def column(name, dtype):
        try:
            return np.array([r[cols.index(name)] for r in rows], dtype=dtype)
        except (TypeError, ValueError):
            raise NodegraphError(f"column '{name}' holds a value that is not a number") from None

    x = np.stack([column(c, np.float32) for c in p.inputs], axis=1)
    if p.target_kind == "class":
        y = column(p.targets[0], np.float64).astype(np.int64)
    else:
        y = np.stack([column(c, np.float32) for c in p.targets], axis=1)
    given = None
    if p.split_column:
        labels = [r[cols.index(p.split_column)] for r in rows]
        bad = sorted({str(v) for v in labels} - {"train", "val", "test"})
        if bad:
            raise NodegraphError(f"split column values must be train, val or test, not {bad}")
        given = {s: np.array([i for i, v in enumerate(labels) if v == s], dtype=np.int64)
                 for s in ("train", "val", "test")}
    return from_arrays({"x": x, "y": y}, p, given_splits=given)


TARGET = choice_param("target", ("binary", "class"), "binary",
                      "binary: y is a float column of 0/1 (for BCE); class: y holds class "
                      "indices (for cross-entropy)")

BLOCKS = [
    block("data.XOR", "data",
          "The four points of the XOR truth table.\n\nThe classic problem a single linear "
          "layer cannot solve: y = x1 XOR x2.",
          _xor, outputs=[X, Y], params=[TARGET, *data_params(batch_size=4)],
          keywords=("logic", "truth table", "toy")),
    block("data.NoisyLine", "data",
          "Points on a straight line y = slope*x + intercept with Gaussian noise.\n\n"
          "For checking that a regression recovers known parameters.",
          _noisy_line, outputs=[X, Y],
          params=[float_param("slope", 2.0, "slope of the true line"),
                  float_param("intercept", -1.0, "intercept of the true line"),
                  float_param("noise", 0.1, "standard deviation of the added noise", min=0),
                  int_param("n", 200, "number of samples", min=2),
                  float_param("x_min", -1.0, "smallest x"), float_param("x_max", 1.0, "largest x"),
                  int_param("seed", 0, "seed of the generator", min=0),
                  *data_params(val_fraction=0.2)],
          keywords=("regression", "synthetic", "linear")),
    block("data.Table", "data",
          "A small table typed into the graph file: named columns, rows of numbers.\n\n"
          "`inputs` name the columns that form x, `targets` those that form y. An optional "
          "split column holding train/val/test fixes the split by hand.",
          _table, outputs=[X, Y],
          params=[Param("columns", "strs", doc="column names, in row order"),
                  Param("rows", "json", doc="the rows: a list of lists of values"),
                  Param("inputs", "strs", doc="columns that form the input x"),
                  Param("targets", "strs", doc="columns that form the target y"),
                  choice_param("target_kind", ("value", "class"), "value",
                               "value: y is float (regression); class: y holds class indices"),
                  str_param("split_column", "", "a column of train/val/test labels; empty "
                            "means split by the split params"),
                  *data_params(batch_size=0, shuffle=False)],
          keywords=("inline", "csv", "tabular")),
]
