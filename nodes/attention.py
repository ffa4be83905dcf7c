"""Attention and Transformer blocks, batch first: (N, L, D) sequences of L vectors.

One computation underlies all of them: scores between queries and keys, a
softmax over the keys (masked positions excluded), and the weighted sum of the values.

- `DotProduct`, `ScaledDotProduct` and `Cosine` are that computation without weights, on
  query, key and value wires (the notes' dot-product attention and its √d scaling).
- `MultiHeadSelfAttention` and `MultiHeadCrossAttention` project Q, K, V per head and mix the
  heads with an output projection; their weights have torch's names and layout, so a state
  dict loads into nn.MultiheadAttention and back.
- `TransformerEncoderBlock` / `TransformerDecoderBlock` are torch's encoder and decoder
  layers (post-LN or pre-LN by `norm_first`), built from those pieces so every block also
  outputs its attention weights (N, heads, L, S) for the editor's heatmaps.
- Positional encodings, the ViT pieces (`PatchEmbedding`, `ClsToken`, `TakeToken`) and the
  language-model head complete the family.

Masks: `attn_mask` marks with true (or non-zero) the query-key pairs that may attend, as
torch's scaled_dot_product_attention reads a boolean mask; `key_padding_mask` marks with
true the keys that are padding and are ignored, as torch's nn.MultiheadAttention does. A
query that may attend to no key gets zero weights (torch would give NaN). The `weights`
output is the softmax before attention dropout.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, cast

import torch
import torch.nn.functional as F
from torch import nn

from nodegraph.kinds import shapes
from nodegraph.kinds.declare import family, op
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
from nodes._shapes import fmt, need_ndim
from nodes.generative import sinusoidal
from nodes.layers.dense import init_values

# -- the attention computation -----------------------------------------------------------


def causal_allowed(q_len: int, k_len: int, device: torch.device) -> torch.Tensor:
    """(L, S) true where key k may be seen from query t: k <= t (no peeking ahead)."""
    return torch.ones(q_len, k_len, dtype=torch.bool, device=device).tril()


def combine(*masks: torch.Tensor | None) -> torch.Tensor | None:
    """The pairs every given `allowed` mask allows (None: no restriction)."""
    given = [m for m in masks if m is not None]
    if not given:
        return None
    out = given[0]
    for m in given[1:]:
        out = out & m
    return out


def attend(scores: torch.Tensor, value: torch.Tensor, allowed: torch.Tensor | None,
           dropout: float = 0.0, training: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """softmax over the keys of `scores` (..., L, S) where `allowed`, then the weighted sum
    of `value` (..., S, Dv); returns (output, weights before dropout)."""
    if allowed is not None:
        # the dtype's lowest number instead of −inf: a row with nothing allowed stays
        # finite (uniform), and the multiplication below turns it into zeros
        scores = scores.masked_fill(~allowed, torch.finfo(scores.dtype).min)
    weights = scores.softmax(-1)
    if allowed is not None:
        weights = weights * allowed
    return F.dropout(weights, dropout, training) @ value, weights


def as_allowed(mask: torch.Tensor | None) -> torch.Tensor | None:
    """A mask wire (bool, or numbers where non-zero counts as true) as a bool tensor."""
    if mask is None:
        return None
    return mask if mask.dtype == torch.bool else mask != 0


def padding_allowed(key_padding_mask: torch.Tensor | None) -> torch.Tensor | None:
    """(N, S) padding flags as (N, 1, 1, S) allowed flags for (N, heads, L, S) scores."""
    if key_padding_mask is None:
        return None
    return ~cast(torch.Tensor, as_allowed(key_padding_mask))[:, None, None, :]


SCORES: dict[str, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]] = {
    "dot": lambda q, k: q @ k.transpose(-2, -1),
    "scaled": lambda q, k: q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]),
    "cosine": lambda q, k: F.normalize(q, dim=-1) @ F.normalize(k, dim=-1).transpose(-2, -1),
}


class Attention(nn.Module):
    """Weightless attention: softmax(score(q, k) / temperature) @ v."""

    def __init__(self, score: str, temperature: float, causal: bool):
        super().__init__()
        self.score, self.temperature, self.causal = score, temperature, causal

    def forward(self, query, key, value, attn_mask=None):
        scores = SCORES[self.score](query, key) / self.temperature
        causal = (causal_allowed(query.shape[-2], key.shape[-2], query.device)
                  if self.causal else None)
        return attend(scores, value, combine(as_allowed(attn_mask), causal))


class MultiHeadAttention(nn.Module):
    """Multi-head attention with torch's parameter names and initialisation.

    Q = query W_Qᵀ + b_Q (likewise K, V), split into `num_heads` heads of embed_dim /
    num_heads, softmax(Q_h K_hᵀ / √d_h) V_h per head, the heads concatenated and projected by
    `out_proj` (multi-head attention). Keys of another width than the queries (kdim) get their
    own projection matrices, as in torch.
    """

    def __init__(self, embed_dim: int, num_heads: int, kdim: int | None = None,
                 bias: bool = True, dropout: float = 0.0, causal: bool = False):
        super().__init__()
        kdim = kdim or embed_dim
        self.embed_dim, self.num_heads = embed_dim, num_heads
        self.dropout, self.causal = dropout, causal
        self.same_dim = kdim == embed_dim
        if self.same_dim:
            self.in_proj_weight = nn.Parameter(torch.empty(3 * embed_dim, embed_dim))
        else:
            self.q_proj_weight = nn.Parameter(torch.empty(embed_dim, embed_dim))
            self.k_proj_weight = nn.Parameter(torch.empty(embed_dim, kdim))
            self.v_proj_weight = nn.Parameter(torch.empty(embed_dim, kdim))
        self.in_proj_bias = nn.Parameter(torch.zeros(3 * embed_dim)) if bias else None
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=bias)
        for name in ("in_proj_weight", "q_proj_weight", "k_proj_weight", "v_proj_weight"):
            if hasattr(self, name):
                init_values(getattr(self, name), nn.init.xavier_uniform_)
        if bias:
            init_values(self.out_proj.bias, nn.init.zeros_)

    def projections(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        if self.same_dim:
            q, k, v = self.in_proj_weight.chunk(3)
            return q, k, v
        return self.q_proj_weight, self.k_proj_weight, self.v_proj_weight

    def heads(self, x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None) -> torch.Tensor:
        """(N, L, E) projected and split into (N, heads, L, E / heads)."""
        n, length, _ = x.shape
        return F.linear(x, w, b).view(n, length, self.num_heads, -1).transpose(1, 2)

    def forward(self, query, key, value, key_padding_mask=None):
        biases = (self.in_proj_bias.chunk(3) if self.in_proj_bias is not None
                  else (None, None, None))
        q, k, v = (self.heads(t, w, b) for t, w, b in
                   zip((query, key, value), self.projections(), biases, strict=True))
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
        causal = (causal_allowed(q.shape[-2], k.shape[-2], q.device) if self.causal
                  else None)
        out, weights = attend(scores, v, combine(padding_allowed(key_padding_mask), causal),
                              self.dropout, self.training)
        out = out.transpose(1, 2).reshape(query.shape[0], query.shape[1], self.embed_dim)
        return self.out_proj(out), weights


class SelfAttention(MultiHeadAttention):
    """Multi-head attention of a sequence to itself."""

    def forward(self, x, key_padding_mask=None):  # type: ignore[override]  # one input
        return super().forward(x, x, x, key_padding_mask)


class CrossAttention(MultiHeadAttention):
    """Multi-head attention of queries to a memory that gives both keys and values."""

    def forward(self, query, memory,  # type: ignore[override]  # keys are the values
                key_padding_mask=None):
        return super().forward(query, memory, memory, key_padding_mask)


# -- Transformer layers --------------------------------------------------------------------

ACTIVATIONS: dict[str, Callable[..., torch.Tensor]] = {"relu": F.relu, "gelu": F.gelu}


class _FeedForward(nn.Module):
    """Shared parts of torch's encoder and decoder layers, under torch's attribute names
    so their state dicts load into each other."""

    def __init__(self, d_model, dim_feedforward, dropout, activation, layer_norm_eps, bias,
                 norm_first, norms):
        super().__init__()
        self.norm_first = norm_first
        self.linear1 = nn.Linear(d_model, dim_feedforward, bias=bias)
        self.dropout = nn.Dropout(dropout)
        self.linear2 = nn.Linear(dim_feedforward, d_model, bias=bias)
        self.activation = ACTIVATIONS[activation]
        for i in range(1, norms + 1):
            setattr(self, f"norm{i}", nn.LayerNorm(d_model, layer_norm_eps, bias=bias))
            setattr(self, f"dropout{i}", nn.Dropout(dropout))

    def sublayer(self, x, norm: Any, drop: Any, fn):
        """x + drop(fn(norm(x))) pre-LN, norm(x + drop(fn(x))) post-LN; fn returns (y, extra)."""
        y, extra = fn(norm(x) if self.norm_first else x)
        x = x + drop(y)
        return (x if self.norm_first else norm(x)), extra

    def feed_forward(self, x):
        return self.linear2(self.dropout(self.activation(self.linear1(x)))), None


class EncoderLayer(_FeedForward):
    """nn.TransformerEncoderLayer(batch_first=True) that also returns its attention weights."""

    def __init__(self, d_model, nhead, dim_feedforward, dropout, activation, layer_norm_eps,
                 bias, norm_first, causal):
        super().__init__(d_model, dim_feedforward, dropout, activation, layer_norm_eps, bias,
                         norm_first, norms=2)
        self.self_attn = SelfAttention(d_model, nhead, bias=bias, dropout=dropout,
                                       causal=causal)

    def forward(self, x, key_padding_mask=None):
        x, weights = self.sublayer(x, self.norm1, self.dropout1,
                                   lambda h: self.self_attn(h, key_padding_mask))
        x, _ = self.sublayer(x, self.norm2, self.dropout2, self.feed_forward)
        return x, weights


class DecoderLayer(_FeedForward):
    """nn.TransformerDecoderLayer(batch_first=True): masked self-attention, attention to the
    encoder's memory, feed-forward; also returns both attention weights."""

    def __init__(self, d_model, nhead, dim_feedforward, dropout, activation, layer_norm_eps,
                 bias, norm_first, causal):
        super().__init__(d_model, dim_feedforward, dropout, activation, layer_norm_eps, bias,
                         norm_first, norms=3)
        self.self_attn = SelfAttention(d_model, nhead, bias=bias, dropout=dropout,
                                       causal=causal)
        self.multihead_attn = CrossAttention(d_model, nhead, bias=bias, dropout=dropout)

    def forward(self, x, memory, key_padding_mask=None, memory_key_padding_mask=None):
        x, self_weights = self.sublayer(x, self.norm1, self.dropout1,
                                        lambda h: self.self_attn(h, key_padding_mask))
        x, cross_weights = self.sublayer(
            x, self.norm2, self.dropout2,
            lambda h: self.multihead_attn(h, memory, memory_key_padding_mask))
        x, _ = self.sublayer(x, self.norm3, self.dropout3, self.feed_forward)
        return x, self_weights, cross_weights


