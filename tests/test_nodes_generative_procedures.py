"""Generative procedures: prior samples, interpolation and the DDPM reverse chain.

Each runs around an untrained (seeded) model, and the frames are recomputed by hand
from that model's weights and the seeded generator the procedure gets (seed 0).
"""

from __future__ import annotations

import math

import pytest
import torch

import nodegraph
from nodegraph.model.errors import NodegraphError
from nodegraph.model.graph import Graph
from nodegraph.model.groups import GroupDef
from nodegraph.runtime.procedure import run_procedure


def seeded():
    return torch.Generator().manual_seed(0)


def autoencoder() -> Graph:
    """x (4) → enc Linear 2 → dec Linear 4, with a prior sampler and an interpolation."""
    g = Graph("ae")
    g.add("data.Table", id="data", columns=["a", "b", "c", "d", "y"],
          inputs=["a", "b", "c", "d"], targets=["y"],
          rows=[[0, 1, 2, 3, 0], [1, 0, 1, 0, 0], [3, 2, 1, 0, 0]], val_fraction=0.0)
    g.add("layers.Linear", id="enc", out_features=2)
    g.add("layers.Linear", id="dec", out_features=4)
    g.add("losses.MSE", id="loss")
    g.add("optimizers.GD", id="opt")
    g.add("procedures.SamplePrior", id="prior", model="dec", count=3, image_shape=[2, 2])
    g.add("procedures.Interpolate", id="walk", model="dec", encoder="enc", code="output",
          split="train", index_a=0, index_b=2, steps=3)
    for src, dst in ((("data", "x"), ("enc", "input")), (("enc", "output"), ("dec", "input")),
                     (("dec", "output"), ("loss", "input")), (("data", "x"), ("loss", "target")),
                     (("loss", "loss"), ("opt", "loss"))):
        g.connect(src, dst)
    return g


def test_sample_prior_decodes_seeded_normal_codes():
    compiled = nodegraph.compile(autoencoder(), device="cpu", seed=0)
    frames = run_procedure(compiled, "prior")
    z = torch.randn(3, 2, generator=seeded())  # latent_dim from the wire into dec (2)
    dec = compiled.module.blocks["dec"]
    with torch.no_grad():
        expected = dec(z).reshape(3, 2, 2)
    assert [f["index"] for f in frames] == [0, 1, 2]
    assert torch.tensor([f["z"] for f in frames]) == pytest.approx(z)
    assert torch.tensor([f["image"] for f in frames]) == pytest.approx(expected, abs=1e-6)
    assert run_procedure(compiled, "prior", latent_dim=2) == frames  # the same, stated


def test_interpolate_decodes_the_line_between_two_codes():
    compiled = nodegraph.compile(autoencoder(), device="cpu", seed=0)
    frames = run_procedure(compiled, "walk")
    x = compiled.datasets["data"].tensors("train")["x"]
    enc, dec = compiled.module.blocks["enc"], compiled.module.blocks["dec"]
    with torch.no_grad():
        za, zb = enc(x[[0, 2]])
        for frame, alpha in zip(frames, (0.0, 0.5, 1.0), strict=True):
            z = (1 - alpha) * za + alpha * zb
            assert frame["alpha"] == alpha
            assert torch.tensor(frame["z"]) == pytest.approx(z, abs=1e-6)
            assert torch.tensor(frame["image"]) == pytest.approx(dec(z), abs=1e-6)


@pytest.mark.parametrize("change, message", [
    ({"index_b": 3}, "sample 3 is outside the train split"),
    ({"code": "mu"}, "'enc' has no output 'mu'"),
])
def test_interpolate_says_what_is_wrong(change, message):
    with pytest.raises(NodegraphError, match=message):
        run_procedure(autoencoder(), "walk", **change)


def diffusion(timesteps: int = 4) -> Graph:
    """2-D points → DDPMNoise → denoiser group ε = W·[x_t, sin t, cos t] + b."""
    g = Graph("ddpm")
    g.add("data.Moons", id="data", n=40)
    body = Graph("denoiser")
    body.add("generative.TimestepEmbedding", id="embed", embedding_dim=2)
    body.add("layers.Concat", id="join")
    body.add("layers.Linear", id="out", out_features=2)
    body.connect(("embed", "output"), ("join", "b"))
    body.connect(("join", "output"), ("out", "input"))
    g.define_group(GroupDef("denoiser", body, {"x": [("join", "a")],
                                               "t": [("embed", "input")]},
                            {"eps": ("out", "output")}))
    g.add("samplers.DDPMNoise", id="noise", timesteps=timesteps, schedule="linear",
          beta_start=0.1, beta_end=0.4)
    g.add("group.denoiser", id="den")
    g.add("generative.DiffusionEpsLoss", id="loss")
    g.add("optimizers.GD", id="opt")
    g.add("procedures.DDPMSample", id="sample", model="den", count=3, every=1)
    for src, dst in ((("data", "x"), ("noise", "x0")), (("noise", "x_t"), ("den", "x")),
                     (("noise", "t"), ("den", "t")), (("den", "eps"), ("loss", "eps_pred")),
                     (("noise", "eps"), ("loss", "eps")), (("loss", "loss"), ("opt", "loss"))):
        g.connect(src, dst)
    return g


def reverse_chain(linear, betas, variance, count=3):
    """Ho et al. (2020) Algorithm 2, written out in float64."""
    gen = seeded()
    x = torch.randn(count, 2, generator=gen, dtype=torch.float64)
    alphas = [1 - b for b in betas]
    abar = [math.prod(alphas[: i + 1]) for i in range(len(betas))]
    chain = [x]
    for t in reversed(range(len(betas))):
        features = torch.cat([x, torch.full((count, 1), math.sin(t), dtype=torch.float64),
                              torch.full((count, 1), math.cos(t), dtype=torch.float64)], 1)
        eps = features @ linear.weight.double().T + linear.bias.double()
        x = (x - betas[t] / math.sqrt(1 - abar[t]) * eps) / math.sqrt(alphas[t])
        if t > 0:
            var = betas[t] if variance == "beta" else betas[t] * (1 - abar[t - 1]) / (1 - abar[t])
            x = x + math.sqrt(var) * torch.randn(count, 2, generator=gen, dtype=torch.float64)
        chain.append(x)
    return chain


@pytest.mark.parametrize("variance", ["beta", "posterior"])
def test_ddpm_sample_is_algorithm_2(variance):
    compiled = nodegraph.compile(diffusion(), device="cpu", seed=0)
    frames = run_procedure(compiled, "sample", variance=variance)
    linear = compiled.module.module_of("den__out")
    betas = [0.1 + i * 0.1 for i in range(4)]
    with torch.no_grad():
        expected = reverse_chain(linear, betas, variance)
    assert [f["t"] for f in frames] == [4, 3, 2, 1, 0]
    for frame, x in zip(frames, expected, strict=True):
        assert torch.tensor(frame["x"]) == pytest.approx(x, abs=1e-5)
    sparse = run_procedure(compiled, "sample", every=2)
    assert [f["t"] for f in sparse] == [4, 2, 0]


@pytest.mark.parametrize("change, message", [
    ({"noise": "opt"}, "'opt' is not a samplers.DDPMNoise block"),
    ({"step_input": "step"}, "'den' has no input 'step' for the step"),
])
def test_ddpm_sample_says_what_is_wrong(change, message):
    with pytest.raises(NodegraphError, match=message):
        run_procedure(diffusion(), "sample", **change)
