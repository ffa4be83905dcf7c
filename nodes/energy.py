"""Energy-based models: Hopfield networks and the Bernoulli restricted Boltzmann machine.

Neither learns by backpropagating a task loss. A Hopfield network's weights are designed in
closed form from the patterns it must store — the Hebbian outer-product rule, or MATLAB's
`newhop` (Li, Michel & Porod 1989: SVD, matrix exponential, satlins recall), the design
that reproduces the classic exercises' 2-D and 3-D attractors and spurious states — and recall
iterates x ← f(Wx + b) inside the block, emitting the trajectory and its energy
E = −½xᵀWx − bᵀx per step so the editor can plot them.

The RBM learns by contrastive divergence, whose update is not the gradient of any loss
the trainer could compute. It is expressed as the standard surrogate: the difference of
free energies F(v_data) − F(v_model) with the model sample v_model from a Gibbs chain
held constant, whose gradient is exactly the CD-k (or persistent CD) estimate, so any
optimizer block trains it. The hidden probabilities are an output, so RBMs stack (a DBN,
or a DBM's layer-wise pre-training); the pseudo-likelihood, as scikit-learn estimates it,
is an output too, averaged over a split by `energy.PseudoLikelihood`.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from nodegraph.kinds import footprint
from nodegraph.kinds.declare import metric, op
from nodegraph.kinds.dtypes import DTYPE_PARAM
from nodegraph.kinds.metric import Metric
from nodegraph.model.errors import ParamError, PortError
from nodegraph.model.spec import (
    LOSS_OUT,
    Param,
    Params,
    Port,
    bool_param,
    choice_param,
    float_param,
    int_param,
)
from nodes._shapes import fmt, need_float, need_ndim

# -- Hopfield designs ------------------------------------------------------------------------


def pattern_matrix(value: Any, name: str, least: int = 1) -> torch.Tensor:
    """A param's list of patterns (one per row) as a float64 CPU matrix, or a ParamError."""
    try:
        rows = torch.tensor(value, dtype=torch.float64, device="cpu")
    except (TypeError, ValueError, RuntimeError):
        raise ParamError(f"'{name}' must be a list of equally long lists of numbers, one "
                         "pattern per row") from None
    if rows.ndim == 1:
        rows = rows[None]
    if rows.ndim != 2 or rows.shape[0] < least or rows.shape[1] < 1:
        raise ParamError(f"'{name}' needs at least {least} pattern(s) of one or more units, "
                         f"one per row, got shape {tuple(rows.shape)}")
    return rows


def hebbian(patterns: torch.Tensor, normalize: bool = True,
            zero_diagonal: bool = True) -> torch.Tensor:
    """W = (1/N)·Σ ξξᵀ over the patterns ξ (rows), N the number of units; no self-loops."""
    w = patterns.T @ patterns
    if normalize:
        w = w / patterns.shape[1]
    if zero_diagonal:
        w = w - torch.diag(torch.diag(w))
    return w


def newhop(targets: torch.Tensor, tau: float = 10.0,
           h: float = 0.15) -> tuple[torch.Tensor, torch.Tensor]:
    """Weights and bias of MATLAB's `newhop` (Li, Michel & Porod) for targets as rows.

    With Y the targets minus the last one, U its left singular vectors and K its rank,
    T_τ = U_K U_Kᵀ − τ·U_⊥U_⊥ᵀ makes the targets' affine span attracting and the rest
    repelling; W = expm(h·T_τ) and b = U·diag(e^h − 1 (K times), (1 − e^{−τh})/τ)·Uᵀ·I_τ
    with I_τ = t_Q − T_τ·t_Q, so that every target t is a fixed point of satlins(Wt + b).
    """
    t = targets.T  # S × Q, MATLAB's layout
    units = t.shape[0]
    y = t[:, :-1] - t[:, -1:]
    u = torch.linalg.svd(y, full_matrices=True).U
    rank = int(torch.linalg.matrix_rank(y))
    span, rest = u[:, :rank], u[:, rank:]
    t_tau = span @ span.T - tau * rest @ rest.T
    i_tau = t[:, -1] - t_tau @ t[:, -1]
    weight = torch.linalg.matrix_exp(h * t_tau)
    gains = torch.cat([torch.full((rank,), math.exp(h) - 1, dtype=torch.float64),
                       torch.full((units - rank,), (1 - math.exp(-tau * h)) / tau,
                                  dtype=torch.float64)])
    bias = u @ torch.diag(gains) @ u.T @ i_tau
    return weight, bias


