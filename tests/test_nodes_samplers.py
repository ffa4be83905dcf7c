"""Sampler blocks: draws against their distributions' moments, torch's samplers and the
closed forms (DDPM's q(x_t | x_0) against iterating the chain), train vs eval."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from nodegraph.model.errors import ParamError, PortError
from nodegraph.model.spec import default_registry
from nodes.samplers import ddpm_betas
from tests.blockcheck import build, run_op


def on_meta(block_id: str, inputs: dict[str, torch.Tensor], /, **params):
    """Build and run a block as validation does: meta inputs, built under the meta device,
    called outside it (a block must not read values or create CPU tensors there)."""
    spec = default_registry().get(block_id)
    values, problems = spec.resolve_params(params)
    assert not problems, problems
    meta = {k: torch.empty(v.shape, dtype=v.dtype, device="meta") for k, v in inputs.items()}
    with torch.device("meta"):
        module = spec.build(values, meta)
    out = module(*[meta.get(p.name) for p in spec.inputs])
    return out if isinstance(out, tuple) else (out,)


def module(block_id: str, inputs: dict | None = None, /, **params):
    return build(block_id, inputs or {}, **params)[2]


def call(m, inputs: dict, block_id: str):
    return m(*[inputs.get(p.name) for p in default_registry().get(block_id).inputs])


# -- noise sources -----------------------------------------------------------------------


def test_gaussian_noise_follows_the_batch_and_shape_of_like():
    like = torch.zeros(5, 3, 4)
    out = run_op("samplers.GaussianNoise", {"like": like})
    assert out.shape == (5, 3, 4)
    assert run_op("samplers.GaussianNoise", {"like": like}, shape=[7]).shape == (5, 7)
    assert run_op("samplers.GaussianNoise", {"like": like.double()}).dtype == torch.float64


def test_gaussian_noise_has_its_mean_and_std():
    torch.manual_seed(0)
    out = run_op("samplers.GaussianNoise", {}, shape=[1000], batch_size=200, mean=2.0, std=3.0)
    assert out.shape == (200, 1000)
    assert out.mean().item() == pytest.approx(2.0, abs=0.03)  # se = 3/√2e5 ≈ 0.007
    assert out.std().item() == pytest.approx(3.0, abs=0.02)


def test_noise_source_needs_a_batch_from_somewhere():
    with pytest.raises(PortError) as e:
        build("samplers.GaussianNoise", {}, shape=[2])
    assert e.value.port == "like"
    with pytest.raises(ParamError, match="shape"):
        build("samplers.UniformNoise", {}, batch_size=4)


def test_noise_sources_sample_in_eval_too():
    m = module("samplers.GaussianNoise", {}, shape=[8], batch_size=2).eval()
    assert not torch.equal(m(), m())


def test_uniform_noise_range_mean_and_variance():
    torch.manual_seed(0)
    out = run_op("samplers.UniformNoise", {"like": torch.zeros(400, 500)}, low=-1.0, high=3.0)
    assert out.min() >= -1.0 and out.max() < 3.0
    assert out.mean().item() == pytest.approx(1.0, abs=0.01)
    assert out.var().item() == pytest.approx(16 / 12, abs=0.01)  # (high − low)²/12
    with pytest.raises(ParamError, match="high"):
        build("samplers.UniformNoise", {"like": torch.zeros(2, 2)}, low=1.0, high=1.0)


def test_prior_sample_is_standard_normal_of_latent_dim():
    torch.manual_seed(0)
    z = run_op("samplers.PriorSample", {"like": torch.zeros(50000, 28, 28)}, latent_dim=3)
    assert z.shape == (50000, 3)
    assert torch.allclose(z.mean(0), torch.zeros(3), atol=0.02)
    assert torch.allclose(torch.cov(z.T), torch.eye(3), atol=0.03)


def test_source_without_inputs_draws_on_the_device_of_its_graph():
    m = module("samplers.PriorSample", {}, latent_dim=2, batch_size=3)
    assert m().device.type == "cpu"
    assert m.to("meta")().device.type == "meta"  # the empty anchor buffer moved with it


# -- reparameterisation and discrete units ---------------------------------------------------


def test_reparameterize_draws_mu_plus_sigma_eps_and_passes_gradients():
    mu = torch.randn(4, 3, requires_grad=True)
    logvar = torch.randn(4, 3, requires_grad=True)
    m = module("samplers.Reparameterize", {"mu": mu, "logvar": logvar})
    torch.manual_seed(1)
    z = m(mu, logvar)
    torch.manual_seed(1)
    eps = torch.randn(4, 3)
    std = torch.exp(0.5 * logvar)
    assert torch.allclose(z, mu + std * eps)
    z.sum().backward()
    assert torch.allclose(mu.grad, torch.ones(4, 3))
    assert torch.allclose(logvar.grad, 0.5 * std.detach() * eps)  # dz/d logvar = σε/2


def test_reparameterize_moments_and_eval_returns_mu():
    torch.manual_seed(0)
    mu, logvar = torch.full((100000, 1), 1.5), torch.full((100000, 1), math.log(0.25))
    m = module("samplers.Reparameterize", {"mu": mu, "logvar": logvar})
    z = m(mu, logvar)
    assert z.mean().item() == pytest.approx(1.5, abs=0.01)
    assert z.var().item() == pytest.approx(0.25, abs=0.01)
    assert torch.equal(m.eval()(mu, logvar), mu)
    kept = module("samplers.Reparameterize", {"mu": mu, "logvar": logvar}, sample_in_eval=True)
    assert kept.eval()(mu, logvar).var().item() == pytest.approx(0.25, abs=0.01)


def test_reparameterize_refuses_mismatched_heads():
    with pytest.raises(PortError) as e:
        build("samplers.Reparameterize", {"mu": torch.zeros(2, 3), "logvar": torch.zeros(2, 4)})
    assert e.value.port == "logvar"


def test_bernoulli_frequencies_logits_and_eval_threshold():
    torch.manual_seed(0)
    p = torch.tensor([0.1, 0.5, 0.9]).repeat(40000, 1)
    draws = run_op("samplers.Bernoulli", {"input": p})
    assert set(draws.unique().tolist()) == {0.0, 1.0}
    assert torch.allclose(draws.mean(0), torch.tensor([0.1, 0.5, 0.9]), atol=0.01)
    from_logits = run_op("samplers.Bernoulli", {"input": torch.logit(p)}, input_kind="logits")
    assert torch.allclose(from_logits.mean(0), torch.tensor([0.1, 0.5, 0.9]), atol=0.01)
    m = module("samplers.Bernoulli", {"input": p}).eval()
    assert torch.equal(m(p[:1]), torch.tensor([[0.0, 0.0, 1.0]]))


def test_bernoulli_straight_through_gradient_is_the_identity():
    p = torch.tensor([[0.2, 0.7]], requires_grad=True)
    assert not run_op("samplers.Bernoulli", {"input": p}).requires_grad  # a draw: no gradient
    out = run_op("samplers.Bernoulli", {"input": p}, straight_through=True)
    assert set(out.detach().flatten().tolist()) <= {0.0, 1.0}
    (out * torch.tensor([[3.0, -2.0]])).sum().backward()
    assert torch.equal(p.grad, torch.tensor([[3.0, -2.0]]))


def test_categorical_frequencies_follow_softmax_with_temperature():
    torch.manual_seed(0)
    logits = torch.tensor([1.0, 0.0, -1.0]).repeat(60000, 1)
    one_hot, index = run_op("samplers.Categorical", {"input": logits}, temperature=2.0)
    want = torch.softmax(logits[0] / 2.0, -1)
    assert torch.allclose(one_hot.mean(0), want, atol=0.01)
    assert torch.equal(one_hot.argmax(-1), index) and index.dtype == torch.long


def test_categorical_draw_is_torchs_gumbel_max_and_eval_is_argmax():
    logits = torch.randn(6, 5)
    m = module("samplers.Categorical", {"input": logits})
    torch.manual_seed(3)
    _, index = m(logits)
    torch.manual_seed(3)
    assert torch.equal(index, F.gumbel_softmax(logits, tau=1.0, hard=True).argmax(-1))
    assert torch.equal(m.eval()(logits)[1], logits.argmax(-1))


def test_categorical_straight_through_gradient_is_the_softmax_gradient():
    logits = torch.randn(3, 4, requires_grad=True)
    w = torch.randn(3, 4)
    one_hot, _ = run_op("samplers.Categorical", {"input": logits}, straight_through=True,
                        temperature=0.5)
    (one_hot * w).sum().backward()
    want = torch.autograd.grad((torch.softmax(logits / 0.5, -1) * w).sum(), logits)[0]
    assert torch.allclose(logits.grad, want)


@pytest.mark.parametrize("hard", [False, True])
def test_gumbel_softmax_matches_torch_and_drops_the_noise_in_eval(hard):
    logits = torch.randn(5, 4)
    m = module("samplers.GumbelSoftmax", {"input": logits}, tau=0.7, hard=hard)
    torch.manual_seed(2)
    got = m(logits)
    torch.manual_seed(2)
    assert torch.allclose(got, F.gumbel_softmax(logits, tau=0.7, hard=hard))
    soft = torch.softmax(logits / 0.7, -1)
    want = F.one_hot(logits.argmax(-1), 4).float() if hard else soft
    assert torch.allclose(m.eval()(logits), want)


def test_discrete_samplers_need_classes_in_the_last_dim():
    with pytest.raises(PortError) as e:
        build("samplers.GumbelSoftmax", {"input": torch.zeros(4, 1)})
    assert e.value.port == "input"


# -- DDPM forward noising --------------------------------------------------------------------


def test_ddpm_linear_schedule_and_closed_form():
    x0 = torch.randn(6, 2, 3)
    t = torch.tensor([0, 1, 10, 100, 500, 999])
    m = module("samplers.DDPMNoise", {"x0": x0, "t": t})
    x_t, eps, t_out = m(x0, t)
    betas = torch.linspace(1e-4, 0.02, 1000, dtype=torch.float64)
    abar = torch.cumprod(1 - betas, 0).float()
    assert torch.allclose(m.alphas_cumprod, abar)
    assert m.alphas_cumprod[0].item() == pytest.approx(1 - 1e-4)
    a = abar[t].reshape(6, 1, 1)
    assert torch.allclose(x_t, a.sqrt() * x0 + (1 - a).sqrt() * eps, atol=1e-6)
    assert torch.equal(t_out, t)


def test_ddpm_cosine_schedule_follows_nichol_and_dhariwal():
    T, s = 1000, 0.008
    abar = torch.cumprod(1 - ddpm_betas(T, "cosine"), 0)

    def f(t):
        return math.cos((t / T + s) / (1 + s) * math.pi / 2) ** 2

    for t in (0, 1, 250, 500, 900):  # before the 0.999 cap bites at the very end
        assert abar[t].item() == pytest.approx(f(t + 1) / f(0), rel=1e-9)
    assert ddpm_betas(T, "cosine").max().item() == pytest.approx(0.999)


@pytest.mark.parametrize("schedule", ["linear", "cosine"])
def test_ddpm_closed_form_equals_iterating_the_chain(schedule):
    """q(x_t | x_0) = N(√ᾱ_t x0, (1 − ᾱ_t) I) and the chain x_s = √(1−β_s) x_{s−1} + √β_s z
    agree in mean and variance over many samples."""
    torch.manual_seed(0)
    n, T, t = 40000, 50, 29
    x0 = torch.tensor([1.5, -2.0]).repeat(n, 1)
    betas = ddpm_betas(T, schedule, 1e-3, 0.1).float()
    x = x0.clone()
    for beta in betas[:t + 1]:
        x = (1 - beta).sqrt() * x + beta.sqrt() * torch.randn_like(x)
    params = {"timesteps": T, "schedule": schedule, "beta_start": 1e-3, "beta_end": 0.1}
    x_t, _, _ = run_op("samplers.DDPMNoise", {"x0": x0, "t": torch.full((n, 1), t)}, **params)
    abar = torch.cumprod(1 - betas, 0)[t]
    mean, var = abar.sqrt() * x0[0], 1 - abar
    for draws in (x, x_t):  # se of the mean ≈ 0.005, of the variance ≈ 0.007·var
        assert torch.allclose(draws.mean(0), mean, atol=0.025)
        assert torch.allclose(draws.var(0), var.expand(2), rtol=0.04)


def test_ddpm_draws_t_uniformly_when_unwired_in_train_and_eval():
    torch.manual_seed(0)
    m = module("samplers.DDPMNoise", {"x0": torch.zeros(5000, 1)}, timesteps=10)
    for mode in (m.train(), m.eval()):
        _, eps, t = mode(torch.zeros(5000, 1))
        assert t.min() == 0 and t.max() == 9 and t.shape == (5000,)
        assert torch.bincount(t).float().div(5000).sub(0.1).abs().max() < 0.02
        assert eps.std().item() == pytest.approx(1.0, abs=0.05)


def test_ddpm_checks_t():
    with pytest.raises(PortError) as e:
        build("samplers.DDPMNoise", {"x0": torch.zeros(4, 2), "t": torch.zeros(4)})
    assert e.value.port == "t" and e.value.kind == "dtype_mismatch"
    with pytest.raises(PortError, match="one step index per sample"):
        build("samplers.DDPMNoise", {"x0": torch.zeros(4, 2), "t": torch.zeros(3, dtype=int)})


# -- Langevin --------------------------------------------------------------------------------


def test_langevin_step_formula():
    x, score = torch.randn(3, 2), torch.randn(3, 2)
    m = module("samplers.LangevinStep", {"input": x, "score": score}, step_size=0.04)
    torch.manual_seed(5)
    got = m(x, score)
    torch.manual_seed(5)
    assert torch.allclose(got, x + 0.02 * score + 0.2 * torch.randn(3, 2))
    still = module("samplers.LangevinStep", {"input": x, "score": score}, step_size=0.04,
                   noise_scale=0.0)
    assert torch.equal(still(x, score), x + 0.02 * score)


def test_langevin_steps_sample_a_gaussian_from_its_score():
    """With the score of N(2, 0.5²) the chain is AR(1) with factor a = 1 − ε/(2σ²): its
    stationary variance is ε/(1 − a²), σ² up to the discretisation bias."""
    torch.manual_seed(0)
    eps, mu, var = 0.01, 2.0, 0.25
    x = torch.zeros(20000, 1)
    m = module("samplers.LangevinStep", {"input": x, "score": x}, step_size=eps)
    for _ in range(600):
        x = m(x, -(x - mu) / var)
    a = 1 - eps / (2 * var)
    assert x.mean().item() == pytest.approx(mu, abs=0.02)
    assert x.var().item() == pytest.approx(eps / (1 - a * a), rel=0.04)


# -- shape inference -------------------------------------------------------------------------

META_CASES = [
    ("samplers.GaussianNoise", {"like": torch.zeros(4, 3)}, {}, [(4, 3)]),
    ("samplers.UniformNoise", {}, {"shape": [2, 5], "batch_size": 7}, [(7, 2, 5)]),
    ("samplers.PriorSample", {"like": torch.zeros(4, 1, 8, 8)}, {"latent_dim": 6}, [(4, 6)]),
    ("samplers.Reparameterize", {"mu": torch.zeros(4, 2), "logvar": torch.zeros(4, 2)}, {},
     [(4, 2)]),
    ("samplers.Bernoulli", {"input": torch.zeros(4, 3)}, {"straight_through": True}, [(4, 3)]),
    ("samplers.Categorical", {"input": torch.zeros(4, 3)}, {}, [(4, 3), (4,)]),
    ("samplers.GumbelSoftmax", {"input": torch.zeros(4, 3)}, {"hard": True}, [(4, 3)]),
    ("samplers.DDPMNoise", {"x0": torch.zeros(4, 1, 8, 8)}, {"schedule": "cosine"},
     [(4, 1, 8, 8), (4, 1, 8, 8), (4,)]),
    ("samplers.LangevinStep", {"input": torch.zeros(4, 2), "score": torch.zeros(4, 2)}, {},
     [(4, 2)]),
]


@pytest.mark.parametrize(("block_id", "inputs", "params", "shapes"), META_CASES,
                         ids=[c[0] for c in META_CASES])
def test_samplers_infer_shapes_on_meta_tensors(block_id, inputs, params, shapes):
    outs = on_meta(block_id, inputs, **params)
    assert [tuple(o.shape) for o in outs] == shapes
    assert all(o.is_meta for o in outs)


def test_every_sampler_is_covered_by_the_meta_test(registry):
    ids = {s.id for s in registry if s.category == "samplers"}
    assert ids == {c[0] for c in META_CASES}