# -- positions and tokens ----------------------------------------------------------------


class SinusoidalPositions(nn.Module):
    """x + p[:L] with p[t, 2i] = sin(t / base^(2i/D)), p[t, 2i+1] = cos(t / base^(2i/D)), the
    Transformer's positions (the same code as a diffusion model's timestep embedding)."""

    def __init__(self, base: float):
        super().__init__()
        self.base = base

    def forward(self, x):
        t = torch.arange(x.shape[1], device=x.device)
        return x + sinusoidal(t, x.shape[2], self.base).to(x.dtype)


class LearnedPositions(nn.Module):
    """A learned vector per position, added: x + P[:L]; P starts as N(0, 0.02²) (GPT, ViT)."""

    def __init__(self, max_len: int, dim: int):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(max_len, dim))
        init_values(self.weight, lambda w: nn.init.normal_(w, 0.0, 0.02))

    def forward(self, x):
        return x + self.weight[:x.shape[1]]


class ClsToken(nn.Module):
    """Prepends one learned token to every sequence: (N, L, D) -> (N, L + 1, D)."""

    def __init__(self, dim: int):
        super().__init__()
        self.token = nn.Parameter(torch.empty(1, 1, dim))
        init_values(self.token, lambda w: nn.init.normal_(w, 0.0, 0.02))

    def forward(self, x):
        return torch.cat([self.token.expand(x.shape[0], 1, -1), x], 1)


