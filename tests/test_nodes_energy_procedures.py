"""procedures.GibbsChain: the chain is the RBM's own Gibbs step, seeded; clamped rows never
change; from noise, a trained RBM's chains end closer to the data than noise is."""

from __future__ import annotations

import itertools

import pytest
import torch

import nodegraph
from nodegraph.model.errors import NodegraphError, NodeRuntimeError
from nodegraph.model.graph import Graph
from nodegraph.model.groups import make_group
from nodegraph.runtime.procedure import run_procedure
from nodes.energy import BernoulliRBM
from nodes.procedures.energy import TwoLayerBM


def rbm_graph(epochs: int) -> Graph:
    """Digits binarised by Step (x > 0) → RBM of 32 hidden units, CD-1 with SGD."""
    g = Graph("rbm")
    g.add("data.Digits", id="data", batch_size=32)
    g.add("activations.Step", id="binary")
    g.add("energy.BernoulliRBM", id="rbm", n_components=32)
    g.add("optimizers.SGD", id="opt", lr=0.1)
    g.add("procedures.GibbsChain", id="chain", model="rbm", image_shape=[8, 8], count=64,
          split="val")
    g.connect(("data", "x"), ("binary", "input"))
    g.connect(("binary", "output"), ("rbm", "input"))
    g.connect(("rbm", "loss"), ("opt", "loss"))
    g.update_training(epochs=epochs, seed=0)
    return g


@pytest.fixture(scope="module")
def trained():
    return nodegraph.train(rbm_graph(5), device="cpu").compiled


def test_the_chain_starts_at_the_binarised_data_and_is_seeded(trained):
    frames = run_procedure(trained, "chain", steps=2)
    x = trained.datasets["data"].tensors("val")["x"][:64]
    assert torch.equal(torch.tensor(frames[0]["visible"]), (x > 0).float())
    assert [f["step"] for f in frames] == [0, 1, 2]
    assert torch.tensor(frames[1]["image"]).shape == (64, 8, 8)
    again = run_procedure(trained, "chain", steps=2)
    assert again[2]["visible"] == frames[2]["visible"]
    other = run_procedure(trained, "chain", steps=2, seed=1)
    assert other[2]["visible"] != frames[2]["visible"]


def test_frames_are_the_rbms_gibbs_steps(trained):
    """With the same seed, the frames are P(v|h) of the block's own gibbs_step, k per frame."""
    frames = run_procedure(trained, "chain", steps=2, k=3, count=4)
    rbm = trained.module.module_of("rbm")
    v = torch.tensor(frames[0]["visible"])
    seed = int(torch.randint(0, 2**31 - 1, (1,), generator=torch.Generator().manual_seed(0)))
    torch.manual_seed(seed)
    with torch.no_grad():
        for frame in frames[1:]:
            for _ in range(3):
                v, probs = rbm.gibbs_step(v)
            assert torch.tensor(frame["visible"]) == pytest.approx(probs, abs=1e-6)
    assert frames[-1]["step"] == 6


def test_clamped_rows_never_change_and_the_others_do(trained):
    frames = run_procedure(trained, "chain", start="noise", clamp_rows=[0, 1, 2, 3], steps=10)
    images = torch.tensor([f["image"] for f in frames])  # (frames, chains, 8, 8)
    data = torch.tensor(frames[0]["data"]).reshape(64, 8, 8)
    assert (images[:, :, :4] == data[:, :4]).all()
    assert not (images[:, :, 4:] == images[0, :, 4:]).all()
    assert torch.tensor(frames[0]["clamped"]).reshape(8, 8)[:4].all()


def nearest_distance(samples: torch.Tensor, data: torch.Tensor) -> float:
    """Mean over samples of the squared distance to the nearest data image."""
    return torch.cdist(samples, data).min(1).values.pow(2).mean().item()


def test_a_trained_rbm_samples_closer_to_the_data_than_noise(trained):
    data = (trained.datasets["data"].tensors("train")["x"] > 0).float()
    frames = run_procedure(trained, "chain", start="noise", steps=50)
    samples = torch.tensor(frames[-1]["visible"])
    noise = torch.tensor(frames[0]["visible"])
    assert nearest_distance(samples, data) < 0.5 * nearest_distance(noise, data)
    untrained = nodegraph.compile(rbm_graph(0), device="cpu", for_training=False)
    chains = torch.tensor(run_procedure(untrained, "chain", start="noise", steps=50)[-1]
                          ["visible"])
    assert nearest_distance(samples, data) < 0.5 * nearest_distance(chains, data)


