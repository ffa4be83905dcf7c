"""Procedures: loops around a trained model that emit the whole trajectory.

Sampling a diffusion model, running a Gibbs chain, letting a Hopfield network settle,
decoding a language model token by token, forecasting a series by feeding predictions
back: each is a loop around part of a trained graph, not a forward pass. A procedure
block (kind ``procedure``) builds an object with ``run(ctx)``, a generator of frames
(plain dicts of numbers and tensors); its ``model`` param names the node or group instance
it loops around. `ProcedureContext.model(node)` turns that node into a function from input
ports to output ports, running a group's inner nodes in order.

`run_procedure` compiles the graph (or takes a compiled one with trained weights), runs
the procedure and returns the frames, emitting each as a `ProcedureFrame` event so the
editor can animate it; `nodegraph sample GRAPH NODE` is the command-line form.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from nodegraph.model.errors import NodegraphError, NodeRuntimeError
from nodegraph.model.events import Emitter
from nodegraph.model.graph import Graph
from nodegraph.runtime.compile import Compiled, compile


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


class ProcedureContext:
    """What a procedure may use: the trained model's parts, the data, a seeded generator."""

    def __init__(self, compiled: Compiled, seed: int = 0, node: str = "procedure"):
        self.compiled = compiled
        self.node = node  # the procedure block, named in errors
        self.device = compiled.device
        self.generator = torch.Generator(device="cpu").manual_seed(seed)

    def model(self, node: str, grad: bool = False) -> Callable[..., dict[str, torch.Tensor]]:
        """`node` (an op block or a group instance) as a function: inputs by port name in,
        outputs by port name out. Runs in eval mode, without gradients unless `grad` (a
        procedure differentiating through the model, e.g. an energy's gradient)."""
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
                                 f"{str(e).splitlines()[0]}") from None
    params = dict(compiled.report.params[node])
    for key, value in overrides.items():
        param = spec.param(key)
        if param is None:
            raise NodegraphError(f"{spec.id} has no param '{key}'")
        params[key] = param.check(value)
    procedure = spec.build(type(compiled.report.params[node])(params))
    ctx = ProcedureContext(compiled, seed, node)
    frames = []
    try:
        for i, frame in enumerate(procedure.run(ctx)):
            frames.append(frame)
            if events is not None:
                events.emit(ProcedureFrame(node, i, frame))
    except NodegraphError:
        raise
    except Exception as e:
        raise NodeRuntimeError(node, f"{type(e).__name__}: {str(e).splitlines()[0]}") from e
    return frames
