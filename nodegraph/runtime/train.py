"""The training loop: epochs over the train split, evaluation on val, events out.

One step: the data blocks yield a batch; for each optimizer block of the stage in
topological order, run the plan its loss needs, zero its parameters' gradients, backward,
clip, step (with a closure for L-BFGS), and advance a per-step schedule. One epoch: the
steps, the val split evaluated, per-epoch schedules advanced, the history entry recorded and
sent. At the end every split is evaluated once more for the `final` numbers.

Everything else happens in callbacks at fixed points of that loop (`nodegraph.runtime.callbacks`):
stages and frozen nodes, the monitored number, best weights, weight snapshots, early
stopping, checkpoints and resume, probes. DDP and the torch.compile fallback wrap the step.

The loop is kept as lean as a hand-written one: data already on the device, losses read
as Python floats on the CPU (a free read there) and summed on the device elsewhere (no
sync per step), per-step events only when someone listens. `benchmarks/overhead.py` holds
it to that.
"""

from __future__ import annotations

import contextlib
import math
import random
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from nodegraph.check import eager
from nodegraph.kinds import write_confine
from nodegraph.kinds.estimator import fit_estimators
from nodegraph.model import outputs, settings
from nodegraph.model.errors import (
    NodegraphError,
    NodeRuntimeError,
    ValidationError,
    not_a_graph,
)
from nodegraph.model.events import (
    Emitter,
    EpochEnded,
    Message,
    NodeFailed,
    RunFinished,
    RunStarted,
    StepEnded,
    WeightsSnapshot,
)
from nodegraph.model.graph import Graph
from nodegraph.runtime import distributed, feeding
from nodegraph.runtime import threads as cpu_threads
from nodegraph.runtime.callbacks import (
    BestWeights,
    Callback,
    Callbacks,
    Checkpointing,
    EarlyStopping,
    LoopState,
    Monitor,
    Probing,
    StageSchedule,
    WeightSnapshots,
)
from nodegraph.runtime.callbacks.fallback import compiled_or_eager
from nodegraph.runtime.callbacks.monitor import lookup
from nodegraph.runtime.callbacks.parallel import DataParallel
from nodegraph.runtime.callbacks.probing import output_ports
from nodegraph.runtime.callbacks.stages import stages_of
from nodegraph.runtime.compile import Compiled, Key, OptimizerRun, compile_graph
from nodegraph.runtime.epoch_start import EpochStart
from nodegraph.runtime.precision import Precision, slow_warning
from nodegraph.runtime.probes import ProbeFrame, Prober


class RunControl:
    """Stop and pause a run from another thread (the editor's buttons, Ctrl-C)."""

    def __init__(self) -> None:
        self._stop = threading.Event()
        self._running = threading.Event()
        self._running.set()
        self._changes: list[tuple[str, str, Any]] = []  # live param changes, not yet applied
        self._lock = threading.Lock()

    def set_param(self, node: str, name: str, value: Any) -> None:
        """Change a live param (an optimizer's lr) of the running graph from its next step."""
        with self._lock:
            self._changes.append((node, name, value))

    def take_changes(self) -> list[tuple[str, str, Any]]:
        if not self._changes:  # every step asks: the common answer costs no lock
            return []
        with self._lock:
            taken, self._changes = self._changes, []
        return taken

    def stop(self) -> None:
        self._stop.set()
        self._running.set()

    def pause(self) -> None:
        self._running.clear()

    def resume(self) -> None:
        self._running.set()

    @property
    def stopped(self) -> bool:
        return self._stop.is_set()

    @property
    def paused(self) -> bool:
        return not self._running.is_set()

    def wait_while_paused(self) -> None:
        while not self._running.wait(0.1):
            pass