def test_clamp_rows_need_an_image_shape_and_the_model_an_rbm(trained):
    with pytest.raises((NodegraphError, NodeRuntimeError), match="image_shape"):
        run_procedure(trained, "chain", clamp_rows=[0], image_shape=[])
    with pytest.raises((NodegraphError, NodeRuntimeError), match="outside"):
        run_procedure(trained, "chain", clamp_rows=[8])
    with pytest.raises((NodegraphError, NodeRuntimeError), match="BernoulliRBM"):
        run_procedure(trained, "chain", model="binary")


# -- Langevin ------------------------------------------------------------------------------

MU = torch.tensor([1.0, -2.0])
PRECISION = torch.tensor([[2.0, 0.6], [0.6, 1.0]])  # P = Σ⁻¹ of the target Gaussian


def gaussian_score_graph() -> Graph:
    """2-D points → a Linear whose weights make it the score of N(μ, P⁻¹):
    ∇log p(x) = −P(x − μ) = −Px + Pμ."""
    g = Graph("langevin")
    g.add("data.Moons", id="data")
    g.add("layers.Linear", id="score", out_features=2)
    g.add("procedures.Langevin", id="langevin", model="score", count=4000, steps=300,
          every=100, step_size=0.4)
    g.connect(("data", "x"), ("score", "input"))
    return g


@pytest.fixture(scope="module")
def gaussian():
    c = nodegraph.compile(gaussian_score_graph(), device="cpu", for_training=False)
    fc = c.module.module_of("score")
    with torch.no_grad():
        fc.weight.copy_(-PRECISION)
        fc.bias.copy_(PRECISION @ MU)
    return c


def test_langevin_samples_a_gaussian_with_the_discretised_chains_covariance(gaussian):
    """Unadjusted Langevin on N(μ, P⁻¹) with step ε is x' = Mx + (ε/2)Pμ + √ε z, with
    M = I − (ε/2)P: its stationary law has mean μ and covariance C = ε(I − M²)⁻¹
    = (P − (ε/4)P²)⁻¹, which at ε = 0.4 is 0.17 (Frobenius) away from Σ = P⁻¹."""
    frames = run_procedure(gaussian, "langevin")
    assert [f["step"] for f in frames] == [0, 100, 200, 300]
    x = torch.tensor(frames[-1]["samples"])
    assert x.shape == (4000, 2)
    assert torch.tensor(frames[-1]["mean"]) == pytest.approx(MU, abs=0.06)  # SE ≈ 0.015
    eps = 0.4
    want = torch.linalg.inv(PRECISION - eps / 4 * PRECISION @ PRECISION)
    cov = torch.cov(x.T)
    assert (cov - want).norm() < 0.06  # sampling error of 4000 draws ≈ 0.03
    assert (cov - torch.linalg.inv(PRECISION)).norm() > 0.1  # the step's bias is seen
    assert torch.tensor(frames[0]["var"]) == pytest.approx(torch.ones(2), abs=0.1)  # N(0, I)


def test_langevin_is_seeded_and_gradient_ascent_without_noise(gaussian):
    a = run_procedure(gaussian, "langevin", steps=5, every=5, count=10)
    b = run_procedure(gaussian, "langevin", steps=5, every=5, count=10)
    assert a[-1]["samples"] == b[-1]["samples"]
    assert run_procedure(gaussian, "langevin", steps=5, every=5, count=10,
                         seed=1)[-1]["samples"] != a[-1]["samples"]
    # noise_scale 0: x ← x − (ε/2)P(x − μ), so x − μ shrinks by M = I − (ε/2)P per step
    frames = run_procedure(gaussian, "langevin", steps=3, every=3, count=5, noise_scale=0.0,
                           start="data")
    x0, x3 = torch.tensor(frames[0]["samples"]), torch.tensor(frames[-1]["samples"])
    m = torch.eye(2) - 0.2 * PRECISION
    assert x3 - MU == pytest.approx((x0 - MU) @ torch.linalg.matrix_power(m, 3).T, abs=1e-5)
    data = gaussian.datasets["data"].tensors("train")["x"][:5]
    assert torch.equal(x0, data)


