"""Compile, don't interpret: a validated graph becomes one `nn.Module` plus what trains it.

`GraphModule` holds every op block's module (keyed by node id) and runs *plans*: tuples of
(node, module, input keys, output keys) in topological order, precomputed once, so a step
costs one call per block and a dict store per wire — the same work a hand-written
`forward` does. Values travel in a dict keyed by (node, port). Each optimizer gets the plan
of what its loss needs; evaluation gets the plan of every loss and metric.

`compile_graph` returns a `Compiled` bundle: the module, the datasets, the optimizers with their
parameter scopes and schedules, the metrics, and the plans. The trainer only loops.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from nodegraph.check import eager
from nodegraph.check.validate import Report, check
from nodegraph.kinds import devices, dtypes, folder_index
from nodegraph.kinds.classes import LabelError, name_label
from nodegraph.kinds.datameta import materialise
from nodegraph.kinds.dataset import Dataset
from nodegraph.kinds.metric import Metric
from nodegraph.model import allowlist, gcpause
from nodegraph.model.errors import (
    NodegraphError,
    NodeRuntimeError,
    Problem,
    ValidationError,
    first_line,
)
from nodegraph.model.graph import Graph
from nodegraph.model.types import LOSS
from nodegraph.runtime import normalization
from nodegraph.runtime import referenced_weights as weights_file

Key = tuple[str, str]
Step = tuple[str, nn.Module, tuple[Key | None, ...], tuple[Key, ...]]


class Plan(tuple):
    """A training step's plan: its steps, plus the outputs nothing reads after the step.

    A step's values dict would otherwise hold every intermediate output until the next
    batch, through backward: on the CPU that larger peak made the allocator give memory
    back and fault it in again every step (the digits CNN: +6-47 % per epoch, all in page
    faults). Once the loss is known to be finite they are let go; a non-finite loss keeps
    them, so the trainer can still name the node where the non-finite value appeared.
    """

    drop: tuple[Key, ...] = ()
    loss: Key | None = None


def _lean(steps: tuple[Step, ...], loss: Key, keep: set[Key | None]) -> Plan:
    """`steps` as a Plan that lets go of every output it makes except those in `keep`."""
    plan = Plan(steps)
    plan.drop = tuple(k for _, _, _, outs in steps for k in outs if k not in keep)
    plan.loss = loss
    return plan


def _finite_on_cpu(value: Any) -> bool:
    """Whether a loss is a finite CPU scalar (reading a GPU one would wait for the GPU)."""
    return (isinstance(value, torch.Tensor) and value.device.type == "cpu"
            and value.numel() == 1 and math.isfinite(float(value.detach())))


class GraphModule(nn.Module):
    """The forward part of a graph: op blocks by node id, run in topological order."""

    def __init__(self, blocks: dict[str, nn.Module], steps: dict[str, Step]):
        super().__init__()
        self.blocks = nn.ModuleDict()
        for node, block in blocks.items():  # a node id may shadow a ModuleDict attribute
            self.blocks._modules[node] = block  # ('double', 'train'): blocks are read by key
        self._steps = steps  # node id -> step, in topological order
        self.full_plan: tuple[Step, ...] = tuple(steps.values())

    def plan(self, nodes: set[str]) -> tuple[Step, ...]:
        """The steps of the op blocks among `nodes`, in topological order."""
        return tuple(s for nid, s in self._steps.items() if nid in nodes)

    def run(self, plan: tuple[Step, ...], values: dict[Key, Any]) -> dict[Key, Any]:
        """Run `plan` on `values` (inputs already in it); outputs are stored in `values`."""
        node = None
        try:
            for node, module, in_keys, out_keys in plan:  # noqa: B007 (node names failures)
                args = [None if k is None else values.get(k) for k in in_keys]
                try:
                    out = module(*args)
                except (IndexError, RuntimeError) as e:  # torch on the CPU: "Target 4 is
                    named = name_label(module, args)  # out of bounds", named by its wire
                    if named is None:
                        raise
                    raise named from e
                if len(out_keys) == 1:
                    values[out_keys[0]] = out
                else:
                    values.update(zip(out_keys, out, strict=True))
        except LabelError as e:  # a class index the scores cannot index: name its wire
            key = in_keys[e.position] if e.position < len(in_keys) else None
            wire = f" from '{key[0]}'.{key[1]}" if key is not None else ""
            raise NodeRuntimeError(node, f"input '{e.port}'{wire}: {e}", e.hint) from e
        except NodegraphError:
            raise
        except Exception as e:
            message = first_line(e)
            raise NodeRuntimeError(node, f"{type(e).__name__}: {message}") from e
        drop, loss = getattr(plan, "drop", None), getattr(plan, "loss", None)
        if drop and loss is not None and _finite_on_cpu(values.get(loss)) and \
                not torch.compiler.is_compiling():
            for key in drop:
                values.pop(key, None)
        return values

    def forward(self, values: dict[Key, Any], plan: tuple[Step, ...] | None = None
                ) -> dict[Key, Any]:
        """Every block (or those of `plan`, then in place) on the given inputs, keyed
        (data node, port); returns all values. DDP calls the trainer's plans through here."""
        if plan is None:
            return self.run(self.full_plan, dict(values))
        return self.run(plan, values)

    def module_of(self, node: str) -> nn.Module | None:
        """The module a node runs (its owner's, for a node sharing weights)."""
        step = self._steps.get(node)
        return None if step is None else step[1]

    def block_state(self) -> dict[str, torch.Tensor]:
        """Weights keyed `node.param` (node ids, not module paths), for safetensors; a tied
        tensor appears once, under its first name."""
        out, seen = {}, set()
        for k, v in self.state_dict().items():
            ident = (v.untyped_storage().data_ptr(), v.storage_offset(), tuple(v.shape))
            if v.numel() and ident in seen:
                continue
            seen.add(ident)
            out[k.removeprefix("blocks.")] = v
        return out

    def computed_keys(self) -> set[str]:
        """Keys of buffers a block computes from its params outside autograd (a Hopfield
        design): saved with the weights, but a file written before they were may lack them,
        and the computed values then stay."""
        return {f"{node}.{name}" for node, block in self.blocks.items()
                for name in getattr(block, "computed_state", ())}

    def load_block_state(self, state: dict[str, torch.Tensor], strict: bool = True) -> None:
        """Load weights keyed `node.param`; a data block's saved normalisation in the same
        file is not a weight (see `nodegraph.runtime.normalization`) and is skipped."""
        state = {k: v for k, v in state.items() if not k.startswith(normalization.PREFIX)}
        expected = set(self.block_state())
        missing = expected - set(state) - self.computed_keys()
        unexpected = set(state) - {k.removeprefix("blocks.") for k in self.state_dict()}
        if strict and (missing or unexpected):
            raise RuntimeError(f"weights do not fit: missing {sorted(missing)[:5]}, "
                               f"unexpected {sorted(unexpected)[:5]}")
        self.load_state_dict({f"blocks.{k}": v for k, v in state.items()}, strict=False)


