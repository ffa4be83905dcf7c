"""Attention blocks: the weightless attentions against their formulas and torch's
scaled_dot_product_attention, masks, multi-head attention and the Transformer layers against
torch's modules given the same weights (dropout 0), dropout in training only, positional
encodings, the ViT pieces, and shape errors by port."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from blockcheck import build, run_op

import nodegraph
from nodegraph.model.errors import PortError

torch.manual_seed(0)
N, L, S, D = 2, 5, 7, 8
Q, K, V = torch.randn(N, L, D), torch.randn(N, S, D), torch.randn(N, S, 3)
QKV = {"query": Q, "key": K, "value": V}


def close(a, b, tol=1e-5):
    return torch.allclose(a, b, atol=tol, rtol=1e-5)


def causal_mask(length: int) -> torch.Tensor:
    """torch's float mask: −inf above the diagonal."""
    return torch.nn.Transformer.generate_square_subsequent_mask(length)


def port_error(block_id, inputs, **params) -> PortError:
    with pytest.raises(PortError) as e:
        build(block_id, inputs, **params)
    return e.value


# -- weightless attention -----------------------------------------------------------------

@pytest.mark.parametrize("name, scores", [
    ("DotProduct", lambda q, k: q @ k.transpose(1, 2)),
    ("ScaledDotProduct", lambda q, k: q @ k.transpose(1, 2) / math.sqrt(D)),
    ("Cosine", lambda q, k: (q / q.norm(dim=-1, keepdim=True))
     @ (k / k.norm(dim=-1, keepdim=True)).transpose(1, 2)),
])
def test_attention_is_the_softmax_of_its_scores_times_the_values(name, scores):
    out, w = run_op(f"attention.{name}", QKV, temperature=0.5)
    expected = torch.softmax(scores(Q, K) / 0.5, -1)
    assert close(w, expected) and close(out, expected @ V)
    assert close(w.sum(-1), torch.ones(N, L))


def test_scaled_attention_equals_torchs_sdpa_with_a_mask_and_causally():
    mask = torch.rand(N, L, S) > 0.3
    mask[..., 0] = True  # every query sees at least one key
    out, _ = run_op("attention.ScaledDotProduct", {**QKV, "attn_mask": mask})
    assert close(out, F.scaled_dot_product_attention(Q, K, V, attn_mask=mask))
    x = torch.randn(N, L, D)
    out, w = run_op("attention.ScaledDotProduct", {"query": x, "key": x, "value": x},
                    causal=True)
    assert close(out, F.scaled_dot_product_attention(x, x, x, is_causal=True))
    assert (w.triu(1) == 0).all()


def test_temperature_moves_weights_between_argmax_and_uniform():
    _, sharp = run_op("attention.DotProduct", QKV, temperature=1e-4)
    _, flat = run_op("attention.DotProduct", QKV, temperature=1e6)
    best = (Q @ K.transpose(1, 2)).argmax(-1)
    assert close(sharp, F.one_hot(best, S).float())
    assert close(flat, torch.full((N, L, S), 1 / S), 1e-4)


def test_masked_keys_get_no_weight_and_a_query_with_no_keys_gets_zeros():
    mask = torch.ones(N, L, S)
    mask[:, :, 2] = 0  # numbers work as masks: non-zero allows
    mask[0, 1] = 0  # query 1 of sample 0 may see nothing
    out, w = run_op("attention.ScaledDotProduct", {**QKV, "attn_mask": mask})
    assert (w[..., 2] == 0).all() and torch.isfinite(out).all()
    assert (w[0, 1] == 0).all() and (out[0, 1] == 0).all()
    assert close(w[1].sum(-1), torch.ones(L))


def test_causal_output_does_not_depend_on_later_positions():
    x = torch.randn(N, L, D)
    later = x.clone()
    later[:, 3:] = torch.randn(N, L - 3, D)
    args = {"query": x, "key": x, "value": x}
    before, _ = run_op("attention.DotProduct", args, causal=True)
    after, _ = run_op("attention.DotProduct", {k: later for k in args}, causal=True)
    assert close(before[:, :3], after[:, :3]) and not close(before[:, 3:], after[:, 3:])


# -- multi-head attention ------------------------------------------------------------------

