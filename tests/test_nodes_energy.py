"""Energy-based blocks: the Hopfield designs against seed 004's E11–E12 figures (digest
§1), Hebbian recall, and the RBM against brute-force sums over hidden states, the CD
formula and scikit-learn's BernoulliRBM."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from sklearn.neural_network import BernoulliRBM as SkRBM

import nodegraph
from nodegraph.model.errors import ParamError, PortError
from nodegraph.model.graph import Graph
from nodes.energy import newhop, pattern_matrix
from tests.blockcheck import build
from tests.test_nodes_samplers import on_meta

TARGETS_2D = [[1, 1], [-1, -1], [1, -1]]  # seed 004 eq 3 (L161)
TARGETS_3D = [[-1, -1, 1], [1, -1, -1], [1, 1, 1]]  # seed 004 L176


def hopfield(block_id: str, units: int, **params):
    return build(block_id, {"input": torch.zeros(1, units)}, **params)[2]


def recall(m, states) -> torch.Tensor:
    return m(torch.tensor(states, dtype=torch.float32))[0]


def uniform_starts(units: int, n: int = 1000, seed: int = 0) -> torch.Tensor:
    """Random starts in [−1, 1]^units, as the course's rands(S, 1)."""
    torch.manual_seed(seed)
    return torch.rand(n, units) * 2 - 1


# -- newhop: seed 004 E11 (2-D) ------------------------------------------------------------


def test_newhop_2d_design_is_1_1618_identity():
    m = hopfield("energy.HopfieldNewhop", 2, targets=TARGETS_2D)
    assert torch.allclose(m.weight, 1.1618 * torch.eye(2), atol=5e-5)  # e^0.15·I
    assert torch.equal(m.bias, torch.zeros(2))