def test_langevin_on_an_rbms_free_energy_follows_minus_its_gradient(trained):
    """kind energy: the score is −∇F(v) = b + Wᵀσ(c + Wv) for the RBM's free energy F."""
    g = rbm_graph(0)
    g.add("procedures.Langevin", id="lv", model="rbm", kind="energy", steps=1, every=1,
          count=6, start="data", split="val", noise_scale=0.0, step_size=0.5)
    c = nodegraph.compile(g, device="cpu", for_training=False)
    c.module.load_block_state(trained.module.block_state())
    frames = run_procedure(c, "lv")
    rbm = c.module.module_of("rbm")
    v = torch.tensor(frames[0]["samples"])
    with torch.no_grad():
        score = rbm.visible_bias + rbm.hidden_probs(v) @ rbm.weight
        want = v + 0.25 * score
    assert torch.tensor(frames[1]["samples"]) == pytest.approx(want, abs=1e-5)
    assert frames[0]["energy"] == pytest.approx(rbm.free_energy(v).mean().item(), rel=1e-5)
    assert frames[1]["energy"] < frames[0]["energy"]  # downhill in energy


def test_langevin_differentiates_the_energy_of_a_group_instance():
    """A group computing E(x) = ½‖A(x − μ)‖² with AᵀA = P has the Gaussian's score
    −P(x − μ): noiseless Langevin through the group shrinks x − μ by M = I − (ε/2)P."""
    g = Graph("group energy")
    g.add("data.Moons", id="data")
    g.add("layers.Linear", id="fc", out_features=2)
    g.add("layers.Multiply", id="square")
    g.add("layers.Linear", id="half_sum", out_features=1, bias=False)
    g.connect(("data", "x"), ("fc", "input"))
    g.connect(("fc", "output"), ("square", "a"))
    g.connect(("fc", "output"), ("square", "b"))
    g.connect(("square", "output"), ("half_sum", "input"))
    make_group(g, ["fc", "square", "half_sum"], "quadratic", instance="energy")
    g.add("procedures.Langevin", id="lv", model="energy", kind="energy", steps=3, every=3,
          count=5, start="data", noise_scale=0.0, step_size=0.4)
    c = nodegraph.compile(g, device="cpu", for_training=False)
    a = torch.linalg.cholesky(PRECISION).T  # P = LLᵀ, so A = Lᵀ gives AᵀA = P
    with torch.no_grad():
        c.module.module_of("energy__fc").weight.copy_(a)
        c.module.module_of("energy__fc").bias.copy_(-a @ MU)
        c.module.module_of("energy__half_sum").weight.fill_(0.5)
    frames = run_procedure(c, "lv")
    x0, x3 = torch.tensor(frames[0]["samples"]), torch.tensor(frames[-1]["samples"])
    m = torch.eye(2) - 0.2 * PRECISION
    assert x3 - MU == pytest.approx((x0 - MU) @ torch.linalg.matrix_power(m, 3).T, abs=1e-5)
    energy = 0.5 * (((x0 - MU) @ a.T) ** 2).sum(-1)
    assert frames[0]["energy"] == pytest.approx(energy.mean().item(), rel=1e-5)


def test_langevin_refuses_what_it_cannot_differentiate_or_call(gaussian):
    with pytest.raises((NodegraphError, NodeRuntimeError), match="no output 'logits'"):
        run_procedure(gaussian, "langevin", output="logits")
    with pytest.raises((NodegraphError, NodeRuntimeError), match="only train"):
        run_procedure(gaussian, "langevin", split="test")


# -- two-layer DBM ---------------------------------------------------------------------------


def random_rbm(visible: int, hidden: int, seed: int) -> BernoulliRBM:
    torch.manual_seed(seed)
    m = BernoulliRBM(visible, hidden, 1, False, 1.0, False).double()
    with torch.no_grad():
        m.hidden_bias.normal_()
        m.visible_bias.normal_()
    return m


def binary_states(units: int) -> torch.Tensor:
    return torch.tensor(list(itertools.product([0.0, 1.0], repeat=units)), dtype=torch.float64)


@pytest.fixture(scope="module")
def tiny_dbm() -> TwoLayerBM:
    """3 pixels, 2 middle and 2 top units: 2⁷ states, few enough to sum over."""
    return TwoLayerBM(random_rbm(3, 2, 0), random_rbm(2, 2, 1))


def exact_joint(dbm: TwoLayerBM) -> tuple[torch.Tensor, torch.Tensor]:
    """Every (v, h1, h2) state as rows of 7 units, and its probability ∝ exp(−E)."""
    s = binary_states(7)
    with torch.no_grad():
        return s, torch.softmax(-dbm.energy(s[:, :3], s[:, 3:5], s[:, 5:]), 0)


