"""A trained graph as one object: fit it, fit it more, predict, evaluate, save, load, export.

    m = nodegraph.fit(g, epochs=20)          # compile and train; a Model
    m = nodegraph.fit(g, x=X, y=Y, validation_data=(Xv, Yv), epochs=20)  # on your arrays
    m = nodegraph.fit(g, x=X, y=Y, sample_weight=w, epochs=20)  # each sample's loss times w
    m.evaluate(x=Xv, y=Yv)                   # losses and metrics over your arrays
    m.fit(epochs=5)                          # five more: every state kept, as one longer run
    y = m.predict("test")                    # the prediction heads over a whole split
    y = m.predict(x_new, batch_size=256)     # or over your own (raw) arrays, in batches
    y = m.predict(["cat.jpg", "dog.png"])    # or photos, for an image data block
    m.evaluate("test")                       # losses and metrics
    m.save("run.ngz"); m = nodegraph.load_model("run.ngz")
    m.export("python", "model.py")           # or "onnx", "weights"

`nodegraph.train` stays the one-call run; a `Model` keeps the compiled graph between calls,
in the manner of Keras' `fit` and Lightning's `Trainer.fit`: its `history` grows across
calls with epochs numbered on from the last, and `fit(epochs=k)` trains k *more* epochs
(progress shows `epoch 71/80` for 10 after 70), continuing from the weights, the optimizer
moments, the schedules, the step count, every random generator (torch, CUDA, numpy,
Python, the batch order) and the callbacks' `state_dict`s the last one left — in this
process or, through `save` and `load_model`, in another: `fit(n)` then `fit(k)` equals
`fit(n + k)` bit for bit on the CPU (it trains all of the graph's optimizers; a stage
schedule, the monitor and early stopping start again with each `fit`). Ctrl-C or a
notebook's Stop during `fit` ends the run at the end of the last whole epoch: the stopped
epoch's steps are undone (weights, moments, schedules, generators), so the model holds
the weights its history describes (`m.cancelled`; see `nodegraph.runtime.epoch_start`).
The file format is `nodegraph.interop.modelfile`.
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import torch

from nodegraph.interop import arguments, arrays, modelfile, predict, sample_weights
from nodegraph.interop.class_weights import weigh_classes
from nodegraph.kinds import given
from nodegraph.kinds.dataset import Dataset
from nodegraph.model.errors import NodegraphError
from nodegraph.model.events import Emitter
from nodegraph.model.graph import Graph
from nodegraph.runtime import checkpoint, feeding, generators, normalization
from nodegraph.runtime.callbacks.base import Callback, callback_states, load_callback_states
from nodegraph.runtime.compile import Compiled
from nodegraph.runtime.train import RunControl, RunResult, Trainer, train, training_options

EXPORTS = ("python", "onnx", "weights")
FIT_KEYWORDS = ("x", "y", "epochs", "batch_size", "validation_data", "class_weight",
                "sample_weight", "metrics", "callbacks")
# `nodegraph.train`'s keywords that fit passes on
TRAIN_OPTIONS = ("progress", "events", "control", "checkpoint_dir", "resume", "log_dir",
                 "mlflow", "threads", "seed", "device", "prepare")
TRAIN_HINTS = {
    "lr": "a learning rate is the optimizer block's param: g.set_param('opt', 'lr', 0.1)",
    "learning_rate": "a learning rate is the optimizer block's param: "
                     "g.set_param('opt', 'lr', 0.1)",
    "validation_split": "the data block's val_fraction param splits off validation data; "
                        "or give validation_data=(x_val, y_val)",
    "verbose": "progress=True shows a progress bar",
    "shuffle": "shuffling is the data block's shuffle param",
}


class Model:
    """A graph, compiled, with its trained weights and its run so far (see the module doc).
    Build one with `nodegraph.fit(graph, ...)` or `nodegraph.load_model(path)`."""

    def __init__(self, graph: Graph, compiled: Compiled | None = None):
        self.graph = graph.copy()  # later edits of the caller's graph do not reach it
        self.compiled = compiled
        self.history: list[dict[str, Any]] = []
        self.final: dict[str, dict[str, Any]] = {}
        self.cancelled = False
        self.stopped_early = False
        self.global_step = 0
        # every generator the run draws from, as its last fit left them (`runtime.generators`)
        self.generators: dict[str, torch.Tensor] = {}
        self.callback_states: dict[str, dict[str, Any]] = {}  # the callbacks' state_dicts
        # the last fit's sample weights, by data node and split (`sample_weights.taken`)
        self.fitted_sample_weights: sample_weights.Held = {}
        self.result: RunResult | None = None  # the last fit's

    # -- training ------------------------------------------------------------------------

    @property
    def epochs(self) -> int:
        """Epochs trained so far, over every `fit`."""
        return len(self.history)

    @property
    def module(self) -> torch.nn.Module:
        return self._ready().module

    def fit(self, x: Any = None, y: Any = None, *, epochs: int | None = None,
            batch_size: int | None = None, validation_data: Any = None,
            class_weight: Mapping[int, float] | str | None = None,
            sample_weight: Any = None, metrics: Sequence[str] | None = None,
            callbacks: Iterable[Callback] = (), **options: Any) -> RunResult:
        """Train `epochs` more epochs (the graph's `training.epochs` the first time, when
        not given) and return this call's `RunResult` (its history is the whole run's).

        `x` and `y` are your own data in place of what the data block reads: numpy arrays,
        torch tensors, pandas frames (a table block's columns by name), mappings
        "port"/"node.port" -> those for several inputs, or a torch Dataset/DataLoader as
        `x` (`nodegraph.interop.arrays`); the block's params split, scale and batch them,
        `validation_data=(x_val, y_val)` is the validation split instead. A graph with no
        data block of its own declares its inputs with data.Arrays. `batch_size` sets the
        data block's; `class_weight` ({class: weight} or "balanced", from the training
        targets) sets the classification loss's `weight`; `metrics` names metric blocks
        to wire (the first fit only). `fit(5)` is `fit(epochs=5)`.
        `sample_weight` (with `x`: one number >= 0 per sample, a 1-D array, tensor, list
        or Series) multiplies each sample's loss, and a batch's loss is Keras' weighted
        sum over the batch size, mean(loss_i * w_i), not sum(loss_i * w_i) / sum(w_i):
        Keras' numbers, and one sample's pull independent of its batch-mates' weights
        (`nodegraph.interop.sample_weights` says why and how). The weights go with their
        samples through the block's split (its validation rows, weighed there too),
        shuffling and batching; `validation_data=(x_val, y_val, w_val)` weighs the
        validation data. Metric blocks are not weighed (Keras weighs only its
        `weighted_metrics`). A later `fit(epochs=k)` on the same data keeps the weights.
        `options` are `nodegraph.train`'s: progress, events, control, checkpoint_dir,
        log_dir, mlflow, threads, seed and device (the last two the first time only)."""
        if isinstance(x, int) and not isinstance(x, bool) and y is None and epochs is None:
            epochs, x = x, None  # fit(5): the epochs, as before arrays came in
        arguments.known_keywords("fit", options, FIT_KEYWORDS + TRAIN_OPTIONS, TRAIN_HINTS)
        callbacks = arguments.need_callbacks("fit", callbacks)
        epochs = arguments.need_int("fit", "epochs", epochs)
        batch_size = arguments.need_int("fit", "batch_size", batch_size, least=1)
        if sample_weight is not None and x is None:
            raise NodegraphError("fit(sample_weight=...) weighs your own samples: give x= and "
                                 "y= too (one weight per sample of x)")
        if self.compiled is not None and ({"seed", "device"} & set(options)):
            raise NodegraphError("seed and device are chosen by the first fit; this model "
                                 "is already compiled (build a new one with nodegraph.fit)")
        if self.compiled is not None and (class_weight is not None or metrics):
            raise NodegraphError("class_weight and metrics are chosen by the first fit; this "
                                 "model is already compiled (build a new one with "
                                 "nodegraph.fit)")
        if self.compiled is not None and epochs is None:
            raise NodegraphError("say how many more epochs: model.fit(epochs=N)")
        if validation_data is not None and x is None:
            raise NodegraphError("fit(validation_data=...) goes with your own training data: "
                                 "give x= and y= too")
        if self.compiled is None:
            self._first_fit_graph(batch_size, metrics)
        handed = self._handed(x, y, validation_data, sample_weight)
        if class_weight is not None:
            weigh_classes(self.graph, class_weight, handed)
        carry = _Carry(self)
        # the loss nodes weigh the samples while this fit runs (the first fit compiles
        # inside train: its compiled graph comes through `prepare`)
        weighing, asked = sample_weights.Weighing(), options.pop("prepare", None)

        def prepare(c: Compiled) -> None:
            if asked is not None:
                asked(c)
            weighing(c)

        ran: Compiled | None = None
        try:
            with given.given(handed if self.compiled is None else {}):
                if self.compiled is not None:
                    self._swap_in(handed, batch_size)
                    if not handed:  # on the same data: with the weights it had
                        sample_weights.put_back(self.compiled.datasets, self.fitted_sample_weights)
                result = train(self.graph, epochs=epochs,
                               callbacks=[carry, *callbacks, carry.keeper()],
                               compiled=self.compiled, prepare=prepare, **options)
                ran = result.compiled
        finally:
            weighing.undo()
            ran = ran or self.compiled
            if ran is not None:  # kept beside the data, out of what predict and export see
                self.fitted_sample_weights = sample_weights.taken(ran.datasets)
        self.compiled, self.result = result.compiled, result
        self.history = list(result.history)
        self.final, self.cancelled = result.final, result.cancelled
        self.stopped_early = result.stopped_early
        return result

    def _first_fit_graph(self, batch_size: int | None, metrics: Sequence[str] | None) -> None:
        """The first fit's changes to the model's graph: the batch size, the metrics."""
        if batch_size is not None:
            blocks = arrays.data_blocks(self.graph)
            if not blocks:
                raise NodegraphError("fit(batch_size=...): the graph has no data block to "
                                     "batch")
            for block in blocks:
                self.graph.set_param(block.node, "batch_size", batch_size)
        if metrics:
            if isinstance(metrics, str):
                metrics = [metrics]
            # helper "metrics"' module, imported when asked for (`wire_metrics(graph, names)`
            # returns a copy with the metric blocks wired to the prediction and target)
            wiring = importlib.import_module("nodegraph.interop.metric_wiring")
            self.graph = wiring.wire_metrics(self.graph, list(metrics))

    def _handed(self, x: Any, y: Any, validation_data: Any,
                sample_weight: Any = None) -> dict[str, Dataset]:
        """The datasets of the caller's arrays, by data node (none when x is None), with
        the sample weights as one more port (`sample_weights.PORT`) of the weighed one."""
        if x is None:
            if y is not None:
                raise NodegraphError("fit(y=...) goes with x=: give the inputs too")
            return {}
        blocks = arrays.data_blocks(self.graph)
        train_arrays = arrays.by_block(self.graph, blocks, x, y, "fit")
        val, val_weight = None, None
        if validation_data is not None:
            if not isinstance(validation_data, tuple | list) or \
                    len(validation_data) not in (2, 3):
                if not _torch_data(validation_data):
                    raise NodegraphError("fit(validation_data=...) takes (x_val, y_val), "
                                         "(x_val, y_val, sample_weight_val), or a torch "
                                         "Dataset/DataLoader (got "
                                         f"{arguments.shown(validation_data)})")
                validation_data = (validation_data, None)
            x_val, y_val, *rest = validation_data
            val_weight = rest[0] if rest else None
            val = arrays.by_block(self.graph, blocks, x_val, y_val, "fit validation_data")
        if sample_weight is not None or val_weight is not None:
            sample_weights.attach(train_arrays, val, sample_weight, val_weight)
        stats = None if self.compiled is None else _stats(self.compiled)
        return arrays.datasets(blocks, train_arrays, val, stats)

    def _swap_in(self, handed: Mapping[str, Dataset], batch_size: int | None) -> None:
        """A compiled model fits on the new arrays: they replace its data blocks' datasets
        (scaled with its statistics, on its device, in its dtype)."""
        c = self._ready()
        for node, ds in handed.items():
            old = c.datasets[node]
            c.datasets[node] = ds.astype(_float_dtype(old)).to(c.device)
        if batch_size is not None:
            for ds in c.datasets.values():
                ds.batch_size = batch_size

    # -- using it ------------------------------------------------------------------------

    def predict(self, data: Any = "test", batch_size: int | None = None,
                outputs: str | Iterable[str] | None = None) -> Any:
        """The prediction over `data` in batches of `batch_size` (the graph's
        eval_batch_size by default), on the CPU: a split's name ("train", "val", "test"),
        an array or tensor for the graph's one input port, or a mapping of "node.port" to
        such arrays. Arrays are raw, as the data files hold them, and go through the
        model's preprocessing: scaled as the data block scaled its own, and for an image
        block the deterministic part of its augment chain (Normalize, a centre crop).
        An image block also takes photos: a file path or a list of paths, a decoded photo
        as a uint8 array (H, W, C) — or (N, H, W, C), or a list of them — of any size,
        read as the block reads its files (resized to its `size` by its `resize` policy);
        float images are (N, C, H, W) in [0, 1] at that size. A table block (data.Parquet)
        takes rows by column name: a pandas DataFrame, a pyarrow Table or a mapping column
        -> values; its input columns are picked (the targets and others ignored), text
        coded with the categories it learned from its files (`table_rows`); a missing
        column or an unknown category is an error naming both. `outputs` names node or
        node.port values; by default the prediction heads (what losses and metrics read).
        One output is a tensor; several are a dict keyed "node.port"."""
        c = self._ready()
        opts = self._options()
        size = opts["eval_batch_size"] if batch_size is None else batch_size
        # streamed data read with the run's loader settings (workers, pinning)
        feeding.prepare(c.datasets, opts, c.device, None,
                        lambda text: warnings.warn(text, stacklevel=3))
        return predict.predict(c, data, size, outputs)

    def table_rows(self, rows: Any, port: str | None = None) -> Any:
        """A table's rows by column name (DataFrame, pyarrow Table, mapping) as the float32
        (N, columns) array the table block's port takes raw, and the exported ONNX file
        takes: input columns in order, text as category codes (`predict.table_rows`)."""
        return predict.table_rows(self._ready(), rows, port)

    def evaluate(self, split: str = "test", *, x: Any = None, y: Any = None,
                 sample_weight: Any = None) -> dict[str, Any]:
        """Mean losses and metric values over `split`, in eval mode, or over your own
        data `x` and `y` (as `fit` takes them, scaled with the model's statistics);
        streamed data is read without random augmentation, the training split too.
        `sample_weight` weighs the losses over `x` as `fit` does; a split of data a fit
        was given weights for is weighed by them."""
        c = self._ready()
        if sample_weight is not None and x is None:
            raise NodegraphError("evaluate(sample_weight=...) weighs your own samples: give "
                                 "x= and y= too")
        if x is not None or y is not None:
            if x is None or (y is None and not _torch_data(x)):
                raise NodegraphError("evaluate(x=..., y=...): give the inputs and their "
                                     "targets")
            blocks = arrays.data_blocks(self.graph)
            given_arrays = arrays.by_block(self.graph, blocks, x, y, "evaluate")
            if sample_weight is not None:
                sample_weights.attach(given_arrays, None, sample_weight, None, "evaluate")
            handed = arrays.datasets(blocks, given_arrays, stats=_stats(c), split="test")
            kept = {node: c.datasets[node] for node in handed}
            try:
                self._swap_in(handed, None)
                with sample_weights.weighing(c):
                    return self._evaluate(c, "test")
            finally:
                c.datasets.update(kept)
        if not isinstance(split, str):
            raise NodegraphError(f"evaluate() takes a split's name, or x= and y= (got "
                                 f"{arguments.shown(split)}: give arrays as x=..., y=...)")
        if split not in predict.SPLITS:
            raise NodegraphError(f"split '{split}': use one of {', '.join(predict.SPLITS)}")
        if not any(ds.has(split) for ds in c.datasets.values()):
            raise NodegraphError(f"the graph's data has no '{split}' split")
        sample_weights.put_back(c.datasets, self.fitted_sample_weights)  # the fit's, where it had
        try:
            with sample_weights.weighing(c):
                return self._evaluate(c, split)
        finally:
            sample_weights.taken(c.datasets)

    def _evaluate(self, c: Compiled, split: str) -> dict[str, Any]:
        # streamed data without random augmentation (the training split read as val is)
        return Trainer(c, self._options(), Emitter(), RunControl(), None).evaluate(
            split, plain=True)

    def weights(self) -> dict[str, torch.Tensor]:
        """The weights keyed node.param, with the data blocks' normalisation."""
        c = self._ready()
        return normalization.with_weights(c, c.module.block_state())

    def save(self, path: str | Path) -> Path:
        """Write graph, weights, optimizer and schedule states, normalisation, history, the
        random generators and the callbacks' state to one file (a zip of JSON and
        safetensors; `nodegraph.load_model` reads it, and fits on from it exactly)."""
        return modelfile.write(Path(path), self, self._ready())

    def export(self, to: str, path: str | Path, **kwargs: Any) -> Any:
        """Write the trained model as `to` ("python": a PyTorch class and its weights beside
        it; "onnx"; "weights": one safetensors file keyed node.param). The python class and
        the ONNX file start from raw inputs, the model's preprocessing inside (see
        `predict`; ONNX photos as uint8 (N, H, W, C) at the data block's size);
        ``preprocess=False`` writes the bare ONNX network, ``opset=N`` asks for an ONNX
        opset (default: the first that holds every op). `nodegraph export MODEL.ngz`."""
        c, path = self._ready(), Path(path)
        if to == "weights":
            checkpoint.save_weights(path, self.weights())
            return path
        # the exporters compile the graph again: on the data this model holds (a
        # data.Arrays block has none of its own; its scaling statistics are the fitted ones)
        with given.given(c.datasets):
            if to == "python":
                from nodegraph.interop.export.python import to_python

                result = to_python(self.graph, path, kwargs.get("source_name"))
                checkpoint.save_weights(path.with_name(path.stem + ".weights.safetensors"),
                                        c.module.block_state())
                return result
            if to == "onnx":
                from nodegraph.interop.export.onnx import to_onnx

                return to_onnx(self.graph, path, kwargs.get("outputs"), self.weights(),
                               opset=kwargs.get("opset"),
                               preprocess=kwargs.get("preprocess", True))
        raise NodegraphError(f"export to {to!r}: use one of {', '.join(EXPORTS)}")

    def summary(self):
        """A table of the nodes: block, output shapes, parameters (trainable), memory."""
        from nodegraph.check.summary import summary

        c = self._ready()
        return summary(self.graph, c.report, c.module)

    # -- display -------------------------------------------------------------------------

    def __repr__(self) -> str:
        state = "not trained" if self.compiled is None else (
            f"{self.epochs} epoch(s)" + (", cancelled" if self.cancelled else ""))
        count = f", {self.compiled.parameter_count():,} parameters" if self.compiled else ""
        return f"<nodegraph.Model '{self.graph.name}': {state}{count}{_last_loss(self)}>"

    def _repr_html_(self) -> str:
        from html import escape

        rows = "".join(f"<tr><th style='text-align:left'>{escape(k)}</th><td>{escape(v)}</td>"
                       "</tr>" for k, v in _facts(self))
        return f"<div><b>nodegraph.Model</b> {escape(self.graph.name)}<table>{rows}</table></div>"

    # -- inside --------------------------------------------------------------------------

    def _ready(self) -> Compiled:
        if self.compiled is None:
            raise NodegraphError("this model is not trained yet: call model.fit(epochs=N)")
        return self.compiled

    def _options(self):
        return training_options(self.graph, epochs=0)


def fit(graph: Graph, x: Any = None, y: Any = None, **options: Any) -> Model:
    """Compile and train `graph`, and return the trained `Model` (continue it with
    `model.fit(epochs=N)`). `x`, `y` and `options` are `Model.fit`'s: your own arrays,
    epochs, batch_size, validation_data, class_weight, sample_weight, metrics, callbacks, and
    `nodegraph.train`'s options."""
    graph = arguments.need_graph("fit", graph)
    model = Model(graph)
    model.fit(x, y, **options)
    return model


def model_of_run(graph: Graph, result: RunResult) -> Model:
    """The `Model` of a finished (or stopped) `train` run of `graph`, to save, predict or
    export: the editor's File > Save Trained Model. Its weights and history are the run's;
    optimizer moments come along where the run's compiled graph still holds them."""
    model = Model(graph, result.compiled)
    model.history, model.final = list(result.history), result.final
    model.cancelled, model.stopped_early = result.cancelled, result.stopped_early
    model.result = result
    return model


def load_model(path: str | Path, *, trust: bool = False, grant: Sequence[str] = (),
               device: str | None = None, max_bytes: int = modelfile.MAX_BYTES) -> Model:
    """The `Model` a `save` wrote: ready to predict, evaluate, export or fit on. `trust`
    lets its graph import the modules outside the allowlist it names (as `--trust`);
    `grant` names callables that do more than compute (``["numpy:load"]``, as `--grant`);
    `max_bytes` bounds what one tensor member may unpack to (the graph bounds it first:
    the file is held to the compiled graph's shapes before its data is read)."""
    if not isinstance(path, str | Path):
        raise NodegraphError(f"load_model() takes the path of a saved model (got "
                             f"{arguments.shown(path)})")
    # a data.Arrays block holds no data of its own: a placeholder of its declared shapes
    with given.placeholders():
        return modelfile.read(Path(path), Model, trust=trust, grant=grant, device=device,
                              max_bytes=max_bytes)


class _Carry(Callback):
    """Hands a model's run so far to the trainer of its next `fit` (the first of its
    callbacks); `keeper()`, the last, takes it back."""

    def __init__(self, model: Model):
        self.model = model

    def keeper(self) -> Callback:
        return _Keep(self.model)

    def on_run_start(self, trainer) -> None:
        m, s = self.model, trainer.state
        if m.history:
            s.history, s.epoch, s.global_step = list(m.history), len(m.history), m.global_step
            s.before = len(m.history)  # progress counts on: epoch 71/80 for 10 after 70
        if m.generators:  # what a longer run would draw next, whatever ran in between
            generators.restore(m.generators, trainer.shuffle_rng, "the model's generators")
        if m.callback_states:
            load_callback_states(trainer.callbacks.all, m.callback_states)


class _Keep(Callback):
    """Takes the run back onto the model after every other callback's hooks: the step
    count, the generators and the callbacks' state."""

    def __init__(self, model: Model):
        self.model = model

    def on_run_end(self, trainer) -> None:
        m = self.model
        m.global_step = trainer.state.global_step
        m.generators = generators.capture(trainer.shuffle_rng)
        m.callback_states = callback_states(trainer.callbacks.all, plain=False)


def _stats(c: Compiled) -> dict[str, dict[str, dict[str, torch.Tensor]]]:
    """The data blocks' fitted scaling: new arrays are scaled as training's were."""
    return {node: ds.normalization for node, ds in c.datasets.items()}


def _float_dtype(ds: Any) -> torch.dtype:
    """The floating dtype a compiled dataset holds its inputs in (float32 when none)."""
    if not getattr(ds, "streamed", False):
        for part in ds._split.values():
            for t in part.values():
                if t.is_floating_point():
                    return t.dtype
    return torch.float32


def _torch_data(value: Any) -> bool:
    return isinstance(value, torch.utils.data.Dataset | torch.utils.data.DataLoader)


def _last_loss(model: Model) -> str:
    last = model.history[-1] if model.history else None
    if not last:
        return ""
    parts = [f"{split} loss {last[split]['loss']:.4g}" for split in ("train", "val")
             if isinstance(last.get(split), Mapping) and "loss" in last[split]]
    return (", " + ", ".join(parts)) if parts else ""


def _facts(model: Model) -> list[tuple[str, str]]:
    facts = [("epochs", str(model.epochs) + (" (cancelled)" if model.cancelled else ""))]
    if model.compiled is not None:
        facts.append(("parameters", f"{model.compiled.parameter_count():,}"))
        facts.append(("device", str(model.compiled.device)))
    if _last_loss(model):
        facts.append(("last epoch", _last_loss(model).removeprefix(", ")))
    for split, stats in model.final.items():
        shown = ", ".join(f"{k} {v:.4g}" for k, v in stats.items()
                          if isinstance(v, int | float) and not isinstance(v, bool))
        facts.append((split, shown[:200]))
    return facts
