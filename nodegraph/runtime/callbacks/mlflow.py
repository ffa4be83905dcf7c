"""MLflow: a run recorded on a tracking server or store (`run --mlflow URI`).

The graph's name is the experiment; the run gets the same hyperparameters TensorBoard's HParams
tab shows (`node.param`, `training.key`), every numeric train/val stat and learning rate per
epoch (`train.loss`, `val.accuracy`, `lr.<node>`), the final numbers of every split at the
end (`final.test.accuracy`, ...), the graph as it ran (with `--set`, `--epochs` and `--seed`
applied: rerunning it reruns the run) as the artifact `<name>.json`, and the trained weights
as `weights.safetensors` (keyed node.param, with the data blocks' normalisation; `nodegraph
forward GRAPH --weights` loads them). Inside an active MLflow run (`mlflow.start_run()`),
the run is nested under it, in its experiment. The run ends FINISHED, KILLED (stopped by
request, Ctrl-C) or FAILED.

mlflow is optional (the `mlflow` extra) and imported only when a run asks for it. A
tracking server is reached before training starts, with a line saying so, and one that does
not answer within `NODEGRAPH_CONNECT_TIMEOUT` seconds (10) is an error (`runtime.endpoint`):
MLflow's own client would retry for minutes without a word.
"""

from __future__ import annotations

import os
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from nodegraph.model.errors import NodegraphError
from nodegraph.model.events import Emitter, RunFinished
from nodegraph.model.fileformat import dumps
from nodegraph.model.graph import Graph
from nodegraph.runtime import checkpoint, endpoint, normalization
from nodegraph.runtime.callbacks.base import Callback
from nodegraph.runtime.callbacks.tensorboard import hyperparameters, numbers

BATCH = 100  # MLflow's limit of params per log_batch call
MAX_VALUE = 6000  # MLflow's limit of a param value's length


def mlflow_client(uri: str | bool):
    """An `MlflowClient` on `uri` (True: MLflow's current tracking URI), or an error that
    says what to install or change. A server is reached first, within the connect timeout."""
    if isinstance(uri, str):
        endpoint.reach("MLflow", uri, "--mlflow")
    try:
        import mlflow
        from mlflow.exceptions import MlflowException
        from mlflow.tracking import MlflowClient
    except ImportError as e:
        raise NodegraphError(f"--mlflow needs the mlflow package ({e}); install it with "
                             "pip install 'nodegraph[mlflow]'") from e
    where = mlflow.get_tracking_uri() if isinstance(uri, bool) else uri
    if isinstance(uri, bool):
        endpoint.reach("MLflow", where, "--mlflow")
    try:
        client = MlflowClient(tracking_uri=where)
        with _answer_within(endpoint.timeout()):
            client.search_experiments(max_results=1)  # a bad URI fails now, before training
    except MlflowException as e:
        if "timed out" in str(e.message).lower():
            raise NodegraphError(f"--mlflow {endpoint.shown(where)}: the server took the "
                                 f"connection but did not answer within "
                                 f"{endpoint.timeout():g} s ({endpoint.TIMEOUT_VAR}=SECONDS "
                                 "waits longer)") from None
        raise refused(where, e) from None
    return client


@contextmanager
def _answer_within(seconds: float):
    """MLflow's HTTP requests inside: one try, `seconds` each (a server that accepts the
    connection but never answers), unless the user set MLflow's own variables."""
    names = {"MLFLOW_HTTP_REQUEST_TIMEOUT": str(max(1, round(seconds))),
             "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0"}
    mine = {k: v for k, v in names.items() if k not in os.environ}
    os.environ.update(mine)
    try:
        yield
    finally:
        for k in mine:
            os.environ.pop(k, None)


def refused(uri: str, error) -> NodegraphError:
    """The store at `uri` refused; MLflow's message says why, this what a user can do."""
    return NodegraphError(f"--mlflow {uri}: {error.message} (give a tracking server's URI "
                          "such as http://HOST:5000, or set MLFLOW_ALLOW_FILE_STORE=true for "
                          "a file: store)")


class MLflow(Callback):
    """Records one run in the MLflow store at `uri`."""

    def __init__(self, uri: str | bool, graph: Graph, opts: dict[str, Any]):
        self.uri, self.graph, self.opts = uri, effective(graph, opts), opts
        self.client = mlflow_client(uri)  # a missing package fails before compiling
        self.where = self.client.tracking_uri
        self.run_id: str | None = None
        self.trainer: Any = None

    def attach(self, events: Emitter) -> None:
        """Listen for the final numbers (they come after the last hook)."""
        events.subscribe(self._finished, RunFinished)

    def on_run_start(self, trainer) -> None:
        from mlflow.entities import Param
        from mlflow.exceptions import MlflowException

        self.trainer = trainer
        name = self.graph.name or "nodegraph"
        parent = _active_run(self.where)
        try:
            if parent is not None:  # nested under the user's run, in its experiment
                experiment, tags = parent.info.experiment_id, {
                    "mlflow.parentRunId": parent.info.run_id}
            else:
                found = self.client.get_experiment_by_name(name)
                experiment = (found.experiment_id if found
                              else self.client.create_experiment(name))
                tags = {}
            self.run_id = self.client.create_run(experiment, run_name=name,
                                                 tags=tags).info.run_id
        except MlflowException as e:  # a store that refuses
            raise refused(str(self.uri), e) from None
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

    def _finished(self, event: RunFinished) -> None:
        """The final numbers and the trained weights; then the run ends."""
        from mlflow.entities import Metric

        if self.run_id is None:
            return
        step, now = len(event.history), int(time.time() * 1000)
        finals = [Metric(f"final.{split}.{k}", v, now, step)
                  for split, stats in event.final.items() for k, v in numbers(stats).items()]
        if finals:
            self.client.log_batch(self.run_id, metrics=finals)
        c = self.trainer.c if self.trainer is not None else None
        if c is not None:
            with tempfile.TemporaryDirectory(prefix="nodegraph-mlflow.") as folder:
                path = Path(folder) / "weights.safetensors"
                checkpoint.save_weights(path, normalization.with_weights(
                    c, c.module.block_state()))
                self.client.log_artifact(self.run_id, str(path))
        self._end("KILLED" if event.cancelled else "FINISHED")

    def on_exception(self, trainer, error: BaseException) -> None:
        self._end("KILLED" if isinstance(error, KeyboardInterrupt) else "FAILED")

    def _end(self, status: str) -> None:
        """End the run (once)."""
        if self.run_id is not None:
            self.client.set_terminated(self.run_id, status)
            self.run_id = None


def effective(graph: Graph, opts: dict[str, Any]) -> Graph:
    """`graph` with the run's epochs and seed in its training section: the file that, run
    again, reruns this run (arguments such as --epochs override the file's)."""
    g = graph.copy()
    for key in ("epochs", "seed"):
        if g.training.get(key) != opts[key]:
            g.set_training(key, opts[key])
    return g


def _active_run(where: str):
    """The user's active MLflow run (`with mlflow.start_run():`), if any, when it lives in
    the store at `where` (a run elsewhere cannot be a parent)."""
    import mlflow

    run = mlflow.active_run()
    return run if run is not None and mlflow.get_tracking_uri() == where else None