class TakeToken(nn.Module):
    """x[:, index]: one position of every sequence."""

    def __init__(self, index: int):
        super().__init__()
        self.index = index

    def forward(self, x):
        return x[:, self.index]


class PatchEmbedding(nn.Conv2d):
    """Non-overlapping patches, each flattened and mapped linearly: a conv whose kernel and
    stride are the patch size, then (N, E, H/P, W/P) -> (N, H·W/P², E), patches row by row."""

    def forward(self, x):
        return super().forward(x).flatten(2).transpose(1, 2)


# -- builds -------------------------------------------------------------------------------


def need_tokens(x: dict, port: str) -> torch.Tensor:
    """A real (N, L, D) sequence at `port`."""
    t = x[port]
    if not t.dtype.is_floating_point:
        raise PortError(port, f"needs vectors (N, L, D), got {t.dtype} {fmt(t.shape)}",
                        "token ids go through layers.Embedding first", kind="dtype_mismatch")
    return need_ndim(x, port, (3,), "(N, L, D)",
                     "insert layers.Reshape with shape [L, D] before it (one vector per "
                     "position)" if t.ndim == 2 else "")


def need_heads(dim: int, num_heads: int, port: str = "input") -> None:
    if dim % num_heads:
        divisors = [h for h in range(1, dim + 1) if dim % h == 0]
        raise PortError(port, f"has {dim} features, which {num_heads} heads cannot share "
                        "equally", f"choose a head count that divides {dim}: {divisors}")


def need_padding_mask(x: dict, port: str, keys: torch.Tensor) -> None:
    """An optional (N, S) padding mask matching the keys (N, S, D)."""
    if port in x and tuple(x[port].shape) != tuple(keys.shape[:2]):
        raise PortError(port, f"must be (N, S) = {fmt(keys.shape[:2])}, one flag per key, "
                        f"but is {fmt(x[port].shape)}",
                        "true marks a padding position to ignore")


class AttentionParams(Params):
    """DotProduct's, ScaledDotProduct's and Cosine's."""

    temperature: float
    causal: bool


def _attention(score: str):
    def build(p: AttentionParams, x):
        _attention_check(p, x)
        return Attention(score, p.temperature, p.causal)
    return build


def _attention_shape(score: str) -> shapes.Rule:
    """Dot or scaled scores: batched products need no copies of (N, L, D) tensors: the
    scores, scaled by √D (scaled), divided by the temperature, softmaxed (the weights
    output), the weighted sum; a causal mask adds three bool (L, S) tensors, a masked fill
    and a product. An attn_mask runs on meta."""
    def rule(p: AttentionParams, x):
        _attention_check(p, x)
        dtype = shapes.same_dtype(x)
        if dtype is None or "attn_mask" in x:
            return None
        q, k, v = x["query"], x["key"], x["value"]
        n, length, s_len = q.shape[0], q.shape[1], k.shape[1]
        scores = n * length * s_len * dtype.itemsize
        out = (n, length, v.shape[-1])
        made = scores * (3 + (score == "scaled")) + shapes.nbytes(out, dtype)
        if p.causal:
            made += 3 * length * s_len * torch.bool.itemsize + 2 * scores
        return shapes.Inferred(((out, dtype), ((n, length, s_len), dtype)), work=made)
    return rule


