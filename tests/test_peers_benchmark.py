"""benchmarks/peers.py compares like with like: nodegraph and the hand-written loop get the
same samples in the same order and the same initial weights, so they reach the same model."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

PEERS = Path(__file__).resolve().parents[1] / "benchmarks" / "peers.py"


@pytest.fixture
def peers(monkeypatch):
    spec = importlib.util.spec_from_file_location("peers_benchmark", PEERS)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setattr(module, "EPOCHS", {"mlp": 3, "cnn": 1})
    return module


def test_nodegraph_and_the_hand_loop_train_the_same_mlp(peers):
    data = peers.splits("mlp")
    assert len(data["train"][0]) + len(data["test"][0]) == 1797
    assert data["train"][0].shape[1] == 64 and len(data["test"][0]) > 300
    ours, theirs = peers.run_nodegraph("mlp", data), peers.run_hand("mlp", data)
    assert ours == pytest.approx(theirs, abs=1e-9)  # the same weights: the same answers
    assert ours > 0.8


def test_the_order_sampler_draws_what_the_hand_loop_draws(peers):
    import torch

    sampler = peers.Orders(100)
    generator = torch.Generator().manual_seed(peers.SEED)
    for _ in range(2):  # a fresh permutation every epoch, from one generator
        order = torch.randperm(100, generator=generator)
        batches = list(sampler)
        assert len(batches) == len(sampler) == 4
        assert torch.equal(torch.cat(batches), order)
