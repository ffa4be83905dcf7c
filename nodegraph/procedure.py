"""Procedures: loops around a trained model that emit the whole trajectory.

Sampling a diffusion model, running a Gibbs chain, letting a Hopfield network settle,
decoding a language model token by token, forecasting a series by feeding predictions
back: each is a loop around part of a trained graph, not a forward pass. A procedure
block (kind ``procedure``) builds an object with ``run(ctx)``, a generator of frames
(plain dicts of numbers and tensors); its ``model`` param names the node or group instance
it loops around, and the block declares it with ``binds="model"`` so the context knows
it (`ProcedureContext.bound`). `ProcedureContext.model(node)` turns that node into a
function from input ports to output ports, running a group's inner nodes in order.

Procedures import no part of the trainer: the context hands them what they need — the
compiled model, `compile` for a fresh copy of the graph, `run_training` to train one, the
resolved training settings and an emitter — so a block depends on this interface only.

`run_procedure` compiles the graph (or takes a compiled one with trained weights), runs
the procedure and returns the frames, emitting each as a `ProcedureFrame` event so the
editor can animate it; `nodegraph sample GRAPH NODE` is the command-line form.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import torch

from nodegraph import settings
from nodegraph.compile import Compiled, compile
from nodegraph.errors import NodegraphError, NodeRuntimeError, ValidationError, first_line
from nodegraph.events import Emitter, EpochEnded
from nodegraph.graph import Graph
from nodegraph.spec import Params
from nodegraph.train import RunControl, Trainer, training_options

__all__ = ["Compiled", "Procedure", "ProcedureContext", "ProcedureFrame", "RunTraining",
           "run_procedure", "run_training"]


class Procedure:
    """A loop around a model; `run` yields one frame (a dict) per step of the loop."""

    def run(self, ctx: ProcedureContext) -> Iterator[dict[str, Any]]:
        raise NotImplementedError


@dataclass(frozen=True)
class ProcedureFrame:
    """One step of a procedure's trajectory."""

    node: str
    index: int
    data: dict[str, Any]


class RunTraining(Protocol):
    """Train a compiled graph under its graph's training settings (`epochs` overriding
    theirs); `on_epoch(epoch)` after each epoch; returns the final numbers by split."""

    def __call__(self, compiled: Compiled, epochs: int | None = None,
                 on_epoch: Callable[[int], None] | None = None
                 ) -> dict[str, dict[str, Any]]: ...


def run_training(compiled: Compiled, epochs: int | None = None,
                 on_epoch: Callable[[int], None] | None = None) -> dict[str, dict[str, Any]]:
    """The `RunTraining` the runner hands procedures: the trainer, quietly, on the
    compiled graph's device."""
    opts = training_options(compiled.graph, epochs=epochs, device=str(compiled.device))
    events = Emitter()
    if on_epoch is not None:
        events.subscribe(lambda e: on_epoch(e.epoch), EpochEnded)
    return Trainer(compiled, opts, events, RunControl(), None).run().final