@dataclass
class RunResult:
    """What `train` returns: the per-epoch history, the final numbers and the model."""

    history: list[dict[str, Any]]
    final: dict[str, dict[str, Any]]
    compiled: Compiled
    stopped_early: bool = False
    cancelled: bool = False
    best_epoch: int | None = None

    @property
    def module(self):
        return self.compiled.module

    def unless_cancelled(self) -> RunResult:
        """This result, or KeyboardInterrupt again when the run was stopped: for callers
        that must not go on with a half-trained model (export --train, a search's trial)."""
        if self.cancelled:
            raise KeyboardInterrupt
        return self

    def __repr__(self) -> str:
        state = ("cancelled" if self.cancelled else "stopped early" if self.stopped_early
                 else "done")
        return f"<nodegraph.RunResult: {state} after {len(self.history)} epoch(s){_brief(self)}>"

    def _repr_html_(self) -> str:
        from html import escape

        rows = "".join(f"<tr><th style='text-align:left'>{escape(split)}</th><td>"
                       f"{escape(_stats_text(stats))}</td></tr>"
                       for split, stats in self.final.items())
        return f"<div><code>{escape(repr(self))}</code><table>{rows}</table></div>"

    def to_json(self) -> dict[str, Any]:
        return {"history": self.history, "final": self.final,
                "stopped_early": self.stopped_early, "cancelled": self.cancelled,
                "best_epoch": self.best_epoch}


def _stats_text(stats: dict[str, Any], limit: int = 6) -> str:
    """`loss 0.12, accuracy 0.9`: the plain numbers of a split's stats, the first few."""
    shown = [f"{k} {v:.4g}" for k, v in stats.items()
             if isinstance(v, int | float) and not isinstance(v, bool)]
    return ", ".join(shown[:limit]) + (", ..." if len(shown) > limit else "")


def _brief(result: RunResult) -> str:
    split = next((s for s in ("test", "val", "train") if result.final.get(s)), None)
    if split is not None:
        return f"; {split}: {_stats_text(result.final[split], 3)}"
    last = result.history[-1].get("train") if result.history else None
    return f"; last train: {_stats_text(last, 3)}" if last else ""


def train(graph: Graph, *, epochs: int | None = None, seed: int | None = None,
          device: str | None = None, events: Emitter | None = None,
          checkpoint_dir: str | Path | None = None, resume: bool = False,
          control: RunControl | None = None,
          prepare: Callable[[Compiled], None] | None = None,
          callbacks: Iterable[Callback] = (), log_dir: str | Path | None = None,
          mlflow: str | bool | None = None, threads: int | None = None,
          progress: bool | str = False, compiled: Compiled | None = None) -> RunResult:
    """Train `graph` and return its history; arguments override the file's training section.
    `prepare` sees the compiled graph before the first step (`run --init-weights` loads
    weights there); `callbacks` join the loop after the trainer's own; `log_dir` (or
    `training.log_dir`) writes TensorBoard event files there; `mlflow` (a tracking URI,
    or True for MLflow's current one) records the run in MLflow; `progress` (True,
    "notebook" or "text") shows a progress bar
    and the loss curves in a notebook, a progress line elsewhere. The CPU thread count is
    chosen for the run (`nodegraph.runtime.threads`) and put back after it.

    `compiled` trains an already compiled (and trained) graph on: `nodegraph.Model.fit`
    continues a run through it. A graph with nothing to train by gradient (estimators,
    procedures, metrics) is fitted and evaluated, with no epochs. Ctrl-C (a notebook's
    Stop) ends the run as a stop by request does: marked cancelled, at the end of the last
    whole epoch (the stopped epoch's steps are undone: `nodegraph.runtime.epoch_start`).
    A fresh run seeds torch (at the compile), numpy's and Python's generators from the
    run's seed."""
    if not isinstance(graph, Graph):
        raise not_a_graph("train", graph)
    shown = None
    if progress:  # a bad choice fails before the compile
        from nodegraph.runtime.callbacks.progress import mode_of

        shown = mode_of(progress)
    opts = training_options(graph, epochs=epochs, seed=seed, device=device, log_dir=log_dir,
                            threads=threads)
    asked, gradient_free = opts.epochs, not has_optimizer(graph)
    if gradient_free:  # estimators and procedures: fit, evaluate, no epochs
        opts = training_options(graph, epochs=0, seed=seed, device=device, log_dir=log_dir,
                                threads=threads)
    if log_dir is None and opts["log_dir"]:  # the file's own: only beside the file
        opts["log_dir"] = str(write_confine.file_folder(graph, "training.log_dir",
                                                        opts["log_dir"]))
    if checkpoint_dir is not None:  # an unwritable folder fails now, not after an epoch
        outputs.check_folder(checkpoint_dir, "checkpoint folder")
    if opts["log_dir"]:
        outputs.check_folder(opts["log_dir"], "log folder (--log-dir, training.log_dir)")
    group = distributed.current()
    device = distributed.setup(group, opts.device) if group else opts.device
    fresh = compiled is None
    compiled = compile_for(graph, opts, device) if compiled is None else compiled
    if fresh:  # the compile seeded torch; code in blocks and callbacks may draw from these
        random.seed(opts.seed)
        np.random.seed(opts.seed % 2 ** 32)
    if gradient_free and asked > 0 and compiled.parameter_count():  # an optimizer forgotten
        compile_graph(graph, device="cpu", for_training=True)  # raises: "no optimizer", with a hint
    events = events or Emitter()
    if opts["log_dir"] and (group is None or group.rank == 0):  # one writer under DDP
        from nodegraph.runtime.callbacks.tensorboard import TensorBoard

        board = TensorBoard(opts["log_dir"], graph, opts)
        board.attach(events)  # before the trainer is built: it probes for the histograms
        callbacks = [*callbacks, board]
    if shown and (group is None or group.rank == 0):
        from nodegraph.runtime.callbacks.progress import Progress

        callbacks = [*callbacks, Progress(shown)]
    if mlflow and (group is None or group.rank == 0):
        from nodegraph.runtime.callbacks.mlflow import MLflow

        tracker = MLflow(mlflow, graph, opts)
        tracker.attach(events)  # the final numbers and the weights come after the last hook
        callbacks = [*callbacks, tracker]
    if fresh:  # a continued run keeps the estimators it fitted
        fit_estimators(compiled, lambda text: events.emit(Message(text)))  # trees, k-NN, SVMs
    if prepare is not None:
        prepare(compiled)
    if group:
        torch.manual_seed(opts.seed + group.rank)  # same weights everywhere, own dropout masks
    choice = cpu_threads.choose(compiled, opts.threads)
    events.emit(Message(f"using {choice.text}"))
    untraced = eager.untraced() if opts["compile"] == "off" else contextlib.nullcontext()
    with cpu_threads.using(choice.threads), untraced:  # nothing compiled: no torch._dynamo
        return Trainer(compiled, opts, events, control or RunControl(),
                       Path(checkpoint_dir) if checkpoint_dir else None, group,
                       callbacks).run(resume)


