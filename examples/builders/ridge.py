"""Ridge and lasso on collinear features.

The data: x2 is an exact copy of x1 and x4 is pure noise, y = 4·x1 + 1.5·x3 + noise. XᵀX is
singular (rank 4 of 5 with the bias column), so plain least squares has no unique solution:
only w1 + w2 is determined, and the solver's Newton step leaves the split between the two
copies where the initial weights put it. Ridge, minimising
‖y − Xw − b‖² + λ‖w‖² with the bias spared (losses.SSE, LeastSquares ridge λ,
decay weights_only), is unique for any λ > 0: w = (XᵀX + λD)⁻¹Xᵀy on the design with a
column of ones, D = diag(1, …, 1, 0). The objective 2/n‖y − Xw‖² + λ/2‖w‖², as some texts write it,
has its minimiser at (XᵀX + nλ/4·I)⁻¹Xᵀy, not at the (XᵀX + λI)⁻¹Xᵀy they print; the
example states the penalty the way the solver applies it.

The lasso (losses.MSE + optimizers.ProximalGD l1 λ, FISTA) sets the noise feature's weight
to exactly 0; its solution is scikit-learn's Lasso(alpha = λ/2).

ridge_lasso.json: least squares, ridge and lasso side by side, test MSE each.
ridge_path.json: procedures.RegularizationPath retrains the ridge model for λ from 0 to
10⁴ and yields w(λ); every weight shrinks towards 0 as λ grows.

    python examples/builders/ridge.py
"""

from __future__ import annotations

import numpy as np
from _classic import save_all, wire

from nodegraph.model.graph import Graph

RIDGE = 5.0
L1 = 0.2
PATH = [0.0, 0.01, 0.1, 1.0, 10.0, 100.0, 1000.0, 10000.0]


def rows() -> list[list]:
    rng = np.random.default_rng(0)
    n = 60
    x1, x3, x4 = rng.normal(size=(3, n))
    y = 4 * x1 + 1.5 * x3 + 0.5 * rng.normal(size=n)
    split = ["train"] * 40 + ["test"] * 20
    return [[round(float(a), 4), round(float(a), 4), round(float(c), 4), round(float(d), 4),
             round(float(t), 4), s] for a, c, d, t, s in zip(x1, x3, x4, y, split, strict=True)]


def data(g: Graph) -> None:
    g.add("data.Table", id="data", columns=["x1", "x2", "x3", "x4", "y", "split"],
          rows=rows(), inputs=["x1", "x2", "x3", "x4"], targets=["y"],
          split_column="split")


def model(g: Graph, name: str, loss: str, optimizer: str, **opt) -> None:
    g.add("layers.Linear", id=name, out_features=1)
    g.add(loss, id=f"{name}_loss")
    g.add(optimizer, id=f"{name}_opt", decay="weights_only", scope=[name], **opt)
    g.add("metrics.MSE", id=f"{name}_mse")
    wire(g, f"data.x -> {name}.input", f"{name}.output -> {name}_loss.input",
         f"data.y -> {name}_loss.target", f"{name}_loss.loss -> {name}_opt.loss",
         f"{name}.output -> {name}_mse.input", f"data.y -> {name}_mse.target")


def ridge_lasso() -> Graph:
    g = Graph("ridge-lasso")
    data(g)
    model(g, "ls", "losses.SSE", "optimizers.LeastSquares")
    model(g, "ridge", "losses.SSE", "optimizers.LeastSquares", ridge=RIDGE)
    model(g, "lasso", "losses.MSE", "optimizers.ProximalGD", l1=L1, lr=0.05)
    g.update_training(epochs=300, seed=0, device="auto")
    return g


def ridge_path() -> Graph:
    g = Graph("ridge-path")
    data(g)
    model(g, "ridge", "losses.SSE", "optimizers.LeastSquares", ridge=RIDGE)
    g.add("procedures.RegularizationPath", id="path", model="ridge", optimizer="ridge_opt",
          param="ridge", values=PATH)
    g.update_training(epochs=1, seed=0, device="auto")
    return g


def build() -> dict[str, Graph]:
    return {"ridge_lasso": ridge_lasso(), "ridge_path": ridge_path()}


if __name__ == "__main__":
    save_all(build())