def _attention_check(p, x) -> None:
    q, k, v = (need_tokens(x, port) for port in ("query", "key", "value"))
    if q.shape[0] != k.shape[0] or k.shape[:2] != v.shape[:2]:
        raise PortError("value", f"query {fmt(q.shape)}, key {fmt(k.shape)} and value "
                        f"{fmt(v.shape)} must share the batch, and key and value the "
                        "length S", "one value per key")
    if q.shape[-1] != k.shape[-1]:
        raise PortError("key", f"query and key must have the same width to be compared: "
                        f"query is {fmt(q.shape)}, key {fmt(k.shape)}",
                        "project one of them with layers.Linear")
    if "attn_mask" in x:
        want = (q.shape[0], q.shape[1], k.shape[1])
        m = x["attn_mask"]
        try:
            fits = m.ndim == 3 and torch.broadcast_shapes(m.shape, want) == want
        except RuntimeError:
            fits = False
        if not fits:
            raise PortError("attn_mask", f"must broadcast to (N, L, S) = {fmt(want)}, got "
                            f"{fmt(m.shape)}", "give it three dims; size 1 broadcasts")


def _self_attention_check(p: MultiHeadSelfAttentionParams, x) -> None:
    t = need_tokens(x, "input")
    need_heads(t.shape[-1], p.num_heads)
    need_padding_mask(x, "key_padding_mask", t)


class MultiHeadSelfAttentionParams(Params):
    num_heads: int
    bias: bool
    dropout: float
    causal: bool
    dtype: str


def _self_attention(p: MultiHeadSelfAttentionParams, x):
    _self_attention_check(p, x)
    t = x["input"]
    return SelfAttention(t.shape[-1], p.num_heads, bias=p.bias, dropout=p.dropout,
                         causal=p.causal)


class MultiHeadCrossAttentionParams(Params):
    num_heads: int
    bias: bool
    dropout: float
    dtype: str


def _cross_attention(p: MultiHeadCrossAttentionParams, x):
    q, m = need_tokens(x, "query"), need_tokens(x, "memory")
    need_heads(q.shape[-1], p.num_heads, "query")
    if q.shape[0] != m.shape[0]:
        raise PortError("memory", f"query {fmt(q.shape)} and memory {fmt(m.shape)} must have "
                        "the same batch")
    need_padding_mask(x, "key_padding_mask", m)
    return CrossAttention(q.shape[-1], p.num_heads, kdim=m.shape[-1], bias=p.bias,
                          dropout=p.dropout)


def _layer_args(p: TransformerLayerParams, d_model: int) -> dict:
    return dict(d_model=d_model, nhead=p.nhead,
                dim_feedforward=p.dim_feedforward or 4 * d_model, dropout=p.dropout,
                activation=p.activation, layer_norm_eps=p.layer_norm_eps, bias=p.bias,
                norm_first=p.norm_first, causal=p.causal)


def _encoder_input(p: TransformerLayerParams, x):
    t = need_tokens(x, "input")
    need_heads(t.shape[-1], p.nhead)
    need_padding_mask(x, "key_padding_mask", t)
    return t


class TransformerLayerParams(Params):
    """TransformerEncoderBlock's and TransformerDecoderBlock's."""

    nhead: int
    dim_feedforward: int | None
    dropout: float
    activation: str
    norm_first: bool
    layer_norm_eps: float
    bias: bool
    causal: bool
    dtype: str


def _encoder(p: TransformerLayerParams, x):
    return EncoderLayer(**_layer_args(p, _encoder_input(p, x).shape[-1]))


def _dropout_elements(p: float, size: int) -> float:
    """Elements a training-mode dropout makes on a tensor of `size`: a mask and the
    product; nothing at p = 0; at p = 1 a zero scalar and the product."""
    return 0 if p == 0 else size + 1 if p == 1 else 2 * size


def _self_attention_input(x: dict, dtype: torch.dtype, heads: int) -> Any:
    """The (N, L, D) input a self-attention rule covers, or None: a padding mask, mixed
    dtypes, bfloat16, or one feature per head (torch's copies differ: out_proj makes its
    own) are left to the meta path."""
    t = x["input"]
    if "key_padding_mask" in x or t.dtype != dtype or \
            dtype not in (torch.float32, torch.float64) or t.shape[-1] == heads > 1:
        return None
    return t