def training_options(graph: Graph, **overrides):
    """The graph's training section with the non-None `overrides` (epochs, seed, device,
    log_dir, threads)."""
    opts, problems = settings.resolve(
        {**graph.training, **{k: str(v) if isinstance(v, Path) else v
                              for k, v in overrides.items() if v is not None}})
    if problems:
        raise ValidationError(problems)
    return opts


def has_optimizer(graph: Graph) -> bool:
    """Whether `graph` trains by gradient (an optimizer block); without one, a run fits its
    estimators and evaluates its metrics."""
    reg = graph.registry
    return any(n.type in reg and reg.get(n.type).kind == "optimizer" for n in graph)


def compile_for(graph: Graph, opts, device: str | None = None) -> Compiled:
    """The graph compiled as `train` compiles it under `opts`: its seed (so its data
    splits) and device. With no epochs to run the graph is only evaluated, so it needs no
    optimizer."""
    return compile_graph(graph, device=device or opts.device, seed=opts.seed,
                   for_training=opts.epochs > 0)


class Trainer:
    """Runs the epochs of one compiled graph: a short loop, and callbacks for the rest
    (`nodegraph.runtime.callbacks`: stages, monitor, best weights, snapshots, early stopping,
    checkpoints, probes). `callbacks` run after the trainer's own, in their order."""

    def __init__(self, compiled: Compiled, opts: dict, events: Emitter, control: RunControl,
                 checkpoint_dir: Path | None, group: distributed.Group | None = None,
                 callbacks: Iterable[Callback] = ()):
        self.c, self.opts, self.events, self.control = compiled, opts, events, control
        self.live_changes: list[dict[str, Any]] = []  # applied since the last epoch entry
        self.checkpoint_dir = checkpoint_dir
        self.ddp = DataParallel(group) if group is not None else None
        self.run_plan = compiled.module.run  # (plan, values) -> values
        self.scale = 1.0  # this rank's share of the batch, under DDP
        if self.ddp is not None and compiled.optimizers:
            self.run_plan = self.ddp.wrap(compiled)
        if opts["compile"] != "off":
            self.run_plan = compiled_or_eager(self.run_plan, opts["compile"], events)
        # each optimizer's step; uncompiled, without the torch._dynamo import torch's makes
        self.steps = {o.node: o.optimizer.step if opts["compile"] != "off"
                      else eager.stepper(o.optimizer) for o in compiled.optimizers}
        self.shuffle_rng = torch.Generator().manual_seed(opts["seed"])
        feeding.prepare(compiled.datasets, opts, compiled.device, group,
                        lambda text: events.emit(Message(text)))
        self.precision = Precision(opts["precision"], opts["accumulate"], compiled.device,
                                   list(compiled.optimizers))
        if slow := slow_warning(opts["precision"], compiled.device):  # e.g. bf16 on a CPU
            events.emit(Message(slow))
        self.primary = next(iter(compiled.datasets.values()), None)  # None: a graph without data
        self.has_val = self.primary is not None and self.primary.has("val")
        self.on_cpu = compiled.device.type == "cpu"
        self.objective = [o.loss_key[0] for o in compiled.optimizers]
        self.active: list[OptimizerRun] = list(compiled.optimizers)  # the stage's optimizers
        self.state = LoopState(stages_of(opts["stages"], [o.node for o in compiled.optimizers],
                                         opts["epochs"]))
        key = opts["monitor"] or ("val.loss" if self.has_val else "train.loss")
        self.monitor = Monitor(key, settings.monitor_rises(key, opts["mode"]), opts["min_delta"])
        self.best = (BestWeights(self.monitor, opts["restore_best"])
                     if opts["patience"] is not None or opts["monitor"] else None)
        own = self._own_callbacks()
        saving = [cb for cb in own if isinstance(cb, Checkpointing)]
        # a checkpoint resumes before the other callbacks start and is written after every
        # other callback's epoch end: what it keeps of them and of the generators is then
        # what the epoch left
        own = [cb.loader() if isinstance(cb, Checkpointing) else cb for cb in own]
        self.callbacks = Callbacks([*own, *callbacks, *(cb.writer() for cb in saving)])
        self.epoch_start: EpochStart | None = None  # what a stopped epoch goes back to

    def _own_callbacks(self) -> list[Callback]:
        """The units every run has, and those its options and listeners ask for, in the
        order their hooks must run."""
        opts, events, monitor = self.opts, self.events, self.monitor
        own: list[Callback] = [StageSchedule(), monitor]
        if self.best is not None:
            own.append(self.best)
        if events.wants(WeightsSnapshot):
            own.append(WeightSnapshots())
        if opts["patience"] is not None:
            own.append(EarlyStopping(monitor, opts["patience"]))
        if self.checkpoint_dir:
            own.append(Checkpointing(self.checkpoint_dir, opts["checkpoint_every"], monitor,
                                     self.best, writes=self.ddp is None or self.ddp.writes))
        if events.wants(ProbeFrame):
            own.append(Probing(Prober(opts["probe_every"], opts["probe_budget"],
                                      opts["probe_rate"]), output_ports(self.c.module)))
        return own

    # -- the loop ----------------------------------------------------------------------

    def run(self, resume: bool = False) -> RunResult:
        """Train through the stage schedule (from the last checkpoint with `resume`)."""
        c, state, hooks = self.c, self.state, self.callbacks
        if resume and self.checkpoint_dir is None:
            raise NodegraphError("resuming needs a checkpoint directory")
        state.resume = resume
        try:
            hooks.on_run_start(self)  # a resumed run's state comes back here
            steps = self.primary.num_batches("train") if self.primary is not None else 0
            self.events.emit(RunStarted(state.last, steps, state.epoch + 1, str(c.device),
                                        c.parameter_count()))
            try:
                while not state.finished:
                    self._epoch(steps)
            except KeyboardInterrupt:  # Ctrl-C, a notebook's Stop: back to the last whole epoch
                state.cancelled = True
                self._roll_back(f"interrupted during epoch {state.epoch}")
            hooks.on_run_end(self)  # everything unfrozen; the best weights back
        except BaseException as e:
            hooks.on_exception(self, e)
            raise
        final: dict[str, dict[str, Any]] = {}
        try:
            for split in ("train", "val", "test"):
                if not state.cancelled and self.primary is not None and self.primary.has(split):
                    final[split] = self.evaluate(split)
        except KeyboardInterrupt:  # during the final evaluation: the trained model is kept
            state.cancelled, final = True, {}
        result = RunResult(state.history, final, c, state.stopped_early, state.cancelled,
                           self.monitor.best_epoch if self.best else None)
        self.events.emit(RunFinished(state.history, final, state.stopped_early, state.cancelled))
        return result

    def _epoch(self, steps: int) -> None:
        """One epoch of the schedule: train, validate, record, then the epoch's callbacks."""
        state, hooks = self.state, self.callbacks
        stage, k = state.schedule[state.index]
        if stage != state.stage:
            state.stage = stage
            hooks.on_stage_start(self, fresh=k == 0)
        self.epoch_start = EpochStart(self)
        state.epoch += 1
        began = time.perf_counter()
        self.c.module.train()
        hooks.on_epoch_start(self)
        train_stats = self._train_epoch(state.epoch, steps)
        if train_stats is None:
            state.cancelled = True
            self._roll_back(f"stopped by request during epoch {state.epoch}")
            return
        state.train, state.val = train_stats, (self.evaluate("val") if self.has_val else {})
        for o in self.active:
            if o.scheduler is not None and not o.per_step:
                self._step_schedule(o)
        hooks.on_validation_end(self)  # the monitor; the best weights
        entry: dict[str, Any] = {"epoch": state.epoch, "train": state.train, "val": state.val,
                 "lr": {o.node: o.optimizer.param_groups[0]["lr"] for o in self.active},
                 "seconds": round(time.perf_counter() - began, 4)}
        if skipped := feeding.take_skipped(self.c.datasets):  # named, never dropped in silence
            entry["skipped"] = skipped
        if self.live_changes:  # what was changed while this epoch trained, and from when
            entry["changes"], self.live_changes = self.live_changes, []
        if len(state.stages) > 1:
            entry["stage"] = state.stages[stage].name
        state.history.append(entry)
        state.index += 1  # with the entry: a stop from here on keeps this epoch whole
        self.events.emit(EpochEnded(state.epoch, state.last, state.train, state.val,
                                    entry["lr"], entry["seconds"], state.improved))
        hooks.on_epoch_end(self)  # snapshots, early stopping, checkpoints

    def _step_schedule(self, o: OptimizerRun) -> None:
        """Advance an epoch schedule; one that watches a number (ReduceLROnPlateau) is
        stepped with it (`monitor`, or the run's monitored number)."""
        watched = getattr(o.scheduler, "monitor", None)
        if watched is None:
            o.scheduler.step()
            return
        key = watched or self.monitor.key
        value = lookup(key, self.state.train, self.state.val)
        if value is None:
            known = [f"train.{k}" for k in self.state.train] + [
                f"val.{k}" for k in self.state.val]
            raise NodegraphError(f"schedule '{o.schedule_node}' watches {key}, which this "
                                 f"run does not report (it has: {', '.join(known)})")
        o.scheduler.step(value)

    def _roll_back(self, said: str) -> None:
        """After a stop: when an epoch was under way (not yet in the history), go back to
        its start (`nodegraph.runtime.epoch_start`), so the weights are those the history
        describes."""
        state, start = self.state, self.epoch_start
        if start is None or len(state.history) >= state.epoch:
            self.events.emit(Message(said))
            return
        start.restore(self)
        state.epoch = len(state.history)
        self.events.emit(Message(f"{said}; the model goes back to the end of epoch "
                                 f"{state.epoch} (a stopped epoch is not kept)"))

    def apply_changes(self, changes: list[tuple[str, str, Any]], epoch: int) -> None:
        """Live param changes sent while the run trains (an optimizer's lr): set in the
        optimizer's param groups (and under its schedule, which scales from them) before
        the next step, and recorded for the epoch's history; a param the optimizer does not
        hold is said, not applied."""
        for node, name, value in changes:
            o = next((o for o in self.c.optimizers if o.node == node), None)
            groups = o.optimizer.param_groups if o is not None else []
            if o is None or not groups or name not in groups[0] \
                    or isinstance(groups[0][name], tuple):
                self.events.emit(Message(f"{node}.{name} cannot change while training; it "
                                         "applies to the next run"))
                continue
            before = groups[0][name]
            for g in groups:
                g[name] = value
            if name == "lr" and o.scheduler is not None and hasattr(o.scheduler, "base_lrs"):
                o.scheduler.base_lrs = [value for _ in o.scheduler.base_lrs]
            step = self.state.global_step + 1
            self.live_changes.append({"node": node, "param": name, "value": value,
                                      "before": before, "epoch": epoch, "step": step})
            self.events.emit(Message(f"{node}.{name} = {value} from step {step} (was "
                                     f"{before})"))

    def _train_epoch(self, epoch: int, steps: int) -> dict[str, Any] | None:
        """The steps of one epoch and their mean losses and metrics; None when stopped."""
        c, control, events, state = self.c, self.control, self.events, self.state
        sums = _Sums(c.loss_keys, self.on_cpu, self.objective)
        for m in c.metrics:
            m.metric.reset()
        want_steps = events.wants(StepEnded)
        loss_every = self.opts["loss_every"]
        before, after = self.callbacks.step_start, self.callbacks.step_end
        step = 0
        shuffle = self.primary is not None and self.primary.shuffle  # None: no data to batch
        for step, values in enumerate(self.batches("train", shuffle), 1):
            if self.ddp is not None:
                values, self.scale = feeding.shard(c.datasets, values, step, self.ddp.group)
            if control.stopped:
                return None
            if control.paused:
                control.wait_while_paused()
            if control._changes:
                self.apply_changes(control.take_changes(), epoch)
            state.global_step += 1
            for cb in before:
                cb.on_step_start(self, values)
            if self.precision.plain:
                for o in self.active:
                    self.step(o, values)
            else:  # mixed precision or accumulation: nodegraph.runtime.precision
                for o in self.active:
                    self.precision.step(o, values, self.run_plan, self.scale, step, steps)
            for cb in after:
                cb.on_step_end(self, values)
            n = next(iter(values.values())).shape[0]
            bad = sums.add(values, n)
            if bad is not None:
                self.fail_nonfinite(bad, values, epoch)
            if c.metrics:
                with torch.no_grad():
                    for m in c.metrics:
                        m.metric.update(*[_detach(None if k is None else values.get(k))
                                          for k in m.keys])
            if want_steps:
                loss = sums.last_total() if step % loss_every == 0 or step == steps else None
                events.emit(StepEnded(epoch, step, steps, loss))
        if self.ddp is not None:
            return self.ddp.reduce(sums, _metric_values(c))
        stats = sums.means()
        bad = next((k for k, v in stats.items() if not math.isfinite(v)), None)
        if bad is not None and step:
            self.fail_nonfinite(bad, values, epoch)
        stats.update(_metric_values(c))
        return stats

    def batches(self, split: str, shuffle: bool) -> Iterator[dict[Key, torch.Tensor]]:
        """Batches of every data block, zipped, keyed (node, port)."""
        streams = [ds.batches(split, shuffle, self.shuffle_rng, node=nid)
                   for nid, ds in self.c.datasets.items()]
        if len(streams) == 1:
            yield from streams[0]
            return
        for parts in zip(*streams, strict=False):
            yield {k: v for part in parts for k, v in part.items()}

    def step(self, o: OptimizerRun, values: dict) -> None:
        """One optimizer's step on a batch (`values` gains every output computed)."""
        run, plan, optimizer, scale = self.run_plan, o.plan, o.optimizer, self.scale
        optimizer_step = self.steps[o.node]
        if o.closure:
            def closure(backward: bool = True):
                # backward=False hands a solver the loss with its graph, to differentiate itself
                optimizer.zero_grad(set_to_none=True)
                with torch.enable_grad():
                    loss = run(plan, values)[o.loss_key]
                    if backward:
                        (loss * scale if scale != 1.0 else loss).backward()
                        if o.clip is not None:
                            torch.nn.utils.clip_grad_norm_(o.params, o.clip)
                return loss
            optimizer_step(closure)
        else:
            loss = run(plan, values)[o.loss_key]
            optimizer.zero_grad(set_to_none=True)
            (loss * scale if scale != 1.0 else loss).backward()
            if o.clip is not None:
                torch.nn.utils.clip_grad_norm_(o.params, o.clip)
            optimizer_step()
        if o.per_step and o.scheduler is not None:
            o.scheduler.step()

    @torch.no_grad()
    def evaluate(self, split: str, plain: bool = False) -> dict[str, Any]:
        """Mean losses and metric values over `split`, in eval mode (`plain`: streamed
        data without random augmentation, the training split too)."""
        c = self.c
        was_training = c.module.training
        c.module.eval()
        sums = _Sums(c.loss_keys, self.on_cpu, self.objective)
        for m in c.metrics:
            m.metric.reset()
        size = self.opts["eval_batch_size"]
        for values in self._eval_batches(split, size, plain):
            with self.precision.autocast():
                c.module.run(c.eval_plan, values)
            sums.add(values, next(iter(values.values())).shape[0])
            for m in c.metrics:
                m.metric.update(*[None if k is None else values.get(k) for k in m.keys])
        c.module.train(was_training)
        return {**sums.means(), **_metric_values(c)}

    def _eval_batches(self, split: str, size: int,
                      plain: bool = False) -> Iterator[dict[Key, torch.Tensor]]:
        return feeding.eval_batches(self.c.datasets, split, size, plain)

    def fail_nonfinite(self, loss_node: str, values: dict, epoch: int) -> None:
        """Stop with the name of the first node whose output stopped being finite."""
        culprit = loss_node
        with torch.no_grad():
            for node, _, _, out_keys in self.c.module.full_plan:
                if any(isinstance(values.get(k), torch.Tensor) and
                       not torch.isfinite(values[k]).all() for k in out_keys):
                    culprit = node
                    break
        message = (f"the loss became NaN or infinite in epoch {epoch}; the first "
                   f"non-finite value appeared at node '{culprit}'")
        self.events.emit(NodeFailed(culprit, message))
        raise NodeRuntimeError(culprit, message, "lower the learning rate, clip gradients "
                               "(clip_grad_norm) or normalise the inputs")