def test_the_middle_layer_hears_both_neighbours(tiny_dbm):
    """P(h1_j = 1 | v, h2) of the sampler equals the conditional of the summed energy."""
    s, p = exact_joint(tiny_dbm)
    for row in range(0, 128, 9):
        v, h2 = s[row, :3], s[row, 5:]
        given = (s[:, :3] == v).all(1) & (s[:, 5:] == h2).all(1)
        conditional = (p[given, None] * s[given, 3:5]).sum(0) / p[given].sum()
        with torch.no_grad():
            probs = tiny_dbm.h1_probs(v[None], h2[None])[0]
        assert probs == pytest.approx(conditional, abs=1e-9)


def test_gibbs_through_both_layers_samples_the_dbms_joint(tiny_dbm):
    """20,000 chains after 60 sweeps: the frequencies of the 8 pixel states and of the 4
    top states match the exact marginals (standard error ≈ 0.003)."""
    s, p = exact_joint(tiny_dbm)
    code = torch.tensor([4.0, 2.0, 1.0], dtype=torch.float64)
    exact_v = torch.zeros(8, dtype=torch.float64).index_add_(0, (s[:, :3] @ code).long(), p)
    exact_h2 = torch.zeros(4, dtype=torch.float64).index_add_(
        0, (s[:, 5:] @ code[1:]).long(), p)
    torch.manual_seed(3)
    v = torch.randint(0, 2, (20000, 3)).double()
    h2 = tiny_dbm.start(v)
    for _ in range(60):
        v, h2, _ = tiny_dbm.step(v, h2)
    seen_v = torch.bincount((v @ code).long(), minlength=8) / len(v)
    seen_h2 = torch.bincount((h2 @ code[1:]).long(), minlength=4) / len(v)
    assert seen_v == pytest.approx(exact_v, abs=0.015)
    assert seen_h2 == pytest.approx(exact_h2, abs=0.015)
    # the lower RBM alone is another distribution: the top layer matters
    with torch.no_grad():
        lower_only = torch.softmax(-tiny_dbm.lower.free_energy(binary_states(3)), 0)
    assert (lower_only - exact_v).abs().max() > 0.05


def test_a_dbm_needs_stacked_layers():
    with pytest.raises(NodegraphError, match="same layer"):
        TwoLayerBM(random_rbm(3, 2, 0), random_rbm(4, 2, 1))


SIGMA = 0.3  # the denoising noise level


def denoising_score_graph() -> Graph:
    """A Linear score network trained by denoising score matching on one 2-D Gaussian blob:
    s(x + n) regressed on −n/σ² with n ~ N(0, σ²I)."""
    g = Graph("dsm")
    g.add("data.Blobs", id="data", centers=1, n=2000, noise=50.0, batch_size=100)
    g.add("samplers.GaussianNoise", id="noise", std=SIGMA)
    g.add("layers.Add", id="noisy")
    g.add("layers.Linear", id="score", out_features=2)
    g.add("layers.Scale", id="target", scale=-1 / SIGMA**2, learnable=False)
    g.add("losses.MSE", id="loss")
    g.add("optimizers.Adam", id="opt", lr=0.05)
    g.add("procedures.Langevin", id="langevin", model="score", count=4000, steps=300,
          every=100, step_size=0.05)
    for src, dst in [("data.x", "noise.like"), ("data.x", "noisy.a"), ("noise.output", "noisy.b"),
                     ("noisy.output", "score.input"), ("noise.output", "target.input"),
                     ("score.output", "loss.input"), ("target.output", "loss.target"),
                     ("loss.loss", "opt.loss")]:
        g.connect(tuple(src.split(".")), tuple(dst.split(".")))
    g.update_training(epochs=8, seed=0)
    return g


def test_langevin_around_a_score_network_trained_by_denoising_score_matching():
    """The best linear denoising score of data with mean m and covariance C is the score of
    N(m, C + σ²I); Langevin on the trained network lands there (with the step's bias
    (P − (ε/4)P²)⁻¹, P = (C + σ²I)⁻¹), visibly wider than the data themselves."""
    result = nodegraph.train(denoising_score_graph(), device="cpu")
    x = result.compiled.datasets["data"].tensors("train")["x"]
    m, c = x.mean(0), torch.cov(x.T)
    p = torch.linalg.inv(c + SIGMA**2 * torch.eye(2))
    frames = run_procedure(result.compiled, "langevin")
    samples = torch.tensor(frames[-1]["samples"])
    assert samples.mean(0) == pytest.approx(m, abs=0.05)  # 0.02 measured
    cov = torch.cov(samples.T)
    assert (cov - torch.linalg.inv(p - 0.05 / 4 * p @ p)).norm() < 0.03  # 0.012 measured
    assert (cov - c).norm() > 0.1  # σ-smoothed: 0.34 per axis against the data's 0.25