@dataclass
class OptimizerRun:
    """One optimizer block at run time: what it minimises, over which parameters."""

    node: str
    optimizer: torch.optim.Optimizer
    loss_key: Key
    plan: tuple[Step, ...]
    params: list[nn.Parameter]
    clip: float | None = None
    closure: bool = False
    scheduler: Any = None
    schedule_node: str | None = None
    per_step: bool = False


@dataclass
class MetricRun:
    node: str
    metric: Metric
    keys: tuple[Key | None, ...]


@dataclass
class Compiled:
    """Everything a run needs, built from a graph once."""

    graph: Graph
    report: Report
    module: GraphModule
    device: torch.device
    datasets: dict[str, Dataset]
    optimizers: list[OptimizerRun] = field(default_factory=list)
    metrics: list[MetricRun] = field(default_factory=list)
    loss_keys: dict[str, Key] = field(default_factory=dict)  # loss node -> its output
    eval_plan: tuple[Step, ...] = ()
    exec_graph: Graph | None = None  # what runs: the graph with its groups expanded
    weights_file: Any = None  # the imported weights file loaded into it (see fx_weights)

    def parameter_count(self) -> int:
        seen = {id(p): p.numel() for p in self.module.parameters() if p.requires_grad}
        return sum(seen.values())


def resolve_device(name: str) -> torch.device:
    """`auto` is the first GPU when there is one, else the CPU; others are checked."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return devices.check_here(name, "training.device")


def compile_graph(graph: Graph, device: str | torch.device | None = None,
                  seed: int | None = None, for_training: bool = True,
                  referenced_weights: bool = True) -> Compiled:
    """Validate `graph` and build its module, datasets, optimizers and metrics; with
    `referenced_weights`, load the weights file an imported graph names. (Public as
    `nodegraph.compile`; named so here that it does not shadow the builtin `compile`.)

    Raises ValidationError listing every problem when the graph cannot run.
    """
    with (allowlist.trusting(graph.trusted), gcpause.paused(),  # names resolve as validated
          folder_index.one_listing()):  # validation and build read a folder's one listing
        compiled = _compile(graph, device, seed, for_training)
    if referenced_weights:
        compiled.weights_file = weights_file.load_referenced(compiled, graph)
    return compiled


def _compile(graph: Graph, device: str | torch.device | None, seed: int | None,
             for_training: bool) -> Compiled:
    report = check(graph, for_training=for_training)
    user_graph, graph = graph, report.flat.graph if report.flat else graph
    shared = report.flat.shared if report.flat else {}
    training = report.settings  # resolved: defaults filled in, one place
    dev = device if isinstance(device, torch.device) else resolve_device(
        device or training.device)
    datasets = materialise(report, user_graph.folder)  # before the seed, as validation did
    torch.manual_seed(training.seed if seed is None else seed)

    ops = [n for n in report.order if report.specs[n].kind == "op"]
    kinds = dtypes.node_dtypes(report, training)
    _check_dtype_device(kinds, dev)
    blocks = {}
    for node_id in ops:  # a node sharing another's weights gets no module of its own
        if node_id not in shared:
            inputs = {e.dst_port: report.outputs[e.source] for e in graph.edges_into(node_id)}
            with dtypes.building(kinds[node_id]):
                module = report.specs[node_id].build(report.params[node_id], inputs)
            blocks[node_id] = dtypes.cast_module(module, kinds[node_id])
    steps = {}
    for node_id in ops:
        spec = report.specs[node_id]
        in_keys = tuple(_source(graph, node_id, p.name) for p in spec.inputs)
        steps[node_id] = (node_id, blocks[shared.get(node_id, node_id)], in_keys,
                          tuple((node_id, p.name) for p in spec.outputs))
    _bind(blocks, report)
    _tie(graph, steps)  # the flat graph's ties include those declared in group bodies
    _freeze(blocks, report.flat.frozen if report.flat else set())
    module = GraphModule(blocks, steps)
    every = _every_parameter(module)  # one walk of the model, shared with the optimizers
    if any(p.device != dev for _, p in every) or any(b.device != dev for b in module.buffers()):
        module.to(dev)  # moves the blocks in place (a walk of every module: only when needed)
        every = _every_parameter(module)

    datasets = {nid: ds.astype(kinds[nid]).to(dev) for nid, ds in datasets.items()}
    compiled = Compiled(user_graph, report, module, dev, datasets, exec_graph=graph)
    compiled.loss_keys = {nid: (nid, p.name) for nid in report.order
                          for p in report.specs[nid].outputs if p.type == LOSS
                          if report.specs[nid].kind == "op"}
    for nid in report.order:
        spec = report.specs[nid]
        if spec.kind == "metric":
            inputs = {e.dst_port: report.outputs[e.source] for e in graph.edges_into(nid)}
            metric = spec.build(report.params[nid], inputs)
            if spec.binds:
                _bind_one(nid, metric, spec, report.params[nid], dict(module.blocks))
            compiled.metrics.append(MetricRun(nid, metric, tuple(_source(graph, nid, p.name)
                                                                 for p in spec.inputs)))
    sinks = [*compiled.loss_keys, *(e.src for m in compiled.metrics
                                    for e in graph.edges_into(m.node))]
    feeds_sinks = graph.upstream(sinks)
    compiled.eval_plan = module.plan(feeds_sinks)
    if for_training:
        _build_optimizers(compiled, graph, feeds_sinks, every)
    return compiled


def _check_dtype_device(kinds: dict[str, torch.dtype], device: torch.device) -> None:
    """Refuse, on the first node that asks for it, a dtype the device cannot compute in."""
    for node, dtype in kinds.items():
        why = dtypes.check_device(dtype, device)
        if why is not None:
            raise ValidationError([Problem(node, "dtype", "bad_config", why)])


def _bind(blocks: dict[str, nn.Module], report: Report) -> None:
    """Hand blocks that act on other blocks' weights (penalties) the modules they name."""
    for node_id, module in blocks.items():
        spec = report.specs[node_id]
        if spec.binds:
            _bind_one(node_id, module, spec, report.params[node_id], blocks)