def test_self_attention_equals_torchs_multihead_attention():
    x = torch.randn(N, L, D)
    pad = torch.zeros(N, L, dtype=torch.bool)
    pad[1, -2:] = True
    _, _, m = build("attention.MultiHeadSelfAttention", {"input": x, "key_padding_mask": pad},
                    num_heads=2)
    ref = torch.nn.MultiheadAttention(D, 2, batch_first=True)
    ref.load_state_dict(m.state_dict())
    out, w = m(x, pad)
    ref_out, ref_w = ref(x, x, x, key_padding_mask=pad, average_attn_weights=False)
    assert close(out, ref_out) and close(w, ref_w) and w.shape == (N, 2, L, L)
    assert (w[1, :, :, -2:] == 0).all()
    causal = m.__class__(D, 2, causal=True)
    causal.load_state_dict(m.state_dict())
    ref_out, ref_w = ref(x, x, x, attn_mask=causal_mask(L), average_attn_weights=False)
    assert close(causal(x)[0], ref_out) and close(causal(x)[1], ref_w)


def test_self_attention_heads_follow_the_notes_formula():
    x = torch.randn(N, L, D)
    _, _, m = build("attention.MultiHeadSelfAttention", {"input": x}, num_heads=2, bias=False)
    wq, wk, wv = m.in_proj_weight.chunk(3)
    heads = []
    for h in range(2):
        rows = slice(4 * h, 4 * h + 4)  # head h owns features 4h..4h+3 of Q, K, V
        q, k, v = x @ wq[rows].T, x @ wk[rows].T, x @ wv[rows].T
        heads.append(torch.softmax(q @ k.transpose(1, 2) / math.sqrt(4), -1) @ v)
    assert close(m(x)[0], torch.cat(heads, -1) @ m.out_proj.weight.T)


def test_cross_attention_with_a_wider_memory_equals_torchs():
    memory = torch.randn(N, S, 6)
    _, _, m = build("attention.MultiHeadCrossAttention", {"query": Q, "memory": memory},
                    num_heads=4)
    ref = torch.nn.MultiheadAttention(D, 4, kdim=6, vdim=6, batch_first=True)
    ref.load_state_dict(m.state_dict())
    out, w = m(Q, memory)
    ref_out, ref_w = ref(Q, memory, memory, average_attn_weights=False)
    assert close(out, ref_out) and close(w, ref_w) and w.shape == (N, 4, L, S)


def test_attention_dropout_acts_only_while_training_and_not_on_the_weights_port():
    x = torch.randn(N, L, D)
    _, _, m = build("attention.MultiHeadSelfAttention", {"input": x}, num_heads=2, dropout=0.5)
    m.eval()
    out_eval, w_eval = m(x)
    plain = build("attention.MultiHeadSelfAttention", {"input": x}, num_heads=2)[2]
    plain.load_state_dict(m.state_dict())
    assert close(out_eval, plain(x)[0])
    m.train()
    out_train, w_train = m(x)
    assert not close(out_train, out_eval) and close(w_train, w_eval)


# -- Transformer layers ------------------------------------------------------------------------

@pytest.mark.parametrize("norm_first", [True, False])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_encoder_block_equals_torchs_encoder_layer(norm_first, activation):
    x = torch.randn(N, L, D)
    pad = torch.zeros(N, L, dtype=torch.bool)
    pad[0, -1] = True
    _, _, m = build("attention.TransformerEncoderBlock", {"input": x}, nhead=2,
                    dim_feedforward=16, dropout=0.0, norm_first=norm_first,
                    activation=activation)
    ref = torch.nn.TransformerEncoderLayer(D, 2, 16, 0.0, activation, batch_first=True,
                                           norm_first=norm_first)
    ref.load_state_dict(m.state_dict())
    out, w = m(x, pad)
    assert close(out, ref(x, src_key_padding_mask=pad))
    attn_in = ref.norm1(x) if norm_first else x
    _, ref_w = ref.self_attn(attn_in, attn_in, attn_in, key_padding_mask=pad,
                             average_attn_weights=False)
    assert close(w, ref_w) and w.shape == (N, 2, L, L)


def test_causal_encoder_block_equals_torchs_with_a_square_subsequent_mask():
    x = torch.randn(N, L, D)
    _, _, m = build("attention.TransformerEncoderBlock", {"input": x}, nhead=2, dropout=0.0,
                    causal=True)
    assert m.linear1.out_features == 4 * D  # dim_feedforward defaults to 4·d_model
    ref = torch.nn.TransformerEncoderLayer(D, 2, 4 * D, 0.0, batch_first=True, norm_first=True)
    ref.load_state_dict(m.state_dict())
    assert close(m(x)[0], ref(x, src_mask=causal_mask(L)))


