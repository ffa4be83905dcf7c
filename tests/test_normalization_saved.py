"""A data block's fitted normalisation is saved with the weights and reapplied.

Trained in one process, predicted in another on raw inputs after the data file has
changed (so fitting again would give other statistics): the predictions equal those of
the trained model on the same raw inputs scaled with the training statistics.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file, save_file

import nodegraph
from nodegraph.interop.export.weights import load_weights, read_weights
from nodegraph.runtime import checkpoint

ROOT = Path(__file__).resolve().parents[1]


def write_csv(path: Path, seed: int, offset: float) -> np.ndarray:
    """Two features far from 0 (so scaling matters) and a linear target; returns x."""
    rng = np.random.default_rng(seed)
    x = rng.normal([offset, -3 * offset], [20.0, 5.0], size=(64, 2))
    y = 0.05 * x[:, :1] - 0.2 * x[:, 1:] + rng.normal(0, 0.1, size=(64, 1))
    rows = ["a,b,t", *(f"{a:.4f},{b:.4f},{t:.4f}" for (a, b), (t,) in zip(x, y, strict=True))]
    path.write_text("\n".join(rows) + "\n")
    return x


def graph_file(folder: Path, normalize: str = "zscore") -> Path:
    doc = {"format": "nodegraph", "version": 1, "name": "scaled-line",
           "nodes": {"data": {"type": "data.CSV", "params": {
                         "path": "data.csv", "normalize": normalize, "batch_size": 0,
                         "val_fraction": 0.0, "shuffle": False}},
                     "fit": {"type": "layers.Linear", "params": {"out_features": 1}},
                     "loss": {"type": "losses.MSE", "params": {}},
                     "opt": {"type": "optimizers.Adam", "params": {"lr": 0.05}}},
           "edges": [{"from": ["data", "x"], "to": ["fit", "input"]},
                     {"from": ["fit", "output"], "to": ["loss", "input"]},
                     {"from": ["data", "y"], "to": ["loss", "target"]},
                     {"from": ["loss", "loss"], "to": ["opt", "loss"]}],
           "training": {"epochs": 40, "seed": 0, "device": "cpu"}}
    path = folder / f"g_{normalize}.json"
    path.write_text(json.dumps(doc))
    return path


def cli(*args: str) -> subprocess.CompletedProcess:
    run = subprocess.run([sys.executable, "-m", "nodegraph", *args], capture_output=True,
                         text=True, cwd=ROOT, check=False, env=_env())
    assert run.returncode == 0, run.stdout + run.stderr
    return run


def _env() -> dict:
    import os

    return {**os.environ, "OMP_NUM_THREADS": "1"}


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A graph trained in a fresh process with --checkpoint-dir: (folder, graph, weights)."""
    folder = tmp_path_factory.mktemp("norm")
    write_csv(folder / "data.csv", seed=0, offset=100.0)
    graph = graph_file(folder)
    cli("run", str(graph), "--checkpoint-dir", str(folder / "ck"))
    return folder, graph, folder / "ck" / "last" / "model.safetensors"


def test_the_checkpoint_holds_the_training_statistics(trained):
    folder, graph, weights = trained
    saved = load_file(str(weights))
    compiled = nodegraph.compile(nodegraph.load(graph), device="cpu", for_training=False)
    fitted = compiled.datasets["data"].normalization["x"]
    assert torch.equal(saved["normalization/data/x.centre"], fitted["centre"])
    assert torch.equal(saved["normalization/data/x.scale"], fitted["scale"])
    x = np.loadtxt(folder / "data.csv", delimiter=",", skiprows=1)[:, :2].astype(np.float32)
    np.testing.assert_allclose(fitted["centre"].numpy(), x.mean(0), rtol=1e-5)
    np.testing.assert_allclose(fitted["scale"].numpy(), x.std(0), rtol=1e-5)
    assert "normalization/data/y.centre" not in saved  # only the inputs are scaled
    # the weights part loads strictly, as a resume does
    compiled.module.load_block_state(saved)