# -- Hopfield recall ------------------------------------------------------------------------


def hopfield_energy(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """E = −½ xᵀWx − bᵀx over the last dim."""
    return -0.5 * ((x @ weight.T) * x).sum(-1) - x @ bias


def sign_keep(field: torch.Tensor, previous: torch.Tensor) -> torch.Tensor:
    """±1 by the sign of the field; a unit whose field is exactly 0 keeps its state."""
    return torch.where(field == 0, previous, torch.sign(field))


def satlins(field: torch.Tensor, previous: torch.Tensor) -> torch.Tensor:
    return field.clamp(-1.0, 1.0)


ACTIVATIONS = {"sign": sign_keep, "satlins": satlins}


class HopfieldRecall(nn.Module):
    """Iterates x ← f(Wx + b) from the given states, synchronously or unit by unit.

    W and b are computed outside autograd (designed from the params), and are outputs and
    buffers saved with the weights, so a reloaded model recalls with the saved design even
    where recomputing it would round differently; files from before they were saved lack
    them and keep the recomputed design (`computed_state`)."""

    computed_state = ("weight", "bias")  # may be missing from a weights file
    weight: torch.Tensor  # buffers
    bias: torch.Tensor

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor, activation: str,
                 update: str, steps: int, tol: float):
        super().__init__()
        device = torch.get_default_device()  # meta while the graph is validated
        dtype = torch.get_default_dtype()  # the graph's dtype (nodegraph.kinds.dtypes)
        self.register_buffer("weight", weight.to(device, dtype))
        self.register_buffer("bias", bias.to(device, dtype))
        self.activation, self.update, self.steps, self.tol = activation, update, steps, tol

    def energy(self, x: torch.Tensor) -> torch.Tensor:
        return hopfield_energy(x, self.weight, self.bias)

    def step(self, x: torch.Tensor) -> torch.Tensor:
        """One synchronous update, or one asynchronous sweep over the units in random order."""
        act = ACTIVATIONS[self.activation]
        if self.update == "sync":
            return act(x @ self.weight.T + self.bias, x)
        x = x.clone()
        for i in torch.randperm(x.shape[-1]).tolist():
            x[:, i] = act(x @ self.weight[i] + self.bias[i], x[:, i])
        return x

    def forward(self, input: torch.Tensor):
        if input.is_meta:  # validation: the shapes, without iterating (a meta step is slow)
            trajectory = input.new_empty(input.shape[0], self.steps + 1, input.shape[1])
            return (input.new_empty(input.shape), trajectory, self.energy(trajectory),
                    input.new_empty(input.shape[0], dtype=torch.int64), self.weight,
                    self.bias)
        states = [input]
        for _ in range(self.steps):
            states.append(self.step(states[-1]))
            if not input.is_meta and torch.equal(states[-1], states[-2]):
                break  # every state is a fixed point: the rest of the run repeats it
        states += [states[-1]] * (self.steps + 1 - len(states))
        trajectory = torch.stack(states, 1)
        moved = (trajectory[:, 1:] - trajectory[:, :-1]).abs().amax(-1)
        settled = moved <= self.tol
        iterations = torch.where(settled.any(1), settled.int().argmax(1) + 1, -1)
        return states[-1], trajectory, self.energy(trajectory), iterations, self.weight, self.bias


def _need_units(x: dict, units: int) -> None:
    t = need_ndim(x, "input", (2,), "(N, units)", "one row of unit states per sample")
    need_float(x, "input")
    if t.shape[1] != units:
        raise PortError("input", f"has {t.shape[1]} units per sample but the patterns have "
                        f"{units}", "wire states as long as the stored patterns")


def _need_weights(units: int, param: str) -> None:
    """Refuse, before computing it, a units x units float64 design that cannot fit (newhop's
    SVD, projections and matrix exponential hold several at once)."""
    footprint.need(units * units * 8 * 8, param, f"rows of {units:,} values",
                   f"a weight matrix of {units:,} x {units:,} units",
                   f"use shorter patterns in '{param}'")


