"""Experiment tracking: `run --log-dir` writes TensorBoard event files that tensorboard's own
reader finds the scalars, learning rates, hyperparameters and probe histograms in."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("tensorboard")
from tensorboard.backend.event_processing.event_accumulator import (  # noqa: E402
    EventAccumulator,
)
from tensorboard.plugins.hparams import plugin_data_pb2  # noqa: E402

from nodegraph.model.errors import NodegraphError  # noqa: E402
from nodegraph.model.fileformat import load  # noqa: E402
from nodegraph.runtime.train import train  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
XOR = ROOT / "examples" / "xor.json"


def read(log_dir: Path) -> EventAccumulator:
    files = list(log_dir.glob("events.out.tfevents.*"))
    assert len(files) == 1, files  # one run, one file: hparams are not a sub-run
    acc = EventAccumulator(str(log_dir), size_guidance={"scalars": 0, "histograms": 0,
                                                        "tensors": 0})
    acc.Reload()
    return acc


def test_run_log_dir_writes_scalars_lr_and_hparams(tmp_path):
    log_dir, metrics = tmp_path / "tb", tmp_path / "metrics.json"
    subprocess.run([sys.executable, "-m", "nodegraph", "run", str(XOR), "--epochs", "4",
                    "--quiet", "--log-dir", str(log_dir), "--metrics-out", str(metrics)],
                   check=True, cwd=tmp_path, env={**_env(), "OMP_NUM_THREADS": "1"})
    history = json.loads(metrics.read_text())["history"]
    acc = read(log_dir)
    loss = acc.Scalars("train/loss")
    assert [e.step for e in loss] == [1, 2, 3, 4]
    # the numbers are the history's, epoch by epoch
    assert [e.value for e in loss] == pytest.approx([h["train"]["loss"] for h in history])
    assert [e.value for e in acc.Scalars("train/accuracy")] == pytest.approx(
        [h["train"]["accuracy"] for h in history])
    assert [e.value for e in acc.Scalars("lr/opt")] == pytest.approx(
        [h["lr"]["opt"] for h in history])
    assert acc.Scalars("step/loss"), "per-step losses"
    # the HParams tab: the graph's number params and the training settings, metrics naming
    # the scalars above
    content = acc.PluginTagToContent("hparams")
    data = plugin_data_pb2.HParamsPluginData.FromString(content["_hparams_/experiment"])
    names = {h.name for h in data.experiment.hparam_infos}
    assert {"opt.lr", "hidden.out_features", "training.epochs", "training.seed"} <= names
    assert "training.log_dir" in names
    assert {m.name.tag for m in data.experiment.metric_infos} >= {"train/loss"}
    start = plugin_data_pb2.HParamsPluginData.FromString(
        content["_hparams_/session_start_info"]).session_start_info
    graph = json.loads(XOR.read_text())
    lr = graph["nodes"]["opt"]["params"]["lr"]
    assert start.hparams["opt.lr"].number_value == pytest.approx(lr)
    assert start.hparams["training.epochs"].number_value == 4


def test_probe_histograms_when_probes_run(tmp_path):
    graph = load(XOR)
    graph.set_training("probe_every", 1)
    graph.set_training("probe_rate", 0)  # no frame-rate limit: every step may be probed
    graph.set_training("probe_budget", 1000)
    graph.set_training("log_dir", str(tmp_path / "tb"))  # the setting, not the argument
    train(graph, epochs=2)
    acc = read(tmp_path / "tb")
    tags = acc.Tags()["histograms"]
    assert "activations/hidden.output" in tags and "gradients/hidden.output" in tags
    hist = acc.Histograms("activations/act.output")
    assert hist, "a histogram per probed step"
    h = hist[0].histogram_value
    # act is a tanh: its values lie in [-1, 1], and the buckets count every value
    assert -1 <= h.min <= h.max <= 1
    assert h.num > 0 and sum(h.bucket) == pytest.approx(h.num)
    assert acc.Scalars("grad_norm/hidden.weight")


def test_unwritable_log_dir_fails_before_training(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(NodegraphError, match="log folder"):
        train(load(XOR), epochs=1, log_dir=blocker / "tb")


def _env() -> dict[str, str]:
    import os

    return {**os.environ, "PYTHONPATH": str(ROOT)}


def test_mlflow_records_params_metrics_and_graph(tmp_path, monkeypatch):
    pytest.importorskip("mlflow")
    from mlflow.tracking import MlflowClient

    # MLflow 3 keeps the file store only on request; a local store needs no server
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    uri = (tmp_path / "store").as_uri()
    graph = load(XOR)
    graph.set_training("seed", 3)
    result = train(graph, epochs=3, mlflow=uri)
    client = MlflowClient(tracking_uri=uri)
    experiment = client.get_experiment_by_name("xor-mlp")
    (run,) = client.search_runs([experiment.experiment_id])
    assert run.info.status == "FINISHED"
    assert run.data.params["opt.lr"] == "0.05"
    assert run.data.params["training.seed"] == "3"
    losses = client.get_metric_history(run.info.run_id, "train.loss")
    assert [m.step for m in sorted(losses, key=lambda m: m.step)] == [1, 2, 3]
    assert [m.value for m in sorted(losses, key=lambda m: m.step)] == pytest.approx(
        [h["train"]["loss"] for h in result.history])
    assert len(client.get_metric_history(run.info.run_id, "lr.opt")) == 3
    artifacts = {a.path for a in client.list_artifacts(run.info.run_id)}
    assert artifacts == {"xor-mlp.json", "weights.safetensors"}
    saved = client.download_artifacts(run.info.run_id, "xor-mlp.json", str(tmp_path))
    assert load(saved).training["seed"] == 3  # the graph as it ran, settings included
