"""Node ids the import makes are valid attributes of the exported Python class: MPNet's
`input_ids & mask` in its own forward was named `and` (fx's `and_`, its digits and `_`
taken off), a Python keyword, and the Python export refused the graph."""

from __future__ import annotations

import json

import torch
from torch import nn

from nodegraph.interop.importing.roundtrip import round_trip


class MaskedAnd(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x, mask):
        keep = (x > 0) & mask
        return self.fc(x) * keep


def test_an_op_named_like_a_keyword_gets_a_suffix(tmp_path):
    torch.manual_seed(0)
    result = round_trip(MaskedAnd(), (torch.randn(2, 4), torch.rand(2, 4) > 0.5), tmp_path,
                        ways=("validate", "python"))
    assert not result.errors, result.errors
    assert result.python == 0.0
    nodes = json.loads((tmp_path / "model.json").read_text())["nodes"]
    assert "and_op" in nodes and "and" not in nodes
