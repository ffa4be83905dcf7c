"""Polynomial regression of rising degree: the bias-variance table.

The classic table fits polynomials of degree 1, 3, 5 and 300 by least squares to noisy samples of
the cubic t = 0.5x³ + 0.3x² − 0.25x + 1 + w, w ~ N(0, 1), and report that the
training loss keeps falling with the degree while the test loss is best near the true
degree and explodes at 300. N, the x range and the split are not given, so the graph picks
them: 60 points uniform on [−2, 2] (seed 1), half for training, half for testing, noise
76.8 % of the cubic's spread there (a standard deviation of about 1, as in the classic table).

The graph is Polynomial data -> PolynomialFeatures(degree) -> Linear -> MSE, solved exactly
by the LeastSquares block, which works in float64. Inputs are z-scored so the powers stay
of moderate size. Degree 15 on 30 training points stands in for the table's 300: its
monomial design has a condition number of 2·10⁷, which float64 normal equations still
solve exactly (float32 ones stopped at degree 8), while the model itself computes in
float32 and x¹⁵ is as far as its predictions stay exact to 4 digits; 300 would need an
orthogonal basis. The sweep:

    nodegraph sweep examples/poly_bias_variance.json --grid poly.degree=1,3,5,10,15 \
        --metric test.mse

    python examples/builders/poly_bias_variance.py
"""

from __future__ import annotations

from _classic import save_all, wire

from nodegraph.model.graph import Graph

CUBIC = [1.0, -0.25, 0.3, 0.5]  # 0.5x³ + 0.3x² − 0.25x + 1, lowest order first


def build() -> dict[str, Graph]:
    g = Graph("poly-bias-variance")
    g.add("data.Polynomial", id="data", coefficients=CUBIC, x_min=-2.0, x_max=2.0, n=60,
          noise=76.8, seed=1, val_fraction=0.0, test_fraction=0.5, batch_size=0,
          normalize="zscore")
    g.add("layers.PolynomialFeatures", id="poly", degree=3)
    g.add("layers.Linear", id="linear", out_features=1)
    g.add("losses.MSE", id="mse")
    g.add("optimizers.LeastSquares", id="opt", iterations=3)
    wire(g, "data.x -> poly.input", "poly.output -> linear.input", "linear.output -> mse.input",
         "data.y -> mse.target", "mse.loss -> opt.loss")
    g.update_training(epochs=1, seed=0, device="auto")
    return {"poly_bias_variance": g}


if __name__ == "__main__":
    save_all(build())