def _self_attention_bytes(t: Any, heads: int, dropout: float, causal: bool) -> int:
    """What a `MultiHeadAttention` of a sequence to itself makes (X: the (N, L, D)
    sequence, S: the scores (N, heads, L, L)): the q, k, v projections, q and kᵀ copied for
    the batched product, the scores, scaled, softmaxed (the weights output), dropped out,
    v copied, the weighted sum, the heads merged back (a copy) and out_proj; a causal mask
    adds three bool (L, L) tensors, a masked fill and a product. The heads' views fold
    into (N·heads, ...) without a copy, and merge back, where a size of 1 leaves nothing
    out of order."""
    n, length, d = t.shape
    big_x, big_s = n * length * d, n * heads * length**2
    copies = 3 * (n > 1 and heads > 1 and length > 1) + (heads > 1 and length > 1)
    made = ((5 + copies) * big_x + 3 * big_s + _dropout_elements(dropout, big_s)) \
        * t.dtype.itemsize
    if causal:
        made += 3 * length**2 * torch.bool.itemsize + 2 * big_s * t.dtype.itemsize
    return made


def _self_attention_shape(p: MultiHeadSelfAttentionParams, x):
    _self_attention_check(p, x)
    t = _self_attention_input(x, shapes.layer_dtype(p), p.num_heads)
    if t is None:
        return None
    n, length, d = t.shape
    return shapes.weighted([(t.shape, t.dtype), ((n, p.num_heads, length, length), t.dtype)],
                           4 * d * d + 4 * d * p.bias, t.dtype,
                           work=_self_attention_bytes(t, p.num_heads, p.dropout, p.causal))


def _encoder_shape(p: TransformerLayerParams, x):
    """EncoderLayer's forward (F: the feed-forward's hidden (N, L, ff), R: one value per
    position): two LayerNorms (output, mean, rstd), the self-attention, dropout after it
    and the residual sum; the feed-forward's two Linears, its activation, dropout inside
    and after it, and the residual sum."""
    _encoder_input(p, x)
    t = _self_attention_input(x, shapes.layer_dtype(p), p.nhead)
    if t is None:
        return None
    n, length, d = t.shape
    ff = p.dim_feedforward or 4 * d
    big_x, big_f, rows = n * length * d, n * length * ff, n * length
    elements = 5 * big_x + 2 * big_f + 4 * rows + sum(
        _dropout_elements(p.dropout, size) for size in (big_x, big_f, big_x))
    made = elements * t.dtype.itemsize + _self_attention_bytes(t, p.nhead, p.dropout,
                                                               p.causal)
    weights = 4 * d * d + 2 * d * ff + 2 * d + p.bias * (3 * d + d + ff + d + 2 * d)
    return shapes.weighted([(t.shape, t.dtype), ((n, p.nhead, length, length), t.dtype)],
                           weights, t.dtype, work=made)


def _decoder(p: TransformerLayerParams, x):
    t, m = need_tokens(x, "input"), need_tokens(x, "memory")
    need_heads(t.shape[-1], p.nhead)
    if m.shape[0] != t.shape[0] or m.shape[-1] != t.shape[-1]:
        raise PortError("memory", f"must be (N, S, {t.shape[-1]}) like the input "
                        f"{fmt(t.shape)} in batch and width, got {fmt(m.shape)}",
                        "the encoder and decoder need the same d_model")
    need_padding_mask(x, "key_padding_mask", t)
    need_padding_mask(x, "memory_key_padding_mask", m)
    return DecoderLayer(**_layer_args(p, t.shape[-1]))


def _sinusoidal_input(p, x):
    t = need_tokens(x, "input")
    width = t.shape[-1]
    if width % 2:
        raise PortError("input", f"has {width} features, but the code comes in (sin, cos) "
                        "pairs and needs an even width", "make the embedding width even")
    return t


class SinusoidalPositionalEncodingParams(Params):
    base: float


def _sinusoidal(p: SinusoidalPositionalEncodingParams, x):
    _sinusoidal_input(p, x)
    return SinusoidalPositions(p.base)