def test_fresh_process_predicts_right_on_raw_inputs(trained, tmp_path):
    folder, graph, weights = trained
    raw = np.random.default_rng(7).normal([100.0, -300.0], [20.0, 5.0], size=(10, 2))
    saved = load_file(str(weights))
    w, b = saved["fit.weight"].double().numpy(), saved["fit.bias"].double().numpy()
    centre = saved["normalization/data/x.centre"].double().numpy()
    scale = saved["normalization/data/x.scale"].double().numpy()
    want = ((raw - centre) / scale) @ w.T + b  # the trained model on the scaled inputs
    # in this process, from the unchanged data: the same
    compiled = nodegraph.compile(nodegraph.load(graph), device="cpu", for_training=False)
    load_weights(compiled, read_weights(weights), weights)
    here = nodegraph.forward(nodegraph.load(graph), {"data.x": raw}, compiled=compiled)
    np.testing.assert_allclose(here["fit", "output"].double().numpy(), want, rtol=1e-5)

    # the data file changes (other statistics), then a fresh process predicts on raw inputs
    write_csv(folder / "data.csv", seed=1, offset=400.0)
    try:
        inputs, out = tmp_path / "raw.npz", tmp_path / "out.npz"
        np.savez(inputs, **{"data.x": raw})
        cli("forward", str(graph), "--weights", str(weights), "--inputs", str(inputs),
            "-o", str(out))
        with np.load(out) as arrays:
            got = arrays["fit.output"]
        assert np.array_equal(got, here["fit", "output"].numpy())

        # a file without the statistics (written before they were saved) loads, but the
        # statistics are fitted anew on the changed data: the predictions are off
        old = tmp_path / "old.safetensors"
        save_file({k: v for k, v in saved.items() if not k.startswith("normalization/")},
                  str(old))
        cli("forward", str(graph), "--weights", str(old), "--inputs", str(inputs),
            "-o", str(out))
        with np.load(out) as arrays:
            assert np.abs(arrays["fit.output"] - want).max() > 1.0
    finally:
        write_csv(folder / "data.csv", seed=0, offset=100.0)


def test_data_batches_are_rescaled_with_the_saved_statistics(trained):
    """Loading the weights puts the saved statistics on the data block: its own batches
    are then scaled as in training, whatever the data file's own statistics."""
    folder, graph, weights = trained
    write_csv(folder / "data.csv", seed=1, offset=400.0)
    try:
        compiled = nodegraph.compile(nodegraph.load(graph), device="cpu", for_training=False)
        load_weights(compiled, read_weights(weights), weights)
        saved = load_file(str(weights))
        x = np.loadtxt(folder / "data.csv", delimiter=",", skiprows=1)[:, :2]
        want = (x - saved["normalization/data/x.centre"].double().numpy()) / \
            saved["normalization/data/x.scale"].double().numpy()
        got = compiled.datasets["data"].tensors("train")["x"].double().numpy()
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    finally:
        write_csv(folder / "data.csv", seed=0, offset=100.0)


def test_normalized_flag_takes_scaled_inputs(trained, tmp_path):
    folder, graph, weights = trained
    compiled = nodegraph.compile(nodegraph.load(graph), device="cpu", for_training=False)
    load_weights(compiled, read_weights(weights), weights)
    scaled = compiled.datasets["data"].tensors("train")["x"][:5]
    a = nodegraph.forward(nodegraph.load(graph), {"data.x": scaled}, compiled=compiled,
                          raw=False)
    b = nodegraph.forward(nodegraph.load(graph), compiled=compiled)
    assert torch.equal(a["fit", "output"], b["fit", "output"][:5])


def test_a_graph_that_does_not_normalise_refuses_the_statistics(trained):
    folder, _, weights = trained
    plain = nodegraph.load(graph_file(folder, normalize="none"))
    compiled = nodegraph.compile(plain, device="cpu", for_training=False)
    with pytest.raises(nodegraph.NodegraphError, match=r"'data\.x' normalised.*normalize"):
        load_weights(compiled, read_weights(weights), weights)


def test_best_weights_carry_the_statistics_too(tmp_path):
    write_csv(tmp_path / "data.csv", seed=0, offset=100.0)
    g = nodegraph.load(graph_file(tmp_path))
    g.update_training(epochs=3, monitor="train.loss")
    nodegraph.train(g, checkpoint_dir=tmp_path / "ck")
    best = checkpoint.read_tensors(tmp_path / "ck" / "best.safetensors", "weights", "")
    assert {"normalization/data/x.centre", "normalization/data/x.scale"} <= set(best)
