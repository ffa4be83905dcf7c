"""MLflow: a run recorded on a tracking server or store (`run --mlflow URI`).

The graph's name is the experiment; the run gets the same hyperparameters TensorBoard's HParams
tab shows (`node.param`, `training.key`), every numeric train/val stat and learning rate per
epoch (`train.loss`, `val.accuracy`, `lr.<node>`), and the graph as it ran (with `--set`
applied) as the artifact `<name>.json`, so a run can be opened or rerun from the store. The
run ends FINISHED, KILLED (stopped by request, Ctrl-C) or FAILED.

mlflow is optional (the `mlflow` extra) and imported only when a run asks for it.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

from nodegraph.model.errors import NodegraphError
from nodegraph.model.fileformat import dumps
from nodegraph.model.graph import Graph
from nodegraph.runtime.callbacks.base import Callback
from nodegraph.runtime.callbacks.tensorboard import hyperparameters, numbers

BATCH = 100  # MLflow's limit of params per log_batch call
MAX_VALUE = 6000  # MLflow's limit of a param value's length


def mlflow_client(uri: str):
    """An `MlflowClient` on `uri`, or an error that says what to install or change."""
    try:
        from mlflow.exceptions import MlflowException
        from mlflow.tracking import MlflowClient
    except ImportError as e:
        raise NodegraphError(f"--mlflow needs the mlflow package ({e}); install it with "
                             "pip install 'nodegraph[mlflow]'") from e
    try:
        client = MlflowClient(tracking_uri=uri)
        client.search_experiments(max_results=1)  # a bad URI fails now, before training
    except MlflowException as e:
        raise refused(uri, e) from None
    return client


def refused(uri: str, error) -> NodegraphError:
    """The store at `uri` refused; MLflow's message says why, this what a user can do."""
    return NodegraphError(f"--mlflow {uri}: {error.message} (give a tracking server's URI "
                          "such as http://HOST:5000, or set MLFLOW_ALLOW_FILE_STORE=true for "
                          "a file: store)")


class MLflow(Callback):
    """Records one run in the MLflow store at `uri`."""

    def __init__(self, uri: str, graph: Graph, opts: dict[str, Any]):
        self.uri, self.graph, self.opts = uri, graph, opts
        self.client = mlflow_client(uri)  # a missing package fails before compiling
        self.run_id: str | None = None

    def on_run_start(self, trainer) -> None:
        from mlflow.entities import Param
        from mlflow.exceptions import MlflowException

        name = self.graph.name or "nodegraph"
        try:
            found = self.client.get_experiment_by_name(name)
            experiment = found.experiment_id if found else self.client.create_experiment(name)
            self.run_id = self.client.create_run(experiment, run_name=name).info.run_id
        except MlflowException as e:  # a store that refuses
            raise refused(self.uri, e) from None
        params = [Param(k, str(v)[:MAX_VALUE])
                  for k, v in hyperparameters(self.graph, self.opts).items()]
        for i in range(0, len(params), BATCH):
            self.client.log_batch(self.run_id, params=params[i:i + BATCH])
        with tempfile.TemporaryDirectory(prefix="nodegraph-mlflow.") as folder:
            path = Path(folder) / f"{name}.json"
            path.write_text(dumps(self.graph), encoding="utf-8")
            self.client.log_artifact(self.run_id, str(path))

    def on_epoch_end(self, trainer) -> None:
        from mlflow.entities import Metric

        entry = trainer.state.history[-1]
        epoch, now = entry["epoch"], int(time.time() * 1000)
        values = {f"{split}.{k}": v for split in ("train", "val")
                  for k, v in numbers(entry[split]).items()}
        values.update({f"lr.{node}": lr for node, lr in entry["lr"].items()})
        self.client.log_batch(self.run_id, metrics=[Metric(k, v, now, epoch)
                                                    for k, v in values.items()])

    def on_run_end(self, trainer) -> None:
        self._end("KILLED" if trainer.state.cancelled else "FINISHED")

    def on_exception(self, trainer, error: BaseException) -> None:
        self._end("KILLED" if isinstance(error, KeyboardInterrupt) else "FAILED")

    def _end(self, status: str) -> None:
        if self.run_id is not None:
            self.client.set_terminated(self.run_id, status)
            self.run_id = None
