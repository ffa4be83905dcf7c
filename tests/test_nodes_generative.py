"""Generative blocks: the ELBO's KL against torch.distributions, GAN losses against their
formulas (and the minimax generator's vanishing gradient), the time embedding against the
sinusoid formula, the coupling layer's inverse and log-determinant against autograd's
Jacobian, and the flow's density integrating to one."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch.autograd.functional import jacobian
from torch.distributions import Normal, kl_divergence

import nodegraph
from nodegraph.model.errors import ParamError, PortError
from nodegraph.model.graph import Graph
from tests.blockcheck import build, run_op
from tests.test_nodes_samplers import on_meta

torch.manual_seed(0)
MU, LOGVAR = torch.randn(5, 3), torch.randn(5, 3)
X = torch.rand(5, 8)
RECON = torch.rand(5, 8).clamp(0.01, 0.99)


def elbo_inputs(recon=RECON):
    return {"recon": recon, "target": X, "mu": MU, "logvar": LOGVAR}


def kl_reference() -> torch.Tensor:
    """Per-sample KL(q ‖ N(0, I)) from torch.distributions."""
    q = Normal(MU, torch.exp(0.5 * LOGVAR))
    return kl_divergence(q, Normal(torch.zeros(3), torch.ones(3))).sum(1)


# -- ELBO ------------------------------------------------------------------------------------


def test_elbo_with_bce_is_summed_bce_plus_beta_kl_per_sample():
    loss, nll, kl = run_op("generative.ELBO", elbo_inputs(), beta=4.0)
    want_nll = F.binary_cross_entropy(RECON, X, reduction="sum") / 5
    want_kl = kl_reference().mean()
    assert torch.allclose(nll, want_nll) and torch.allclose(kl, want_kl)
    assert torch.allclose(loss, want_nll + 4.0 * want_kl)


def test_elbo_mse_logits_and_sum_reduction():
    logits = torch.randn(5, 8)
    loss, _, _ = run_op("generative.ELBO", elbo_inputs(logits), reconstruction="bce_logits",
                        reduction="sum")
    want = F.binary_cross_entropy_with_logits(logits, X, reduction="sum") + kl_reference().sum()
    assert torch.allclose(loss, want)
    loss, nll, _ = run_op("generative.ELBO", elbo_inputs(), reconstruction="mse", beta=0.0)
    assert torch.allclose(loss, ((RECON - X) ** 2).sum() / 5) and torch.equal(loss, nll)


def test_elbo_kl_vanishes_at_the_prior_and_its_gradient_is_the_closed_form():
    mu, logvar = torch.zeros(2, 4, requires_grad=True), torch.zeros(2, 4, requires_grad=True)
    inputs = {"recon": RECON[:2], "target": X[:2], "mu": mu, "logvar": logvar}
    _, _, kl = run_op("generative.ELBO", inputs)
    assert kl.item() == 0.0
    mu2, logvar2 = MU.clone().requires_grad_(), LOGVAR.clone().requires_grad_()
    _, _, kl = run_op("generative.ELBO", {**elbo_inputs(), "mu": mu2, "logvar": logvar2})
    kl.backward()  # d/dμ = μ/N, d/dlog σ² = (σ² − 1)/(2N)
    assert torch.allclose(mu2.grad, MU / 5)
    assert torch.allclose(logvar2.grad, (torch.exp(LOGVAR) - 1) / 10)


def test_elbo_checks_its_wires():
    with pytest.raises(PortError) as e:
        build("generative.ELBO", {**elbo_inputs(), "target": X[:, :4]})
    assert e.value.port == "target"
    with pytest.raises(PortError) as e:
        build("generative.ELBO", {**elbo_inputs(), "mu": MU[:4], "logvar": LOGVAR[:4]})
    assert e.value.port == "mu"


def test_vae_graph_trains_on_the_elbo():
    """Encoder heads μ and log σ², Reparameterize, decoder, ELBO: the trainer minimises the
    loss output while the nll and kl outputs ride along."""
    g = Graph("vae")
    g.add("data.Digits", id="data", batch_size=32)
    for node, width in (("enc", 32), ("mu", 4), ("logvar", 4), ("dec", 64)):
        g.add("layers.Linear", id=node, out_features=width)
    g.add("activations.ReLU", id="relu")
    g.add("activations.Sigmoid", id="sigmoid")
    g.add("samplers.Reparameterize", id="z")
    g.add("generative.ELBO", id="elbo")
    g.add("optimizers.Adam", id="opt", lr=0.01)
    for src, dst in [("data.x", "enc.input"), ("enc.output", "relu.input"),
                     ("relu.output", "mu.input"), ("relu.output", "logvar.input"),
                     ("mu.output", "z.mu"), ("logvar.output", "z.logvar"),
                     ("z.z", "dec.input"), ("dec.output", "sigmoid.input"),
                     ("sigmoid.output", "elbo.recon"), ("data.x", "elbo.target"),
                     ("mu.output", "elbo.mu"), ("logvar.output", "elbo.logvar"),
                     ("elbo.loss", "opt.loss")]:
        g.connect(tuple(src.split(".")), tuple(dst.split(".")))
    g.update_training({"epochs": 3, "seed": 0})
    losses = [h["train"]["elbo"] for h in nodegraph.train(g).history]
    assert losses[0] > losses[1] > losses[2], losses
    assert losses[-1] < 0.75 * 64 * math.log(2)  # well below p = ½ for every pixel


# -- GAN -------------------------------------------------------------------------------------


def test_discriminator_loss_is_minus_the_minimax_value():
    real, fake = torch.randn(6, 1), torch.randn(6, 1)
    got = run_op("generative.GANDiscriminatorLoss", {"real_logits": real, "fake_logits": fake})
    value = torch.log(torch.sigmoid(real)).mean() + torch.log(1 - torch.sigmoid(fake)).mean()
    assert torch.allclose(got, -value)
    smooth = run_op("generative.GANDiscriminatorLoss", {"real_logits": real,
                                                         "fake_logits": fake}, real_label=0.9)
    d = torch.sigmoid(real)
    want = -(0.9 * d.log() + 0.1 * (1 - d).log()).mean() - (1 - torch.sigmoid(fake)).log().mean()
    assert torch.allclose(smooth, want)


def test_generator_losses_match_their_formulas():
    fake = torch.randn(7)
    d = torch.sigmoid(fake)
    ns = run_op("generative.GANGeneratorLoss", {"fake_logits": fake})
    mm = run_op("generative.GANGeneratorLoss", {"fake_logits": fake}, form="minimax")
    assert torch.allclose(ns, -d.log().mean())
    assert torch.allclose(mm, (1 - d).log().mean())


def test_minimax_generator_gradient_vanishes_where_non_saturating_does_not():
    """D confidently rejects the fakes (logit −10): E log(1 − D) barely moves G, while
    −E log D pushes with almost unit slope (Goodfellow et al.'s footnote, seed 004 L476)."""
    grads = {}
    for form in ("minimax", "non_saturating"):
        logits = torch.full((4, 1), -10.0, requires_grad=True)
        run_op("generative.GANGeneratorLoss", {"fake_logits": logits}, form=form).backward()
        grads[form] = logits.grad
    assert torch.allclose(grads["minimax"], torch.full((4, 1), -torch.sigmoid(
        torch.tensor(-10.0)).item() / 4))
    assert torch.allclose(grads["non_saturating"], torch.full((4, 1), -(1 - torch.sigmoid(
        torch.tensor(-10.0)).item()) / 4))
    extreme = run_op("generative.GANGeneratorLoss", {"fake_logits": torch.tensor([-200.0])},
                     form="minimax")
    assert torch.isfinite(extreme)  # computed as −softplus, not log(1 − σ)


def test_gan_losses_want_one_logit_per_sample():
    with pytest.raises(PortError) as e:
        build("generative.GANGeneratorLoss", {"fake_logits": torch.zeros(4, 2)})
    assert e.value.port == "fake_logits"


# -- diffusion -------------------------------------------------------------------------------


@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_diffusion_eps_loss_is_the_noise_mse(reduction):
    a, b = torch.randn(3, 1, 4, 4), torch.randn(3, 1, 4, 4)
    got = run_op("generative.DiffusionEpsLoss", {"eps_pred": a, "eps": b}, reduction=reduction)
    assert torch.allclose(got, F.mse_loss(a, b, reduction=reduction))


def test_timestep_embedding_is_the_sinusoid_formula():
    t = torch.tensor([0, 1, 7, 250])
    out = run_op("generative.TimestepEmbedding", {"input": t}, embedding_dim=6)
    want = torch.zeros(4, 6)
    for k in range(3):
        omega = 10000.0 ** (-2 * k / 6)
        want[:, 2 * k] = torch.sin(t * omega)
        want[:, 2 * k + 1] = torch.cos(t * omega)
    assert torch.allclose(out, want, atol=1e-5)
    assert torch.equal(run_op("generative.TimestepEmbedding", {"input": t[:, None]},
                              embedding_dim=6), out)


def test_timestep_embedding_mlp_applies_linear_silu_linear():
    t = torch.tensor([3.0, 40.0])
    _, _, m = build("generative.TimestepEmbedding", {"input": t}, embedding_dim=4,
                    mlp_features=5)
    code = run_op("generative.TimestepEmbedding", {"input": t}, embedding_dim=4)
    first, last = m.mlp[0], m.mlp[2]
    assert torch.allclose(m(t), last(F.silu(first(code))), atol=1e-6)
    assert m(t).shape == (2, 5)


def test_timestep_embedding_checks():
    with pytest.raises(ParamError, match="even"):
        build("generative.TimestepEmbedding", {"input": torch.zeros(2)}, embedding_dim=5)
    with pytest.raises(PortError, match="one step per sample"):
        build("generative.TimestepEmbedding", {"input": torch.zeros(2, 3)})


# -- flows -----------------------------------------------------------------------------------


def coupling(features=4, **params):
    x = torch.randn(3, features, dtype=torch.float64)
    _, _, m = build("generative.AffineCoupling", {"input": x}, hidden_features=16, **params)
    return x, m.double()


@pytest.mark.parametrize(("mask", "flip"), [("alternate", False), ("half", True)])
def test_coupling_inverts_exactly_and_keeps_the_masked_half(mask, flip):
    x, m = coupling(5, mask=mask, flip=flip)
    y, _ = m(x)
    assert torch.allclose(m.inverse(y), x, atol=1e-12)
    kept = m.mask.bool()
    want = {("alternate", False): [1, 0, 1, 0, 1], ("half", True): [0, 0, 0, 1, 1]}[mask, flip]
    assert kept.tolist() == [bool(v) for v in want]
    assert torch.equal(y[:, kept], x[:, kept]) and not torch.allclose(y[:, ~kept], x[:, ~kept])


@pytest.mark.parametrize("tanh_scale", [True, False])
def test_coupling_log_det_equals_the_jacobians(tanh_scale):
    x, m = coupling(4, tanh_scale=tanh_scale)
    _, log_det = m(x)
    for i in range(3):
        J = jacobian(lambda v: m(v[None])[0][0], x[i])
        assert torch.allclose(log_det[i], torch.linalg.slogdet(J)[1], atol=1e-10)


def test_stacked_couplings_accumulate_log_det_and_flow_nll_is_the_density():
    x, first = coupling(3)
    _, second = coupling(3, flip=True)
    y1, ld1 = first(x)
    z, ld = second(y1, ld1)
    nll = run_op("generative.FlowNLL", {"z": z, "log_det": ld}, reduction="sum")
    full = [torch.linalg.slogdet(jacobian(lambda v: second(first(v[None])[0])[0][0], xi))[1]
            for xi in x]
    want = -(Normal(0.0, 1.0).log_prob(z).sum(1) + torch.stack(full)).sum()
    assert torch.allclose(nll, want, atol=1e-10)


def test_flow_density_integrates_to_one():
    """exp(−NLL) of a random 2-D coupling flow, summed over a fine grid, is ≈ 1: the
    change of variables is right (log_det sign and the base density's constant)."""
    torch.manual_seed(1)
    _, _, first = build("generative.AffineCoupling", {"input": torch.zeros(1, 2)})
    _, _, second = build("generative.AffineCoupling", {"input": torch.zeros(1, 2)}, flip=True)
    nll_block = build("generative.FlowNLL", {"z": torch.zeros(1, 2), "log_det": torch.zeros(1)})[2]
    side, half = 361, 9.0
    g = torch.linspace(-half, half, side)
    grid = torch.cartesian_prod(g, g)
    with torch.no_grad():
        z, ld = second(*first(grid))
    nll = 0.5 * (z**2).sum(1) + math.log(2 * math.pi) - ld  # −log p(x) at each grid point
    cell = (2 * half / (side - 1)) ** 2
    assert torch.exp(-nll).sum().item() * cell == pytest.approx(1.0, abs=0.01)
    assert torch.allclose(nll_block(z, ld), nll.mean(), atol=1e-5)  # the block's number


def test_flow_nll_against_torch_distributions():
    z, log_det = torch.randn(6, 2, 3), torch.randn(6)
    got = run_op("generative.FlowNLL", {"z": z, "log_det": log_det})
    want = -(Normal(0.0, 1.0).log_prob(z).flatten(1).sum(1) + log_det).mean()
    assert torch.allclose(got, want, atol=1e-5)


def test_coupling_checks_its_input():
    with pytest.raises(PortError) as e:
        build("generative.AffineCoupling", {"input": torch.zeros(2, 1, 4, 4)})
    assert "Flatten" in e.value.hint
    with pytest.raises(PortError) as e:
        build("generative.AffineCoupling", {"input": torch.zeros(2, 4),
                                            "log_det": torch.zeros(3)})
    assert e.value.port == "log_det"


# -- shape inference -------------------------------------------------------------------------

META_CASES = [
    ("generative.ELBO", elbo_inputs(), {}, [(), (), ()]),
    ("generative.GANDiscriminatorLoss", {"real_logits": torch.zeros(4, 1),
                                         "fake_logits": torch.zeros(4, 1)}, {}, [()]),
    ("generative.GANGeneratorLoss", {"fake_logits": torch.zeros(4)}, {}, [()]),
    ("generative.DiffusionEpsLoss", {"eps_pred": torch.zeros(4, 2), "eps": torch.zeros(4, 2)},
     {}, [()]),
    ("generative.TimestepEmbedding", {"input": torch.zeros(4, dtype=torch.long)},
     {"mlp_features": 8}, [(4, 8)]),
    ("generative.AffineCoupling", {"input": torch.zeros(4, 6), "log_det": torch.zeros(4)}, {},
     [(4, 6), (4,)]),
    ("generative.FlowNLL", {"z": torch.zeros(4, 6), "log_det": torch.zeros(4)}, {}, [()]),
]


@pytest.mark.parametrize(("block_id", "inputs", "params", "shapes"), META_CASES,
                         ids=[c[0] for c in META_CASES])
def test_generative_blocks_infer_shapes_on_meta_tensors(block_id, inputs, params, shapes):
    assert [tuple(o.shape) for o in on_meta(block_id, inputs, **params)] == shapes


def test_every_generative_block_is_covered_by_the_meta_test(registry):
    assert {s.id for s in registry if s.category == "generative"} == {c[0] for c in META_CASES}