def _bind_one(node_id: str, target: Any, spec, params: dict, blocks: dict[str, nn.Module]):
    names = params.get(spec.binds) or [
        n for n, m in blocks.items() if n != node_id and any(True for _ in m.parameters())]
    missing = [n for n in names if n not in blocks]
    if missing:
        raise NodegraphError(f"node '{node_id}': {spec.binds} names {missing}, which are "
                             "not blocks with weights")
    target.bind({n: blocks[n] for n in names})


def _source(graph: Graph, node: str, port: str) -> Key | None:
    edge = graph.source_of(node, port)
    return None if edge is None else edge.source


def _build_optimizers(compiled: Compiled, graph: Graph, feeds_sinks: set[str],
                      every: list[tuple[str, nn.Parameter]]) -> None:
    """`graph`: what runs (`compiled.exec_graph`); `feeds_sinks`: the nodes upstream of
    every loss and metric; `every`: `_every_parameter` of the compiled module."""
    report, module = compiled.report, compiled.module
    opt_nodes = [nid for nid in report.order if report.specs[nid].kind == "optimizer"]
    # what the trainer reads after a step: every loss (the epoch's sums), the metrics' inputs
    keep = {*compiled.loss_keys.values(), *(k for m in compiled.metrics for k in m.keys)}
    named_all = _named(every)
    by_block = _parameters_by_block(module, every)
    for i, nid in enumerate(opt_nodes):
        params = report.params[nid]
        loss_edge = graph.source_of(nid, "loss")
        if loss_edge is None:  # validate reports this before compile gets here
            raise NodeRuntimeError(nid, "its loss input is not wired", "wire a loss into it")
        upstream = graph.upstream([loss_edge.src])
        scope = _members(report, params.get("scope")) or sorted(upstream)
        trainable = _parameters(module, scope, by_block)
        chosen = {id(p) for p in trainable}  # by identity, in one look-up each
        named = [(name, p) for name, p in named_all if id(p) in chosen]
        spec = report.specs[nid]
        last = i == len(opt_nodes) - 1
        # the last optimizer's forward also computes every loss and metric, so the epoch's
        # training numbers come for free
        plan = _lean(module.plan(upstream | feeds_sinks if last else upstream),
                     loss_edge.source, keep)
        optimizer = _built(nid, spec, params, named)
        run = OptimizerRun(nid, optimizer, loss_edge.source, plan,
                           trainable, params.get("clip_grad_norm"), spec.closure)
        sched_edge = graph.source_of(nid, "schedule")
        if sched_edge is not None:
            sspec = report.specs[sched_edge.src]
            sparams = report.params[sched_edge.src]
            run.scheduler = _built(sched_edge.src, sspec, sparams, run.optimizer)
            run.schedule_node = sched_edge.src
            run.per_step = sparams.get("interval") == "step"
        compiled.optimizers.append(run)


