"""Recurrent blocks: RNN, LSTM and GRU over batch-first sequences, and the highway layer.

A recurrence h_t = R(h_{t-1}, x_t) is a cycle, which a graph cannot hold, so each block
loops over time inside itself (the notes' abstract cell) and hands out two
views of the result: `output`, every step's hidden state (N, L, H·dirs), for sequence-to-
sequence models, and `last`, the final state (N, H·dirs), for many-to-one models that feed
a Linear. h_0 = 0.

By default the blocks are PyTorch's modules (fast, cuDNN on a GPU). LSTM and GRU also have
the convention of the notes (`convention = "notes"`): an explicit loop with the notes' gate
names and one bias per gate. The notes' LSTM computes the same function as torch's
with the gates stacked in another order (f, i, o, c̃ instead of i, f, g, o) and the two
torch biases summed. The notes' GRU (16.6, Cho et al. 2014) is a different model:

    notes:  h_t = (1 − i_o) ⊙ h_{t−1} + i_o ⊙ h̃_t,  h̃_t = tanh(W x_t + U (i_f ⊙ h_{t−1}) + b)
    torch:  h_t = (1 − z) ⊙ n + z ⊙ h_{t−1},  n = tanh(W x_t + b_in + r ⊙ (U h_{t−1} + b_hn))

so the update gate plays the opposite role (z = 1 − i_o, which negating its weights gives
exactly, as σ(−a) = 1 − σ(a)) and the reset gate acts before U in the notes, after it in
torch; the two agree only when the reset gate is fully open.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import cast

import torch
import torch.nn.functional as F
from torch import nn

from nodegraph.kinds import shapes
from nodegraph.kinds.declare import op
from nodegraph.kinds.dtypes import DTYPE_PARAM
from nodegraph.model.errors import PortError
from nodegraph.model.spec import (
    Params,
    Port,
    Search,
    TorchEquivalent,
    bool_param,
    choice_param,
    float_param,
    int_param,
)
from nodes._shapes import fmt
from nodes.layers.dense import init_values

# -- shared pieces -----------------------------------------------------------------------


def last_state(h_n: torch.Tensor, bidirectional: bool) -> torch.Tensor:
    """The top layer's final state (N, H·dirs) from h_n (layers·dirs, N, H): for two
    directions the forward one after step L and the backward one after step 1, both of which
    have read the whole sequence."""
    return torch.cat([h_n[-2], h_n[-1]], -1) if bidirectional else h_n[-1]


def meta_result(x: torch.Tensor, width: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(output, last) shaped for a meta input, without running the recurrence: torch's meta
    kernels unroll it op by op (seconds for an LSTM), and validation needs only shapes."""
    return x.new_empty(*x.shape[:2], width), x.new_empty(x.shape[0], width)


def sequence_width(x: dict, port: str = "input") -> int:
    """Features F of a real (N, L, F) sequence at `port`, or a PortError saying what to insert."""
    t = x[port]
    if not t.dtype.is_floating_point:
        raise PortError(port, f"needs real-valued vectors (N, L, features), got {t.dtype} "
                        f"{fmt(t.shape)}", "token ids go through layers.Embedding first",
                        kind="dtype_mismatch")
    if t.ndim != 3:
        hint = ("insert layers.Reshape with shape [-1, 1] (a series of scalars) or "
                "[L, features] before it" if t.ndim == 2 else
                "the input must be a batch of sequences (N, L, features)")
        raise PortError(port, f"needs a sequence (N, L, features) but receives "
                        f"{fmt(t.shape)}", hint)
    return t.shape[-1]


class _WithLast:
    """Makes torch's nn.RNN/LSTM/GRU return (output, last) instead of (output, h_n)."""

    hidden_size: int  # set by the torch module this is mixed into
    bidirectional: bool

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if x.is_meta:
            return meta_result(x, self.hidden_size * (2 if self.bidirectional else 1))
        output, h_n = super().forward(x)  # type: ignore[misc]  # the torch module's
        if isinstance(h_n, tuple):  # LSTM: (h_n, c_n)
            h_n = h_n[0]
        return output, last_state(h_n, self.bidirectional)