class ProcedureContext:
    """What a procedure may use: the trained model's parts, the data, a seeded generator,
    the node its block binds, and ways to compile and train the graph afresh."""

    def __init__(self, compiled: Compiled, seed: int = 0, node: str = "procedure", *,
                 bound: str | None = None, events: Emitter | None = None,
                 train: RunTraining = run_training):
        self.compiled = compiled
        self.node = node  # the procedure block, named in errors
        self.bound = bound  # the node named by the param the block `binds`
        self.device = compiled.device
        self.generator = torch.Generator(device="cpu").manual_seed(seed)
        self.events = events if events is not None else Emitter()
        self.run_training = train

    def compile(self, seed: int) -> Compiled:
        """The graph compiled anew on this device: its own optimizers, weights drawn from
        `seed`."""
        return compile(self.compiled.graph, device=self.device, seed=seed)

    @property
    def training(self) -> Params:
        """The graph's training settings, resolved, on this device."""
        opts, problems = settings.resolve({**self.compiled.graph.training,
                                           "device": str(self.device)})
        if problems:
            raise ValidationError(problems)
        return opts

    def model(self, node: str | None = None, grad: bool = False
              ) -> Callable[..., dict[str, torch.Tensor]]:
        """`node` (an op block or a group instance; default: the bound one) as a function:
        inputs by port name in, outputs by port name out. Runs in eval mode, without
        gradients unless `grad` (a procedure differentiating through the model, e.g. an
        energy's gradient)."""
        node = node if node is not None else self.bound
        if node is None:
            raise NodegraphError(f"procedure '{self.node}' names no model to loop around")
        c = self.compiled
        flat = c.report.flat
        if flat is not None and (node, "") in flat.inputs:  # a group instance
            members = set(flat.members(node))
            inputs = {port: targets for (inst, port), targets in flat.inputs.items()
                      if inst == node and port}
            outputs = {port: _resolve(flat, (node, port)) for (inst, port) in flat.outputs
                       if inst == node}
        elif c.module.module_of(node) is not None:
            members = {node}
            spec = c.report.specs[node]
            inputs = {p.name: [(node, p.name)] for p in spec.inputs}
            outputs = {p.name: (node, p.name) for p in spec.outputs}
        else:
            raise NodegraphError(f"'{node}' is not a block with a forward pass or a group "
                                 "instance, so a procedure cannot loop around it")
        feeds = {target: port for port, targets in inputs.items() for target in targets}
        plan = []
        for step_node, module, in_keys, out_keys in c.module.plan(members):
            ports = [p.name for p in c.report.specs[step_node].inputs]
            keys = tuple(("", feeds[(step_node, port)]) if (step_node, port) in feeds else key
                         for port, key in zip(ports, in_keys, strict=True))
            plan.append((step_node, module, keys, out_keys))
        plan = tuple(plan)

        def call(**given: torch.Tensor) -> dict[str, torch.Tensor]:
            unknown = set(given) - set(inputs)
            if unknown:
                raise NodegraphError(f"'{node}' has no input(s) {sorted(unknown)} (inputs: "
                                     f"{', '.join(inputs)})")
            c.module.eval()
            with torch.set_grad_enabled(grad):
                values = c.module.run(plan, {("", port): v for port, v in given.items()})
            return {port: values[key] for port, key in outputs.items()}

        call.inputs, call.outputs = list(inputs), list(outputs)  # port names, in order
        return call

    def batch(self, split: str = "train") -> dict[str, torch.Tensor]:
        """The first batch of a split, by port name (from the first data block)."""
        for ds in self.compiled.datasets.values():
            for batch in ds.batches(self.checked(ds, split)):
                return batch
        raise NodegraphError("the graph has no data block to take a batch from")

    def split(self, split: str = "train") -> dict[str, torch.Tensor]:
        """A whole split, by port name, in order."""
        for ds in self.compiled.datasets.values():
            return ds.tensors(self.checked(ds, split))
        raise NodegraphError("the graph has no data block")

    def checked(self, dataset, split: str) -> str:
        """`split`, or an error naming this procedure when `dataset` has no such split
        (falling back to another split would quietly sample the wrong data)."""
        if not dataset.has(split):
            have = [s for s in ("train", "val", "test") if dataset.has(s)]
            raise NodegraphError(f"procedure '{self.node}' asks for the '{split}' split, but "
                                 f"the data has only {', '.join(have)}: set its split to "
                                 "one of those")
        return split


def _resolve(flat, ref):
    while ref in flat.outputs:
        ref = flat.outputs[ref]
    return ref


def run_procedure(graph: Graph | Compiled, node: str, events: Emitter | None = None,
                  weights: str | Path | None = None, seed: int = 0,
                  **overrides: Any) -> list[dict[str, Any]]:
    """Run procedure block `node` of `graph` and return its frames.

    `graph` may be a compiled graph holding trained weights; otherwise it is compiled and
    `weights` (a safetensors file keyed node.param, e.g. a checkpoint's model.safetensors)
    are loaded. `overrides` change the procedure's params for this run.
    """
    from safetensors.torch import load_file

    compiled = graph if isinstance(graph, Compiled) else compile(graph, for_training=False)
    spec = compiled.report.specs.get(node)
    if spec is None or spec.kind != "procedure":
        names = [n for n, s in compiled.report.specs.items() if s.kind == "procedure"]
        raise NodegraphError(f"'{node}' is not a procedure block (procedures: "
                             f"{', '.join(names) or 'none'})")
    if weights is not None:
        try:
            compiled.module.load_block_state(load_file(str(weights)))
        except (OSError, RuntimeError) as e:
            raise NodegraphError(f"cannot load weights from {weights}: "
                                 f"{first_line(e)}") from None
    params = dict(compiled.report.params[node])
    for key, value in overrides.items():
        param = spec.param(key)
        if param is None:
            raise NodegraphError(f"{spec.id} has no param '{key}'")
        params[key] = param.check(value)
    procedure = spec.build(type(compiled.report.params[node])(params))
    ctx = ProcedureContext(compiled, seed, node, events=events,
                           bound=params.get(spec.binds) if spec.binds else None)
    frames = []
    try:
        for i, frame in enumerate(procedure.run(ctx)):
            frames.append(frame)
            if events is not None:
                events.emit(ProcedureFrame(node, i, frame))
    except NodegraphError:
        raise
    except Exception as e:
        raise NodeRuntimeError(node, f"{type(e).__name__}: {first_line(e)}") from e
    return frames