def _members(report: Report, nodes: list[str] | None) -> list[str]:
    """Node ids as the flat graph knows them: a group instance stands for its inner nodes."""
    if not nodes or report.flat is None:
        return list(nodes or [])
    return [m for n in nodes for m in (report.flat.members(n) or [n])]


def _freeze(blocks: dict[str, nn.Module], frozen: set[str]) -> None:
    """The weights of nodes inside a `trainable = false` group instance stop requiring
    gradients, so no optimizer is given them (Adam keeps no state for them) and backward
    computes none; the export writes the same `requires_grad_(False)`. A node sharing
    another's weights has no module of its own: the owner's instance decides."""
    for node in frozen:
        block = blocks.get(node)
        if block is not None:
            block.requires_grad_(False)


def _tie(graph: Graph, steps: dict[str, Step]) -> None:
    """Make each tied parameter one Parameter object used by both blocks."""
    for tie in graph.ties:
        src_step, dst_step = steps.get(tie.src), steps.get(tie.dst)
        if src_step is None or dst_step is None:
            raise ValidationError([Problem(tie.dst, tie.dst_param, "bad_tie",
                                           "ties join parameters of blocks with weights")])
        src, dst = src_step[1], dst_step[1]
        source = dict(src.named_parameters()).get(tie.src_param)
        target = dict(dst.named_parameters()).get(tie.dst_param)
        if source is None or target is None:
            missing = tie.src if source is None else tie.dst
            name = tie.src_param if source is None else tie.dst_param
            raise ValidationError([Problem(missing, name, "bad_tie", f"'{missing}' has no "
                                           f"parameter '{name}'")])
        if source.shape != target.shape:
            raise ValidationError([Problem(tie.dst, tie.dst_param, "bad_tie", f"cannot tie "
                                           f"{tie.dst}.{tie.dst_param} {tuple(target.shape)} "
                                           f"to {tie.src}.{tie.src_param} "
                                           f"{tuple(source.shape)}: shapes differ")])
        owner, _, leaf = tie.dst_param.rpartition(".")
        holder = dst.get_submodule(owner) if owner else dst
        holder._parameters[leaf] = source


