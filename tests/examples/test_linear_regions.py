"""linear_regions.json and procedures.LinearRegions: activation patterns counted on a grid
against ½(n² + n + 2) (seed 000 §4.1.4) and against hand-made arrangements of lines."""

from __future__ import annotations

import pytest
from classic_support import assert_builder_writes_files, example

import nodegraph
from nodegraph.model.graph import Graph
from nodegraph.runtime.procedure import run_procedure
from nodes.procedures.regions import region_bound


def net(weight: list[list[float]] | None, bias: list[float] | None, units: int = 3,
        seed: int = 0, **procedure) -> Graph:
    g = Graph("regions")
    g.add("data.Moons", id="data", n=50)
    params = {} if weight is None else {"weight": weight, "bias_init": bias}
    g.add("layers.Linear", id="hidden", out_features=units, **params)
    g.add("activations.ReLU", id="relu")
    g.add("layers.Linear", id="out", out_features=1)
    g.connect(("data", "x"), ("hidden", "input"))
    g.connect(("hidden", "output"), ("relu", "input"))
    g.connect(("relu", "output"), ("out", "input"))
    g.add("procedures.LinearRegions", id="regions", model="out", units=["hidden"],
          **procedure)
    g.update_training(seed=seed)
    return g


def counts(g: Graph) -> list[dict]:
    return run_procedure(nodegraph.compile(g, for_training=False), "regions")


def test_the_bound_is_the_notes_formula():
    assert [region_bound(n) for n in range(1, 9)] == [(n * n + n + 2) // 2
                                                      for n in range(1, 9)]
    assert region_bound(8) == 37


@pytest.mark.parametrize("weight, bias, regions", [
    ([[1, 0], [0, 1], [1, 1]], [0, 0, -1], 7),  # x = 0, y = 0, x + y = 1: general position
    ([[1, 0], [1, 0], [0, 1]], [0, -1, 0], 6),  # two parallel lines: one crossing lost
    ([[1, 0], [0, 1], [1, 1]], [0, 0, 0], 6),  # three lines through one point
])
def test_hand_made_arrangements(weight, bias, regions):
    frames = counts(net(weight, bias, extent=3.0, resolutions=[601]))
    assert frames[-1]["regions"] == regions
    assert frames[-1]["bound"] == 7


@pytest.mark.parametrize("units", [1, 2, 4, 6])
def test_random_layers_reach_the_bound(units):
    frames = counts(net(None, None, units=units, seed=units))
    assert frames[-1]["regions_with_vertices"] == region_bound(units)
    assert all(f["regions"] <= region_bound(units) for f in frames)


def test_the_example_finds_the_bound_after_training():
    g = example("linear_regions")
    result = nodegraph.train(g, epochs=5, device="cpu")
    frames = run_procedure(result.compiled, "regions")
    grid = [f["regions"] for f in frames]
    assert grid == sorted(grid) and grid[-1] <= 37
    assert frames[-1]["regions_with_vertices"] == 37
    assert grid[-1] >= 30  # a fine grid finds most of them


def test_the_file_is_what_the_builder_writes():
    assert_builder_writes_files("linear_regions")
