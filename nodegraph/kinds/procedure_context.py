"""What a procedure block is given and gives back: the interface between blocks and runner.

A procedure block (kind ``procedure``) builds a `Procedure`, whose ``run(ctx)`` yields one
frame (a dict of numbers and tensors) per step of a loop around a trained model. The
`ProcedureContext` hands it everything it may use — the compiled model, `compile` for a
fresh copy of the graph, `run_training` to train one, the resolved training settings, an
emitter — so a block depends on this interface, never on the trainer. The runner
(`nodegraph.runtime.procedure`) supplies the compiler and trainer.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import torch

from nodegraph.model import settings
from nodegraph.model.errors import NodegraphError, ValidationError
from nodegraph.model.events import Emitter
from nodegraph.model.settings import TrainingSettings

if TYPE_CHECKING:
    from nodegraph.kinds.dataset import Dataset
    from nodegraph.model.graph import Graph


class Compiled(Protocol):
    """What a procedure reads of a compiled graph (`nodegraph.runtime.compile.Compiled` is
    one): typed here, so blocks and kinds never import the runtime."""

    @property
    def graph(self) -> Graph: ...

    @property
    def report(self) -> Any: ...  # the validation report: specs, flat, params by node

    @property
    def module(self) -> Any: ...  # the graph module: module_of, plan, run, block_state

    @property
    def device(self) -> torch.device: ...

    @property
    def datasets(self) -> Mapping[str, Dataset]: ...

    @property
    def metrics(self) -> Sequence[Any]: ...

    @property
    def exec_graph(self) -> Graph | None: ...  # the graph with its groups expanded


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


class Compile(Protocol):
    """Compile the graph anew on `device` with weights drawn from `seed`."""

    def __call__(self, graph: Any, *, device: Any, seed: int) -> Compiled: ...


class ModelCall(Protocol):
    """A node as a function (`ProcedureContext.model`): inputs by port name in, outputs by
    port name out; `inputs` and `outputs` name its ports in order."""

    inputs: list[str]
    outputs: list[str]

    def __call__(self, **given: torch.Tensor) -> dict[str, torch.Tensor]: ...


class ProcedureContext:
    """What a procedure may use: the trained model's parts, the data, a seeded generator,
    the node its block binds, and ways to compile and train the graph afresh."""

    def __init__(self, compiled: Compiled, seed: int = 0, node: str = "procedure", *,
                 bound: str | None = None, events: Emitter | None = None,
                 train: RunTraining, compile_graph: Compile):
        self.compiled = compiled
        self.node = node  # the procedure block, named in errors
        self.bound = bound  # the node named by the param the block `binds`
        self.device = compiled.device
        self.generator = torch.Generator(device="cpu").manual_seed(seed)
        self.events = events if events is not None else Emitter()
        self.run_training = train
        self._compile = compile_graph

    def compile(self, seed: int, graph: Any = None) -> Compiled:
        """The graph (or `graph`, a changed copy of it) compiled anew on this device: its
        own optimizers, weights drawn from `seed`."""
        return self._compile(self.compiled.graph if graph is None else graph,
                             device=self.device, seed=seed)

    @property
    def training(self) -> TrainingSettings:
        """The graph's training settings, resolved, on this device."""
        opts, problems = settings.resolve({**self.compiled.graph.training,
                                           "device": str(self.device)})
        if problems:
            raise ValidationError(problems)
        return opts

    def model(self, node: str | None = None, grad: bool = False) -> ModelCall:
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
        steps = []
        for step_node, module, in_keys, out_keys in c.module.plan(members):
            ports = [p.name for p in c.report.specs[step_node].inputs]
            keys = tuple(("", feeds[(step_node, port)]) if (step_node, port) in feeds else key
                         for port, key in zip(ports, in_keys, strict=True))
            steps.append((step_node, module, keys, out_keys))
        plan = tuple(steps)

        def call(**given: torch.Tensor) -> dict[str, torch.Tensor]:
            unknown = set(given) - set(inputs)
            if unknown:
                raise NodegraphError(f"'{node}' has no input(s) {sorted(unknown)} (inputs: "
                                     f"{', '.join(inputs)})")
            c.module.eval()
            with torch.set_grad_enabled(grad):
                values = c.module.run(plan, {("", port): v for port, v in given.items()})
            return {port: values[key] for port, key in outputs.items()}

        return _Call(call, list(inputs), list(outputs))

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


@dataclass
class _Call:
    """A `ModelCall`: the function and its port names."""

    fn: Callable[..., dict[str, torch.Tensor]]
    inputs: list[str]
    outputs: list[str]

    def __call__(self, **given: torch.Tensor) -> dict[str, torch.Tensor]:
        return self.fn(**given)


def _resolve(flat, ref):
    while ref in flat.outputs:
        ref = flat.outputs[ref]
    return ref


