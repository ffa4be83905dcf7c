"""The training loop: epochs over the train split, evaluation on val, events out.

One step: the data blocks yield a batch; for each optimizer block in topological order,
run the plan its loss needs, zero its parameters' gradients, backward, clip, step (with a
closure for L-BFGS), and advance a per-step schedule. After the epoch: evaluate the val
split, advance per-epoch schedules, record the history, watch for early stopping, write a
checkpoint. At the end, the best weights come back when asked and every split is evaluated
once more for the `final` numbers.

The loop is kept as lean as a hand-written one: data already on the device, losses read
as Python floats on the CPU (a free read there) and summed on the device elsewhere (no
sync per step), per-step events only when someone listens. `benchmarks/overhead.py` holds
it to that.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import torch

from nodegraph.kinds.estimator import fit_estimators
from nodegraph.model import outputs, settings
from nodegraph.model.errors import NodegraphError, NodeRuntimeError, ValidationError
from nodegraph.model.errors import first_line as _first_line
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
from nodegraph.runtime import checkpoint, distributed
from nodegraph.runtime.compile import Compiled, Key, OptimizerRun, compile
from nodegraph.runtime.probes import ProbeFrame, Prober

SNAPSHOT_INTERVAL_S = 0.5  # weight copies for live model views, at most this often


class RunControl:
    """Stop and pause a run from another thread (the editor's buttons, Ctrl-C)."""

    def __init__(self) -> None:
        self._stop = threading.Event()
        self._running = threading.Event()
        self._running.set()

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

    def to_json(self) -> dict[str, Any]:
        return {"history": self.history, "final": self.final,
                "stopped_early": self.stopped_early, "cancelled": self.cancelled,
                "best_epoch": self.best_epoch}


@dataclass(frozen=True)
class Stage:
    """A phase of training: which optimizers step, which nodes stay fixed, how long."""

    name: str
    epochs: int
    optimizers: list[str]
    frozen: list[str]


@dataclass
class _Monitor:
    """Early stopping and best-weights tracking on one number."""

    key: str
    rises: bool
    min_delta: float
    patience: int | None
    best: float | None = None
    best_epoch: int | None = None
    since_best: int = 0
    best_state: dict[str, torch.Tensor] | None = field(default=None, repr=False)

    def update(self, value: float, epoch: int) -> bool:
        """Record `value`; True when it is a new best."""
        if value is None or not math.isfinite(value):
            self.since_best += 1
            return False
        better = self.best is None or (value > self.best + self.min_delta if self.rises
                                       else value < self.best - self.min_delta)
        if better:
            self.best, self.best_epoch, self.since_best = value, epoch, 0
        else:
            self.since_best += 1
        return better

    @property
    def exhausted(self) -> bool:
        return self.patience is not None and self.since_best >= self.patience


def train(graph: Graph, *, epochs: int | None = None, seed: int | None = None,
          device: str | None = None, events: Emitter | None = None,
          checkpoint_dir: str | Path | None = None, resume: bool = False,
          control: RunControl | None = None,
          prepare: Callable[[Compiled], None] | None = None) -> RunResult:
    """Train `graph` and return its history; arguments override the file's training section.
    `prepare` sees the compiled graph before the first step (`run --init-weights` loads
    weights there)."""
    opts = training_options(graph, epochs=epochs, seed=seed, device=device)
    if checkpoint_dir is not None:  # an unwritable folder fails now, not after an epoch
        outputs.check_folder(checkpoint_dir, "checkpoint folder")
    group = distributed.current()
    device = distributed.setup(group, opts.device) if group else opts.device
    compiled = compile_for(graph, opts, device)
    events = events or Emitter()
    fit_estimators(compiled, lambda text: events.emit(Message(text)))  # trees, k-NN, SVMs
    if prepare is not None:
        prepare(compiled)
    if group:
        torch.manual_seed(opts.seed + group.rank)  # same weights everywhere, own dropout masks
    return Trainer(compiled, opts, events, control or RunControl(),
                   Path(checkpoint_dir) if checkpoint_dir else None, group).run(resume)


def training_options(graph: Graph, **overrides):
    """The graph's training section with the non-None `overrides` (epochs, seed, device)."""
    opts, problems = settings.resolve(
        {**graph.training, **{k: v for k, v in overrides.items() if v is not None}})
    if problems:
        raise ValidationError(problems)
    return opts


def compile_for(graph: Graph, opts, device: str | None = None) -> Compiled:
    """The graph compiled as `train` compiles it under `opts`: its seed (so its data
    splits) and device. With no epochs to run the graph is only evaluated, so it needs no
    optimizer."""
    return compile(graph, device=device or opts.device, seed=opts.seed,
                   for_training=opts.epochs > 0)


class Trainer:
    """Runs the epochs of one compiled graph."""

    def __init__(self, compiled: Compiled, opts: dict, events: Emitter, control: RunControl,
                 checkpoint_dir: Path | None, group: distributed.Group | None = None):
        self.c, self.opts, self.events, self.control = compiled, opts, events, control
        self.checkpoint_dir = checkpoint_dir
        self.group = group
        self.run_plan = compiled.module.run  # (plan, values) -> values
        self.scale = 1.0  # this rank's share of the batch, under DDP
        if group is not None and compiled.optimizers:
            ddp = distributed.wrap(compiled.module, compiled.device, _partial_plans(compiled))
            self.run_plan = lambda plan, values: ddp(values, plan)
        if opts["compile"] != "off":
            self.run_plan = self._compiled(self.run_plan, opts["compile"])
        self.history: list[dict[str, Any]] = []
        self.shuffle_rng = torch.Generator().manual_seed(opts["seed"])
        datasets = compiled.datasets
        self.primary = next(iter(datasets.values()), None)  # None: a graph without data
        self.has_val = self.primary is not None and self.primary.has("val")
        key = opts["monitor"] or ("val.loss" if self.has_val else "train.loss")
        self.monitor = _Monitor(key, settings.monitor_rises(key, opts["mode"]),
                                opts["min_delta"], opts["patience"])
        self.on_cpu = compiled.device.type == "cpu"
        self.objective = [o.loss_key[0] for o in compiled.optimizers]
        self.active: list[OptimizerRun] = list(compiled.optimizers)
        self._frozen: list[torch.nn.Parameter] = []
        self._frozen_modules: list[torch.nn.Module] = []
        self.global_step = 0
        self.prober = (Prober(opts["probe_every"], opts["probe_budget"], opts["probe_rate"])
                       if events.wants(ProbeFrame) else None)
        self._snapshots = events.wants(WeightsSnapshot)
        self._snapshot_sent = -math.inf
        self.probe_ports = {node: [k[1] for k in out_keys]
                            for node, _, _, out_keys in compiled.module.full_plan}

    # -- the loop ----------------------------------------------------------------------

    def run(self, resume: bool = False) -> RunResult:
        c, opts = self.c, self.opts
        stages = self.stages
        schedule = [(si, k) for si, st in enumerate(stages) for k in range(st.epochs)]
        index, epoch = self._resume() if resume else (0, 0)
        total = len(schedule)
        steps = self.primary.num_batches("train") if self.primary is not None else 0
        self.events.emit(RunStarted(total, steps, epoch + 1, str(c.device),
                                    c.parameter_count()))
        stopped_early = cancelled = False
        current = None
        while index < total:
            si, k = schedule[index]
            if si != current:
                current = self._enter_stage(si, fresh=k == 0)
            epoch += 1
            began = time.perf_counter()
            train_stats = self._train_epoch(epoch, steps)
            if train_stats is None:
                cancelled = True
                self.events.emit(Message(f"stopped by request during epoch {epoch}"))
                break
            val_stats = self.evaluate("val") if self.has_val else {}
            for o in self.active:
                if o.scheduler is not None and not o.per_step:
                    o.scheduler.step()
            improved = self.monitor.update(_lookup(self.monitor.key, train_stats, val_stats),
                                           epoch)
            if improved and self._tracks_best():
                self.monitor.best_state = {k: v.detach().clone()
                                           for k, v in c.module.block_state().items()}
            entry = {"epoch": epoch, "train": train_stats, "val": val_stats,
                     "lr": {o.node: o.optimizer.param_groups[0]["lr"] for o in self.active},
                     "seconds": round(time.perf_counter() - began, 4)}
            if len(stages) > 1:
                entry["stage"] = stages[si].name
            self.history.append(entry)
            self.events.emit(EpochEnded(epoch, total, train_stats, val_stats,
                                        entry["lr"], entry["seconds"], improved))
            index += 1
            self._snapshot(epoch, last=index >= total)
            if self.monitor.exhausted:
                self.events.emit(Message(f"early stop after epoch {epoch}: {self.monitor.key} "
                                         f"has not improved for {self.monitor.patience} "
                                         f"epochs (best {self.monitor.best:.6g} at epoch "
                                         f"{self.monitor.best_epoch})"))
                if si == len(stages) - 1:
                    stopped_early = True
                    index = total
                else:  # the stage ends early; the next one starts
                    index = next(i for i, (s, _) in enumerate(schedule) if s == si + 1)
            if self.checkpoint_dir and self._main and (
                    epoch % opts["checkpoint_every"] == 0 or index >= total):
                self._save_checkpoint(epoch, index, improved)
        self._enter_stage(None)
        if self.monitor.best_state is not None and opts["restore_best"] and not cancelled:
            c.module.load_block_state(self.monitor.best_state)
            self.events.emit(Message(f"restored the weights of epoch {self.monitor.best_epoch}"
                                     f" (best {self.monitor.key} = {self.monitor.best:.6g})"))
        final = {} if cancelled else {s: self.evaluate(s) for s in ("train", "val", "test")
                                      if self.primary is not None and self.primary.has(s)}
        result = RunResult(self.history, final, c, stopped_early, cancelled,
                           self.monitor.best_epoch if self._tracks_best() else None)
        self.events.emit(RunFinished(self.history, final, stopped_early, cancelled))
        return result

    def _snapshot(self, epoch: int, last: bool) -> None:
        """Send a copy of the weights to whoever watches the model train (throttled)."""
        now = time.monotonic()
        if not self._snapshots or (now - self._snapshot_sent < SNAPSHOT_INTERVAL_S and not last):
            return
        self._snapshot_sent = now
        state = {k: v.detach().to("cpu", copy=True) for k, v in self.c.module.block_state().items()}
        self.events.emit(WeightsSnapshot(epoch, state))

    @property
    def stages(self) -> list[Stage]:
        """The training stages; one stage of every optimizer when none are declared."""
        declared = self.opts["stages"]
        if not declared:
            return [Stage("train", self.opts["epochs"], [o.node for o in self.c.optimizers],
                          [])]
        return [Stage(d.get("name", f"stage {i + 1}"), d["epochs"],
                      d.get("optimizers") or [o.node for o in self.c.optimizers],
                      d.get("frozen", [])) for i, d in enumerate(declared)]

    def _enter_stage(self, index: int | None, fresh: bool = True) -> int | None:
        """Activate a stage's optimizers and freeze its frozen nodes (None: unfreeze all)."""
        for p in self._frozen:
            p.requires_grad_(True)
        self._frozen = []
        if index is None:
            return None
        stage = self.stages[index]
        runs = [o for o in self.c.optimizers if o.node in stage.optimizers]
        if runs:  # the last active optimizer's forward also feeds every loss and metric
            needed = {s[0] for s in runs[-1].plan} | {s[0] for s in self.c.eval_plan}
            runs[-1] = replace(runs[-1], plan=self.c.module.plan(needed))
        self.active = runs
        members = _stage_members(self.c, stage.frozen)
        self._frozen = [p for m in members for p in m.parameters() if p.requires_grad]
        for p in self._frozen:
            p.requires_grad_(False)
        self._frozen_modules = members
        if len(self.stages) > 1:
            if fresh:
                self.monitor = replace(self.monitor, best=None, best_epoch=None,
                                       since_best=0, best_state=None)
            self.events.emit(Message(f"stage {index + 1}/{len(self.stages)} '{stage.name}': "
                                     f"{stage.epochs} epochs, optimizers "
                                     f"{', '.join(stage.optimizers)}"
                                     + (f", frozen {', '.join(stage.frozen)}"
                                        if stage.frozen else "")))
        return index

    def _compiled(self, run, backend: str):
        """`run` through torch.compile; on the first failure, a message and eager from then on."""
        try:
            fast = torch.compile(run, backend=backend)
        except Exception as e:  # torch.compile unavailable on this platform
            self.events.emit(Message(f"torch.compile unavailable ({_first_line(e)}); running "
                                     "eager", "warning"))
            return run
        state = {"run": fast}

        def call(plan, values):
            try:
                return state["run"](plan, values)
            except NodegraphError:
                raise
            except Exception as e:
                if state["run"] is run:
                    raise
                state["run"] = run
                self.events.emit(Message(f"torch.compile failed ({_first_line(e)}); running "
                                         "eager", "warning"))
                return run(plan, values)

        return call

    @property
    def _main(self) -> bool:
        return self.group is None or self.group.main

    def _tracks_best(self) -> bool:
        return self.opts["patience"] is not None or bool(self.opts["monitor"])

    def batches(self, split: str, shuffle: bool) -> Iterator[dict[Key, torch.Tensor]]:
        """Batches of every data block, zipped, keyed (node, port)."""
        streams = [ds.batches(split, shuffle, self.shuffle_rng, node=nid)
                   for nid, ds in self.c.datasets.items()]
        if len(streams) == 1:
            yield from streams[0]
            return
        for parts in zip(*streams, strict=False):
            yield {k: v for part in parts for k, v in part.items()}

    def _train_epoch(self, epoch: int, steps: int) -> dict[str, Any] | None:
        c, control, events = self.c, self.control, self.events
        c.module.train()
        for m in self._frozen_modules:  # frozen blocks keep their statistics too
            m.eval()
        sums = _Sums(c.loss_keys, self.on_cpu, self.objective)
        for m in c.metrics:
            m.metric.reset()
        want_steps = events.wants(StepEnded)
        loss_every = self.opts["loss_every"]
        step = 0
        for step, values in enumerate(self.batches("train", self.primary.shuffle), 1):
            if self.group is not None:
                values, self.scale = self.group.shard(values)
            if control.stopped:
                return None
            if control.paused:
                control.wait_while_paused()
            self.global_step += 1
            if self.prober is None:
                for o in self.active:
                    self.step(o, values)
            else:
                self._probed_step(values, epoch)
            n = next(iter(values.values())).shape[0]
            bad = sums.add(values, n)
            if bad is not None:
                self._fail_nonfinite(bad, values, epoch)
            if c.metrics:
                with torch.no_grad():
                    for m in c.metrics:
                        m.metric.update(*[_detach(values.get(k)) for k in m.keys])
            if want_steps:
                loss = sums.last_total() if step % loss_every == 0 or step == steps else None
                events.emit(StepEnded(epoch, step, steps, loss))
        if self.group is not None:
            return self._reduced(sums)
        stats = sums.means()
        bad = next((k for k, v in stats.items() if not math.isfinite(v)), None)
        if bad is not None and step:
            self._fail_nonfinite(bad, values, epoch)
        stats.update(_metric_values(c))
        return stats

    def _reduced(self, sums: _Sums) -> dict[str, Any]:
        """The epoch's numbers over all ranks: losses exactly, metrics weighted by samples
        (exact for shares like accuracy, a close average for the rest)."""
        totals = self.group.sum([float(v) for v in sums.sums.values()] + [sums.count])
        sums.sums, sums.count = dict(zip(sums.sums, totals[:-1], strict=True)), int(totals[-1])
        stats = sums.means()
        parts = self.group.gather((sums.count, _metric_values(self.c)))
        total = sum(n for n, _ in parts) or 1
        for key, value in parts[0][1].items():
            if isinstance(value, int | float) and not isinstance(value, bool):
                stats[key] = sum(n * p[key] for n, p in parts) / total
            else:
                stats[key] = value
        return stats

    def _probed_step(self, values: dict, epoch: int) -> None:
        """A step the prober may watch; every step is timed to keep probing on budget."""
        prober, optimizers = self.prober, self.active
        start = time.perf_counter()
        if not prober.wants(self.global_step):
            for o in optimizers:
                self.step(o, values)
            prober.note_step_time(time.perf_counter() - start)
            return
        with prober.watch(self.c.module, self.probe_ports) as watch:
            for o in optimizers:
                self.step(o, values)
        prober.note_step_time(time.perf_counter() - start - watch.cost)
        frame = watch.frame(epoch, self.global_step)
        self.events.emit(frame)
        if frame.nonfinite is not None:
            self._fail_nonfinite(frame.nonfinite, values, epoch)

    def step(self, o: OptimizerRun, values: dict) -> None:
        """One optimizer's step on a batch (`values` gains every output computed)."""
        run, plan, optimizer, scale = self.run_plan, o.plan, o.optimizer, self.scale
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
            optimizer.step(closure)
        else:
            loss = run(plan, values)[o.loss_key]
            optimizer.zero_grad(set_to_none=True)
            (loss * scale if scale != 1.0 else loss).backward()
            if o.clip is not None:
                torch.nn.utils.clip_grad_norm_(o.params, o.clip)
            optimizer.step()
        if o.per_step and o.scheduler is not None:
            o.scheduler.step()

    @torch.no_grad()
    def evaluate(self, split: str) -> dict[str, Any]:
        """Mean losses and metric values over `split`, in eval mode."""
        c = self.c
        was_training = c.module.training
        c.module.eval()
        sums = _Sums(c.loss_keys, self.on_cpu, self.objective)
        for m in c.metrics:
            m.metric.reset()
        size = self.opts["eval_batch_size"]
        for values in self._eval_batches(split, size):
            c.module.run(c.eval_plan, values)
            sums.add(values, next(iter(values.values())).shape[0])
            for m in c.metrics:
                m.metric.update(*[values.get(k) for k in m.keys])
        c.module.train(was_training)
        return {**sums.means(), **_metric_values(c)}

    def _eval_batches(self, split: str, size: int) -> Iterator[dict[Key, torch.Tensor]]:
        tensors = {nid: ds.tensors(split) for nid, ds in self.c.datasets.items()}
        n = min(len(next(iter(t.values()))) for t in tensors.values())
        for i in range(0, n, size):
            yield {(nid, k): v[i:i + size] for nid, part in tensors.items()
                   for k, v in part.items()}

    # -- failures ------------------------------------------------------------------------

    def _fail_nonfinite(self, loss_node: str, values: dict, epoch: int) -> None:
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

    # -- checkpoints ---------------------------------------------------------------------

    def _save_checkpoint(self, epoch: int, index: int, improved: bool) -> None:
        c = self.c
        tensors = {"rng/torch": torch.get_rng_state(), "rng/shuffle": self.shuffle_rng.get_state()}
        if torch.cuda.is_available():
            tensors["rng/cuda"] = torch.cuda.get_rng_state()
        info = {"epoch": epoch, "next": index, "history": self.history,
                "global_step": self.global_step,
                "monitor": {"best": self.monitor.best, "best_epoch": self.monitor.best_epoch,
                            "since_best": self.monitor.since_best},
                "schedules": {o.node: o.scheduler.state_dict() for o in c.optimizers
                              if o.scheduler is not None}}
        checkpoint.save(self.checkpoint_dir, c.module.block_state(),
                        {o.node: o.optimizer.state_dict() for o in c.optimizers}, tensors, info)
        if improved and self._tracks_best():
            checkpoint.save_weights(self.checkpoint_dir / "best.safetensors",
                                    c.module.block_state())
        self.events.emit(Message(f"checkpoint written: epoch {epoch}", "debug"))

    def _resume(self) -> tuple[int, int]:
        """Load the last checkpoint; (index into the epoch schedule, epochs done)."""
        c = self.c
        if self.checkpoint_dir is None:
            raise NodegraphError("resuming needs a checkpoint directory")
        weights, optimizers, tensors, info = checkpoint.load(self.checkpoint_dir)
        try:
            c.module.load_block_state(weights)
        except RuntimeError as e:
            raise NodegraphError(f"the checkpoint in {self.checkpoint_dir} does not fit this "
                                 f"graph: {_first_line(e)}") from None
        try:
            for o in c.optimizers:
                if o.node in optimizers:
                    o.optimizer.load_state_dict(optimizers[o.node])
                if o.scheduler is not None and o.node in info.get("schedules", {}):
                    o.scheduler.load_state_dict(info["schedules"][o.node])
        except (ValueError, KeyError, TypeError) as e:  # torch's words for a foreign state
            raise NodegraphError(f"the optimizer state in the checkpoint in "
                                 f"{self.checkpoint_dir} does not fit this graph's optimizers "
                                 f"({_first_line(e)}); resume with the graph that wrote it, "
                                 "or start afresh without --resume") from None
        torch.set_rng_state(tensors["rng/torch"])
        self.shuffle_rng.set_state(tensors["rng/shuffle"])
        if "rng/cuda" in tensors and torch.cuda.is_available():
            torch.cuda.set_rng_state(tensors["rng/cuda"])
        self.history = info["history"]
        self.global_step = info.get("global_step", 0)
        mon = info.get("monitor", {})
        self.monitor.best, self.monitor.best_epoch = mon.get("best"), mon.get("best_epoch")
        self.monitor.since_best = mon.get("since_best", 0)
        best = self.checkpoint_dir / "best.safetensors"
        if self._tracks_best() and best.exists():
            self.monitor.best_state = checkpoint.load_file(str(best))
        self.events.emit(Message(f"resumed from the checkpoint of epoch {info['epoch']}"))
        return info.get("next", info["epoch"]), info["epoch"]


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
            v = float(v.detach()) if self.on_cpu else v.detach()
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
        if "loss" not in out:
            out = {"loss": sum(out[n] for n in self.objective if n in out), **out}
        return out


def _stage_members(c: Compiled, nodes: list[str]) -> list[torch.nn.Module]:
    """The modules of `nodes` (a group instance stands for its inner nodes)."""
    flat = c.report.flat
    ids = [m for n in nodes for m in ((flat.members(n) if flat else None) or [n])]
    return [m for m in (c.module.module_of(n) for n in ids) if m is not None]


def _partial_plans(c: Compiled) -> bool:
    """True when some optimizer's forward leaves parameters unused (DDP must look for them)."""
    all_params = {id(p) for p in c.module.parameters() if p.requires_grad}
    for o in c.optimizers:
        used = {id(p) for _, block, _, _ in o.plan for p in block.parameters()}
        if all_params - used:
            return True
    return False


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


def _lookup(key: str, train: dict, val: dict) -> float | None:
    split, _, name = key.partition(".")
    source = {"train": train, "val": val}.get(split)
    if source is None or name not in source:
        return None
    value = source[name]
    return float(value) if isinstance(value, int | float) else None
