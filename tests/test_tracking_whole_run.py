"""Trackers keep the whole run (issue #27): read back with TensorBoard's and MLflow's own
readers — the model graph, weight histograms several times an epoch, every scalar on the
global step with epoch as a second view, the final test numbers; in MLflow the final
numbers, the effective graph (rerunning it gives the same numbers), the trained weights,
and nesting under an active run."""

from __future__ import annotations

import pytest
import torch
from safetensors.torch import load_file

import nodegraph
from nodegraph.model.fileformat import load

pytest.importorskip("tensorboard")
from tensorboard.backend.event_processing.event_accumulator import (  # noqa: E402
    EventAccumulator,
)


def moons(batch_size: int = 40):
    g = nodegraph.load("examples/logistic_binary.json")
    g.set_param("data", "batch_size", batch_size)  # 240 train samples: 6 steps an epoch
    return g


def read(log_dir) -> EventAccumulator:
    acc = EventAccumulator(str(log_dir), size_guidance={"scalars": 0, "histograms": 0,
                                                        "tensors": 0})
    acc.Reload()
    return acc


def test_tensorboard_keeps_the_graph_histograms_one_step_axis_and_the_test_numbers(tmp_path):
    result = nodegraph.train(moons(), epochs=3, log_dir=tmp_path / "tb")
    acc = read(tmp_path / "tb")
    graph = acc.Graph()
    names = {n.name: n for n in graph.node}
    assert set(names) == set(moons().nodes)
    assert names["linear"].op == "layers.Linear" and list(names["linear"].input) == ["data"]
    assert b"(N, 1)" in names["linear"].attr["shapes"].s
    # every scalar on the global step: 6 steps an epoch
    loss = acc.Scalars("train/loss")
    assert [e.step for e in loss] == [6, 12, 18]
    assert [e.value for e in acc.Scalars("epoch")] == [1, 2, 3]
    assert [e.step for e in acc.Scalars("epoch")] == [6, 12, 18]
    by_epoch = acc.Scalars("by_epoch/train/loss")
    assert [e.step for e in by_epoch] == [1, 2, 3]
    assert [e.value for e in by_epoch] == pytest.approx([h["train"]["loss"]
                                                         for h in result.history])
    assert [e.step for e in acc.Scalars("val/loss")] == [6, 12, 18]
    # weights and their gradients 4 times an epoch by default (6 steps: every 1st)
    hist = acc.Histograms("weights/linear.weight")
    assert len(hist) == 18 and acc.Histograms("weight_grads/linear.weight")
    # the final numbers of every split, the test split's included
    (test_acc,) = acc.Scalars("final/test/accuracy")
    assert test_acc.value == pytest.approx(result.final["test"]["accuracy"])
    assert test_acc.step == 18


def test_the_histogram_rate_is_a_setting(tmp_path):
    g = moons(batch_size=20)  # 12 steps an epoch
    g.set_training("histograms_per_epoch", 2)
    nodegraph.train(g, epochs=2, log_dir=tmp_path / "tb")
    assert [h.step for h in read(tmp_path / "tb").Histograms("weights/linear.weight")] == [
        6, 12, 18, 24]


@pytest.fixture
def store(tmp_path, monkeypatch):
    pytest.importorskip("mlflow")
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    return (tmp_path / "store").as_uri()


def test_mlflow_keeps_final_numbers_weights_and_a_graph_that_reruns_the_run(store, tmp_path):
    from mlflow.tracking import MlflowClient

    graph = moons()
    assert graph.training["epochs"] != 4  # the file says otherwise: --epochs decides
    result = nodegraph.train(graph, epochs=4, mlflow=store)
    client = MlflowClient(tracking_uri=store)
    (run,) = client.search_runs([client.get_experiment_by_name(graph.name).experiment_id])
    assert run.info.status == "FINISHED"
    metrics = run.data.metrics
    for split in ("train", "val", "test"):
        assert metrics[f"final.{split}.accuracy"] == pytest.approx(
            result.final[split]["accuracy"])
    artifacts = {a.path for a in client.list_artifacts(run.info.run_id)}
    assert artifacts == {f"{graph.name}.json", "weights.safetensors"}
    saved_graph = load(client.download_artifacts(run.info.run_id, f"{graph.name}.json",
                                                 str(tmp_path)))
    assert saved_graph.training["epochs"] == 4
    again = nodegraph.train(saved_graph)  # the logged graph reruns the run
    def numbers(history):  # each epoch's numbers, less its wall-clock seconds
        return [{k: v for k, v in h.items() if k != "seconds"} for h in history]

    assert numbers(again.history) == numbers(result.history)
    assert again.final["test"] == result.final["test"]
    weights = load_file(client.download_artifacts(run.info.run_id, "weights.safetensors",
                                                  str(tmp_path)))
    trained = result.compiled.module.blocks["linear"].weight.detach()
    assert torch.equal(weights["linear.weight"], trained)
    assert "normalization/data/x.centre" in weights


def test_mlflow_nests_under_an_active_run(store):
    import mlflow
    from mlflow.tracking import MlflowClient

    mlflow.set_tracking_uri(store)
    experiment = mlflow.set_experiment("mine")
    try:
        with mlflow.start_run() as parent:
            nodegraph.train(moons(), epochs=1, mlflow=True)  # True: the current tracking URI
    finally:
        mlflow.set_tracking_uri("")
    client = MlflowClient(tracking_uri=store)
    runs = client.search_runs([experiment.experiment_id])
    (child,) = [r for r in runs if r.info.run_id != parent.info.run_id]
    assert child.data.tags["mlflow.parentRunId"] == parent.info.run_id
    assert child.info.status == "FINISHED" and "final.test.accuracy" in child.data.metrics