class HopfieldHebbianParams(Params):
    patterns: Any
    normalize: bool
    zero_diagonal: bool
    activation: str
    update: str  # type: ignore[assignment]  # the param, not dict.update
    steps: int
    tol: float
    dtype: str


def _hebbian(p: HopfieldHebbianParams, x):
    patterns = pattern_matrix(p.patterns, "patterns")
    _need_units(x, patterns.shape[1])
    _need_weights(patterns.shape[1], "patterns")
    weight = hebbian(patterns, p.normalize, p.zero_diagonal)
    # p["update"], not p.update: that is the dict's own method
    return HopfieldRecall(weight, torch.zeros(patterns.shape[1], dtype=torch.float64),
                          p.activation, p["update"], p.steps, p.tol)


def hebbian_recall(patterns: list, normalize: bool, zero_diagonal: bool, activation: str,
                   update: str, steps: int, tol: float) -> HopfieldRecall:
    """The Hebbian network of `patterns` (rows), as exported code builds it: from the few
    pattern values, not from the N×N weight matrix they give."""
    rows = torch.tensor(patterns, dtype=torch.float64)
    rows = rows[None] if rows.ndim == 1 else rows
    return HopfieldRecall(hebbian(rows, normalize, zero_diagonal),
                          torch.zeros(rows.shape[1], dtype=torch.float64), activation, update,
                          steps, tol)


def _hebbian_export(p: HopfieldHebbianParams, x):
    return hebbian_recall, {"patterns": p.patterns, "normalize": p.normalize,
                            "zero_diagonal": p.zero_diagonal, "activation": p.activation,
                            "update": p["update"], "steps": p.steps, "tol": p.tol}


def newhop_recall(targets: list, tau: float, h: float, steps: int,
                  tol: float) -> HopfieldRecall:
    """MATLAB's newhop network of `targets` (rows), as exported code builds it: from the
    targets, not from the N×N weight matrix they give."""
    weight, bias = newhop(torch.tensor(targets, dtype=torch.float64), tau, h)
    return HopfieldRecall(weight, bias, "satlins", "sync", steps, tol)


class HopfieldNewhopParams(Params):
    targets: Any
    tau: float
    h: float
    steps: int
    tol: float
    dtype: str


def _newhop_export(p: HopfieldNewhopParams, x):
    return newhop_recall, {"targets": p.targets, "tau": p.tau, "h": p.h, "steps": p.steps,
                           "tol": p.tol}


def _newhop(p: HopfieldNewhopParams, x):
    targets = pattern_matrix(p.targets, "targets", least=2)
    _need_units(x, targets.shape[1])
    _need_weights(targets.shape[1], "targets")
    weight, bias = newhop(targets, p.tau, p.h)
    return HopfieldRecall(weight, bias, "satlins", "sync", p.steps, p.tol)


# -- restricted Boltzmann machine --------------------------------------------------------------


def bernoulli(p: torch.Tensor) -> torch.Tensor:
    """0/1 draws with P(1) = p, as u < p for uniform u (scikit-learn's way)."""
    return (torch.rand_like(p) < p).to(p.dtype)


