"""The torch.export front end on modules written by hand, and sizes that follow the input.

Two classes of issue #34 among hand-written models: a nanoGPT-style forward
(`t = idx.size(1); pos = torch.arange(0, t)`, with `assert t <= block_size`, so doubling
the length is refused) and an attention whose causal mask is
`torch.tril(torch.ones(T, T))`, which torch.fx cannot trace. Both must import to a graph
that validates and equals the module at the example length and at a shorter one.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from nodegraph.interop.importing.roundtrip import round_trip

COMPILED, ONNX = 1e-5, 1e-4


class NanoPositions(nn.Module):
    def __init__(self, vocab: int = 32, block: int = 16, d: int = 16):
        super().__init__()
        self.block = block
        self.wte = nn.Embedding(vocab, d)
        self.wpe = nn.Embedding(block, d)
        self.head = nn.Linear(d, vocab)

    def forward(self, idx):
        b, t = idx.size()
        assert t <= self.block, "longer than the block"
        pos = torch.arange(0, t, dtype=torch.long, device=idx.device)
        return self.head(self.wte(idx) + self.wpe(pos))


class TrilMask(NanoPositions):
    def forward(self, idx):
        b, t = idx.size()
        assert t <= self.block, "longer than the block"
        pos = torch.arange(0, t, dtype=torch.long, device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        T = x.size(1)
        mask = torch.tril(torch.ones(T, T, device=x.device))
        att = (x @ x.transpose(1, 2)).masked_fill(mask == 0, float("-inf"))
        return self.head(F.softmax(att, dim=-1) @ x)


def _ids(batch: int, length: int) -> torch.Tensor:
    return torch.randint(0, 32, (batch, length), generator=torch.Generator().manual_seed(length))


def _check(result) -> None:
    assert not result.errors, result.errors
    assert result.shape_ok and result.trained
    assert result.compiled <= COMPILED and result.python <= COMPILED and result.onnx <= ONNX
    assert result.resized <= COMPILED  # a shorter sequence: the arange follows it


def test_arange_of_a_length_the_module_caps_follows_the_input(tmp_path):
    """Doubling the length is refused by the module's assert; the probe shortens it
    instead, so `arange(0, t)` stays an expression of the input (it was a constant whose
    block had no input: the graph did not validate)."""
    torch.manual_seed(0)
    _check(round_trip(NanoPositions, (_ids(2, 10),), tmp_path, others=[(_ids(3, 7),)],
                      tracer="fx"))


def test_a_tril_mask_fx_cannot_trace_is_exported(tmp_path):
    torch.manual_seed(0)
    result = round_trip(TrilMask, (_ids(2, 10),), tmp_path, others=[(_ids(3, 7),)])
    _check(result)
    assert result.opaque <= 8  # torch calls, not one opaque module

