"""Data blocks that declare `meta` describe, from their params alone, exactly the dataset
their build makes: the same shapes and dtypes per port, samples per split, batches and
bytes; validation then builds no dataset and compile does."""

from __future__ import annotations

import pytest
import torch

import nodegraph
from nodegraph.kinds import footprint
from nodegraph.kinds.datameta import DataMeta
from nodegraph.model.errors import NodegraphError
from nodegraph.model.spec import default_registry

# the blocks needing no file (those reading one: tests/test_datameta_files.py and
# tests/test_datameta_builtin.py, which also holds the lag-window blocks, whose window is
# longer than the variants' n = 5)
DECLARED = [s for s in default_registry() if s.kind == "data" and s.meta is not None
            and not any(p.required for p in s.params)
            and s.id not in ("data.LagWindows", "data.ChaoticSeries")]
VARIANTS = [{}, {"val_fraction": 0.3, "test_fraction": 0.1, "batch_size": 0},
            {"split": "chronological", "val_fraction": 0.25, "batch_size": 7},
            {"folds": 3, "fold": 2, "test_fraction": 0.2}, {"n": 5}, {"n": 37},
            {"target": "binary"}, {"target": "class"}]


def test_the_synthetic_generators_declare_their_meta():
    ids = {s.id for s in DECLARED}
    assert {"data.XOR", "data.NoisyLine", "data.Moons", "data.Spirals",
            "data.SinSquared"} <= ids


@pytest.mark.parametrize("spec", DECLARED, ids=lambda s: s.id)
def test_meta_matches_the_built_dataset(spec):
    for variant in VARIANTS:
        given = {k: v for k, v in variant.items() if spec.param(k) is not None}
        params, problems = spec.resolve_params(given)
        assert not problems
        meta = spec.meta(params)
        built = spec.build(params)
        assert meta == DataMeta.of(built), (spec.id, variant)
        assert meta.nbytes == footprint.dataset_bytes(built)
        for split in ("train", "val", "test"):
            assert meta.has(split) == built.has(split)
            if built.has(split):
                assert meta.num_batches(split) == built.num_batches(split)
        assert {k: (t.shape, t.dtype) for k, t in meta.meta().items()} == \
            {k: (t.shape, t.dtype) for k, t in built.meta().items()}


@pytest.mark.parametrize("spec", DECLARED, ids=lambda s: s.id)
def test_meta_refuses_what_the_build_refuses(spec):
    bad = {"val_fraction": 0.6, "test_fraction": 0.5}
    if spec.param("x_min") is not None:
        bad = {"x_min": 2.0, "x_max": 1.0}
    params, _ = spec.resolve_params(bad)
    with pytest.raises((NodegraphError, ValueError)):
        spec.build(params)
    with pytest.raises(NodegraphError):
        spec.meta(params)


def test_validation_builds_no_dataset_and_compile_does(monkeypatch):
    g = nodegraph.load("examples/xor.json")
    spec = g.registry.get("data.XOR")
    calls = []
    real = spec.build
    monkeypatch.setattr(type(spec), "__getattribute__",
                        lambda self, name: (lambda p: calls.append(1) or real(p))
                        if name == "build" and self is spec else object.__getattribute__(
                            self, name))
    report = nodegraph.validate(g, for_training=True)
    assert report.ok and report.datasets == {} and calls == []
    assert report.shape("data", "x") == (4, 2)
    compiled = nodegraph.compile(g)
    assert calls == [1] and compiled.datasets["data"].size("train") == 4
    assert torch.equal(compiled.datasets["data"].tensors("train")["y"].flatten(),
                       torch.tensor([0.0, 1.0, 1.0, 0.0]))


@pytest.mark.parametrize("block_id, bad", [
    ("data.Blobs", {"centers": 10, "n": 5}),
    ("data.DiscRing", {"inner_radius": 2.0, "outer_radius": 1.5}),
    ("data.GaussianMixture", {"n_components": 2, "weights": [1.0, 2.0, 3.0]}),
    ("data.GaussianMixture", {"weights": [0.0, 0.0, 0.0]}),
    ("data.Polynomial", {"coefficients": []}),
    ("data.XOR", {"fold": 3, "folds": 2}),
])
def test_meta_refuses_the_generators_own_refusals(block_id, bad):
    spec = default_registry().get(block_id)
    params, problems = spec.resolve_params(bad)
    assert not problems
    with pytest.raises(NodegraphError) as built:
        spec.build(params)
    with pytest.raises(NodegraphError) as described:
        spec.meta(params)
    assert str(described.value) == str(built.value)