def _built(node: str, spec, params: dict, target: Any):
    """`spec.build(params, target)`, a refusal reported on its node, not as a bare exception."""
    try:
        with eager.untraced():  # building traces nothing: no torch._dynamo import
            return spec.build(params, target)
    except NodegraphError:
        raise
    except Exception as e:
        message = first_line(e)
        raise ValidationError([Problem(node, None, "bad_config",
                                       f"{spec.id} '{node}': {message}")]) from None


def _every_parameter(module: GraphModule) -> list[tuple[str, nn.Parameter]]:
    """Every (name, parameter) of the model, shared ones under each of their names: the one
    walk of the model that the device check, `_named` and `_parameters_by_block` share."""
    return list(module.named_parameters(remove_duplicate=False))


def _named(every: list[tuple[str, nn.Parameter]]) -> list[tuple[str, nn.Parameter]]:
    """Each parameter once, under its first name (as `named_parameters()` gives them)."""
    seen: set[int] = set()
    named = []
    for k, p in every:
        if id(p) not in seen:
            seen.add(id(p))
            named.append((k.removeprefix("blocks."), p))
    return named


def _parameters_by_block(module: GraphModule, every: list[tuple[str, nn.Parameter]]
                         ) -> dict[int, list[nn.Parameter]]:
    """Each block's parameters, keyed by the block's identity, from one walk of the model
    (a walk per block cost more than the rest of the optimizers' set-up)."""
    by_node: dict[str, list[nn.Parameter]] = {}
    for name, p in every:
        by_node.setdefault(name.split(".", 2)[1], []).append(p)  # blocks.<node>.<param>
    return {id(block): by_node.get(nid, []) for nid, block in module.blocks.items()}


def _parameters(module: GraphModule, nodes: Iterable[str],
                by_block: dict[int, list[nn.Parameter]]) -> list[nn.Parameter]:
    """Trainable parameters of `nodes`, each once (shared weights are not stepped twice);
    `by_block` from `_parameters_by_block`."""
    seen, out = set(), []
    for nid in nodes:
        block = module.module_of(nid)
        for p in by_block.get(id(block), ()) if block is not None else ():
            if p.requires_grad and id(p) not in seen:
                seen.add(id(p))
                out.append(p)
    return out
