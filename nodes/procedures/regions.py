"""Linear regions of a ReLU network: count them on a grid and compare with the bound.

A ReLU MLP is piecewise linear: inside a region where the same units are active it is one
affine map. With one hidden layer of n units on a 2-D input, each unit splits the plane
along the line w_i·x + b_i = 0, and n lines cut the plane into at most
R_2(n) = C(n,0) + C(n,1) + C(n,2) = ½(n² + n + 2) regions, reached
when no two lines are parallel and no three meet in a point. One can check
this empirically by counting activation patterns: evaluate the units on a dense grid,
read each point's pattern of signs, and count the distinct patterns. For one hidden layer
every pattern's region is convex, so distinct patterns are regions; a deeper network's
pattern may cover several pieces, and the count is then a lower bound of its regions.

Each frame is one grid resolution (coarse to fine): the regions found, the bound, and an
image of the regions, so the count visibly converges as thin regions get sampled.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from math import comb
from typing import Any

import numpy as np
import torch

from nodegraph.kinds.declare import procedure
from nodegraph.kinds.procedure_context import Procedure, ProcedureContext
from nodegraph.model.errors import NodegraphError
from nodegraph.model.spec import (
    Param,
    Params,
    float_param,
    str_param,
)


def region_bound(n: int, d: int = 2) -> int:
    """R_d(n) = Σ_{k=0}^{d} C(n, k): the most regions n hyperplanes cut R^d into."""
    return sum(comb(n, k) for k in range(d + 1))


def count_patterns(active: torch.Tensor) -> tuple[int, np.ndarray]:
    """Distinct rows of a (M, U) boolean activation matrix, and each row's pattern id."""
    if active.shape[1] <= 62:  # one integer code per row: a 1-D unique is far faster
        weights = 2 ** torch.arange(active.shape[1], device=active.device)
        _, ids = torch.unique(active.long() @ weights, return_inverse=True)
    else:
        _, ids = torch.unique(active, dim=0, return_inverse=True)
    ids = ids.cpu().numpy()
    return int(ids.max()) + 1 if len(ids) else 0, ids


def crossings(weight: np.ndarray, bias: np.ndarray) -> np.ndarray:
    """The points where pairs of the lines w_i·x + b_i = 0 meet (parallel pairs skipped)."""
    points = []
    for i, j in itertools.combinations(range(len(weight)), 2):
        a = weight[[i, j]]
        if abs(np.linalg.det(a)) > 1e-12:
            points.append(np.linalg.solve(a, -bias[[i, j]]))
    return np.array(points).reshape(-1, 2)


class LinearRegionsParams(Params):
    model: str
    units: list[str]
    resolutions: list[int]
    extent: float | None


