"""Modules written the way people write them, for the import tests and the benchmark.

A GPT-2-style decoder (token ids, learned positions from `arange` on the input's length
with `device=idx.device`, a causal mask cut from a buffer by the length, a tied lm_head),
a BERT-style encoder with an attention-mask input, a seq2seq LSTM with teacher forcing
(the encoder's state (h, c) handed to the decoder), and small modules that each compute
with a size taken from their input. Every size is read from the input, so each must give
the module's numbers at input sizes other than the one it was imported at.
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F


class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd: int = 32, n_head: int = 4, block_size: int = 64):
        super().__init__()
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)
        self.n_head, self.n_embd = n_head, n_embd
        self.register_buffer("bias", torch.tril(torch.ones(block_size, block_size))
                             .view(1, 1, block_size, block_size))

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        y = att @ v
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)


class Block(nn.Module):
    def __init__(self, n_embd: int = 32, n_head: int = 4, block_size: int = 64):
        super().__init__()
        self.ln_1 = nn.LayerNorm(n_embd)
        self.attn = CausalSelfAttention(n_embd, n_head, block_size)
        self.ln_2 = nn.LayerNorm(n_embd)
        self.mlp = nn.Sequential(nn.Linear(n_embd, 4 * n_embd), nn.GELU(),
                                 nn.Linear(4 * n_embd, n_embd))

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    """nanoGPT's shape: wte + wpe(arange(T)), blocks, ln_f, lm_head tied to wte."""

    def __init__(self, vocab_size: int = 50, block_size: int = 64, n_layer: int = 2,
                 n_head: int = 4, n_embd: int = 32):
        super().__init__()
        self.wte = nn.Embedding(vocab_size, n_embd)
        self.wpe = nn.Embedding(block_size, n_embd)
        self.h = nn.ModuleList([Block(n_embd, n_head, block_size) for _ in range(n_layer)])
        self.ln_f = nn.LayerNorm(n_embd)
        self.lm_head = nn.Linear(n_embd, vocab_size, bias=False)
        self.wte.weight = self.lm_head.weight

    def forward(self, idx):
        pos = torch.arange(0, idx.size(1), dtype=torch.long, device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.h:
            x = block(x)
        return self.lm_head(self.ln_f(x))


class BertLayer(nn.Module):
    def __init__(self, hidden: int = 32, heads: int = 4):
        super().__init__()
        self.heads, self.head_dim = heads, hidden // heads
        self.query, self.key = nn.Linear(hidden, hidden), nn.Linear(hidden, hidden)
        self.value, self.dense = nn.Linear(hidden, hidden), nn.Linear(hidden, hidden)
        self.norm1, self.norm2 = nn.LayerNorm(hidden), nn.LayerNorm(hidden)
        self.ffn = nn.Sequential(nn.Linear(hidden, 2 * hidden), nn.GELU(),
                                 nn.Linear(2 * hidden, hidden))

    def split(self, x):
        b, t, _ = x.shape
        return x.view(b, t, self.heads, self.head_dim).permute(0, 2, 1, 3)

    def forward(self, x, mask):
        q, k, v = self.split(self.query(x)), self.split(self.key(x)), self.split(self.value(x))
        scores = q @ k.transpose(-1, -2) / math.sqrt(self.head_dim)
        scores = scores + mask
        context = (scores.softmax(-1) @ v).permute(0, 2, 1, 3).flatten(2)
        x = self.norm1(x + self.dense(context))
        return self.norm2(x + self.ffn(x))


class Bert(nn.Module):
    """BERT's shape: token + position + segment embeddings, an extended attention mask
    ((1 - mask) * -10000 on the keys) and a pooled [CLS] head."""

    def __init__(self, vocab_size: int = 50, max_len: int = 64, hidden: int = 32,
                 layers: int = 2, heads: int = 4, classes: int = 3):
        super().__init__()
        self.tokens = nn.Embedding(vocab_size, hidden)
        self.positions = nn.Embedding(max_len, hidden)
        self.segments = nn.Embedding(2, hidden)
        self.norm = nn.LayerNorm(hidden)
        self.layers = nn.ModuleList([BertLayer(hidden, heads) for _ in range(layers)])
        self.pooler = nn.Linear(hidden, hidden)
        self.classifier = nn.Linear(hidden, classes)

    def forward(self, input_ids, attention_mask):
        seq_length = input_ids.size(1)
        position_ids = torch.arange(seq_length, device=input_ids.device).unsqueeze(0)
        segment_ids = torch.zeros_like(input_ids)
        x = self.tokens(input_ids) + self.positions(position_ids) + self.segments(segment_ids)
        x = self.norm(x)
        extended = attention_mask[:, None, None, :].to(x.dtype)
        extended = (1.0 - extended) * -10000.0
        for layer in self.layers:
            x = layer(x, extended)
        pooled = torch.tanh(self.pooler(x[:, 0]))
        return self.classifier(pooled)


class Seq2Seq(nn.Module):
    """An LSTM encoder whose final (h, c) starts an LSTM decoder fed the target sequence
    shifted by one (teacher forcing); logits for every target step."""

    def __init__(self, vocab_size: int = 40, hidden: int = 32):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, hidden)
        self.encoder = nn.LSTM(hidden, hidden, batch_first=True)
        self.decoder = nn.LSTM(hidden, hidden, batch_first=True)
        self.out = nn.Linear(hidden, vocab_size)

    def forward(self, source, target):
        _, (h, c) = self.encoder(self.embed(source))
        start = torch.zeros_like(target[:, :1])
        shifted = torch.cat([start, target[:, :-1]], dim=1)
        decoded, _ = self.decoder(self.embed(shifted), (h, c))
        return self.out(decoded)


class HalfCrop(nn.Module):
    """Keeps the first half of the rows: `x.shape[2] // 2` must stay an expression."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)

    def forward(self, x):
        x = self.conv(x)
        return x[:, :, : x.shape[2] // 2] * 2.0


class SequenceReshape(nn.Module):
    """Folds the sequence into the batch and back: `view(B * T, -1)` and `view(B, T, -1)`."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 6)

    def forward(self, x):
        b, t, f = x.shape
        y = self.fc(x.reshape(b * t, f))
        return y.view(b, t, -1).mean(1) + t


class Pooled(nn.Module):
    """Global average by hand: x.sum over H*W divided by h * w read from the input."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 5, 3)

    def forward(self, x):
        y = self.conv(x)
        h, w = y.shape[-2:]
        return y.sum(dim=(2, 3)) / (h * w)