class BernoulliRBM(nn.Module):
    """Binary visible and hidden units, energy E(v, h) = −bᵀv − cᵀh − hᵀWv.

    `weight` is (hidden, visible) like a Linear's; free energy F(v) = −bᵀv − Σ softplus(c +
    Wv). The surrogate loss F(v) − F(v⁻) has gradient −(⟨h vᵀ⟩_data − ⟨h vᵀ⟩_model) in W
    (h the hidden probabilities), the CD update with its sign flipped for descent.
    """

    chain: torch.Tensor  # a buffer

    def __init__(self, visible: int, hidden: int, k: int, persistent: bool, init_std: float,
                 exact_pl: bool):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(hidden, visible))
        if not self.weight.is_meta:
            nn.init.normal_(self.weight, 0.0, init_std)  # scikit-learn's start
        self.hidden_bias = nn.Parameter(torch.zeros(hidden))
        self.visible_bias = nn.Parameter(torch.zeros(visible))
        self.k, self.persistent, self.exact_pl = k, persistent, exact_pl
        # the persistent chain's hidden states, sized by the first training batch; saved
        # with the weights under PCD, so a resumed run continues the same chains
        self.register_buffer("chain", torch.zeros(0, hidden), persistent=persistent)

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        # the saved chain has the batch size of the run that saved it; an unsized chain
        # (0 rows) takes that size before torch copies the values in
        saved = state_dict.get(prefix + "chain")
        if saved is not None and saved.shape != self.chain.shape:
            self.chain = torch.zeros_like(saved, device=self.chain.device)
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    # the conditionals and the free energy
    def hidden_probs(self, v: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(F.linear(v, self.weight, self.hidden_bias))

    def visible_probs(self, h: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(F.linear(h, self.weight.T, self.visible_bias))

    def free_energy(self, v: torch.Tensor) -> torch.Tensor:
        return -v @ self.visible_bias - F.softplus(F.linear(v, self.weight,
                                                            self.hidden_bias)).sum(-1)

    # sampling
    def gibbs_step(self, v: torch.Tensor, known: torch.Tensor | None = None
                   ) -> tuple[torch.Tensor, torch.Tensor]:
        """h ~ P(h|v), then v' ~ P(v|h): returns (v' drawn, P(v' = 1 | h)). Units where the
        boolean `known` is True keep their values in both (clamped, for inpainting)."""
        probs = self.visible_probs(bernoulli(self.hidden_probs(v)))
        drawn = bernoulli(probs)
        if known is not None:
            probs, drawn = torch.where(known, v, probs), torch.where(known, v, drawn)
        return drawn, probs

    @torch.no_grad()
    def gibbs_chain(self, v: torch.Tensor, steps: int,
                    known: torch.Tensor | None = None) -> torch.Tensor:
        """(steps + 1, N, visible): the start, then P(v = 1 | h) after each Gibbs step.
        The chain goes on from the draws; `known` units stay clamped to their start."""
        shown = [v]
        for _ in range(steps):
            v, probs = self.gibbs_step(v, known)
            shown.append(probs)
        return torch.stack(shown)

    @torch.no_grad()
    def negative_sample(self, v: torch.Tensor) -> torch.Tensor:
        """The model sample v⁻: k Gibbs steps from the data (CD-k), or from the persistent
        chain's hidden states while training (PCD: the chain moves on, batch to batch)."""
        k = min(self.k, 1) if v.is_meta else self.k  # validation: every step has one shape
        if not (self.persistent and self.training):
            h = bernoulli(self.hidden_probs(v))
            for step in range(k):
                v = bernoulli(self.visible_probs(h))
                if step < k - 1:
                    h = bernoulli(self.hidden_probs(v))
            return v
        if self.chain.shape[0] == 0:  # scikit-learn starts its chains at h = 0
            self.chain = torch.zeros(v.shape[0], self.weight.shape[0], device=v.device,
                                     dtype=v.dtype)
        h = self.chain
        for _ in range(k):
            v = bernoulli(self.visible_probs(h))
            h = bernoulli(self.hidden_probs(v))
        self.chain = h
        return v

    def cd_loss(self, v: torch.Tensor, v_model: torch.Tensor) -> torch.Tensor:
        """Mean F(v) − mean F(v⁻): its gradient is minus the CD estimate of ∇ log-likelihood."""
        return self.free_energy(v).mean() - self.free_energy(v_model.detach()).mean()

    def flip_gaps(self, v: torch.Tensor, index: torch.Tensor | None = None) -> torch.Tensor:
        """F(v with unit i flipped to 1 − v_i) − F(v): for every unit (N, visible), or for
        one unit per sample (N,). Flipping i moves the hidden input by (1 − 2v_i)·W[:, i]."""
        a = F.linear(v, self.weight, self.hidden_bias)
        delta = 1 - 2 * v
        if index is None:
            shifted = a[:, None, :] + delta[..., None] * self.weight.T
            base = F.softplus(a)[:, None, :]
            return -self.visible_bias * delta - (F.softplus(shifted) - base).sum(-1)
        d = delta.gather(1, index[:, None])
        shifted = a + d * self.weight.T[index]
        return (-self.visible_bias[index] * d[:, 0]
                - (F.softplus(shifted) - F.softplus(a)).sum(-1))

    def pseudo_likelihood(self, v: torch.Tensor, index: torch.Tensor | None = None,
                          exact: bool = False) -> torch.Tensor:
        """Log pseudo-likelihood Σ_i log P(v_i | v_−i) per sample.

        exact sums every unit; otherwise scikit-learn's estimate D·log P(v_i | v_−i) for one
        random unit i per sample (`index`, or drawn), unbiased over i.
        """
        if exact:
            return -F.softplus(-self.flip_gaps(v)).sum(-1)
        if index is None:
            index = torch.randint(0, v.shape[1], (v.shape[0],), device=v.device)
        return -v.shape[1] * F.softplus(-self.flip_gaps(v, index))

    def forward(self, input: torch.Tensor):
        v = input.detach()  # the loss trains this RBM only, never the layers before it
        loss = self.cd_loss(v, self.negative_sample(v))
        hidden = self.hidden_probs(input)
        with torch.no_grad():
            pl = self.pseudo_likelihood(v, exact=self.exact_pl)
        return loss, hidden, self.visible_probs(hidden), pl


class BernoulliRBMParams(Params):
    n_components: int
    k: int
    method: str
    init_std: float
    pseudo_likelihood: str
    dtype: str


def _rbm(p: BernoulliRBMParams, x):
    t = need_ndim(x, "input", (2,), "(N, visible units)",
                  "insert layers.Flatten before it: one row of pixels per sample")
    need_float(x, "input")
    return BernoulliRBM(t.shape[1], p.n_components, p.k, p.method == "pcd", p.init_std,
                        p.pseudo_likelihood == "exact")


class MeanPerSample(Metric):
    """The mean over every sample of a split of a per-sample value."""

    def reset(self) -> None:
        self.total: torch.Tensor | float = 0.0
        self.count = 0

    def update(self, input: torch.Tensor) -> None:
        self.total = self.total + input.sum()
        self.count += input.shape[0]

    def compute(self) -> float:
        return float(self.total) / max(self.count, 1)


def _pseudo_likelihood_metric(p, x):
    t = x.get("input")
    if t is not None and (t.ndim != 1 or not t.dtype.is_floating_point):
        raise PortError("input", f"needs one value per sample (N,), got {fmt(t.shape)}",
                        "wire a BernoulliRBM's pseudo_likelihood output")
    return MeanPerSample()


# -- declarations --------------------------------------------------------------------------

RECALL_PARAMS = [
    int_param("steps", 50, "recall iterations (sweeps for async updates)", min=1),
    float_param("tol", 1e-3, "a state counts as settled at the first iteration that moves "
                "no unit by more than this", min=0),
]
RECALL_OUTPUTS = [
    Port("output", doc="the states after the last iteration"),
    Port("trajectory", doc="every state, (N, steps + 1, units): the start, then each iteration",
         views=("trajectory",)),
    Port("energy", doc="E = −½xᵀWx − bᵀx of each state, (N, steps + 1)"),
    Port("iterations", doc="per sample, the first iteration that moved no unit by more than "
         "tol; −1 when still moving after `steps`"),
    Port("weight", doc="the designed weights W, (units, units): computed from the params, "
         "saved with the model"),
    Port("bias", doc="the designed bias b, (units,): zero for a Hebbian design; saved with "
         "the model"),
]
RECALL_INPUT = [Port("input", doc="starting states, (N, units): noisy or partial patterns")]
PATTERN_DOC = ("one pattern per row, e.g. [[1, 1], [-1, -1], [1, -1]], values ±1 "
               "(also accepted: a single flat list for one pattern)")

BLOCKS = [
    op("energy.HopfieldHebbian",
       "A Hopfield network with Hebbian weights W = (1/N)·Σ ξξᵀ, recalled by sign updates."
       "\n\nStores the patterns ξ as energy minima of E = −½xᵀWx and iterates "
       "x ← sign(Wx) from the inputs, keeping a unit's state when its field is 0. "
       "async updates the units one at a time in random order (each sweep is one "
       "iteration): the energy never rises and recall always settles. sync updates "
       "all at once (the notes' x⁽ⁿ⁺¹⁾ = α(Wx⁽ⁿ⁾)) and may cycle between two states. "
       "The notes' W = Σssᵀ is normalize and zero_diagonal off. About "
       "N/(4 ln N) random patterns are recalled without error (0.14·N with a few "
       "wrong units); beyond, recall ends in spurious mixtures.",
       _hebbian, inputs=RECALL_INPUT, outputs=RECALL_OUTPUTS,
       params=[Param("patterns", "json", doc="the patterns to store: " + PATTERN_DOC),
               bool_param("normalize", True, "divide W by the number of units N"),
               bool_param("zero_diagonal", True, "no self-connections (w_ii = 0)"),
               choice_param("activation", tuple(ACTIVATIONS), "sign",
                            "sign: ±1 units; satlins: clip the field to [−1, 1]"),
               choice_param("update", ("sync", "async"), "sync",
                            "all units at once, or one at a time in random order"),
               *RECALL_PARAMS, DTYPE_PARAM],
       keywords=("associative memory", "hebb", "attractor", "recall", "energy"),
       export=_hebbian_export),
    op("energy.HopfieldNewhop",
       "A Hopfield network designed as MATLAB's newhop: every target is a stable "
       "attractor.\n\nThe Li–Michel–Porod design: the targets' affine span is made "
       "attracting and its complement repelling through the SVD of the targets' "
       "differences, W = expm(h·T_τ) with a bias b, recalled synchronously by "
       "x ← satlins(Wx + b). Spurious fixed points can remain (in 3-D: edge midpoints "
       "and a centre point); they are unstable.",
       _newhop, inputs=RECALL_INPUT, outputs=RECALL_OUTPUTS,
       params=[Param("targets", "json", doc="the attractors to design, at least 2: "
                     + PATTERN_DOC),
               float_param("tau", 10.0, "τ: how strongly states leave the targets' span",
                           min=1e-6),
               float_param("h", 0.15, "h: the step of the matrix exponential", min=1e-6),
               *RECALL_PARAMS, DTYPE_PARAM],
       keywords=("associative memory", "newhop", "satlins", "attractor", "matlab"),
       export=_newhop_export),
    op("energy.BernoulliRBM",
       "A restricted Boltzmann machine with binary units, trained by contrastive "
       "divergence.\n\nIts loss is F(v) − F(v⁻): free energy of the data minus that "
       "of a model sample v⁻ from k Gibbs steps (from the data: CD-k; from chains that "
       "persist across batches: PCD, scikit-learn's BernoulliRBM). The value itself "
       "means little — watch the pseudo-likelihood — but its gradient is exactly the "
       "CD update, so SGD on it is the classic rule. hidden (P(h = 1 | v)) feeds the "
       "next RBM of a stack; the loss never trains the blocks before it. Visible "
       "values in [0, 1].",
       _rbm, inputs=[Port("input", doc="visible units (N, visible), values in [0, 1]")],
       outputs=[LOSS_OUT, Port("hidden", doc="hidden probabilities P(h = 1 | v)"),
                Port("reconstruction", doc="P(v = 1 | h) with h = P(h = 1 | v): one "
                     "mean-field pass down and up"),
                Port("pseudo_likelihood", doc="log pseudo-likelihood per sample, (N,)")],
       params=[int_param("n_components", 64, "number of hidden units", min=1),
               int_param("k", 1, "Gibbs steps per update", min=1),
               choice_param("method", ("cd", "pcd"), "cd",
                            "cd: chains start at the data; pcd: persistent chains "
                            "(stochastic maximum likelihood)"),
               float_param("init_std", 0.01, "std of the starting weights (biases start "
                           "at 0)", min=0),
               choice_param("pseudo_likelihood", ("one_flip", "exact"), "one_flip",
                            "one_flip: scikit-learn's estimate from one random unit per "
                            "sample; exact: every unit (visible × hidden work per sample)"),
               DTYPE_PARAM],
       keywords=("boltzmann", "contrastive divergence", "cd-k", "pcd", "energy",
                 "dbn", "generative")),
    metric("energy.PseudoLikelihood",
           "The mean log pseudo-likelihood over a split, from an RBM's pseudo_likelihood."
           "\n\nΣ_i log P(v_i | v_−i) per sample, averaged over every sample: the number "
           "scikit-learn's BernoulliRBM prints while it trains (higher is better).",
           _pseudo_likelihood_metric,
           inputs=[Port("input", doc="per-sample log pseudo-likelihood, (N,)")],
           keywords=("rbm", "likelihood", "score")),
]

