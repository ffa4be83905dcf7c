"""The export recipes of the built-in data blocks: numpy lines that make a block's arrays.

`nodegraph export --to python` writes a graph's data as code where it can (see
`nodegraph.interop.export.data`): a recipe, declared on the block as ``recipe=``, gives the
lines that make the block's full `x` and `y` (an sklearn loader, a seeded generator) from
its params; the exporter adds the split and the scaling, runs the function and keeps it only
when it reproduces the dataset nodegraph built exactly, so a recipe that drifts from its
block's builder falls back to the saved arrays instead of giving other numbers.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from nodegraph.kinds.dataset import DataParams
from nodegraph.model.spec import Params


class Drawn(Protocol):
    """What the recipe of a seeded generator reads (every such block's view has it)."""

    n: int
    noise: float
    seed: int

    def get(self, name: str, default: Any = None, /) -> Any: ...  # a param it may lack


class Sampled(Drawn, Protocol):
    """What the recipe of a y = f(x) + noise block reads."""

    x_min: float
    x_max: float
    spacing: str


def _truth_table(gate: str) -> Callable[[Any], list[str]]:
    def lines(p: Drawn) -> list[str]:
        corners = "np.array([[0, 0], [0, 1], [1, 0], [1, 1]], dtype=np.float32)"
        out = [f"x = {corners}" if p.n == 4 else f"x = {corners}[np.arange({p.n}) % 4]",
               f"y = {gate}"]
        if p.noise:
            out += [f"rng = np.random.default_rng({p.seed})",
                    f"x = (x + rng.normal(0.0, {p.noise / 100.0!r}, size=x.shape))"
                    ".astype(np.float32)"]
        return out + _labels(p.get("target"))
    return lines


def _labels(target: str | None) -> list[str]:
    """0/1 labels as a float column for BCE, or as class indices, by the block's `target`
    param (None: it has none)."""
    if target is None:
        return []
    return ["y = y.astype(np.float32)[:, None]  # one 0/1 column, for BCE" if target == "binary"
            else "y = y.astype(np.int64)  # class indices"]


class NoisyLineParams(DataParams):
    slope: float
    intercept: float
    noise: float
    n: int
    x_min: float
    x_max: float
    seed: int


def _noisy_line(p: NoisyLineParams) -> list[str]:
    return [f"rng = np.random.default_rng({p.seed})",
            f"x = rng.uniform({p.x_min!r}, {p.x_max!r}, size=({p.n}, 1)).astype(np.float32)",
            f"noise = rng.normal(0.0, {p.noise!r}, size=({p.n}, 1))",
            f"y = ({p.slope!r} * x {'-' if p.intercept < 0 else '+'} {abs(p.intercept)!r} + noise)"
            ".astype(np.float32)"]


def _sklearn_classes(loader: str) -> Callable[[Any], list[str]]:
    return lambda p: [f"x, y = {loader}(return_X_y=True)",
                      "x, y = x.astype(np.float32), y.astype(np.int64)"]


class DiabetesParams(DataParams):
    scaled: bool


def _diabetes(p: DiabetesParams) -> list[str]:
    return [f"x, y = load_diabetes(return_X_y=True, scaled={p.scaled})",
            "x, y = x.astype(np.float32), y.astype(np.float32)[:, None]"]


class DigitsParams(DataParams):
    size: int
    layout: str


def _digits(p: DigitsParams) -> list[str]:
    lines = ["digits = load_digits()",
             "x = digits.images[:, None].astype(np.float32) / 16.0  # pixels are 0..16"]
    if p.size != 8:  # bilinear upsampling, an MNIST stand-in
        lines += ["x = torch.nn.functional.interpolate(torch.from_numpy(x), "
                  f"size=({p.size}, {p.size}),",
                  '                                    mode="bilinear", align_corners=False)'
                  ".numpy()"]
    if p.layout == "flat":
        lines.append("x = x.reshape(len(x), -1)")
    return [*lines, "y = digits.target.astype(np.int64)"]


def _noise(p: Drawn) -> str:
    return repr(p.noise / 100.0) if p.noise else "None"


class MoonsParams(DataParams):
    target: str
    n: int
    noise: float
    seed: int


def _moons(p: MoonsParams) -> list[str]:
    return [f"x, y = make_moons({p.n}, noise={_noise(p)}, random_state={p.seed})",
            "x = x.astype(np.float32)", *_labels(p.target)]


class CirclesParams(DataParams):
    target: str
    n: int
    factor: float
    noise: float
    seed: int


def _circles(p: CirclesParams) -> list[str]:
    return [f"x, y = make_circles({p.n}, noise={_noise(p)}, factor={p.factor!r}, "
            f"random_state={p.seed})", "x = x.astype(np.float32)", *_labels(p.target)]


class BlobsParams(DataParams):
    centers: int
    n: int
    noise: float
    seed: int


def _blobs(p: BlobsParams) -> list[str]:
    centres = ("centres = np.zeros((1, 2))" if p.centers == 1 else
               f"angle = 2 * np.pi * np.arange({p.centers}) / {p.centers}")
    lines = [centres]
    if p.centers > 1:
        lines.append("centres = np.stack([np.cos(angle), np.sin(angle)], axis=1)  # unit circle")
    return [*lines, f"x, y = make_blobs({p.n}, centers=centres, cluster_std="
            f"{p.noise / 100.0!r}, random_state={p.seed})",
            "x, y = x.astype(np.float32), y.astype(np.int64)"]


def _regression(formula: Callable[[Any], str]) -> Callable[[Any], list[str]]:
    """y = f(x) + noise whose std is `noise` % of the clean signal's."""
    def lines(p: Sampled) -> list[str]:
        sample = (f"np.linspace({p.x_min!r}, {p.x_max!r}, {p.n})" if p.spacing == "grid"
                  else f"rng.uniform({p.x_min!r}, {p.x_max!r}, size={p.n})")
        return [f"rng = np.random.default_rng({p.seed})", f"x = {sample}[:, None]",
                f"clean = {formula(p)}",
                f"sigma = {p.noise!r} / 100.0 * float(np.std(clean))",
                "y = clean + rng.normal(0.0, 1.0, size=clean.shape) * sigma",
                "x, y = x.astype(np.float32), y.astype(np.float32)"]
    return lines


xor = _truth_table("x[:, 0] != x[:, 1]  # x1 XOR x2")
nand = _truth_table("~((x[:, 0] == 1) & (x[:, 1] == 1))  # NOT (x1 AND x2)")
noisy_line = _noisy_line
iris = _sklearn_classes("load_iris")
wine = _sklearn_classes("load_wine")
breast_cancer = _sklearn_classes("load_breast_cancer")
diabetes = _diabetes
digits = _digits
moons = _moons
circles = _circles
blobs = _blobs


class PolynomialParams(Params):
    coefficients: list[float]


def _polynomial(p: PolynomialParams) -> str:
    return f"np.polynomial.polynomial.polyval(x, {list(p.coefficients)!r})"


class SinusoidParams(Params):
    amplitude: float
    frequency: float
    phase: float


def _sinusoid(p: SinusoidParams) -> str:
    return f"{p.amplitude!r} * np.sin(2 * np.pi * {p.frequency!r} * x + {p.phase!r})"


polynomial = _regression(_polynomial)
sinusoid = _regression(_sinusoid)
sin_squared = _regression(lambda p: "np.sin(x ** 2)")
