"""Probes: what each node's output and the gradient arriving at it look like, on a budget.

Every few steps the trainer asks a `Prober` to watch one step. For that step the prober hooks
each block: a forward hook summarises the block's outputs (shape, mean, std, min/max, |max|,
zero / dead / saturated fractions, a 32-bin histogram, a few values, a thumbnail for
image-like outputs) and registers a tensor hook on each output, which summarises the gradient
that arrives there during backward (norm, mean |g|, histogram). Registering the tensor hook
from the forward hook means it sees the output object the next block actually received,
so in-place ops downstream do not break it. Statistics are computed on the device and
copied to the host as one small tensor per output; the hooks are removed after the step, and
no tensor or autograd graph outlives it. Parameters get their gradient norm and the size of
the update relative to the weight (the update/weight ratio).

The interval between probed steps grows when probing costs more than `budget` of the
training time, and frames come at most `rate` times a second, so the animation drops frames
rather than slowing training: it plays about one wave a second, and a fast model would
otherwise be probed a hundred times a second for frames nobody sees.

`trace_batch` is the step-through's source: one batch, every node's full input, output and
gradient values, for small graphs a student checks by hand.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import torch

from nodegraph.runtime.probe_frames import GradSummary as GradSummary
from nodegraph.runtime.probe_frames import Histogram as Histogram
from nodegraph.runtime.probe_frames import OutputSummary as OutputSummary
from nodegraph.runtime.probe_frames import ParamSummary as ParamSummary
from nodegraph.runtime.probe_frames import ProbeFrame as ProbeFrame
from nodegraph.runtime.probe_frames import read_frames as read_frames

BINS = 32
SAMPLE = 8
THUMB = 28


def _histogram(x: torch.Tensor, lo: torch.Tensor, hi: torch.Tensor) -> torch.Tensor:
    if x.numel() == 0:
        return torch.zeros(BINS, device=x.device)
    span = (hi - lo).clamp_min(1e-12)
    idx = ((x - lo) / span * BINS).long().clamp_(0, BINS - 1)
    return torch.bincount(idx.flatten(), minlength=BINS).float()


def summarize_output(t: torch.Tensor) -> OutputSummary:
    """Statistics of one output, computed on its device and copied back at once."""
    x = t.detach()
    shape = list(x.shape)
    if not x.is_floating_point():
        x = x.float()
    flat = x.flatten()
    finite_mask = torch.isfinite(flat)
    finite = flat[finite_mask] if flat.numel() else flat
    if finite.numel() == 0:
        finite = torch.zeros(1, device=x.device)
    lo, hi = finite.min(), finite.max()
    dead = _dead_fraction(x)
    unit = ((finite < 0.01) | (finite > 0.99)).float().mean()
    sym = (finite.abs() > 0.99).float().mean()
    stats = torch.stack([finite.mean(), finite.std() if finite.numel() > 1 else
                         torch.zeros((), device=x.device), lo, hi, finite.abs().max(),
                         (flat == 0).float().mean(), dead, unit, sym,
                         finite_mask.all().float()])
    hist = _histogram(finite, lo, hi)
    host = torch.cat([stats, hist, flat[:SAMPLE].float()]).cpu().tolist()
    mean, std, mn, mx, absmax, zero, dead_f, unit_f, sym_f, ok = host[:10]
    counts = [int(c) for c in host[10:10 + BINS]]
    sample = host[10 + BINS:]
    saturated = unit_f if mn >= 0 and mx <= 1 else sym_f if mn >= -1 and mx <= 1 else 0.0
    return OutputSummary(shape, mean, std, mn, mx, absmax, zero, dead_f, saturated, ok == 1.0,
                         Histogram(mn, mx, counts), sample, _thumbnail(x))


def _dead_fraction(x: torch.Tensor) -> torch.Tensor:
    """Share of units (dim 1: features or channels) that are zero for every sample."""
    if x.ndim < 2:
        return torch.zeros((), device=x.device)
    zero = x == 0
    per_unit = zero.flatten(2).all(-1) if x.ndim >= 3 else zero
    return per_unit.all(0).float().mean()


def _thumbnail(x: torch.Tensor) -> list[list[float]] | None:
    """The first sample as a small image when the output looks like one (N, [C,] H, W)."""
    if x.ndim < 3 or min(x.shape[-2:]) < 2:
        return None
    img = x[0]
    while img.ndim > 2:
        img = img[0]
    h, w = img.shape
    if h > THUMB or w > THUMB:
        img = torch.nn.functional.adaptive_avg_pool2d(img[None, None].float(),
                                                      (min(h, THUMB), min(w, THUMB)))[0, 0]
    return [[round(v, 5) for v in row] for row in img.float().cpu().tolist()]


def summarize_grad(g: torch.Tensor) -> GradSummary:
    x = g.detach().float().flatten()
    mask = torch.isfinite(x)
    finite = x[mask] if x.numel() else x
    if finite.numel() == 0:
        finite = torch.zeros(1, device=x.device)
    lo, hi = finite.min(), finite.max()
    host = torch.cat([torch.stack([finite.norm(), finite.abs().mean(), mask.all().float(), lo,
                                   hi]), _histogram(finite, lo, hi)]).cpu().tolist()
    norm, mean_abs, ok, mn, mx = host[:5]
    return GradSummary(norm, mean_abs, ok == 1.0, Histogram(mn, mx, [int(c) for c in host[5:]]))


@dataclass
class Prober:
    """Decides which steps to probe and collects one frame per probed step."""

    every: int = 10  # probe every N-th step at most
    budget: float = 0.05  # share of training time probing may cost
    rate: float = 0.0  # frames per second at most; 0: no limit
    interval: int = field(init=False)
    _step_time: float = field(default=0.0, init=False)  # running mean of unprobed steps
    _next: int = field(default=1, init=False)
    _not_before: float = field(default=0.0, init=False)  # when `rate` allows the next

    def __post_init__(self) -> None:
        self.interval = self.every

    def wants(self, global_step: int) -> bool:
        return global_step >= self._next and (
            not self.rate or time.perf_counter() >= self._not_before)

    def note_step_time(self, seconds: float) -> None:
        """The duration of an ordinary step, to judge what probing costs."""
        self._step_time = seconds if not self._step_time else 0.9 * self._step_time + 0.1 * seconds

    def watch(self, module: torch.nn.Module, ports: dict[str, list[str]]) -> _Watch:
        """Hooks for one step on the blocks in `ports` (node -> output port names, in
        forward order)."""
        return _Watch(self, module, ports)

    def _done(self, global_step: int, extra: float) -> None:
        if self._step_time > 0:
            needed = math.ceil(extra / (self.budget * self._step_time))
            self.interval = max(self.every, min(needed, 10_000))
        self._next = global_step + self.interval
        if self.rate:
            self._not_before = time.perf_counter() + 1 / self.rate


class _Watch:
    """One probed step: hooks in on enter, a frame out on `frame()`, hooks gone after."""

    def __init__(self, prober: Prober, module: torch.nn.Module, ports: dict[str, list[str]]):
        self.prober, self.ports, self.order = prober, ports, list(ports)
        self.blocks = cast(torch.nn.ModuleDict, module.blocks)
        self.outputs: dict[str, dict[str, OutputSummary]] = {}
        self.grads: dict[str, dict[str, GradSummary]] = {}
        self.handles: list[Any] = []
        self.before: dict[str, torch.Tensor] = {}
        self.cost = 0.0

    def __enter__(self) -> _Watch:
        start = time.perf_counter()
        for node in self.order:
            block = self.blocks[node] if node in self.blocks else None
            if block is not None:
                self.handles.append(block.register_forward_hook(self._forward_hook(node)))
        with torch.no_grad():
            self.before = {k.removeprefix("blocks."): p.detach().clone()
                           for k, p in self.blocks.named_parameters(prefix="blocks")
                           if p.requires_grad}
        self.cost += time.perf_counter() - start
        return self

    def _forward_hook(self, node: str):
        def hook(module, args, output):
            start = time.perf_counter()
            outs = output if isinstance(output, tuple) else (output,)
            ports = self.ports[node]
            summaries = {}
            for port, t in zip(ports, outs, strict=False):
                if not isinstance(t, torch.Tensor):
                    continue
                summaries[port] = summarize_output(t)
                if t.requires_grad:
                    t.register_hook(self._grad_hook(node, port))
            self.outputs[node] = summaries
            self.cost += time.perf_counter() - start
        return hook

    def _grad_hook(self, node: str, port: str):
        def hook(grad):
            start = time.perf_counter()
            self.grads.setdefault(node, {})[port] = summarize_grad(grad)
            self.cost += time.perf_counter() - start
        return hook

    def __exit__(self, *exc) -> None:
        for h in self.handles:
            h.remove()
        self.handles.clear()

    def frame(self, epoch: int, global_step: int) -> ProbeFrame:
        """Call after the optimizer steps: parameter summaries, then the frame."""
        start = time.perf_counter()
        params = {}
        with torch.no_grad():
            named = {k.removeprefix("blocks."): p for k, p in
                     self.blocks.named_parameters(prefix="blocks")}
            stats = []
            for name, before in self.before.items():
                p = named[name]
                g = p.grad if p.grad is not None else torch.zeros((), device=p.device)
                stats.append(torch.stack([g.norm(), before.norm(), (p - before).norm()]))
            values = torch.stack(stats).cpu().tolist() if stats else []
        for name, (gn, wn, un) in zip(self.before, values, strict=True):
            params[name] = ParamSummary(gn, wn, un / wn if wn > 0 else 0.0)
        self.before = {}
        nonfinite = next((n for n in self.order for s in self.outputs.get(n, {}).values()
                          if not s.finite), None)
        self.cost += time.perf_counter() - start
        self.prober._done(global_step, self.cost)
        return ProbeFrame(epoch, global_step, [n for n in self.order if n in self.outputs],
                          self.outputs, self.grads, params, nonfinite, self.cost)


class ProbeWriter:
    """Writes frames to a JSON-lines file for `--probe-out`, one frame per line."""

    def __init__(self, path: str | Path):
        from nodegraph.model.outputs import AtomicFile  # whole or not at all, named on failure

        self.file = AtomicFile(path, "--probe-out")

    def __call__(self, frame: ProbeFrame) -> None:
        self.file.write(json.dumps(frame.to_json(), allow_nan=True) + "\n")

    def close(self) -> None:
        """Keep the frames written so far (a run that failed has them too)."""
        self.file.commit()


@dataclass
class TraceRecord:
    """One node of a step-through: its inputs and outputs, later the gradients at them."""

    node: str
    inputs: dict[str, torch.Tensor]
    outputs: dict[str, torch.Tensor]
    grads: dict[str, torch.Tensor] = field(default_factory=dict)


def trace_batch(compiled, batch: dict | None = None, optimizer: int = 0) -> list[TraceRecord]:
    """Run one batch through the graph and backward from an optimizer's loss, keeping every
    node's inputs, outputs and output gradients (detached copies) in forward order.

    Nothing is stepped: the weights are unchanged. Meant for small graphs and teaching.
    """
    module = compiled.module
    if batch is None:
        data = next(iter(compiled.datasets.items()))
        batch = {(data[0], k): v for k, v in next(data[1].batches("train")).items()}
    values = dict(batch)
    records: dict[str, TraceRecord] = {}
    plan = module.full_plan  # every block, also those that feed no loss yet
    for node, block, in_keys, out_keys in plan:
        args = [values.get(k) for k in in_keys]
        out = block(*args)
        outs = (out,) if len(out_keys) == 1 else tuple(out)
        for key, t in zip(out_keys, outs, strict=True):
            values[key] = t
            if isinstance(t, torch.Tensor) and t.requires_grad:
                t.retain_grad()
        ports = [p.name for p in compiled.report.specs[node].inputs]  # the block's own names
        records[node] = TraceRecord(
            node, {port: v.detach().clone() for port, v in zip(ports, args, strict=True)
                   if isinstance(v, torch.Tensor)},
            {k[1]: t.detach().clone() for k, t in zip(out_keys, outs, strict=True)})
    if compiled.optimizers:
        loss = values[compiled.optimizers[optimizer].loss_key]
        module.zero_grad(set_to_none=True)
        loss.backward()
        for node, _, _, out_keys in plan:
            for key in out_keys:
                t = values[key]
                if isinstance(t, torch.Tensor) and t.grad is not None:
                    records[node].grads[key[1]] = t.grad.detach().clone()
            if node == loss_node(compiled, optimizer):
                records[node].grads.setdefault("loss", torch.ones(()))
        module.zero_grad(set_to_none=True)
    return list(records.values())


def loss_node(compiled, optimizer: int = 0) -> str:
    return compiled.optimizers[optimizer].loss_key[0]
