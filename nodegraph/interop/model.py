"""A trained graph as one object: fit it, fit it more, predict, evaluate, save, load, export.

    m = nodegraph.fit(g, epochs=20)          # compile and train; a Model
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

import warnings
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import torch

from nodegraph.interop import modelfile, predict
from nodegraph.model.errors import NodegraphError
from nodegraph.model.events import Emitter
from nodegraph.model.graph import Graph
from nodegraph.runtime import checkpoint, feeding, generators, normalization
from nodegraph.runtime.callbacks.base import Callback, callback_states, load_callback_states
from nodegraph.runtime.compile import Compiled
from nodegraph.runtime.train import RunControl, RunResult, Trainer, train, training_options

EXPORTS = ("python", "onnx", "weights")


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
        self.result: RunResult | None = None  # the last fit's

    # -- training ------------------------------------------------------------------------

    @property
    def epochs(self) -> int:
        """Epochs trained so far, over every `fit`."""
        return len(self.history)

    @property
    def module(self) -> torch.nn.Module:
        return self._ready().module

    def fit(self, epochs: int | None = None, *, callbacks: Iterable[Callback] = (),
            **options: Any) -> RunResult:
        """Train `epochs` more epochs (the graph's `training.epochs` the first time, when
        not given) and return this call's `RunResult` (its history is the whole run's).
        `options` are `nodegraph.train`'s: progress, events, control, checkpoint_dir,
        log_dir, mlflow, threads, seed and device (the last two the first time only)."""
        if self.compiled is not None and ({"seed", "device"} & set(options)):
            raise NodegraphError("seed and device are chosen by the first fit; this model "
                                 "is already compiled (build a new one with nodegraph.fit)")
        if self.compiled is not None and epochs is None:
            raise NodegraphError("say how many more epochs: model.fit(epochs=N)")
        carry = _Carry(self)
        result = train(self.graph, epochs=epochs,
                       callbacks=[carry, *callbacks, carry.keeper()],
                       compiled=self.compiled, **options)
        self.compiled, self.result = result.compiled, result
        self.history = list(result.history)
        self.final, self.cancelled = result.final, result.cancelled
        self.stopped_early = result.stopped_early
        return result

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

    def evaluate(self, split: str = "test") -> dict[str, Any]:
        """Mean losses and metric values over `split`, in eval mode; streamed data is read
        without random augmentation, the training split too."""
        c = self._ready()
        if split not in predict.SPLITS:
            raise NodegraphError(f"split '{split}': use one of {', '.join(predict.SPLITS)}")
        if not any(ds.has(split) for ds in c.datasets.values()):
            raise NodegraphError(f"the graph's data has no '{split}' split")
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
        ``preprocess=False`` writes the bare ONNX network."""
        c, path = self._ready(), Path(path)
        if to == "weights":
            checkpoint.save_weights(path, self.weights())
            return path
        if to == "python":
            from nodegraph.interop.export.python import to_python

            result = to_python(self.graph, path, kwargs.get("source_name"))
            checkpoint.save_weights(path.with_name(path.stem + ".weights.safetensors"),
                                    c.module.block_state())
            return result
        if to == "onnx":
            from nodegraph.interop.export.onnx import to_onnx

            return to_onnx(self.graph, path, kwargs.get("outputs"), self.weights(),
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


def fit(graph: Graph, epochs: int | None = None, *, callbacks: Iterable[Callback] = (),
        **options: Any) -> Model:
    """Compile and train `graph`, and return the trained `Model` (continue it with
    `model.fit(epochs=N)`). `options` are `nodegraph.train`'s."""
    model = Model(graph)
    model.fit(epochs, callbacks=callbacks, **options)
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