@pytest.mark.parametrize("norm_first", [True, False])
def test_decoder_block_equals_torchs_decoder_layer(norm_first):
    x, memory = torch.randn(N, L, D), torch.randn(N, S, D)
    mem_pad = torch.zeros(N, S, dtype=torch.bool)
    mem_pad[1, -3:] = True
    _, _, m = build("attention.TransformerDecoderBlock", {"input": x, "memory": memory},
                    nhead=2, dim_feedforward=16, dropout=0.0, norm_first=norm_first)
    ref = torch.nn.TransformerDecoderLayer(D, 2, 16, 0.0, batch_first=True,
                                           norm_first=norm_first)
    ref.load_state_dict(m.state_dict())
    out, self_w, cross_w = m(x, memory, None, mem_pad)
    expected = ref(x, memory, tgt_mask=causal_mask(L), memory_key_padding_mask=mem_pad)
    assert close(out, expected)
    assert self_w.shape == (N, 2, L, L) and (self_w.triu(1) == 0).all()
    assert cross_w.shape == (N, 2, L, S) and (cross_w[1, ..., -3:] == 0).all()


def test_encoder_block_dropout_acts_only_while_training():
    x = torch.randn(N, L, D)
    _, _, m = build("attention.TransformerEncoderBlock", {"input": x}, nhead=2, dropout=0.3)
    ref = torch.nn.TransformerEncoderLayer(D, 2, 4 * D, 0.0, batch_first=True, norm_first=True)
    ref.load_state_dict(m.state_dict())
    m.eval()
    assert close(m(x)[0], ref(x))
    m.train()
    assert not close(m(x)[0], ref(x))


# -- positions and tokens ----------------------------------------------------------------------

def test_sinusoidal_encoding_follows_the_formula_and_shifts_by_rotation():
    x = torch.zeros(1, 50, 6)
    p = run_op("attention.SinusoidalPositionalEncoding", {"input": x})[0]
    assert close(p[0, 0::2], torch.zeros(3)) and close(p[0, 1::2], torch.ones(3))
    t, i = 7, 2  # p[t, 2i] = sin(t / 10000^(2i/D)), p[t, 2i+1] = cos(...)
    angle = t / 10000 ** (2 * i / 6)
    assert close(p[t, 2 * i], torch.tensor(math.sin(angle)))
    assert close(p[t, 2 * i + 1], torch.tensor(math.cos(angle)))
    k = 5  # p[t + k] is p[t] rotated by k·ω_i in every (sin, cos) pair
    omega = 1 / 10000 ** (torch.arange(0, 6, 2) / 6)
    c, s = torch.cos(k * omega), torch.sin(k * omega)
    sin_t, cos_t = p[t, 0::2], p[t, 1::2]
    assert close(p[t + k, 0::2], sin_t * c + cos_t * s, 1e-4)
    assert close(p[t + k, 1::2], cos_t * c - sin_t * s, 1e-4)
    y = torch.randn(2, 50, 6)
    assert close(run_op("attention.SinusoidalPositionalEncoding", {"input": y}), y + p)
    e = port_error("attention.SinusoidalPositionalEncoding", {"input": torch.zeros(1, 4, 5)})
    assert "even" in str(e)


def test_learned_positions_add_a_row_per_position():
    x = torch.randn(N, L, D)
    _, _, m = build("attention.LearnedPositionalEncoding", {"input": x}, max_len=9)
    assert m.weight.shape == (9, D) and 0.005 < m.weight.std() < 0.05
    assert close(m(x), x + m.weight[:L])
    e = port_error("attention.LearnedPositionalEncoding", {"input": x}, max_len=3)
    assert "max_len" in str(e) and "5" in e.hint


