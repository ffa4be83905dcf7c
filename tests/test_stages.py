"""Training stages: phases with their own optimizers, frozen nodes and epochs."""

from __future__ import annotations

import pytest
import torch
from test_train import two_heads

import nodegraph


def staged():
    g = two_heads()
    g.set_training("stages", [
        {"name": "first", "epochs": 2, "optimizers": ["opt1"], "frozen": ["fc2"]},
        {"name": "second", "epochs": 3, "optimizers": ["opt2"], "frozen": ["fc1"]},
    ])
    return g


def test_each_stage_trains_its_optimizers_and_keeps_frozen_nodes_fixed():
    g = staged()
    start = nodegraph.compile(g).module.block_state()
    g1 = staged()
    g1.set_training("stages", g1.training["stages"][:1])
    after_first = nodegraph.train(g1).module.block_state()
    assert not torch.equal(start["fc1.weight"], after_first["fc1.weight"])
    assert torch.equal(start["fc2.weight"], after_first["fc2.weight"])
    result = nodegraph.train(g)
    end = result.module.block_state()
    assert torch.equal(after_first["fc1.weight"], end["fc1.weight"])  # frozen in stage 2
    assert not torch.equal(after_first["fc2.weight"], end["fc2.weight"])
    assert [h["stage"] for h in result.history] == ["first"] * 2 + ["second"] * 3
    assert [h["epoch"] for h in result.history] == [1, 2, 3, 4, 5]
    assert all(p.requires_grad for p in result.module.parameters())  # unfrozen afterwards


def test_stages_resume_where_they_stopped(tmp_path):
    full = nodegraph.train(staged(), checkpoint_dir=tmp_path / "a")
    g = staged()
    g.set_training("stages", [g.training["stages"][0], {**g.training["stages"][1], "epochs": 1}])
    nodegraph.train(g, checkpoint_dir=tmp_path / "b")  # stops after epoch 3
    resumed = nodegraph.train(staged(), checkpoint_dir=tmp_path / "b", resume=True)
    strip = [{k: v for k, v in h.items() if k != "seconds"} for h in full.history]
    assert [{k: v for k, v in h.items() if k != "seconds"} for h in resumed.history] == strip


@pytest.mark.parametrize("stage, text", [
    ({"epochs": 1, "optimizers": ["fc1"]}, "'fc1' is not an optimizer"),
    ({"epochs": 1, "frozen": ["ghost"]}, "cannot freeze 'ghost'"),
    ({"epochs": -1}, "'epochs' must be a whole number"),
    ({"epochs": 1, "lr": 2}, "unknown keys ['lr']"),
])
def test_bad_stages_are_reported(stage, text):
    g = two_heads()
    g.set_training("stages", [stage])
    problems = nodegraph.validate(g).problems
    assert any(p.port == "training.stages" and text in p.message for p in problems), problems


def impatient(second_stage_epochs: int):
    g = staged()
    g.set_param("opt1", "lr", 0.9)  # the first stage stalls after a few epochs
    first, second = g.training["stages"]
    g.set_training("stages", [{**first, "epochs": 30}, {**second, "epochs": second_stage_epochs}])
    g.set_training("patience", 2)
    return g


def test_early_stopping_ends_a_stage_and_the_next_starts_with_a_fresh_watch():
    result = nodegraph.train(impatient(3))
    stages = [h["stage"] for h in result.history]
    first = stages.count("first")
    assert first < 30 and stages[first:] == ["second"] * 3 and not result.stopped_early
    assert result.best_epoch > first  # the best of the last stage, not of the whole run


def test_early_stopping_before_stages_without_epochs_ends_the_run():
    result = nodegraph.train(impatient(0))
    assert result.stopped_early and len(result.history) < 30
    assert {h["stage"] for h in result.history} == {"first"}