def test_newhop_2d_attractors_spurious_state_and_unstable_points():
    """All four corners are stable, the spurious [−1, 1] included; [0, 0], [1, 0] and
    [0, 1] are fixed points that a small push leaves (digest E11)."""
    m = hopfield("energy.HopfieldNewhop", 2, targets=TARGETS_2D, steps=100)
    corners = [[1, 1], [-1, -1], [1, -1], [-1, 1]]
    assert torch.equal(recall(m, corners), torch.tensor(corners, dtype=torch.float32))
    near = [[0.9, 0.8], [-0.7, -0.95], [0.6, -0.9], [-0.8, 0.7]]
    assert torch.equal(recall(m, near), torch.tensor(corners, dtype=torch.float32))
    fixed = torch.tensor([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    one_step = hopfield("energy.HopfieldNewhop", 2, targets=TARGETS_2D, steps=1)
    assert torch.equal(one_step(fixed)[0], fixed)
    pushed = recall(m, (fixed + torch.tensor([[1e-3, -1e-3], [0.0, 1e-3], [-1e-3, 0.0]])).tolist())
    assert torch.equal(pushed, torch.tensor([[1.0, -1.0], [1.0, 1.0], [-1.0, 1.0]]))


def test_newhop_2d_convergence_counts():
    """Digest E11: 90 % of random starts converge within about 21 iterations."""
    m = hopfield("energy.HopfieldNewhop", 2, targets=TARGETS_2D, steps=100)
    out, _, _, iterations = m(uniform_starts(2))[:4]
    assert (iterations > 0).all()
    assert torch.quantile(iterations.double(), 0.9).item() == 21
    assert set(map(tuple, out.tolist())) == {(1, 1), (-1, -1), (1, -1), (-1, 1)}


# -- newhop: seed 004 E12 (3-D) ------------------------------------------------------------


def test_newhop_3d_weights_and_bias_match_the_digest():
    m = hopfield("energy.HopfieldNewhop", 3, targets=TARGETS_3D)
    w = torch.tensor([[0.8489, 0.3129, -0.3129], [0.3129, 0.8489, 0.3129],
                      [-0.3129, 0.3129, 0.8489]])
    assert torch.allclose(m.weight, w, atol=5e-5)
    assert torch.allclose(m.bias, torch.tensor([0.2849, -0.2849, 0.2849]), atol=5e-5)
    weight, bias = newhop(pattern_matrix(TARGETS_3D, "targets"))
    t = torch.tensor(TARGETS_3D, dtype=torch.float64)
    normal = torch.linalg.cross(t[0] - t[2], t[1] - t[2])  # across the targets' plane
    along = t[0] - t[2]
    assert torch.allclose(weight @ normal, np.exp(-10 * 0.15) * normal)  # repelled: e^(−τh)
    assert torch.allclose(weight @ along, np.exp(0.15) * along)  # kept: e^h
    assert torch.allclose((t @ weight.T + bias).clamp(-1, 1), t)  # every target is fixed


def spurious_fixed_points() -> dict[str, torch.Tensor]:
    """The fixed points of satlins(Wx + b) with some units inside (−1, 1), solved exactly:
    the free units f satisfy (I − W_ff)·x_f = W_fs·x_s + b_f."""
    weight, bias = newhop(pattern_matrix(TARGETS_3D, "targets"))
    eye = torch.eye(3, dtype=torch.float64)
    found = {"centre": torch.linalg.solve(eye - weight, bias)}
    for j, s in itertools.product(range(3), (-1.0, 1.0)):
        f = [i for i in range(3) if i != j]
        x = torch.full((3,), s, dtype=torch.float64)
        x[f] = torch.linalg.solve(eye[f][:, f] - weight[f][:, f], weight[f, j] * s + bias[f])
        if x[f].abs().max() <= 1 and torch.allclose((weight @ x + bias).clamp(-1, 1), x):
            found[f"edge {j} {s:+.0f}"] = x
    return found


def test_newhop_3d_spurious_equilibria_are_the_digests():
    """Seed 004 L190–L195: edge points [−0.06, −1, −0.06], [−0.06, 0.06, 1],
    [1, 0.06, −0.06] and the centre [0.367, −0.367, 0.367]; digest: ±0.0605, 0.3667."""
    points = sorted(torch.stack(list(spurious_fixed_points().values())).tolist())
    want = sorted([[-0.0605, -1, -0.0605], [-0.0605, 0.0605, 1], [1, 0.0605, -0.0605],
                   [0.3667, -0.3667, 0.3667]])
    assert np.allclose(points, want, atol=5e-5)
    one_step = hopfield("energy.HopfieldNewhop", 3, targets=TARGETS_3D, steps=1)
    x = torch.tensor(points, dtype=torch.float32)
    assert torch.allclose(one_step(x)[0], x, atol=1e-5)  # fixed points of the block too


def test_newhop_3d_spurious_points_are_unstable():
    """Fig 8: starts near a spurious point do not converge to it, but to a target."""
    m = hopfield("energy.HopfieldNewhop", 3, targets=TARGETS_3D, steps=100)
    torch.manual_seed(0)
    points = torch.stack(list(spurious_fixed_points().values())).float()
    starts = (points.repeat(5, 1) + 1e-3 * torch.randn(20, 3)).clamp(-1, 1)
    out = m(starts)[0]
    targets = torch.tensor(TARGETS_3D, dtype=torch.float32)
    assert (torch.cdist(out, targets).min(1).values < 1e-6).all()


def test_newhop_3d_convergence_counts_and_final_states():
    """Digest E12 (a numpy run over random starts): median 12 iterations, 90th percentile
    25, maximum about 47. The same protocol — starts uniform in [−1, 1]³, a start settles
    at the first iteration moving no unit by more than 1e-3 — gives median 12 exactly; the
    90th percentile is 24 over 10⁵ starts and 23–25 over samples of 1000, the maximum
    43–52, so those two figures are checked within the spread of a 1000-start sample."""
    m = hopfield("energy.HopfieldNewhop", 3, targets=TARGETS_3D, steps=120)
    out, trajectory, energy, iterations = m(uniform_starts(3))[:4]
    steps = iterations.double()
    assert steps.median().item() == 12
    assert 23 <= torch.quantile(steps, 0.9).item() <= 25
    assert 40 <= steps.max().item() <= 55
    targets = torch.tensor(TARGETS_3D, dtype=torch.float32)
    assert (torch.cdist(out, targets).min(1).values < 1e-5).all()  # no spurious end state
    assert trajectory.shape == (1000, 121, 3) and energy.shape == (1000, 121)


def test_hopfield_energy_is_the_quadratic_form():
    m = hopfield("energy.HopfieldNewhop", 3, targets=TARGETS_3D, steps=3)
    x = uniform_starts(3, 4)
    _, trajectory, energy, _ = m(x)[:4]
    w, b = m.weight, m.bias
    want = torch.stack([-0.5 * torch.einsum("ni,ij,nj->n", s, w, s) - s @ b
                        for s in trajectory.unbind(1)], 1)
    assert torch.allclose(energy, want, atol=1e-6)


# -- Hebbian -------------------------------------------------------------------------------


def test_hebbian_eq3_weights_and_eq5_recall():
    """Seed 004 eq 3: W = Σssᵀ = [[3, 1], [1, 3]]; eq 5: two sign steps take [0.5, −0.75]
    to the target [1, −1] and [−0.5, 0.75] to the spurious [−1, 1]."""
    m = hopfield("energy.HopfieldHebbian", 2, patterns=TARGETS_2D, normalize=False,
                 zero_diagonal=False, steps=2)
    assert torch.equal(m.weight, torch.tensor([[3.0, 1.0], [1.0, 3.0]]))
    assert torch.equal(recall(m, [[0.5, -0.75], [-0.5, 0.75]]),
                       torch.tensor([[1.0, -1.0], [-1.0, 1.0]]))


@pytest.mark.parametrize("activation", ["sign", "satlins"])
def test_hebbian_cannot_make_1_0_a_fixed_point(activation):
    """The digest's warning: with Hebbian weights [1, 0] maps to [1, 1], so E11's [1, 0]
    and [0, 1] come from newhop, not from eq 3."""
    m = hopfield("energy.HopfieldHebbian", 2, patterns=TARGETS_2D, normalize=False,
                 zero_diagonal=False, activation=activation, steps=1)
    assert torch.equal(recall(m, [[1.0, 0.0]]), torch.tensor([[1.0, 1.0]]))


def test_hebbian_default_is_normalised_without_self_loops():
    patterns = [[1, -1, 1, -1], [1, 1, -1, -1]]
    m = hopfield("energy.HopfieldHebbian", 4, patterns=patterns)
    p = torch.tensor(patterns, dtype=torch.float32)
    assert torch.allclose(m.weight, (p.T @ p - 2 * torch.eye(4)) / 4)


@pytest.mark.parametrize("update", ["sync", "async"])
def test_hebbian_recalls_corrupted_patterns(update):
    torch.manual_seed(0)
    patterns = torch.randint(0, 2, (3, 100)).float() * 2 - 1
    m = hopfield("energy.HopfieldHebbian", 100, patterns=patterns.tolist(), update=update)
    flips = torch.rand(3, 100) < 0.1
    noisy = torch.where(flips, -patterns, patterns)
    out, _, energy, iterations = m(noisy)[:4]
    assert torch.equal(out, patterns)
    assert (energy[:, -1] < energy[:, 0]).all() and (iterations > 0).all()


def test_async_energy_never_rises_while_sync_can_cycle():
    m_sync = hopfield("energy.HopfieldHebbian", 2, patterns=[[1, 1]], steps=6)
    m_async = hopfield("energy.HopfieldHebbian", 2, patterns=[[1, 1]], update="async", steps=6)
    start = torch.tensor([[1.0, -1.0]])
    out, trajectory, _, iterations = m_sync(start)[:4]
    assert torch.equal(trajectory[0, 1], torch.tensor([-1.0, 1.0]))  # a 2-cycle
    assert torch.equal(out, start) and iterations.item() == -1
    torch.manual_seed(0)
    starts = torch.randint(0, 2, (50, 2)).float() * 2 - 1
    out, _, energy, iterations = m_async(starts)[:4]
    assert (energy[:, 1:] <= energy[:, :-1] + 1e-6).all()
    assert (iterations > 0).all() and (out[:, 0] == out[:, 1]).all()


def test_hopfield_checks_patterns_and_states():
    with pytest.raises(PortError) as e:
        build("energy.HopfieldHebbian", {"input": torch.zeros(2, 3)}, patterns=TARGETS_2D)
    assert e.value.port == "input"
    with pytest.raises(ParamError, match="one pattern per row"):
        build("energy.HopfieldHebbian", {"input": torch.zeros(2, 2)}, patterns=[[1, 1], [1]])
    with pytest.raises(ParamError, match="at least 2"):
        build("energy.HopfieldNewhop", {"input": torch.zeros(2, 2)}, targets=[[1, 1]])


# -- the RBM -------------------------------------------------------------------------------

V, H = 5, 3


def rbm(n=V, hidden=H, **params):
    torch.manual_seed(0)
    _, _, m = build("energy.BernoulliRBM", {"input": torch.zeros(2, n)}, n_components=hidden,
                    **params)
    with torch.no_grad():  # weights big enough for the numbers to mean something
        m.weight.normal_(0, 1)
        m.hidden_bias.normal_(0, 1)
        m.visible_bias.normal_(0, 1)
    return m.double()


def binary(n: int, units: int = V, seed: int = 1) -> torch.Tensor:
    torch.manual_seed(seed)
    return torch.randint(0, 2, (n, units)).double()


def energy_of(m, v, h):
    return -(v @ m.visible_bias) - (h @ m.hidden_bias) - ((h @ m.weight) * v).sum(-1)


def all_states(units: int) -> torch.Tensor:
    return torch.tensor(list(itertools.product([0.0, 1.0], repeat=units)), dtype=torch.float64)


def test_free_energy_is_minus_log_sum_over_hidden_states():
    m, v = rbm(), binary(4)
    hs = all_states(H)
    brute = -torch.logsumexp(torch.stack([-energy_of(m, v, h.expand(4, H)) for h in hs]), 0)
    assert torch.allclose(m.free_energy(v), brute)


def test_pseudo_likelihood_exact_against_the_joint_distribution():
    m, v = rbm(), binary(4)
    want = torch.zeros(4, dtype=torch.float64)
    for i in range(V):
        v0, v1 = v.clone(), v.clone()
        v0[:, i], v1[:, i] = 0, 1
        log_p1 = -F.softplus(m.free_energy(v1) - m.free_energy(v0))  # log P(v_i = 1 | v_−i)
        want += torch.where(v[:, i] == 1, log_p1, torch.log1p(-log_p1.exp()))
    assert torch.allclose(m.pseudo_likelihood(v, exact=True), want)
    # scikit-learn's one-flip estimate is unbiased: its mean over the flipped unit is exact
    each = torch.stack([m.pseudo_likelihood(v, torch.full((4,), i)) for i in range(V)])
    assert torch.allclose(each.mean(0), want)


def sklearn_twin(m, batch: int, seed: int = 0) -> SkRBM:
    sk = SkRBM(n_components=H, learning_rate=0.1, batch_size=batch, random_state=seed)
    sk.components_ = m.weight.detach().numpy().copy()
    sk.intercept_hidden_ = m.hidden_bias.detach().numpy().copy()
    sk.intercept_visible_ = m.visible_bias.detach().numpy().copy()
    sk.n_features_in_ = m.weight.shape[1]
    return sk


def test_free_energy_and_pseudo_likelihood_match_scikit_learn():
    m, v = rbm(), binary(6, seed=2)
    sk = sklearn_twin(m, 6, seed=7)
    assert np.allclose(m.free_energy(v).detach().numpy(), sk._free_energy(v.numpy()))
    index = np.random.RandomState(7).randint(0, V, 6)  # the unit score_samples flips
    ours = m.pseudo_likelihood(v, torch.from_numpy(index)).detach().numpy()
    assert np.allclose(ours, sk.score_samples(v.numpy()))


def test_surrogate_gradient_is_the_cd_update():
    m, v, v_model = rbm(), binary(6), binary(4, seed=3)
    m.cd_loss(v, v_model).backward()
    h_data, h_model = m.hidden_probs(v).detach(), m.hidden_probs(v_model).detach()
    dw = h_data.T @ v / 6 - h_model.T @ v_model / 4  # ⟨h vᵀ⟩_data − ⟨h vᵀ⟩_model
    assert torch.allclose(m.weight.grad, -dw)
    assert torch.allclose(m.hidden_bias.grad, -(h_data.mean(0) - h_model.mean(0)))
    assert torch.allclose(m.visible_bias.grad, -(v.mean(0) - v_model.mean(0)))


def test_one_sgd_step_on_the_surrogate_is_scikit_learns_pcd_update():
    """sklearn's _fit draws v⁻ from its persistent hidden states, then moves the weights by
    lr·(⟨vh⟩_data − ⟨vh⟩_model); SGD on F(v) − F(v⁻) with the same v⁻ lands on the same
    weights."""
    m, v = rbm(), binary(6, seed=4)
    sk = sklearn_twin(m, 6)
    sk.h_samples_ = binary(6, H, seed=5).numpy()
    p = 1 / (1 + np.exp(-(sk.h_samples_ @ sk.components_ + sk.intercept_visible_)))
    v_model = torch.from_numpy(np.random.RandomState(0).uniform(size=p.shape) < p).double()
    sk._fit(v.numpy(), np.random.RandomState(0))
    m.cd_loss(v, v_model).backward()
    with torch.no_grad():  # one plain SGD step, lr 0.1
        for param in m.parameters():
            param -= 0.1 * param.grad
    assert np.allclose(m.weight.detach().numpy(), sk.components_)
    assert np.allclose(m.hidden_bias.detach().numpy(), sk.intercept_hidden_)
    assert np.allclose(m.visible_bias.detach().numpy(), sk.intercept_visible_)


def manual_chain(m, v, k):
    """CD-k's model sample drawn by hand, with u < p draws in the block's order."""
    h = (torch.rand_like(m.hidden_probs(v)) < m.hidden_probs(v)).double()
    for step in range(k):
        p = m.visible_probs(h)
        v = (torch.rand_like(p) < p).double()
        if step < k - 1:
            q = m.hidden_probs(v)
            h = (torch.rand_like(q) < q).double()
    return v


@pytest.mark.parametrize("k", [1, 3])
def test_block_loss_is_the_surrogate_on_a_cd_k_chain(k):
    m, v = rbm(k=k), binary(8)
    torch.manual_seed(11)
    loss, hidden, recon, pl = m(v)
    torch.manual_seed(11)
    with torch.no_grad():
        want = m.cd_loss(v, manual_chain(m, v, k))
    assert torch.allclose(loss, want)
    assert torch.allclose(hidden, m.hidden_probs(v))
    assert torch.allclose(recon, m.visible_probs(m.hidden_probs(v)))
    assert pl.shape == (8,) and not pl.requires_grad


def test_pcd_chain_persists_in_training_and_rests_in_eval():
    m, v = rbm(method="pcd"), binary(8)
    torch.manual_seed(0)
    m.train()(v)
    p = torch.sigmoid(m.visible_bias).expand(8, V)  # scikit-learn's start: h = 0
    torch.manual_seed(0)
    with torch.no_grad():
        v_model = (torch.rand_like(p) < p).double()
        q = m.hidden_probs(v_model)
        h = (torch.rand_like(q) < q).double()
    assert torch.equal(m.chain, h)
    m.eval()(v)
    assert torch.equal(m.chain, h)  # evaluation draws from the data, not the chain
    m.train()(v)
    assert m.chain.shape == (8, H)


def test_loss_trains_only_this_rbm_while_hidden_passes_gradients():
    m = rbm()
    v = binary(4).requires_grad_()
    loss, hidden, _, _ = m(v)
    loss.backward(retain_graph=True)
    assert v.grad is None and m.weight.grad is not None
    hidden.sum().backward()
    assert v.grad is not None and v.grad.abs().sum() > 0  # stackable and fine-tunable


def test_gibbs_chain_keeps_clamped_units():
    m, v = rbm(), binary(6)
    known = torch.zeros(6, V, dtype=torch.bool)
    known[:, :2] = True  # the top rows of an image, say
    chain = m.gibbs_chain(v, 20, known)
    assert chain.shape == (21, 6, V)
    assert torch.equal(chain[:, :, :2], v[:, :2].expand(21, 6, 2))
    assert not torch.allclose(chain[1:, :, 2:], v[:, 2:].expand(20, 6, V - 2))
    torch.manual_seed(4)
    drawn, probs = m.gibbs_step(v)
    torch.manual_seed(4)
    h = (torch.rand(6, H, dtype=torch.float64) < m.hidden_probs(v)).double()
    assert torch.allclose(probs, m.visible_probs(h))
    assert set(drawn.unique().tolist()) <= {0.0, 1.0}


def test_rbm_trains_in_a_graph_like_scikit_learns():
    """Digits (8×8, pixels in [0, 1]) into a 32-unit PCD RBM trained by SGD on its
    surrogate: the exact pseudo-likelihood per image climbs from 64·log ½ ≈ −44.4 to
    where scikit-learn's BernoulliRBM gets with the same data, rate, batch and epochs."""
    g = Graph("rbm")
    g.add("data.Digits", id="data", batch_size=20)
    g.add("energy.BernoulliRBM", id="rbm", n_components=32, method="pcd",
          pseudo_likelihood="exact")
    g.add("optimizers.SGD", id="opt", lr=0.05)
    g.add("energy.PseudoLikelihood", id="pl")
    g.connect(("data", "x"), ("rbm", "input"))
    g.connect(("rbm", "loss"), ("opt", "loss"))
    g.connect(("rbm", "pseudo_likelihood"), ("pl", "input"))
    g.update_training({"epochs": 2, "seed": 0})
    result = nodegraph.train(g)
    ours = result.final["val"]["pl"]
    data = result.compiled.datasets["data"]
    train, val = data.tensors("train")["x"].double(), data.tensors("val")["x"].double()
    sk = SkRBM(n_components=32, learning_rate=0.05, batch_size=20, n_iter=2,
               random_state=0).fit(train.numpy())
    twin = rbm(64, 32)
    with torch.no_grad():
        twin.weight.copy_(torch.from_numpy(sk.components_))
        twin.hidden_bias.copy_(torch.from_numpy(sk.intercept_hidden_))
        twin.visible_bias.copy_(torch.from_numpy(sk.intercept_visible_))
    theirs = twin.pseudo_likelihood(val, exact=True).mean().item()
    assert -27 < ours < -23 and abs(ours - theirs) < 1.0, (ours, theirs)


def pcd_graph() -> Graph:
    g = Graph("pcd")
    g.add("data.Digits", id="data", batch_size=50)
    g.add("energy.BernoulliRBM", id="rbm", n_components=8, method="pcd")
    g.add("optimizers.SGD", id="opt", lr=0.05)
    g.connect(("data", "x"), ("rbm", "input"))
    g.connect(("rbm", "loss"), ("opt", "loss"))
    g.update_training({"epochs": 4, "seed": 0, "restore_best": False})
    return g


def test_pcd_chain_is_saved_in_checkpoints_and_a_resumed_run_continues_it(tmp_path):
    """The persistent chain is block state: saved in the safetensors checkpoint, loaded
    back on resume, so 2 + 2 epochs end exactly where 4 epochs do (chain and weights)."""
    from safetensors.torch import load_file

    full = nodegraph.train(pcd_graph(), device="cpu")
    nodegraph.train(pcd_graph(), epochs=2, device="cpu", checkpoint_dir=tmp_path)
    saved = load_file(str(tmp_path / "last" / "model.safetensors"))
    assert saved["rbm.chain"].shape == (50, 8)  # the chains of the first batch's size
    assert set(saved["rbm.chain"].unique().tolist()) <= {0.0, 1.0}
    resumed = nodegraph.train(pcd_graph(), device="cpu", checkpoint_dir=tmp_path,
                              resume=True)
    ours, theirs = full.module.module_of("rbm"), resumed.module.module_of("rbm")
    assert torch.equal(ours.chain, theirs.chain)
    assert torch.equal(ours.weight, theirs.weight)
    # CD keeps no chain, so its checkpoints hold the weights only
    cd = build("energy.BernoulliRBM", {"input": torch.zeros(2, V)}, n_components=H)[2]
    assert "chain" not in cd.state_dict()


def test_rbm_checks_its_input():
    with pytest.raises(PortError) as e:
        build("energy.BernoulliRBM", {"input": torch.zeros(2, 1, 8, 8)})
    assert "Flatten" in e.value.hint
    with pytest.raises(PortError):
        build("energy.PseudoLikelihood", {"input": torch.zeros(4, 2)})


# -- shape inference -------------------------------------------------------------------------

META_CASES = [
    ("energy.HopfieldHebbian", {"input": torch.zeros(4, 2)},
     {"patterns": TARGETS_2D, "update": "async", "steps": 3},
     [(4, 2), (4, 4, 2), (4, 4), (4,), (2, 2), (2,)]),
    ("energy.HopfieldNewhop", {"input": torch.zeros(4, 3)}, {"targets": TARGETS_3D},
     [(4, 3), (4, 51, 3), (4, 51), (4,), (3, 3), (3,)]),
    ("energy.BernoulliRBM", {"input": torch.zeros(4, 6)}, {"n_components": 5, "method": "pcd",
                                                          "pseudo_likelihood": "exact"},
     [(), (4, 5), (4, 6), (4,)]),
]


@pytest.mark.parametrize(("block_id", "inputs", "params", "shapes"), META_CASES,
                         ids=[c[0] for c in META_CASES])
def test_energy_blocks_infer_shapes_on_meta_tensors(block_id, inputs, params, shapes):
    assert [tuple(o.shape) for o in on_meta(block_id, inputs, **params)] == shapes


def test_every_energy_op_is_covered_by_the_meta_test(registry):
    ops = {s.id for s in registry if s.category == "energy" and s.kind == "op"}
    assert ops == {c[0] for c in META_CASES}