# (one input, one pair out: a narrower forward than torch's, on purpose)
class TorchRNN(_WithLast, nn.RNN):  # type: ignore[misc]
    """torch's RNN, batch first, returning (output, last)."""


class TorchLSTM(_WithLast, nn.LSTM):  # type: ignore[misc]
    """torch's LSTM, batch first, returning (output, last)."""


class TorchGRU(_WithLast, nn.GRU):  # type: ignore[misc]
    """torch's GRU, batch first, returning (output, last)."""


# -- the notes' cells, as explicit loops -----------------------------------------------------


class LoopCell(nn.Module):
    """One direction of one layer: `W` maps x_t to every gate at once (with the biases), `U`
    maps h_{t-1}; subclasses say how the gates combine (`step`). Initialised like torch's
    recurrent layers, uniform in ±1/√hidden_size, so both conventions start alike."""

    gates = 1

    def __init__(self, input_size: int, hidden_size: int, bias: bool):
        super().__init__()
        self.hidden_size = hidden_size
        self.W = nn.Linear(input_size, self.gates * hidden_size, bias=bias)
        self.U = nn.Linear(hidden_size, self.gates * hidden_size, bias=False)
        bound = 1 / math.sqrt(hidden_size)
        for w in self.parameters():
            init_values(w, lambda v: nn.init.uniform_(v, -bound, bound))

    def initial_state(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return (x.new_zeros(x.shape[0], self.hidden_size),)

    def step(self, wx: torch.Tensor, state: tuple) -> tuple[torch.Tensor, tuple]:
        raise NotImplementedError

    def run(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Every step's h (N, L, H) and the final h (N, H) for a sequence x (N, L, F)."""
        wx = self.W(x)  # the input part of every step in one matrix product
        state, hs = self.initial_state(x), []
        for t in range(x.shape[1]):
            h, state = self.step(wx[:, t], state)
            hs.append(h)
        return torch.stack(hs, 1), hs[-1]


class ElmanCell(LoopCell):
    """The notes' simple RNN h_t = φ(A x_t + C h_{t−1} + b) (A = W, C = U), plus
    Q h_{t−1} for the residual RNN: h_t = Q h_{t−1} + φ(A x_t + C h_{t−1} + b), with Q
    learned and starting at the identity."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool,
                 nonlinearity: Callable[[torch.Tensor], torch.Tensor]):
        super().__init__(input_size, hidden_size, bias)
        self.phi = nonlinearity
        self.Q = nn.Linear(hidden_size, hidden_size, bias=False)
        init_values(self.Q.weight, nn.init.eye_)

    def step(self, wx, state):
        (h,) = state
        h = self.Q(h) + self.phi(wx + self.U(h))
        return h, (h,)


class NotesGRUCell(LoopCell):
    """The notes' GRU. `W`, `U` stack the rows [W_o; W_f; W] and [U_o; U_f; U], the
    bias [b_o; b_f; b]: update gate i_o, reset gate i_f, candidate h̃."""

    gates = 3

    def step(self, wx, state):
        (h,) = state
        w_o, w_f, w_c = wx.chunk(3, -1)
        u_o, u_f, u_c = self.U.weight.chunk(3, 0)
        i_o = torch.sigmoid(w_o + h @ u_o.T)
        i_f = torch.sigmoid(w_f + h @ u_f.T)
        candidate = torch.tanh(w_c + (i_f * h) @ u_c.T)  # reset before U, as Cho et al.
        h = (1 - i_o) * h + i_o * candidate
        return h, (h,)


class NotesLSTMCell(LoopCell):
    """The notes' LSTM. `W`, `U` stack the rows of the forget, input and output gates
    and the candidate cell, in the notes' order f, i, o, c̃; one bias per gate."""

    gates = 4

    def initial_state(self, x):
        zeros = x.new_zeros(x.shape[0], self.hidden_size)
        return zeros, zeros

    def step(self, wx, state):
        h, c = state
        f, i, o, c_new = (wx + self.U(h)).chunk(4, -1)
        c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(c_new)
        h = torch.sigmoid(o) * torch.tanh(c)
        return h, (h, c)


class LoopRecurrent(nn.Module):
    """Layers × directions of loop cells, with dropout between layers as torch applies it.
    Cell k is layer k // dirs, direction k % dirs (0 forward, 1 backward)."""

    def __init__(self, make_cell: Callable[[int], LoopCell], input_size: int, hidden_size: int,
                 num_layers: int, bidirectional: bool, dropout: float):
        super().__init__()
        self.dirs = 2 if bidirectional else 1
        self.num_layers, self.dropout = num_layers, dropout
        self.cells = nn.ModuleList(
            make_cell(input_size if layer == 0 else hidden_size * self.dirs)
            for layer in range(num_layers) for _ in range(self.dirs))

    def _cell(self, k: int) -> LoopCell:
        return cast(LoopCell, self.cells[k])

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if x.is_meta:
            return meta_result(x, self._cell(-1).hidden_size * self.dirs)
        finals = []
        for layer in range(self.num_layers):
            if layer > 0:
                x = F.dropout(x, self.dropout, self.training)
            outs = []
            for d in range(self.dirs):
                seq, h = self._cell(layer * self.dirs + d).run(x.flip(1) if d else x)
                outs.append(seq.flip(1) if d else seq)
                finals.append(h)
            x = torch.cat(outs, -1)
        return x, last_state(torch.stack(finals), self.dirs == 2)


# -- builds -------------------------------------------------------------------------------

NONLINEARITIES = {"tanh": torch.tanh, "relu": torch.relu}


class RecurrentParams(Params):
    """What every recurrent block declares (its own view adds the rest)."""

    hidden_size: int
    num_layers: int
    bidirectional: bool
    bias: bool
    dropout: float


def _shape_args(p: RecurrentParams, x) -> dict:
    return dict(input_size=sequence_width(x), hidden_size=p.hidden_size,
                num_layers=p.num_layers, bidirectional=p.bidirectional,
                dropout=p.dropout if p.num_layers > 1 else 0.0)


class RNNParams(RecurrentParams):
    nonlinearity: str
    residual: bool
    dtype: str


def _rnn(p: RNNParams, x):
    args = _shape_args(p, x)
    if not p.residual:
        return TorchRNN(**args, nonlinearity=p.nonlinearity, bias=p.bias, batch_first=True)
    phi = NONLINEARITIES[p.nonlinearity]
    return LoopRecurrent(lambda n_in: ElmanCell(n_in, p.hidden_size, p.bias, phi), **args)


class GatedParams(RecurrentParams):
    convention: str
    dtype: str


def _gated(torch_cls: type[nn.Module], notes_cell: type[LoopCell]):
    def build(p: GatedParams, x):
        args = _shape_args(p, x)
        if p.convention == "pytorch":
            return torch_cls(**args, bias=p.bias, batch_first=True)
        return LoopRecurrent(lambda n_in: notes_cell(n_in, p.hidden_size, p.bias), **args)
    return build


def _torch_shape(gates: int) -> shapes.Rule:
    """torch's recurrent module with `gates` weight blocks per layer and direction (RNN 1,
    GRU 3, LSTM 4): W_ih (gates·H, in), W_hh (gates·H, H) and two bias vectors each, the
    input of a layer above the first being H·dirs wide; validation takes `meta_result`,
    the two outputs and nothing else. The notes' loops and the residual RNN run on meta."""
    def rule(p: RecurrentParams, x):
        args = _shape_args(p, x)
        t, dtype = x["input"], shapes.layer_dtype(p)
        if p.get("convention", "pytorch") != "pytorch" or p.get("residual") or \
                t.dtype != dtype:
            return None
        h, dirs = p.hidden_size, 1 + p.bidirectional
        weights = 0
        for layer in range(p.num_layers):
            n_in = args["input_size"] if layer == 0 else h * dirs
            weights += dirs * gates * h * (n_in + h + 2 * p.bias)
        n, length = t.shape[:2]
        return shapes.weighted([((n, length, h * dirs), dtype), ((n, h * dirs), dtype)],
                               weights, dtype)
    return rule


class Highway(nn.Module):
    """y = T(x) ⊙ H(x) + (1 − T(x)) ⊙ x with H(x) = φ(W_H x + b_H), T(x) = σ(W_T x + b_T)."""

    def __init__(self, features: int, activation: Callable, gate_bias: float):
        super().__init__()
        self.transform = nn.Linear(features, features)
        self.gate = nn.Linear(features, features)
        self.activation = activation
        init_values(self.gate.bias, lambda b: nn.init.constant_(b, gate_bias))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        t = torch.sigmoid(self.gate(x))
        return t * self.activation(self.transform(x)) + (1 - t) * x


HIGHWAY_ACTIVATIONS = {"relu": torch.relu, "tanh": torch.tanh, "sigmoid": torch.sigmoid,
                       "identity": lambda v: v}


def _highway_input(p, x):
    t = x["input"]
    if t.ndim < 2 or not t.dtype.is_floating_point:
        raise PortError("input", f"needs real features (N, ..., features), got {t.dtype} "
                        f"{fmt(t.shape)}", "token ids go through layers.Embedding first")
    return t


class HighwayParams(Params):
    activation: str
    gate_bias: float
    dtype: str


def _highway_shape(p: HighwayParams, x):
    """The gate's Linear and sigmoid, the transform's Linear and activation (none for
    identity), T·H, 1 − T, (1 − T)·x and the sum."""
    t, dtype = _highway_input(p, x), shapes.layer_dtype(p)
    if t.dtype != dtype:
        return None  # mixed dtypes: the meta path refuses them
    f = t.shape[-1]
    return shapes.weighted([(t.shape, dtype)], 2 * (f * f + f), dtype,
                           work=(7 + (p.activation != "identity")) * t.nbytes)


def _highway(p: HighwayParams, x):
    t = _highway_input(p, x)
    return Highway(t.shape[-1], HIGHWAY_ACTIVATIONS[p.activation], p.gate_bias)


# -- declarations --------------------------------------------------------------------------

SEQUENCE_IN = [Port("input", doc="a batch of sequences (N, L, features), batch first")]
SEQUENCE_OUT = [Port("output", doc="the hidden state of every step (N, L, hidden_size·dirs)"),
                Port("last", doc="the final hidden state (N, hidden_size·dirs), for a "
                     "many-to-one model; with two directions each direction's state after "
                     "reading the whole sequence")]


def _common(gated: bool) -> list:
    params = [
        int_param("hidden_size", 32, "size of the hidden state h", min=1),
        int_param("num_layers", 1, "recurrent layers stacked, each reading the states of the "
                  "one below", min=1),
        bool_param("bidirectional", False, "also run the sequence backwards and concatenate "
                   "both directions' states (doubles the output width)"),
        bool_param("bias", True, "learn bias vectors"),
        float_param("dropout", 0.0, "dropout on the states passed between stacked layers, "
                    "while training only (no effect with one layer)", min=0, max=1),
    ]
    if gated:
        params.append(choice_param(
            "convention", ("pytorch", "notes"), "pytorch",
            "pytorch: torch's module (fast); notes: an explicit loop with the notes' gate "
            "equations and names; see the module doc for how they "
            "differ"))
    return params



def _torch_lstm(m: nn.LSTM) -> dict | None:
    """recurrent.LSTM's params for a batch-first nn.LSTM without projection (its `output`
    is torch's first result; the block builds the same module, so the weights load)."""
    if type(m) is not nn.LSTM or not m.batch_first or m.proj_size:
        return None
    return {"hidden_size": m.hidden_size, "num_layers": m.num_layers,
            "bidirectional": m.bidirectional, "bias": m.bias, "dropout": float(m.dropout),
            "convention": "pytorch"}


# what the blocks compute in PyTorch: `nodegraph import` and the Python export read these


BLOCKS = [
    op("recurrent.RNN",
       "Simple (Elman) recurrent layer h_t = φ(A x_t + C h_{t−1} + b) over a sequence.\n\n"
       "The basic RNN, h_0 = 0, the same weights at every step. "
       "Long sequences make its gradients vanish or explode; `residual` adds Q h_{t−1} "
       "(a residual RNN), and the gated LSTM and GRU are the usual fix.",
       _rnn, inputs=SEQUENCE_IN, outputs=SEQUENCE_OUT, shape=_torch_shape(1),
       params=[*_common(gated=False),
               choice_param("nonlinearity", ("tanh", "relu"), "tanh", "φ"),
               bool_param("residual", False, "the notes' residual RNN h_t = Q h_{t−1} + "
                          "φ(...) with Q learned from the identity (an explicit loop)"),
               DTYPE_PARAM],
       keywords=("recurrent", "elman", "sequence", "time series", "bptt"),
       search=Search(words=("rnn",))),
    op("recurrent.LSTM",
       "Long short-term memory: a gated recurrent layer with a cell state c_t.\n\n"
       "Forget, input and output gates decide what the cell c_t drops, adds and shows as "
       "h_t = o ⊙ tanh(c_t), so gradients survive long sequences.",
       _gated(TorchLSTM, NotesLSTMCell), inputs=SEQUENCE_IN, outputs=SEQUENCE_OUT,
       shape=_torch_shape(4),
       params=[*_common(gated=True), DTYPE_PARAM],
       keywords=("recurrent", "gated", "memory", "sequence", "hochreiter"),
       torch=TorchEquivalent((nn.LSTM,), _torch_lstm),
       search=Search(words=(("rnn", 1),))),
    op("recurrent.GRU",
       "Gated recurrent unit: an update gate mixes the old state with a candidate.\n\n"
       "Fewer weights than an LSTM and no separate cell. The convention = \"notes\" form "
       "weights the candidate by the update gate and resets h before U; torch's does "
       "the opposite mix and resets after U (see the module doc).",
       _gated(TorchGRU, NotesGRUCell), inputs=SEQUENCE_IN, outputs=SEQUENCE_OUT,
       shape=_torch_shape(3),
       params=[*_common(gated=True), DTYPE_PARAM],
       keywords=("recurrent", "gated", "cho", "sequence"),
       search=Search(words=(("rnn", 2),))),
    op("recurrent.Highway",
       "Highway layer y = T(x) ⊙ H(x) + (1 − T(x)) ⊙ x with a learned sigmoid gate T.\n\n"
       "Srivastava et al. (2015): where T ≈ 0 the input passes unchanged, so very "
       "deep stacks still train. A negative `gate_bias` starts the layer close to the "
       "identity. Acts on the last dim; the shape is kept.",
       _highway, inputs=["input"], outputs=["output"],
       params=[choice_param("activation", tuple(HIGHWAY_ACTIVATIONS), "relu",
                            "φ of the transform H(x) = φ(W_H x + b_H)"),
               float_param("gate_bias", -1.0, "initial bias of the gate T; negative "
                           "values carry the input at first (the paper suggests −1 to "
                           "−3)"), DTYPE_PARAM],
       keywords=("gate", "skip", "carry", "deep", "srivastava"), shape=_highway_shape),
]

