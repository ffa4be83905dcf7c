"""Recurrent blocks: torch's RNN/LSTM/GRU with the `last` state, the notes' LSTM and GRU as
explicit loops checked by hand and related to torch's by weight maps, the residual RNN, the
highway layer, dropout between layers in training only, and shape errors by port."""

from __future__ import annotations

import pytest
import torch
from blockcheck import build, run_op

from nodegraph.model.errors import PortError

torch.manual_seed(0)
N, L, F, H = 3, 5, 4, 6
X = torch.randn(N, L, F)


def close(a, b, tol=1e-5):
    return torch.allclose(a, b, atol=tol, rtol=1e-5)


def block(block_id, x=X, **params):
    return build(block_id, {"input": x}, hidden_size=H, **params)[2]


def sigmoid(v):
    return 1 / (1 + torch.exp(-v))


# -- torch's convention -------------------------------------------------------------------

@pytest.mark.parametrize("name", ["RNN", "LSTM", "GRU"])
def test_torch_convention_equals_torchs_module_and_last_is_the_final_state(name):
    m = block(f"recurrent.{name}", num_layers=2, bidirectional=True)
    ref = getattr(torch.nn, name)(F, H, num_layers=2, bidirectional=True, batch_first=True)
    ref.load_state_dict(m.state_dict())
    output, last = m(X)
    ref_out, h_n = ref(X)
    h_n = h_n[0] if name == "LSTM" else h_n
    assert close(output, ref_out) and output.shape == (N, L, 2 * H)
    assert close(last, torch.cat([h_n[-2], h_n[-1]], -1))
    # forward direction: after the last step; backward: after reading back to step 1
    assert close(last[:, :H], output[:, -1, :H]) and close(last[:, H:], output[:, 0, H:])


def test_rnn_is_the_notes_recurrence_by_hand():
    m = block("recurrent.RNN", x=X[:, :2])
    A, C = m.weight_ih_l0, m.weight_hh_l0
    b = m.bias_ih_l0 + m.bias_hh_l0  # torch's two biases add up to the notes' b
    h1 = torch.tanh(X[:, 0] @ A.T + b)  # h_0 = 0
    h2 = torch.tanh(X[:, 1] @ A.T + h1 @ C.T + b)
    output, last = m(X[:, :2])
    assert close(output, torch.stack([h1, h2], 1)) and close(last, h2)


def test_relu_nonlinearity_reaches_torch():
    m = block("recurrent.RNN", nonlinearity="relu")
    assert m.nonlinearity == "relu" and (m(X)[0] >= 0).all()


# -- the notes' LSTM ---------------------------------------------------------------------

def notes_lstm_by_hand(cell, x):
    """The notes' equations (16.7) written out, one step at a time."""
    Wf, Wi, Wo, Wc = cell.W.weight.chunk(4)
    bf, bi, bo, bc = cell.W.bias.chunk(4)
    Uf, Ui, Uo, Uc = cell.U.weight.chunk(4)
    h = c = torch.zeros(x.shape[0], H)
    hs = []
    for t in range(x.shape[1]):
        xt = x[:, t]
        f = sigmoid(xt @ Wf.T + h @ Uf.T + bf)
        i = sigmoid(xt @ Wi.T + h @ Ui.T + bi)
        o = sigmoid(xt @ Wo.T + h @ Uo.T + bo)
        c_tilde = torch.tanh(xt @ Wc.T + h @ Uc.T + bc)
        c = f * c + i * c_tilde
        h = o * torch.tanh(c)
        hs.append(h)
    return torch.stack(hs, 1)


def test_notes_lstm_follows_the_notes_equations():
    m = block("recurrent.LSTM", convention="notes")
    output, last = m(X)
    expected = notes_lstm_by_hand(m.cells[0], X)
    assert close(output, expected) and close(last, expected[:, -1])


