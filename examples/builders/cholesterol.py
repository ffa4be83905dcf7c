"""Cholesterol from age and BMI: a lecture example's ten-patient table, two ways.

cholesterol.json solves the normal equations θ* = (XᵀX)⁻¹Xᵀy with the LeastSquares block
(one Newton step is exact for a squared loss on a linear model; a second one polishes off
float32 rounding). cholesterol_lbfgs.json reaches the same θ iteratively with L-BFGS; it
z-scores the inputs first, because XᵀX of the raw inputs has a condition number of about
2·10⁶ and L-BFGS in float32 stalls on it. The data sit in the file as a table whose split
column reproduces the lecture's split: rows 1, 3, 5, 7, 9 train, rows 2, 4, 6, 8, 10 test.

    python examples/builders/cholesterol.py
"""

from __future__ import annotations

from _classic import save_all, score, wire

from nodegraph.model.graph import Graph

# (age, BMI, cholesterol) of the lecture's ten patients
ROWS = [(25, 22.5, 180), (30, 24.0, 190), (35, 26.5, 210), (40, 28.0, 220), (45, 29.5, 240),
        (50, 30.0, 250), (55, 31.5, 260), (60, 32.0, 270), (65, 33.5, 280), (70, 34.0, 290)]


def table_rows() -> list[list]:
    """The rows with their split: the lecture's odd rows (1, 3, ...) train, even rows test."""
    return [[age, bmi, chol, "train" if i % 2 == 0 else "test"]
            for i, (age, bmi, chol) in enumerate(ROWS)]


def regression(name: str, optimizer: str, normalize: str, epochs: int, **opt_params) -> Graph:
    """Table -> Linear(2 -> 1) -> MSE, minimised by `optimizer`, scored by two R²."""
    g = Graph(name)
    g.add("data.Table", id="data", columns=["age", "bmi", "cholesterol", "split"],
          rows=table_rows(), inputs=["age", "bmi"], targets=["cholesterol"],
          split_column="split", normalize=normalize)
    g.add("layers.Linear", id="linear", out_features=1)
    g.add("losses.MSE", id="mse")
    g.add(optimizer, id="opt", **opt_params)
    wire(g, "data.x -> linear.input", "linear.output -> mse.input", "data.y -> mse.target",
         "mse.loss -> opt.loss")
    score(g, "linear", r2="metrics.R2", r2_explained="metrics.R2")
    g.set_param("r2_explained", "definition", "var_ratio")
    g.update_training(epochs=epochs, seed=0, device="auto")
    return g


def build() -> dict[str, Graph]:
    return {
        "cholesterol": regression("cholesterol", "optimizers.LeastSquares", "none", 1,
                                  iterations=2),
        "cholesterol_lbfgs": regression("cholesterol-lbfgs", "optimizers.LBFGS", "zscore", 5,
                                        line_search_fn="strong_wolfe"),
    }


if __name__ == "__main__":
    save_all(build())