class _Sums:
    """Sample-weighted sums of each loss over an epoch; `loss` is the total of the losses
    optimizers minimise (a loss feeding a weighted sum is a part, not counted again)."""

    def __init__(self, loss_keys: dict[str, Key], on_cpu: bool, objective: list[str]):
        self.keys = loss_keys
        self.on_cpu = on_cpu
        self.objective = objective or list(loss_keys)
        self.sums: dict[str, Any] = {node: 0.0 for node in loss_keys}
        self.count = 0
        self.last: dict[str, Any] = {}

    def add(self, values: dict, n: int) -> str | None:
        """Add one batch; on the CPU returns the first loss node whose value is not finite."""
        self.count += n
        for node, key in self.keys.items():
            v = values.get(key)
            if v is None:
                continue
            v = v.detach() if v.ndim == 0 else v.detach().mean()  # reduction none: per sample
            v = float(v) if self.on_cpu else v
            self.last[node] = v
            self.sums[node] += v * n
            if self.on_cpu and not math.isfinite(v):
                return node
        return None

    def last_total(self) -> float:
        return float(sum(float(v) for v in self.last.values()))

    def means(self) -> dict[str, float]:
        if not self.count:
            return {}
        out = {node: float(s) / self.count for node, s in self.sums.items()}
        if "loss" not in out and out:  # a graph without losses reports none
            out = {"loss": sum(out[n] for n in self.objective if n in out), **out}
        return out


def _detach(v):
    return v.detach() if isinstance(v, torch.Tensor) else v


def _metric_values(c: Compiled) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for m in c.metrics:
        value = m.metric.compute()
        if isinstance(value, dict):
            out.update({f"{m.node}.{k}": v for k, v in value.items()})
        else:
            out[m.node] = value
    return out