def torch_lstm_state(m, num_layers, dirs):
    """torch LSTM weights from the notes' loop: gates f, i, o, c̃ reordered to i, f, g, o,
    the one bias given to bias_ih (bias_hh = 0)."""
    order = [1, 0, 3, 2]  # torch's i, f, g, o among the notes' f, i, o, c̃
    state = {}
    for k, cell in enumerate(m.cells):
        suffix = f"_l{k // dirs}" + ("_reverse" if k % dirs else "")
        w, u, b = (t.chunk(4) for t in (cell.W.weight, cell.U.weight, cell.W.bias))
        state["weight_ih" + suffix] = torch.cat([w[i] for i in order])
        state["weight_hh" + suffix] = torch.cat([u[i] for i in order])
        state["bias_ih" + suffix] = torch.cat([b[i] for i in order])
        state["bias_hh" + suffix] = torch.zeros(4 * H)
    return state


def test_notes_lstm_is_torchs_lstm_with_the_gates_reordered():
    m = block("recurrent.LSTM", convention="notes", num_layers=2, bidirectional=True)
    ref = torch.nn.LSTM(F, H, num_layers=2, bidirectional=True, batch_first=True)
    ref.load_state_dict(torch_lstm_state(m, 2, 2))
    output, last = m(X)
    ref_out, (h_n, _) = ref(X)
    assert close(output, ref_out) and close(last, torch.cat([h_n[-2], h_n[-1]], -1))


# -- the notes' GRU ----------------------------------------------------------------------

def notes_gru_by_hand(cell, x):
    """The notes' equations (16.6): update gate i_o, reset gate i_f, candidate h̃."""
    Wo, Wf, W = cell.W.weight.chunk(3)
    bo, bf, b = cell.W.bias.chunk(3)
    Uo, Uf, U = cell.U.weight.chunk(3)
    h, hs = torch.zeros(x.shape[0], H), []
    for t in range(x.shape[1]):
        xt = x[:, t]
        i_o = sigmoid(xt @ Wo.T + h @ Uo.T + bo)
        i_f = sigmoid(xt @ Wf.T + h @ Uf.T + bf)
        h_tilde = torch.tanh(xt @ W.T + (i_f * h) @ U.T + b)
        h = (1 - i_o) * h + i_o * h_tilde
        hs.append(h)
    return torch.stack(hs, 1)


def test_notes_gru_follows_the_notes_equations():
    m = block("recurrent.GRU", convention="notes")
    output, last = m(X)
    expected = notes_gru_by_hand(m.cells[0], X)
    assert close(output, expected) and close(last, expected[:, -1])


def torch_gru(cell, negate_update: bool = True) -> torch.nn.GRU:
    """torch's GRU with the notes' weights: torch's gates are (r, z, n) = (reset, update,
    candidate). Negating the update gate's weights turns σ(a) into σ(−a) = 1 − σ(a)."""
    Wo, Wf, W = cell.W.weight.chunk(3)
    bo, bf, b = cell.W.bias.chunk(3)
    Uo, Uf, U = cell.U.weight.chunk(3)
    s = -1 if negate_update else 1
    ref = torch.nn.GRU(F, H, batch_first=True)
    ref.load_state_dict({"weight_ih_l0": torch.cat([Wf, s * Wo, W]),
                         "weight_hh_l0": torch.cat([Uf, s * Uo, U]),
                         "bias_ih_l0": torch.cat([bf, s * bo, b]),
                         "bias_hh_l0": torch.zeros(3 * H)})
    return ref


def open_reset_gate(cell):
    """Reset gate i_f = σ(30) = 1 in float32: the candidate sees all of h."""
    with torch.no_grad():
        for t in (cell.W.weight, cell.U.weight):
            t[H:2 * H] = 0
        cell.W.bias[H:2 * H] = 30.0


def test_notes_gru_is_torchs_with_z_as_one_minus_the_update_gate_when_reset_is_open():
    m = block("recurrent.GRU", convention="notes")
    cell = m.cells[0]
    open_reset_gate(cell)
    output, _ = m(X)
    assert close(output, torch_gru(cell)(X)[0])
    # the same weights without swapping z <-> 1 - z give another model
    assert not close(output, torch_gru(cell, negate_update=False)(X)[0], 1e-2)


def test_notes_gru_resets_before_u_and_torch_after_so_they_differ_in_general():
    m = block("recurrent.GRU", convention="notes")
    output, _ = m(X)
    assert not close(output, torch_gru(m.cells[0])(X)[0], 1e-3)


