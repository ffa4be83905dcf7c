"""nodegraph.callbacks: EarlyStopping, ModelCheckpoint, CSVLogger and LearningRateMonitor
from Python, each checked against the run's own history."""

from __future__ import annotations

import csv

import pytest
import torch
from safetensors.torch import load_file

from nodegraph.callbacks import CSVLogger, EarlyStopping, LearningRateMonitor, ModelCheckpoint
from nodegraph.model.errors import NodegraphError
from nodegraph.model.graph import Graph
from nodegraph.runtime.train import train


def graph(epochs=8, lr=0.05, **training) -> Graph:
    g = Graph("cb")
    g.add("data.NoisyLine", id="data", n=32, batch_size=8, val_fraction=0.25, noise=40.0)
    g.add("layers.Linear", id="lin", out_features=1)
    g.add("losses.MSE", id="loss")
    g.add("optimizers.SGD", id="opt", lr=lr)
    g.add("schedules.Step", id="decay", step_size=2, gamma=0.5)
    g.connect(("data", "x"), ("lin", "input"))
    g.connect(("lin", "output"), ("loss", "input"))
    g.connect(("data", "y"), ("loss", "target"))
    g.connect(("loss", "loss"), ("opt", "loss"))
    g.connect(("decay", "schedule"), ("opt", "schedule"))
    g.update_training(epochs=epochs, device="cpu", seed=2, **training)
    return g


def test_early_stopping_stops_where_the_history_says():
    # mode max on a falling loss: epoch 1 is the best, the run stops `patience` later
    stop = EarlyStopping("train.loss", patience=2, mode="max")
    result = train(graph(), callbacks=[stop])
    assert result.stopped_early and len(result.history) == 3
    assert stop.best_epoch == 1


def test_early_stopping_restores_the_best_weights():
    stop = EarlyStopping("val.loss", patience=100, mode="max", restore_best_weights=True)
    result = train(graph(epochs=4), callbacks=[stop])
    losses = [h["val"]["loss"] for h in result.history]
    assert stop.best_epoch == 1 + losses.index(max(losses))
    # the weights put back are the best epoch's: retrain that many epochs and compare
    again = train(graph(epochs=stop.best_epoch))
    for k, v in again.module.block_state().items():
        assert torch.equal(result.module.block_state()[k], v)


def test_model_checkpoint_writes_the_best_and_a_resumable_checkpoint(tmp_path):
    saver = ModelCheckpoint(tmp_path / "ck", monitor="val.loss", every=2)
    result = train(graph(epochs=4), callbacks=[saver])
    losses = [h["val"]["loss"] for h in result.history]
    assert saver.best_epoch == 1 + losses.index(min(losses))
    assert saver.best_score == min(losses)
    best = load_file(str(saver.best_path))
    assert set(best) >= {"lin.weight", "lin.bias"}
    # the full checkpoint resumes: 4 epochs resumed to 6 equal 6 straight
    resumed = train(graph(epochs=6), checkpoint_dir=tmp_path / "ck", resume=True)
    straight = train(graph(epochs=6))
    assert [h["train"]["loss"] for h in resumed.history] == \
        [h["train"]["loss"] for h in straight.history]


def test_csv_logger_rows_equal_the_history(tmp_path):
    path = tmp_path / "log" / "run.csv"
    result = train(graph(epochs=3), callbacks=[CSVLogger(path)])
    rows = list(csv.DictReader(path.open()))
    assert len(rows) == 3
    for row, entry in zip(rows, result.history, strict=True):
        assert int(row["epoch"]) == entry["epoch"]
        assert float(row["train.loss"]) == entry["train"]["loss"]
        assert float(row["val.loss"]) == entry["val"]["loss"]
        assert float(row["lr.opt"]) == entry["lr"]["opt"]


def test_learning_rate_monitor_per_epoch_and_per_step():
    per_epoch, per_step = LearningRateMonitor(), LearningRateMonitor("step")
    result = train(graph(epochs=4), callbacks=[per_epoch, per_step])
    assert per_epoch.lrs["opt"] == [h["lr"]["opt"] for h in result.history]
    assert per_epoch.lrs["opt"] == pytest.approx([0.05, 0.025, 0.025, 0.0125])
    assert per_step.lrs["opt"] == pytest.approx([0.05] * 3 + [0.05] * 3 + [0.025] * 6)


def test_bad_arguments_are_said():
    with pytest.raises(NodegraphError, match="split.name"):
        EarlyStopping("loss")
    with pytest.raises(NodegraphError, match="mode must be"):
        ModelCheckpoint("x", mode="lowest")
    with pytest.raises(NodegraphError, match="logging_interval"):
        LearningRateMonitor("batch")