def test_patch_embedding_is_a_linear_map_of_each_flattened_patch():
    images = torch.randn(N, 3, 8, 12)
    _, _, m = build("attention.PatchEmbedding", {"input": images}, patch_size=4, embed_dim=5)
    out = m(images)
    assert out.shape == (N, 8 * 12 // 16, 5)
    patches = F.unfold(images, 4, stride=4).transpose(1, 2)  # row-major patches (N, 6, 48)
    assert close(out, patches @ m.weight.reshape(5, -1).T + m.bias, 1e-4)
    e = port_error("attention.PatchEmbedding", {"input": images}, patch_size=5)
    assert e.port == "input" and "multiples" in str(e)
    assert "(N, C, H, W)" in str(port_error("attention.PatchEmbedding",
                                            {"input": torch.zeros(N, 64)}))


def test_cls_token_is_prepended_learned_and_taken_back():
    x = torch.randn(N, L, D)
    _, _, m = build("attention.ClsToken", {"input": x})
    out = m(x)
    assert out.shape == (N, L + 1, D) and close(out[:, 1:], x)
    assert close(out[:, 0], m.token[0].expand(N, D))
    out.sum().backward()
    assert close(m.token.grad, torch.full((1, 1, D), float(N)))
    assert close(run_op("attention.TakeToken", {"input": out}), out[:, 0])
    assert close(run_op("attention.TakeToken", {"input": out}, index=-1), x[:, -1])
    assert port_error("attention.TakeToken", {"input": x}, index=L).port == "input"


def test_lm_head_scores_every_token_at_every_position():
    x = torch.randn(N, L, D)
    _, _, m = build("attention.LMHead", {"input": x}, vocab_size=11)
    assert close(m(x), x @ m.weight.T + m.bias) and m(x).shape == (N, L, 11)


# -- errors and graphs -------------------------------------------------------------------------

def test_shape_errors_name_the_port_and_the_fix():
    e = port_error("attention.MultiHeadSelfAttention", {"input": torch.zeros(N, L, 6)},
                   num_heads=4)
    assert "[1, 2, 3, 6]" in e.hint
    e = port_error("attention.TransformerEncoderBlock", {"input": torch.zeros(N, 16)})
    assert e.port == "input" and "Reshape" in e.hint
    e = port_error("attention.TransformerEncoderBlock",
                   {"input": torch.zeros(N, L, dtype=torch.long)})
    assert "Embedding" in e.hint
    e = port_error("attention.DotProduct", {**QKV, "value": torch.zeros(N, S - 1, 3)})
    assert e.port == "value"
    e = port_error("attention.DotProduct", {**QKV, "key": torch.zeros(N, S, D + 1)})
    assert e.port == "key"
    e = port_error("attention.DotProduct", {**QKV, "attn_mask": torch.ones(N, S)})
    assert e.port == "attn_mask"
    e = port_error("attention.MultiHeadSelfAttention",
                   {"input": Q, "key_padding_mask": torch.zeros(N, L + 1)}, num_heads=2)
    assert e.port == "key_padding_mask"
    e = port_error("attention.TransformerDecoderBlock",
                   {"input": Q, "memory": torch.zeros(N, S, D + 2)}, nhead=2)
    assert e.port == "memory"
    e = port_error("attention.MultiHeadCrossAttention",
                   {"query": Q, "memory": torch.zeros(N + 1, S, D)}, num_heads=2)
    assert e.port == "memory" and "batch" in str(e)
    assert port_error("attention.LMHead", {"input": torch.zeros(N, D)}, vocab_size=5).port \
        == "input"


def test_a_small_vision_transformer_validates_and_learns_digits():
    g = nodegraph.Graph()
    g.add("data.Digits", id="data", layout="image", batch_size=64)
    chain = [("patches", "attention.PatchEmbedding", {"patch_size": 4, "embed_dim": 32}),
             ("cls", "attention.ClsToken", {}),
             ("pos", "attention.LearnedPositionalEncoding", {"max_len": 5}),
             ("enc", "attention.TransformerEncoderBlock",
              {"nhead": 2, "dim_feedforward": 32, "dropout": 0.0}),
             ("take", "attention.TakeToken", {}),
             ("head", "layers.Linear", {"out_features": 10})]
    previous = ("data", "x")
    for nid, kind, params in chain:
        g.add(kind, id=nid, **params)
        g.connect(previous, (nid, "input"))
        previous = (nid, "output")
    g.add("losses.CrossEntropy", id="loss")
    g.add("metrics.Accuracy", id="acc")
    g.add("optimizers.Adam", id="opt", lr=0.01)
    for dst in ("loss", "acc"):
        g.connect(previous, (dst, "input"))
        g.connect(("data", "y"), (dst, "target"))
    g.connect(("loss", "loss"), ("opt", "loss"))
    report = nodegraph.validate(g)
    assert report.ok, report.problems
    assert report.shape_text("patches", "output") == "(N, 4, 32)"  # four 4x4 patches
    assert report.shape_text("enc", "weights") == "(N, 2, 5, 5)"
    result = nodegraph.train(g, epochs=4, device="cpu")
    assert result.final["val"]["acc"] > 0.85
