"""Procedures: loops around a trained model that emit the whole trajectory.

Sampling a diffusion model, running a Gibbs chain, letting a Hopfield network settle,
decoding a language model token by token, forecasting a series by feeding predictions
back: each is a loop around part of a trained graph, not a forward pass. A procedure
block (kind ``procedure``) builds an object with ``run(ctx)``, a generator of frames
(plain dicts of numbers and tensors); its ``model`` param names the node or group instance
it loops around, and the block declares it with ``binds="model"`` so the context knows
it (`ProcedureContext.bound`). `ProcedureContext.model(node)` turns that node into a
function from input ports to output ports, running a group's inner nodes in order.

Procedures import no part of the trainer: the context (`kinds.procedure_context`) hands
them what they need, and this module, the runner, fills it with the compiler and trainer.

`run_procedure` compiles the graph (or takes a compiled one with trained weights), runs
the procedure and returns the frames, emitting each as a `ProcedureFrame` event so the
editor can animate it; `nodegraph sample GRAPH NODE` is the command-line form.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

from nodegraph.kinds.procedure_context import Compiled as CompiledGraph
from nodegraph.kinds.procedure_context import Procedure, ProcedureFrame, RunTraining
from nodegraph.kinds.procedure_context import ProcedureContext as Interface
from nodegraph.model.errors import NodegraphError, NodeRuntimeError, first_line
from nodegraph.model.events import Emitter, EpochEnded
from nodegraph.model.graph import Graph
from nodegraph.runtime import normalization
from nodegraph.runtime.compile import Compiled, compile_graph
from nodegraph.runtime.train import RunControl, Trainer, training_options

__all__ = ["Compiled", "Procedure", "ProcedureContext", "ProcedureFrame", "RunTraining",
           "run_procedure", "run_training"]


def run_training(compiled: CompiledGraph, epochs: int | None = None,
                 on_epoch: Callable[[int], None] | None = None) -> dict[str, dict[str, Any]]:
    """The `RunTraining` the runner hands procedures: the trainer, quietly, on the
    compiled graph's device."""
    run = cast(Compiled, compiled)  # the context holds only this runtime's compiles
    opts = training_options(run.graph, epochs=epochs, device=str(run.device))
    events = Emitter()
    if on_epoch is not None:
        events.subscribe(lambda e: on_epoch(e.epoch), EpochEnded)
    return Trainer(run, opts, events, RunControl(), None).run().final


class ProcedureContext(Interface):
    """The procedure interface with this runtime's compiler and trainer."""

    def __init__(self, compiled: Compiled, seed: int = 0, node: str = "procedure", *,
                 bound: str | None = None, events: Emitter | None = None,
                 train: RunTraining = run_training):
        super().__init__(compiled, seed, node, bound=bound, events=events, train=train,
                         compile_graph=compile_graph)


def run_procedure(graph: Graph | Compiled, node: str, events: Emitter | None = None,
                  weights: str | Path | None = None, seed: int = 0,
                  **overrides: Any) -> list[dict[str, Any]]:
    """Run procedure block `node` of `graph` and return its frames.

    `graph` may be a compiled graph holding trained weights; otherwise it is compiled and
    `weights` (a safetensors file keyed node.param, e.g. a checkpoint's model.safetensors)
    are loaded. `overrides` change the procedure's params for this run.
    """
    from safetensors.torch import load_file

    compiled = graph if isinstance(graph, Compiled) else compile_graph(graph, for_training=False)
    spec = compiled.report.specs.get(node)
    if spec is None or spec.kind != "procedure":
        names = [n for n, s in compiled.report.specs.items() if s.kind == "procedure"]
        raise NodegraphError(f"'{node}' is not a procedure block (procedures: "
                             f"{', '.join(names) or 'none'})")
    if weights is not None:
        try:
            tensors = load_file(str(weights))
            compiled.module.load_block_state(tensors)
        except (OSError, RuntimeError) as e:
            raise NodegraphError(f"cannot load weights from {weights}: "
                                 f"{first_line(e)}") from None
        normalization.apply(compiled, normalization.split(tensors)[1], weights)
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
