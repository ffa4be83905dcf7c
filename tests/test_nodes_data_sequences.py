"""Sequence data: lag windows by their formula from files and generators, chronological
splits with normalisation fitted on the training windows only, RK4 against exact and scipy
solutions, the Lorenz series' sensitivity to its start, character tokens shifted by one, and
a recurrent forecaster trained end to end."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy.integrate import solve_ivp

import nodegraph
from nodegraph.model.errors import NodegraphError
from nodegraph.model.graph import Tie
from nodes.data.sequences import (
    BUNDLED_TEXT,
    chaotic_series,
    decode,
    lag_windows,
    lorenz,
    rk4,
    sine_series,
)

WHOLE = {"val_fraction": 0.0, "test_fraction": 0.0, "normalize": "none", "batch_size": 0}


def build(block_id, **params):
    spec = nodegraph.default_registry().get(block_id)
    values, problems = spec.resolve_params(params)
    assert not problems, problems
    return spec.build(values)


def train_xy(block_id, **params):
    t = build(block_id, **{**WHOLE, **params}).tensors("train")
    return t["x"].numpy(), t["y"].numpy()


# -- lag windows --------------------------------------------------------------------------

def test_windows_hold_the_last_values_and_the_value_horizon_steps_ahead(tmp_path):
    series = np.arange(20, dtype=np.float64) ** 2
    np.save(tmp_path / "s.npy", series)
    x, y = train_xy("data.LagWindows", path=str(tmp_path / "s.npy"), window=4, horizon=3)
    assert x.shape == (20 - 4 - 3 + 1, 4) and y.shape == (14, 1)
    for i in (0, 5, 13):
        assert np.array_equal(x[i], series[i:i + 4])
        assert y[i, 0] == series[i + 4 - 1 + 3]


def test_a_csv_column_by_name_and_the_sequence_layout(tmp_path):
    (tmp_path / "s.csv").write_text("t,value\n" + "".join(f"{i},{i * 0.5}\n"
                                                          for i in range(12)))
    x, y = train_xy("data.LagWindows", path=str(tmp_path / "s.csv"), column="value", window=3,
                    layout="sequence")
    assert x.shape == (9, 3, 1) and np.allclose(x[2, :, 0], [1.0, 1.5, 2.0])
    assert y[2, 0] == 2.5


def test_chronological_split_and_normalisation_from_the_training_windows_only():
    ds = build("data.LagWindows", series="sine", n=200, window=5, val_fraction=0.2,
               test_fraction=0.1, normalize="zscore", batch_size=0)
    raw = sine_series(200, 5.0, 0)
    n = 200 - 5  # windows
    n_test, n_val = round(n * 0.1), round(n * 0.2)
    n_train = n - n_val - n_test
    covered = raw[:n_train - 1 + 5 + 1]  # the first window's start to the last target
    scaled = (raw - covered.mean()) / covered.std()
    x_val = ds.tensors("val")["x"].numpy()
    assert ds.size("train") == n_train and ds.size("val") == n_val
    assert np.allclose(x_val[0], scaled[n_train:n_train + 5], atol=1e-5)  # after train
    assert abs(ds.tensors("train")["y"].mean()) < 0.05


def test_a_short_series_and_a_bad_file_say_what_is_wrong(tmp_path):
    with pytest.raises(NodegraphError, match="holds no window"):
        lag_windows(np.arange(5.0), 5, 1)
    np.save(tmp_path / "m.npy", np.zeros((10, 2)))
    with pytest.raises(NodegraphError, match="column must be an index below 2"):
        build("data.LagWindows", path=str(tmp_path / "m.npy"), column="5")


def test_random_walk_is_a_cumulative_sum_of_unit_steps():
    x, y = train_xy("data.LagWindows", series="random_walk", n=3000, window=1)
    steps = y[:, 0] - x[:, 0]
    assert abs(steps.std() - 1) < 0.05 and abs(steps.mean()) < 0.1


# -- the chaotic series ------------------------------------------------------------------------

def test_rk4_is_fourth_order_on_exponential_decay():
    def error(dt):
        states = rk4(lambda s: -s, np.array([1.0]), dt, round(1 / dt))
        return abs(states[-1, 0] - np.exp(-1))
    assert error(0.1) < 1e-6
    assert 14 < error(0.1) / error(0.05) < 18  # halving dt divides the error by 2^4


def test_rk4_lorenz_matches_a_tight_adaptive_solver():
    start = np.array([1.0, 1.0, 1.0])
    ours = rk4(lorenz(), start, 0.001, 1000)[-1]
    f = lorenz()
    ref = solve_ivp(lambda t, s: f(s), (0, 1), start, rtol=1e-11, atol=1e-11).y[:, -1]
    assert np.allclose(ours, ref, atol=1e-6)


def test_the_series_is_the_observed_x_and_depends_sensitively_on_its_start():
    start = np.ones(3) + np.random.default_rng(3).normal(0.0, 1.0, 3)
    x = rk4(lorenz(), start, 0.01, 100 + 49 * 4)[100::4, 0]
    assert np.allclose(chaotic_series(50, 0.01, 4, "x_squared", 100, 3), x ** 2)
    assert np.allclose(chaotic_series(50, 0.01, 4, "abs_x", 100, 3), np.abs(x))
    a = chaotic_series(400, 0.01, 5, "x", 0, 0)
    b = chaotic_series(400, 0.01, 5, "x", 0, 1)  # another start on the same attractor
    assert abs(a).max() < 25 and abs(b).max() < 25
    assert not np.allclose(a[-50:], b[-50:], atol=1.0)


def test_chaotic_block_windows_the_minmax_scaled_intensity():
    ds = build("data.ChaoticSeries", n=300, window=8, batch_size=0)
    series = chaotic_series(300, 0.01, 5, "x_squared", 1000, 0)
    x_train = ds.tensors("train")["x"].numpy()
    covered = series[:len(x_train) + 8]
    scaled = (series - covered.min()) / (covered.max() - covered.min())
    assert np.allclose(x_train[10], scaled[10:18], atol=1e-5)
    assert x_train.min() == pytest.approx(0, abs=1e-6) and x_train.max() <= 1 + 1e-6
    with pytest.raises(NodegraphError, match="diverged"):
        chaotic_series(100, 0.3, 5, "x", 0, 0)  # beyond RK4's stability limit


# -- character tokens --------------------------------------------------------------------------

def test_tokens_are_the_text_in_windows_and_y_is_x_shifted_by_one():
    ds = build("data.TokenText", seq_len=16, stride=16, val_fraction=0.0, batch_size=0)
    x, y = (ds.tensors("train")[k] for k in ("x", "y"))
    assert x.dtype == y.dtype == torch.int64 and x.shape == y.shape == (len(x), 16)
    assert ds.vocab == "".join(sorted(set(BUNDLED_TEXT)))
    assert decode(x[0], ds.vocab) == BUNDLED_TEXT[:16]
    assert decode(x[2], ds.vocab) == BUNDLED_TEXT[32:48]
    assert torch.equal(y[:, :-1], x[:, 1:])
    assert decode(y[0], ds.vocab) == BUNDLED_TEXT[1:17]
    assert len(x) == (len(BUNDLED_TEXT) - 16 - 1) // 16 + 1


def test_given_text_lowercase_and_a_chronological_split():
    ds = build("data.TokenText", text="Abc abc ABC abc", lowercase=True, seq_len=3, stride=1,
               val_fraction=0.25, batch_size=0)
    assert ds.vocab == " abc"
    train, val = ds.tensors("train")["x"], ds.tensors("val")["x"]
    assert decode(train[0], ds.vocab) == "abc" and decode(val[-1], ds.vocab) == " ab"
    with pytest.raises(NodegraphError, match="too few"):
        build("data.TokenText", text="short", seq_len=5)


def test_a_character_model_validates_from_tokens_to_logits():
    ds = build("data.TokenText")
    g = nodegraph.Graph()
    g.add("data.TokenText", id="data")
    g.add("layers.Embedding", id="emb", num_embeddings=len(ds.vocab), embedding_dim=16)
    g.add("attention.SinusoidalPositionalEncoding", id="pos")
    g.add("attention.TransformerEncoderBlock", id="block", nhead=2, causal=True)
    g.add("attention.LMHead", id="head", vocab_size=len(ds.vocab))
    for a, b in (("data", "emb"), ("emb", "pos"), ("pos", "block"), ("block", "head")):
        g.connect((a, "x" if a == "data" else "output"), (b, "input"))
    report = nodegraph.validate(g)
    assert report.ok, report.problems
    assert report.shape_text("head", "output") == f"(N, 32, {len(ds.vocab)})"
    # the head's (vocab, d) weight tied to the embedding's (notes 17.8): one tensor
    g.add_tie(Tie("emb", "weight", "head", "weight"))
    blocks = nodegraph.compile(g, device="cpu", for_training=False).module.blocks
    assert blocks["head"].weight is blocks["emb"].weight


# -- end to end ----------------------------------------------------------------------------------

def test_an_lstm_learns_to_forecast_the_sine_series():
    g = nodegraph.Graph()
    g.add("data.LagWindows", id="data", n=400, window=12, layout="sequence", batch_size=32)
    g.add("recurrent.LSTM", id="rnn", hidden_size=16)
    g.add("layers.Linear", id="out", out_features=1)
    g.add("losses.MSE", id="loss")
    g.add("optimizers.Adam", id="opt", lr=0.02)
    g.connect(("data", "x"), ("rnn", "input"))
    g.connect(("rnn", "last"), ("out", "input"))
    g.connect(("out", "output"), ("loss", "input"))
    g.connect(("data", "y"), ("loss", "target"))
    g.connect(("loss", "loss"), ("opt", "loss"))
    result = nodegraph.train(g, epochs=8, device="cpu")
    # the z-scored series has variance 1: predicting the mean would score about 1
    assert result.final["val"]["loss"] < 0.1