def _sinusoidal_shape(p: SinusoidalPositionalEncodingParams, x):
    """The code is made in float32 (`sinusoidal`): the positions (int64) and their float
    copy, four tensors of frequencies, the angles, their sines and cosines, the pairs
    stacked; a copy in the input's dtype unless float32, then the sum."""
    t = _sinusoidal_input(p, x)
    n, length, width = t.shape
    f32 = torch.float32.itemsize
    made = length * (torch.int64.itemsize + f32) + 4 * (width // 2) * f32 \
        + 3 * length * (width // 2) * f32 + length * width * f32
    if t.dtype != torch.float32:
        made += length * width * t.dtype.itemsize
    return shapes.Inferred(((t.shape, t.dtype),), work=made + t.nbytes)


def _learned_positions_input(p: LearnedPositionalEncodingParams, x):
    t = need_tokens(x, "input")
    if t.shape[1] > p.max_len:
        raise PortError("input", f"has {t.shape[1]} positions but the table holds max_len = "
                        f"{p.max_len}", f"raise max_len to at least {t.shape[1]}")
    return t


class LearnedPositionalEncodingParams(Params):
    max_len: int
    dtype: str


def _learned_positions(p: LearnedPositionalEncodingParams, x):
    return LearnedPositions(p.max_len, _learned_positions_input(p, x).shape[-1])


def _learned_positions_shape(p: LearnedPositionalEncodingParams, x):
    t, dtype = _learned_positions_input(p, x), shapes.layer_dtype(p)
    if t.dtype != dtype:
        return None  # mixed dtypes: the meta path refuses them
    return shapes.weighted([(t.shape, dtype)], p.max_len * t.shape[-1], dtype)


def _patch_input(p: PatchEmbeddingParams, x):
    t = need_ndim(x, "input", (4,), "(N, C, H, W)")
    size = p.patch_size
    if t.shape[2] % size or t.shape[3] % size:
        raise PortError("input", f"images {fmt(t.shape)} cannot be cut into {size}x{size} "
                        "patches: height and width must be multiples of patch_size",
                        "choose a patch_size that divides both, or resize the images")
    return t


class PatchEmbeddingParams(Params):
    patch_size: int
    embed_dim: int
    bias: bool
    dtype: str


def _patch_embedding(p: PatchEmbeddingParams, x):
    t, size = _patch_input(p, x), p.patch_size
    return PatchEmbedding(t.shape[1], p.embed_dim, size, stride=size, bias=p.bias)


def _patch_embedding_shape(p: PatchEmbeddingParams, x):
    """The convolution's output, then views: (N, patches, embed_dim)."""
    t, size, dtype = _patch_input(p, x), p.patch_size, shapes.layer_dtype(p)
    if t.dtype != dtype:
        return None  # mixed dtypes or integers: the meta path says how
    n, c, h, w = t.shape
    return shapes.weighted([((n, h * w // size**2, p.embed_dim), dtype)],
                           p.embed_dim * (c * size * size + p.bias), dtype)


class ClsTokenParams(Params):
    dtype: str


def _cls_token(p: ClsTokenParams, x):
    return ClsToken(need_tokens(x, "input").shape[-1])


def _cls_token_shape(p: ClsTokenParams, x):
    t, dtype = need_tokens(x, "input"), shapes.layer_dtype(p)
    if t.dtype != dtype:
        return None  # mixed dtypes: the meta path refuses them
    n, length, width = t.shape
    return shapes.weighted([((n, length + 1, width), dtype)], width, dtype)


def _take_index(p: TakeTokenParams, x):
    t = need_tokens(x, "input")
    if not -t.shape[1] <= p.index < t.shape[1]:
        raise PortError("input", f"has {t.shape[1]} positions, so index {p.index} does not "
                        "exist", "0 is the first position (the CLS token), -1 the last")
    return t


class TakeTokenParams(Params):
    index: int


def _take_token(p: TakeTokenParams, x):
    _take_index(p, x)
    return TakeToken(p.index)


def _take_token_shape(p: TakeTokenParams, x):
    t = _take_index(p, x)
    return shapes.Inferred((((t.shape[0], t.shape[2]), t.dtype),))  # a view


class LMHeadParams(Params):
    vocab_size: int
    bias: bool
    dtype: str


def _lm_head(p: LMHeadParams, x):
    return nn.Linear(need_tokens(x, "input").shape[-1], p.vocab_size, bias=p.bias)


def _lm_head_shape(p: LMHeadParams, x):
    t, dtype = need_tokens(x, "input"), shapes.layer_dtype(p)
    if t.dtype != dtype:
        return None  # mixed dtypes: the meta path refuses them
    return shapes.weighted([((*t.shape[:-1], p.vocab_size), dtype)],
                           p.vocab_size * (t.shape[-1] + p.bias), dtype)


# -- declarations --------------------------------------------------------------------------

TEMPERATURE = float_param("temperature", 1.0, "divides the scores before the softmax: below 1 "
                          "sharpens the weights towards the best key, above 1 evens them out",
                          min=1e-6)
CAUSAL = bool_param("causal", False, "position t attends only to keys 0..t (a language "
                    "model must not see the future)")
QKV = [Port("query", doc="queries (N, L, D)"), Port("key", doc="keys (N, S, D)"),
       Port("value", doc="values (N, S, Dv), one per key"),
       Port("attn_mask", doc="true / non-zero where query t may attend to key s, "
            "broadcastable to (N, L, S)", optional=True)]
ATTENTION_OUT = [Port("output", doc="the weighted sums of the values (N, L, Dv)"),
                 Port("weights", doc="attention weights (N, L, S), each row sums to 1",
                      views=("attention",))]
PADDING = Port("key_padding_mask", doc="(N, S): true / non-zero marks a padding key to "
               "ignore (torch's convention)", optional=True)
HEAD_WEIGHTS = Port("weights", doc="attention weights per head (N, heads, L, S), before "
                    "dropout", views=("attention",))
MHA_PARAMS = [
    int_param("num_heads", 4, "heads; each sees embed_dim / num_heads of the features", min=1),
    bool_param("bias", True, "biases in the projections"),
    float_param("dropout", 0.0, "dropout on the attention weights while training", min=0,
                max=1),
]


def layer_params(causal: bool) -> list:
    return [
        int_param("nhead", 4, "attention heads (must divide d_model, which is inferred)",
                  min=1),
        int_param("dim_feedforward", None, "width of the feed-forward hidden layer; empty "
                  "means 4·d_model (torch's fixed default is 2048)", min=1, nullable=True),
        float_param("dropout", 0.1, "dropout on attention weights, after each sublayer and "
                    "inside the feed-forward, while training", min=0, max=1),
        choice_param("activation", tuple(ACTIVATIONS), "relu", "of the feed-forward layer"),
        bool_param("norm_first", True, "pre-LN (the notes' layer: LayerNorm before each "
                   "sublayer, trains stably) or post-LN (the original Transformer; torch's "
                   "default)"),
        float_param("layer_norm_eps", 1e-5, "added to the variance in LayerNorm", min=0),
        bool_param("bias", True, "biases in the linear layers and LayerNorms"),
        bool_param("causal", causal, "self-attention sees only positions 0..t"),
    ]


attention_op = family("attention", "op", wrap=_attention, inputs=QKV, outputs=ATTENTION_OUT,
                      shared_params=[TEMPERATURE, CAUSAL])



def _torch_mha(m: nn.MultiheadAttention) -> dict | None:
    """attention.MultiHeadSelfAttention's params for a batch-first nn.MultiheadAttention
    whose keys and values have the queries' width, with no extra bias or zero key: the same
    parameters under the same names, so its weights load as they are."""
    if type(m) is not nn.MultiheadAttention or not m.batch_first or \
            not m._qkv_same_embed_dim or m.bias_k is not None or m.add_zero_attn:
        return None
    bias = m.in_proj_bias is not None
    if bias != (m.out_proj.bias is not None):
        return None
    return {"num_heads": m.num_heads, "bias": bias, "dropout": float(m.dropout),
            "causal": False}


def _self_attention_call(n: int, kwargs: dict) -> bool:
    """mha(x, x, x): attention of a sequence to itself, no mask (the weights it may also
    return are not the block's per-head ones, so only its first result maps)."""
    unmasked = {"key_padding_mask": None, "attn_mask": None, "is_causal": False}
    return n == 3 and all(k in ("need_weights", "average_attn_weights") or
                          k in unmasked and v == unmasked[k] for k, v in kwargs.items())


# what the blocks compute in PyTorch: `nodegraph import` and the Python export read these


BLOCKS = [
    attention_op("DotProduct",
        "Dot-product attention softmax(q·k / temperature) v, with no weights.\n\n"
        "The plainest attention: each query takes a weighted average of the "
        "values, weighted by how well it matches each key. Wire the same tensor into all "
        "three ports for plain self-attention.", "dot",
        keywords=("attention", "softmax", "alignment", "luong"), shape=_attention_shape("dot")),
    attention_op("ScaledDotProduct",
        "Scaled dot-product attention softmax(q·k / (√d · temperature)) v.\n\n"
        "Dividing by √d keeps the scores' spread independent of the width d, so the "
        "softmax does not saturate; the core of every Transformer.", "scaled",
        keywords=("attention", "transformer", "sdpa", "qkv"), shape=_attention_shape("scaled"),
        search=Search(words=(("attn", 1), ("attention", 1)))),
    attention_op("Cosine",
        "Cosine attention softmax(cos(q, k) / temperature) v.\n\n"
        "Scores are cosine similarities in [−1, 1], independent of the vectors' lengths; a "
        "temperature below 1 (e.g. 0.1) is needed for sharp weights.", "cosine",
        keywords=("attention", "cosine similarity", "normalized")),
    op("attention.MultiHeadSelfAttention",
       "Multi-head self-attention: every position attends to every other.\n\n"
       "Q, K and V are learned projections of the input, split into heads that attend "
       "separately; the heads' outputs are concatenated and projected back. "
       "embed_dim is inferred; `causal` hides the future.",
       _self_attention, inputs=[Port("input", doc="a sequence (N, L, embed_dim)"), PADDING],
       outputs=[Port("output", doc="(N, L, embed_dim)"), HEAD_WEIGHTS],
       params=[*MHA_PARAMS, CAUSAL, DTYPE_PARAM], shape=_self_attention_shape,
       keywords=("attention", "transformer", "mhsa", "heads", "self-attention"),
       torch=TorchEquivalent(
           (nn.MultiheadAttention,), _torch_mha, module_call=_self_attention_call),
       search=Search(words=("mha", "attn", "attention", "selfattention"))),
    op("attention.MultiHeadCrossAttention",
       "Multi-head cross-attention: queries from one sequence, keys and values from "
       "another.\n\nThe decoder's look at the encoder: `query` comes from "
       "the decoder, `memory` (the encoder's output, any width) gives keys and values.",
       _cross_attention,
       inputs=[Port("query", doc="the attending sequence (N, L, embed_dim)"),
               Port("memory", doc="the attended sequence (N, S, kdim)"), PADDING],
       outputs=[Port("output", doc="(N, L, embed_dim)"), HEAD_WEIGHTS],
       params=[*MHA_PARAMS, DTYPE_PARAM],
       keywords=("attention", "encoder-decoder", "translation", "cross"),
       search=Search(words=(("mha", 1), ("attn", 2)))),
    op("attention.TransformerEncoderBlock",
       "One Transformer encoder layer: self-attention and a feed-forward network, each "
       "with a residual connection and LayerNorm.\n\n"
       "Equals torch's nn.TransformerEncoderLayer (batch first) with the same weights; "
       "pre-LN (norm_first) or post-LN. d_model is inferred from the "
       "input. Also outputs the attention weights per head.",
       _encoder, inputs=[Port("input", doc="a sequence (N, L, d_model)"), PADDING],
       shape=_encoder_shape,
       outputs=[Port("output", doc="(N, L, d_model)"), HEAD_WEIGHTS],
       params=[*layer_params(causal=False), DTYPE_PARAM],
       keywords=("transformer", "encoder", "bert", "vit", "layer"),
       search=Search(words=("transformer",))),
    op("attention.TransformerDecoderBlock",
       "One Transformer decoder layer: masked self-attention, cross-attention to the "
       "encoder's memory, feed-forward.\n\n"
       "Equals torch's nn.TransformerDecoderLayer (batch first) with the same weights; "
       "causal by default, so position t sees only 0..t of its own sequence but all of "
       "the memory.",
       _decoder,
       inputs=[Port("input", doc="the target sequence (N, L, d_model)"),
               Port("memory", doc="the encoder's output (N, S, d_model)"), PADDING,
               Port("memory_key_padding_mask", doc="(N, S): true marks padding in the "
                    "memory", optional=True)],
       outputs=[Port("output", doc="(N, L, d_model)"),
                Port("self_weights", doc="self-attention weights (N, heads, L, L)"),
                Port("cross_weights", doc="cross-attention weights (N, heads, L, S)")],
       params=[*layer_params(causal=True), DTYPE_PARAM],
       keywords=("transformer", "decoder", "gpt", "translation", "layer")),
    op("attention.SinusoidalPositionalEncoding",
       "Adds the fixed sinusoidal position code: sin / cos of t / base^(2i/D).\n\n"
       "Attention ignores order; adding p[t, 2i] = sin(t / 10000^(2i/D)), p[t, 2i+1] = "
       "cos(...) lets it tell positions apart, and shifting t rotates each (sin, cos) "
       "pair, so relative offsets are easy to read.",
       _sinusoidal, inputs=["input"], outputs=["output"], shape=_sinusoidal_shape,
       params=[float_param("base", 10000.0, "wavelength scale; 10000 as in the paper",
                           min=1.0)],
       keywords=("position", "sinusoid", "transformer", "order")),
    op("attention.LearnedPositionalEncoding",
       "Adds a learned vector per position (a table of max_len rows).\n\n"
       "What BERT, GPT and ViT use; it cannot handle sequences longer than max_len.",
       _learned_positions, inputs=["input"], outputs=["output"],
       shape=_learned_positions_shape,
       params=[int_param("max_len", 512, "the most positions a sequence may have", min=1),
               DTYPE_PARAM],
       keywords=("position", "embedding", "vit", "bert")),
    op("attention.PatchEmbedding",
       "Cuts images into patches and embeds each: (N, C, H, W) -> (N, patches, "
       "embed_dim).\n\nThe ViT's input: every patch_size x patch_size patch "
       "is flattened and mapped linearly, done as a convolution with stride = kernel = "
       "patch_size. Patches are ordered row by row.",
       _patch_embedding, inputs=[Port("input", doc="images (N, C, H, W)")],
       shape=_patch_embedding_shape,
       outputs=[Port("output", doc="patch vectors (N, H·W / patch_size², embed_dim)")],
       params=[int_param("patch_size", 4, "side of a square patch", min=1),
               int_param("embed_dim", 64, "length of each patch vector", min=1),
               bool_param("bias", True, "learn a bias"), DTYPE_PARAM],
       keywords=("vit", "vision transformer", "patches", "tokens", "image")),
    op("attention.ClsToken",
       "Prepends a learned [CLS] token: (N, L, D) -> (N, L + 1, D).\n\n"
       "After the encoder, the token's vector sums up the sequence for a classifier "
       "head (take it with TakeToken).",
       _cls_token, inputs=["input"], outputs=["output"], shape=_cls_token_shape,
       keywords=("cls", "class token", "vit", "bert", "classification"),
       params=[DTYPE_PARAM]),
    op("attention.TakeToken",
       "Takes one position of every sequence: (N, L, D) -> (N, D).\n\n"
       "index 0 is the [CLS] token's output; -1 the last position (a causal model's "
       "summary of everything).",
       _take_token, inputs=["input"], outputs=["output"], shape=_take_token_shape,
       params=[int_param("index", 0, "the position to take; negative counts from the end")],
       keywords=("cls", "select", "pool", "index")),
    op("attention.LMHead",
       "Language-model head: a score for every vocabulary token at every position.\n\n"
       "A Linear from d_model to vocab_size on (N, L, d_model), giving logits (N, L, "
       "vocab_size) for next-token cross-entropy and sampling. Its weight is laid out "
       "(vocab_size, d_model) like layers.Embedding's, so a tie can share one matrix "
       "between them (weight tying).",
       _lm_head, inputs=[Port("input", doc="the final states (N, L, d_model)")],
       shape=_lm_head_shape,
       outputs=[Port("output", doc="logits (N, L, vocab_size)")],
       params=[int_param("vocab_size", doc="number of tokens (the data block's vocabulary "
                         "size)", min=2),
               bool_param("bias", True, "learn a bias per token"), DTYPE_PARAM],
       keywords=("language model", "logits", "vocabulary", "output layer", "gpt")),
]

