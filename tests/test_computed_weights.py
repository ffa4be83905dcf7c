"""Computed weights (a Hopfield design's W and b) are outputs and are saved with the model.

They are computed from the params outside autograd; as buffers in the state dict they
travel in weights files and checkpoints, and a reloaded model recalls with the saved design.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch

import nodegraph
from nodegraph.cli.main import main
from nodegraph.interop.export.weights import load_weights, read_weights
from nodegraph.runtime import checkpoint
from nodes.energy import newhop

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "hopfield_3d.json"
TARGETS = [[-1, -1, 1], [1, -1, -1], [1, 1, 1]]


def test_weight_and_bias_are_outputs_equal_to_the_newhop_design():
    out = nodegraph.forward(nodegraph.load(EXAMPLE))
    weight, bias = newhop(torch.tensor(TARGETS, dtype=torch.float64), 10.0, 0.15)
    assert torch.equal(out["hopfield", "weight"], weight.float())
    assert torch.equal(out["hopfield", "bias"], bias.float())
    # and they are what the recall used: one step from a start is satlins(Wx + b)
    x = out["data", "x"]
    step = (x @ weight.float().T + bias.float()).clamp(-1, 1)
    assert torch.allclose(out["hopfield", "trajectory"][:, 1], step)


def test_validation_shapes_the_computed_outputs():
    report = nodegraph.validate(nodegraph.load(EXAMPLE))
    assert not report.errors
    assert tuple(report.outputs["hopfield", "weight"].shape) == (3, 3)
    assert tuple(report.outputs["hopfield", "bias"].shape) == (3,)


def test_saved_design_is_loaded_back(tmp_path):
    """Save W and b, then load them into a graph whose params design another network: the
    saved design wins, so the reloaded model gives the saved model's outputs."""
    g = nodegraph.load(EXAMPLE)
    compiled = nodegraph.compile(g, for_training=False, device="cpu")
    state = compiled.module.block_state()
    assert {"hopfield.weight", "hopfield.bias"} <= set(state)
    path = tmp_path / "w.safetensors"
    checkpoint.save_weights(path, state)
    before = nodegraph.forward(g, compiled=compiled)

    other = nodegraph.load(EXAMPLE)
    other.set_param("hopfield", "tau", 2.0)
    reloaded = nodegraph.compile(other, for_training=False, device="cpu")
    fresh = nodegraph.forward(other, compiled=reloaded)
    assert not torch.equal(fresh["hopfield", "weight"], before["hopfield", "weight"])
    load_weights(reloaded, read_weights(path), path)
    after = nodegraph.forward(other, compiled=reloaded)
    for port in ("weight", "bias", "output", "trajectory", "energy"):
        assert torch.equal(after["hopfield", port], before["hopfield", port]), port


def test_a_file_from_before_lacks_them_and_still_loads(tmp_path):
    g = nodegraph.load(EXAMPLE)
    compiled = nodegraph.compile(g, for_training=False, device="cpu")
    old = {k: v for k, v in compiled.module.block_state().items()
           if not k.startswith("hopfield.")}
    load_weights(compiled, old)  # nothing else to load: no error
    compiled.module.load_block_state(old)
    weight, _ = newhop(torch.tensor(TARGETS, dtype=torch.float64), 10.0, 0.15)
    assert torch.equal(compiled.module.blocks["hopfield"].weight, weight.float())


def test_float64_graph_keeps_the_design_in_float64():
    g = nodegraph.load(EXAMPLE)
    g.set_training("dtype", "float64")
    out = nodegraph.forward(g)
    weight, bias = newhop(torch.tensor(TARGETS, dtype=torch.float64), 10.0, 0.15)
    assert torch.equal(out["hopfield", "weight"], weight)  # not rounded through float32
    assert torch.equal(out["hopfield", "bias"], bias)


def test_forward_cli_writes_them_and_sample_recalls(tmp_path, capsys):
    """The CLI's `main` in this process: two interpreter start-ups cost more than the runs."""
    weights = tmp_path / "w.safetensors"
    compiled = nodegraph.compile(nodegraph.load(EXAMPLE), for_training=False, device="cpu")
    checkpoint.save_weights(weights, compiled.module.block_state())
    out = tmp_path / "out.npz"
    code = main(["forward", str(EXAMPLE), "--weights", str(weights), "-o", str(out)])
    assert code == 0, capsys.readouterr().err
    with np.load(out) as arrays:
        assert arrays["hopfield.weight"].shape == (3, 3)
        assert np.array_equal(arrays["hopfield.weight"],
                              compiled.module.blocks["hopfield"].weight.numpy())
    frames = tmp_path / "recall.json"
    code = main(["sample", str(EXAMPLE), "recall", "--weights", str(weights),
                 "--out", str(frames)])
    assert code == 0, capsys.readouterr().err
    got = json.loads(frames.read_text())
    energies = [f["mean_energy"] for f in got]
    assert all(b <= a + 1e-6 for a, b in zip(energies, energies[1:], strict=False))
    assert got[-1]["settled"] == 8  # every uniform start settles (E12: at its target)
    ends = torch.tensor(got[-1]["x"])
    nearest = torch.cdist(ends, torch.tensor(TARGETS, dtype=torch.float32)).min(1).values
    assert (nearest < 1e-3).all()
