"""A weight-normed layer (`nn.utils.parametrizations.weight_norm`, wav2vec2's and HuBERT's
position convolution) through the torch.export front end: export records the private
`torch._weight_norm`, which no graph file may name; it is written as what it computes,
v * (g / |v|), and the imported graph must equal the module and train both g and v."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.nn.utils.parametrizations import weight_norm

from nodegraph.interop.importing.roundtrip import round_trip


class NormedConv(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.conv = weight_norm(nn.Conv1d(4, 6, 3, padding=1), name="weight", dim=dim)

    def forward(self, x):
        return torch.relu(self.conv(x))


@pytest.mark.parametrize("dim", [0, 2])
def test_a_weight_normed_conv_imports_through_export(tmp_path, dim):
    torch.manual_seed(0)
    result = round_trip(NormedConv(dim), (torch.randn(2, 4, 9),), tmp_path,
                        others=[(torch.randn(3, 4, 13),)], tracer="export",
                        ways=("validate", "python", "train"))
    assert not result.errors, result.errors
    assert result.compiled <= 1e-6 and result.python <= 1e-6 and result.resized <= 1e-6
    assert result.trained