# -- residual RNN, dropout, highway ------------------------------------------------------

def test_residual_rnn_adds_q_times_the_previous_state():
    m = block("recurrent.RNN", x=X[:, :2], residual=True)
    cell = m.cells[0]
    assert torch.equal(cell.Q.weight, torch.eye(H))  # Q starts at the identity
    with torch.no_grad():
        cell.Q.weight.mul_(0.5)
    A, C, b = cell.W.weight, cell.U.weight, cell.W.bias
    h1 = torch.tanh(X[:, 0] @ A.T + b)
    h2 = 0.5 * h1 + torch.tanh(X[:, 1] @ A.T + h1 @ C.T + b)
    assert close(m(X[:, :2])[0], torch.stack([h1, h2], 1))


@pytest.mark.parametrize("params", [{"convention": "pytorch"}, {"convention": "notes"}])
def test_dropout_between_layers_acts_only_while_training(params):
    torch.manual_seed(1)
    m = block("recurrent.GRU", num_layers=2, dropout=0.5, **params)
    plain = block("recurrent.GRU", num_layers=2, **params)
    plain.load_state_dict(m.state_dict())
    m.eval()
    assert close(m(X)[0], plain(X)[0])
    m.train()
    first, second = m(X)[0], m(X)[0]
    assert not close(first, second) and not close(first, plain(X)[0])


def test_highway_is_the_gated_mix_of_transform_and_input():
    x = torch.randn(N, F)
    _, _, m = build("recurrent.Highway", {"input": x}, activation="tanh")
    t = sigmoid(x @ m.gate.weight.T + m.gate.bias)
    h = torch.tanh(x @ m.transform.weight.T + m.transform.bias)
    assert close(m(x), h * t + x * (1 - t))
    assert torch.equal(m.gate.bias, torch.full((F,), -1.0))
    carry = run_op("recurrent.Highway", {"input": X}, gate_bias=-40.0)
    assert close(carry, X)  # T ≈ 0: the input passes through, sequences keep their shape


def test_gradients_flow_back_to_the_first_step():
    x = X.clone().requires_grad_(True)
    for params in ({}, {"convention": "notes"}):
        x.grad = None
        block("recurrent.LSTM", x=x, **params)(x)[1].sum().backward()
        assert x.grad[:, 0].abs().sum() > 0


# -- shape errors ---------------------------------------------------------------------------

def test_a_flat_input_asks_for_a_reshape_and_token_ids_for_an_embedding():
    with pytest.raises(PortError) as e:
        block("recurrent.LSTM", x=torch.zeros(N, 10))
    assert e.value.port == "input" and "(N, 10)" in str(e.value) and "Reshape" in e.value.hint
    with pytest.raises(PortError) as e:
        block("recurrent.GRU", x=torch.zeros(N, L, dtype=torch.long))
    assert "Embedding" in e.value.hint
    with pytest.raises(PortError):
        build("recurrent.Highway", {"input": torch.zeros(N, dtype=torch.long)})


@pytest.mark.parametrize("name, params", [("RNN", {}), ("RNN", {"residual": True}),
                                          ("LSTM", {"convention": "notes"}), ("GRU", {})])
def test_meta_inputs_get_the_real_shapes_without_running_the_loop(name, params):
    m = block(f"recurrent.{name}", bidirectional=True, **params)
    real, meta = m(X), m(X.to("meta"))
    assert [t.shape for t in meta] == [t.shape for t in real] and meta[0].is_meta


def test_validation_infers_output_and_last_widths():
    import nodegraph

    g = nodegraph.Graph()
    g.add("data.LagWindows", id="data", window=8, layout="sequence", n=100)
    g.add("recurrent.LSTM", id="rnn", hidden_size=5, bidirectional=True, num_layers=2)
    g.connect(("data", "x"), ("rnn", "input"))
    report = nodegraph.validate(g)
    assert report.ok, report.problems
    assert report.shape_text("rnn", "output") == "(N, 8, 10)"
    assert report.shape_text("rnn", "last") == "(N, 10)"
