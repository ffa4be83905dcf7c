"""nand_tlu.json and xor_tlu.json: threshold units with hand-set weights reproduce the truth
tables of seed 002 (Tables 2 and 3), and training cannot move them (the step's gradient is
zero, L601-603)."""

from __future__ import annotations

import pytest
import torch
from classic_support import example

import nodegraph
from nodegraph.runtime.probes import trace_batch


def traced(name: str) -> tuple[torch.Tensor, dict[str, dict[str, torch.Tensor]]]:
    """The truth table's inputs, and each node's outputs for them."""
    compiled = nodegraph.compile(example(name))
    table = compiled.datasets["data"].tensors("train")
    records = trace_batch(compiled, {("data", k): v for k, v in table.items()})
    return table["x"], {r.node: r.outputs for r in records}


def test_nand_tlu_reproduces_table_2():
    x, out = traced("nand_tlu")
    assert sorted(map(tuple, x.tolist())) == [(0, 0), (0, 1), (1, 0), (1, 1)]
    nand = 1 - x[:, 0] * x[:, 1]
    assert torch.equal(out["tlu_step"]["output"][:, 0], nand)


def test_xor_tlu_needs_the_hidden_unit_and_the_skip_edges():
    x, out = traced("xor_tlu")
    assert torch.equal(out["hidden_step"]["output"][:, 0], x[:, 0] * x[:, 1])  # h = AND
    assert torch.equal(out["skip"]["output"][:, :2], x)  # the inputs skip past h
    assert torch.equal(out["out_step"]["output"][:, 0], (x[:, 0] != x[:, 1]).float())


@pytest.mark.parametrize("name, parameters", [("nand_tlu", 3), ("xor_tlu", 7)])
def test_tlus_evaluate_with_zero_epochs_and_training_moves_nothing(name, parameters):
    g = example(name)
    assert g.training["epochs"] == 0
    assert sum(nodegraph.validate(g).param_counts.values()) == parameters
    result = nodegraph.train(g)
    assert result.history == [] and result.final["train"] == {"loss": 0.0, "accuracy": 1.0}
    start = {k: v.clone() for k, v in result.module.block_state().items()}
    g.set_param("opt", "lr", 10.0)
    trained = nodegraph.train(g, epochs=3)
    assert all(torch.equal(v, start[k]) for k, v in trained.module.block_state().items())
    assert trained.final["train"]["accuracy"] == 1.0