class LinearRegions(Procedure):
    def __init__(self, p: LinearRegionsParams):
        self.p = p

    def run(self, ctx: ProcedureContext) -> Iterator[dict[str, Any]]:
        c, p = ctx.compiled, self.p
        graph = c.exec_graph or c.graph
        missing = [u for u in p.units if c.module.module_of(u) is None]
        if not p.units or missing:
            raise NodegraphError(f"its units must name blocks with outputs (the hidden "
                                 f"Linear layers); {missing or 'none given'}")
        needed = graph.upstream([p.model, *p.units])
        key = _two_d_input(c, needed)
        first = c.module.module_of(p.units[0])
        n = sum(int(np.prod(c.report.outputs[(u, "output")].shape[1:])) for u in p.units
                if (u, "output") in c.report.outputs)
        lo, hi = self.window(c, key, first)
        plan = c.module.plan(needed)
        c.module.eval()
        corners = self.vertex_probes(first)

        def patterns(points: torch.Tensor) -> torch.Tensor:
            with torch.no_grad():
                values = c.module.run(plan, {key: points.to(c.device)})
            return torch.cat([values[(u, "output")].reshape(len(points), -1) > 0
                              for u in p.units], 1)

        for resolution in p.resolutions:
            xs = torch.linspace(lo[0], hi[0], resolution)
            ys = torch.linspace(lo[1], hi[1], resolution)
            gy, gx = torch.meshgrid(ys, xs, indexing="ij")
            grid = torch.stack([gx.flatten(), gy.flatten()], 1)
            active = patterns(grid)
            regions, ids = count_patterns(active)
            frame = {"resolution": resolution, "regions": regions, "units": n,
                     "bound": region_bound(n), "window": [list(lo), list(hi)],
                     "image": (ids.reshape(resolution, resolution) % 17 / 16.0).tolist()}
            # every region of the first layer touches a vertex (with two lines or more)
            frame["regions_with_vertices"] = regions if corners is None else count_patterns(
                torch.cat([active, patterns(corners)]))[0]
            yield frame

    @staticmethod
    def vertex_probes(first) -> torch.Tensor | None:
        """Four points just around each crossing of the first layer's lines, one in each
        of the sectors the two lines make there: every region of an arrangement of lines
        has a vertex, so these reach each region however thin (one hidden layer)."""
        weight = getattr(first, "weight", None)
        if weight is None or weight.ndim != 2 or weight.shape[1] != 2:
            return None
        w = weight.detach().double().cpu().numpy()
        b = (first.bias.detach().double().cpu().numpy() if first.bias is not None
             else np.zeros(len(w)))
        probes = []
        for i, j in itertools.combinations(range(len(w)), 2):
            a = w[[i, j]]
            if abs(np.linalg.det(a)) <= 1e-12:
                continue
            v = np.linalg.solve(a, -b[[i, j]])
            # directions along each line; 1e-5 of the scale: clear of float32 rounding
            eps = 1e-5 * max(1.0, float(np.abs(v).max()))
            d1 = np.array([-a[0, 1], a[0, 0]]) / np.linalg.norm(a[0])
            d2 = np.array([-a[1, 1], a[1, 0]]) / np.linalg.norm(a[1])
            probes += [v + eps * (s1 * d1 + s2 * d2) for s1 in (1, -1) for s2 in (1, -1)]
        if not probes:
            return None
        return torch.tensor(np.array(probes), dtype=torch.float32)

    def window(self, c, key, first) -> tuple[list[float], list[float]]:
        """The square the grid covers: `extent` around 0, or (empty) the training data
        and every crossing of the first layer's lines, with a margin."""
        if self.p.extent is not None:
            return [-self.p.extent] * 2, [self.p.extent] * 2
        points = c.datasets[key[0]].tensors("train")[key[1]].detach().double().cpu().numpy()
        weight = getattr(first, "weight", None)
        if weight is not None and weight.ndim == 2 and weight.shape[1] == 2:
            w = weight.detach().double().cpu().numpy()
            b = (first.bias.detach().double().cpu().numpy() if first.bias is not None
                 else np.zeros(len(w)))
            points = np.vstack([points, crossings(w, b)])
        lo, hi = points.min(0), points.max(0)
        span = np.maximum(hi - lo, 1e-6)
        return (lo - 0.2 * span).tolist(), (hi + 0.2 * span).tolist()


def _two_d_input(c, needed: set[str]):
    for name, ds in c.datasets.items():
        if name in needed:
            for port, t in ds.tensors("train").items():
                if t.ndim == 2 and t.shape[1] == 2 and t.is_floating_point():
                    return (name, port)
    raise NodegraphError("its units do not depend on a data port with two features; "
                         "region counting needs a 2-D input")


BLOCKS = [
    procedure("procedures.LinearRegions",
              "Count the linear regions of a ReLU network on a 2-D input, against the bound."
              "\n\nEvaluates the `units` (the hidden layers' pre-activations: a unit is active "
              "where its output is > 0) on grids of growing resolution and counts the distinct "
              "activation patterns; each frame shows the regions as an image, the count and "
              "the bound ½(n² + n + 2) of one hidden layer of n units. The "
              "grid covers the data and every crossing of the first layer's lines unless "
              "`extent` is set.",
              LinearRegions,
              params=[str_param("model", doc="the network's output node (the grid runs what "
                                "feeds it)"),
                      Param("units", "strs", doc="node ids whose outputs' signs are the "
                            "activation pattern: the hidden Linear layers, in order"),
                      Param("resolutions", "ints", [50, 200, 800],
                            "grid points per side, one frame each", min=2, max=4000),
                      float_param("extent", None, "half-width of the square grid around 0; "
                                  "empty: the data and the first layer's crossings",
                                  min=0, nullable=True)],
              keywords=("linear regions", "activation patterns", "relu", "expressivity",
                        "piecewise linear", "hyperplane arrangement")),
]
