"""Validation: everything that can be known about a graph before it runs.

Structure first — unknown blocks, bad params, unknown ports, wires whose types do not fit,
inputs fed twice or not at all, cycles — then shape inference: walking the nodes in
topological order, each data block reports the shape of one batch and each op block is
built and run on *meta* tensors (shapes and dtypes, no memory, no arithmetic), so every
wire gets its shape and every layer its parameter count before anything executes, and a
Linear needs only `out_features`. Problems are data (`errors.Problem`), keyed by node and
port; a node whose inputs are unknown because of an upstream problem is skipped rather than
reported again. What validation accepts, `compile` builds: ties, the layers a penalty binds,
the device name and the training stages are checked as compile and the trainer use them.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import torch

from nodegraph.check import bounds, eager, opcache
from nodegraph.check.opcache import OpCache
from nodegraph.kinds import classes, confine, devices, dtypes, footprint, given, shapes
from nodegraph.kinds.augment import Chain, augmenting
from nodegraph.kinds.datameta import DataMeta
from nodegraph.kinds.dataset import Dataset, files_relative_to
from nodegraph.model import allowlist, gcpause, groups, references, settings
from nodegraph.model.errors import (
    GraphError,
    NodegraphError,
    PortError,
    Problem,
    ValidationError,
    first_line,
    not_a_graph,
)
from nodegraph.model.graph import Graph
from nodegraph.model.settings import TrainingSettings
from nodegraph.model.spec import BlockSpec, Params
from nodegraph.model.types import why_incompatible

# Load problems the graph itself cannot show (the rest the checks below find again).
_LOAD_ONLY = {"dangling_edge", "bad_entry", "duplicate_key", "renamed_block"}
# optimizers and schedules carry no tensors; transforms carry their chain to a data block
_INFERRED = {"data", "op", "metric", "transform"}


@dataclass
class Report:
    """The outcome of validation: problems, and what inference learnt about the graph."""

    problems: list[Problem] = field(default_factory=list)
    specs: dict[str, BlockSpec] = field(default_factory=dict)
    params: dict[str, Params] = field(default_factory=dict)
    order: list[str] = field(default_factory=list)
    outputs: dict[tuple[str, str], torch.Tensor] = field(default_factory=dict)  # meta tensors
    param_counts: dict[str, int] = field(default_factory=dict)
    # what each data block will hold; `datasets` only the ones inference had to build
    data: dict[str, DataMeta] = field(default_factory=dict)
    datasets: dict[str, Dataset] = field(default_factory=dict)
    batch_size: int | None = None
    seconds: float = 0.0
    flat: groups.Flat | None = None  # the expanded graph, when the graph has groups
    # bytes of an op node's parameters, buffers, and tensors made by one forward on a batch
    module_bytes: dict[str, tuple[int, int, int]] = field(default_factory=dict)
    memory: footprint.Footprint | None = None  # what the graph needs, when inference ran
    # the chain of transforms each transform block's output carries, and each data block's
    # augment input (handed to its build by compile)
    transforms: dict[tuple[str, str], Chain] = field(default_factory=dict)
    augments: dict[str, Chain] = field(default_factory=dict)
    # the training settings with their defaults filled in (`nodegraph.model.settings`), the
    # one place validation and compile read them from (an unusable value keeps its default
    # and is a problem above)
    settings: TrainingSettings = field(default_factory=lambda: settings.resolve({})[0])
    # the folders its data may come from beyond the graph's (nodegraph.kinds.confine), as
    # validation allowed them: building the rest of the data later allows the same
    data_roots: tuple | str = ()
    # outputs carrying a data block's class indices, and the ports taking them as indices
    # into scores (compile checks the labels of in-memory data against their widths)
    labels: dict[tuple[str, str], classes.Labels] = field(default_factory=dict)
    class_targets: dict[tuple[str, str], classes.Target] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.errors

    @property
    def errors(self) -> list[Problem]:
        return [p for p in self.problems if p.severity == "error"]

    def for_node(self, node: str) -> list[Problem]:
        return [p for p in self.problems if p.node == node]

    def shape(self, node: str, port: str) -> tuple[int, ...] | None:
        t = self.outputs.get((node, port))
        return None if t is None else tuple(t.shape)

    def shape_text(self, node: str, port: str) -> str:
        """The inferred shape with the batch dimension shown as N, e.g. ``(N, 784)``."""
        t = self.outputs.get((node, port))
        if t is None:
            return "?"
        dims = [str(d) for d in t.shape]
        if dims and self.batch_size is not None and t.shape[0] == self.batch_size:
            dims[0] = "N"
        return "(" + ", ".join(dims) + ("," if len(dims) == 1 else "") + ")"

    def shown_shape(self, node: str, port: str) -> str:
        """The shape as the editor shows it on wires and in the inspector alike:
        `shape_text`, with 'scalar' for a single number (a loss)."""
        text = self.shape_text(node, port)
        return "scalar" if text == "()" else text

    def raise_if_errors(self) -> None:
        if not self.ok:
            raise ValidationError(self.problems)

    def __repr__(self) -> str:
        errors = len(self.errors)
        warnings = len(self.problems) - errors
        state = "ok" if self.ok else f"{errors} error(s)"
        return (f"<nodegraph.Report: {state}, {warnings} warning(s), {len(self.order)} nodes, "
                f"{sum(self.param_counts.values()):,} parameters>")

    def _repr_html_(self) -> str:
        from html import escape

        shown = self.problems[:20]
        rows = "".join(f"<li><b>{escape(p.severity)}</b> [{escape(str(p.kind))}] "
                       f"{escape(p.location())}: {escape(p.message)}</li>" for p in shown)
        more = (f"<li>... and {len(self.problems) - len(shown)} more</li>"
                if len(self.problems) > len(shown) else "")
        return f"<div><code>{escape(repr(self))}</code><ul>{rows}{more}</ul></div>"


def validate(graph: Graph, for_training: bool = False, cache: OpCache | None = None) -> Report:
    """Check `graph` and infer its shapes; `for_training` also demands data and an optimizer.

    A graph with groups is checked in its flattened form (`report.flat`), and the problems,
    shapes and parameter counts are reported back on the group instances. `cache` keeps
    what inference learnt for the next call (default: see `nodegraph.check.opcache`).
    """
    if not isinstance(graph, Graph):
        raise not_a_graph("validate", graph)
    cache = cache if cache is not None else opcache.default(graph.registry)
    # the memory every node is checked against: read once, not once per node
    with allowlist.trusting(graph.trusted), gcpause.paused(), \
            footprint.memory_limit(footprint.limit_bytes()):
        if graph.folder is not None:  # a graph from a file reads its data beside the file
            with files_relative_to(graph.folder), confine.allowing(graph.data_roots):
                return _validated(graph, for_training, cache)
        return _validated(graph, for_training, cache)


def _validated(graph: Graph, for_training: bool, cache: OpCache) -> Report:
    start = time.perf_counter()
    if groups.has_groups(graph):
        try:
            flat = groups.flatten(graph)
        except GraphError as e:
            return Report([Problem(getattr(e, "node", None), None, "bad_group", str(e))])
        report = _validate(flat.graph, for_training, graph.load_problems, cache, flat)
        _report_on_instances(report, flat)
        _check_instances(graph, report)
    else:
        report = _validate(graph, for_training, graph.load_problems, cache)
    _check_ties(graph, report)
    _check_binds(report)
    _check_device(graph, report)
    _count_ties_once(graph, report)
    _check_stages(graph, report)
    report.problems += bounds.problems(report)  # workers and batches against machine, data
    report.problems += references.problems(graph, set(report.specs))
    report.seconds = time.perf_counter() - start
    return report


def _validate(graph: Graph, for_training: bool, load_problems: list[Problem],
              cache: OpCache, flat: groups.Flat | None = None) -> Report:
    report = Report(flat=flat, data_roots=confine.allowed_now())
    report.problems += [p for p in load_problems if p.kind in _LOAD_ONLY]
    report.problems += flat.problems if flat else []  # wires to ports a group lacks
    report.settings, problems = settings.resolve(graph.training)
    report.problems += problems
    _check_nodes(graph, report)
    _check_code(graph, report)
    _check_edges(graph, report)
    try:
        report.order = graph.topological_order()
    except GraphError:  # only then look for the cycle to name
        cycle = graph.find_cycle() or [next(iter(graph.nodes))]
        path = " -> ".join([*cycle, cycle[0]])
        report.problems.append(Problem(cycle[0], None, "cycle", f"cycle through {path}",
                                       "remove one wire of the loop; recurrence lives inside "
                                       "blocks (RNN, LSTM) or procedures"))
    else:
        _infer(graph, report, cache)
        for frozen in flat.frozen if flat else ():  # `trainable = false`: nothing to train
            report.param_counts[frozen] = 0
        footprint.check_graph(report)
        _check_optimizers(graph, report)
        if for_training:
            _check_trainable(graph, report)
    return report


def _report_on_instances(report: Report, flat: groups.Flat) -> None:
    """Problems, output shapes and parameter counts of inner nodes, told on their instance."""
    report.flat = flat
    problems = []
    for p in report.problems:
        node = p.node
        if node is not None and (origin := flat.origin.get(node, node)) != node:
            inner = node[len(origin) + len(groups.SEP):].replace(groups.SEP, "/")
            p = Problem(origin, p.port, p.kind, f"inside, at '{inner}': {p.message}", p.hint,
                        p.severity)
        problems.append(p)
    report.problems = problems
    for ref in flat.outputs:
        source = groups._resolve_out(flat, ref)
        if source in report.outputs and ref[0] in flat.origin.values():
            report.outputs[ref] = report.outputs[source]
    counts: dict[str, int] = {}
    for fid, count in report.param_counts.items():
        if fid not in flat.shared:  # a shared weight is counted at its owner only
            origin = flat.origin.get(fid, fid)
            counts[origin] = counts.get(origin, 0) + count
    report.param_counts = counts


def _check_instances(graph: Graph, report: Report) -> None:
    """The params of group instances (`share`, `trainable`): the flat graph that the
    other checks see has no instances left to check."""
    bodies = [(None, graph), *((name, d.body) for name, d in graph.groups.items())]
    for group, body in bodies:
        for node in body:
            if not groups.is_group(node.type) or node.type not in body.registry:
                continue
            spec = body.registry.get(node.type)
            for name, message in spec.resolve_params(node.params)[1].items():
                kind = "unknown_param" if spec.param(name) is None else "bad_param"
                if group is None:
                    report.problems.append(Problem(node.id, name, kind, message))
                else:
                    report.problems.append(Problem(None, None, kind, f"group '{group}', node "
                                                   f"'{node.id}': {message}"))


def _check_stages(graph: Graph, report: Report) -> None:
    """Each stage names real optimizers and nodes and a number of epochs."""
    stages = report.settings.stages  # resolved: [] when the file declares none
    optimizers = {n.id for n in graph if n.type in graph.registry
                  and graph.registry.get(n.type).kind == "optimizer"}

    def bad(i: int, message: str) -> None:
        where = f"stage {i + 1}: " if i >= 0 else ""
        report.problems.append(Problem(None, "training.stages", "bad_param", where + message))

    if not isinstance(stages, list):
        bad(-1, f"'stages' must be a list of objects, got {stages!r}"[:200])
        return
    for i, stage in enumerate(stages):
        if not isinstance(stage, dict):
            bad(i, "must be an object with epochs, optimizers and frozen")
            continue
        unknown = set(stage) - {"name", "epochs", "optimizers", "frozen"}
        if unknown:
            bad(i, f"unknown keys {sorted(unknown)} (known: name, epochs, optimizers, frozen)")
        epochs = stage.get("epochs")
        if isinstance(epochs, bool) or not isinstance(epochs, int) or epochs < 0:
            bad(i, f"'epochs' must be a whole number >= 0, got {epochs!r}")
        names = {key: stage.get(key) or [] for key in ("optimizers", "frozen")}
        for key, value in names.items():
            if not isinstance(value, list) or not all(isinstance(n, str) for n in value):
                bad(i, f"'{key}' must be a list of node ids, got {value!r}"[:200])
                names[key] = []
        for node in names["optimizers"]:
            if node not in optimizers:
                bad(i, f"'{node}' is not an optimizer (optimizers: "
                       f"{', '.join(sorted(optimizers)) or 'none'})")
        for node in names["frozen"]:
            if node not in graph.nodes:
                bad(i, f"cannot freeze '{node}': no such node")


def _check_ties(graph: Graph, report: Report) -> None:
    """Each tie joins two parameters of the same shape of blocks with weights — what
    `compile` needs to make them one tensor, so a graph validation passes also compiles."""
    known = set(report.specs) | set(graph.nodes)
    for tie in graph.ties:
        for node in (tie.src, tie.dst):
            if node not in known:
                report.problems.append(Problem(node, None, "bad_tie", f"a tie names node "
                                               f"'{node}', which does not exist"))
    for name, defn in graph.groups.items():  # a body's ties name the body's own nodes
        for tie in defn.body.ties:
            for node in (tie.src, tie.dst):
                if node not in defn.body.nodes:
                    report.problems.append(Problem(None, None, "bad_tie", f"group '{name}': "
                                                   f"a tie names node '{node}', which is not "
                                                   "in the group's body"))
    flat = report.flat
    run_graph = flat.graph if flat else graph
    seen: set[Problem] = set(report.problems)
    for tie in run_graph.ties:
        if tie.src not in known or tie.dst not in known:
            continue  # reported above
        ends = [(tie.src, tie.src_param), (tie.dst, tie.dst_param)]
        found = [_tied_parameter(run_graph, report, node, param) for node, param in ends]
        for (node, param), (_, why) in zip(ends, found, strict=True):
            if why:
                _tie_problem(report, seen, node, param, why)
        src_t, dst_t = found[0][0], found[1][0]
        if src_t is not None and dst_t is not None and src_t.shape != dst_t.shape:
            _tie_problem(report, seen, tie.dst, tie.dst_param,
                         f"cannot tie it {tuple(dst_t.shape)} to "
                         f"{_shown(report, tie.src)}.{tie.src_param} "
                         f"{tuple(src_t.shape)}: shapes differ")


def _check_binds(report: Report) -> None:
    """Blocks acting on other blocks' weights (penalties, size metrics) name layers that
    `compile` builds: op nodes with a module of their own."""
    shared = report.flat.shared if report.flat else {}
    for node, spec in report.specs.items():
        names = report.params.get(node, Params()).get(spec.binds) if spec.binds else None
        if spec.kind not in ("op", "metric") or not isinstance(names, list):
            continue
        bad = [n for n in names if not isinstance(n, str) or n in shared
               or getattr(report.specs.get(n), "kind", None) != "op"]
        if bad:
            report.problems.append(Problem(node, spec.binds, "bad_param", f"{spec.id} "
                                           f"'{node}': {spec.binds} names {bad}, which are "
                                           "not blocks with weights", "name layers of this "
                                           "graph (inside a group: instance__node)"))


def _check_device(graph: Graph, report: Report) -> None:
    """A device name torch can parse (whether this machine has it is for `run` to say)."""
    device = report.settings.device
    if not isinstance(device, str) or device == "auto":
        return  # a non-text device is reported by the settings check
    try:
        devices.parse(device, "training.device")
    except NodegraphError:
        report.problems.append(Problem(None, "training.device", "bad_param",
                                       f"unknown device '{device}'", devices.HINT))


def _tied_parameter(graph: Graph, report: Report, node: str, name: str
                    ) -> tuple[torch.Tensor | None, str]:
    """The meta parameter `name` of `node`'s module, or why a tie cannot use it ("" when
    it is unknown because of a problem reported elsewhere)."""
    spec = report.specs.get(node)
    if node not in graph.nodes:
        return None, (f"'{node}' is a group instance; tie a node inside it "
                      f"('{node}{groups.SEP}<inner node>')")
    if spec is None or node not in report.params:
        return None, ""
    if spec.kind != "op":
        return None, f"{spec.id} '{node}' has no weights; ties join parameters of layers"
    module = _meta_module(graph, report, node)
    if module is None:
        return None, ""
    params = dict(module.named_parameters())
    if name not in params:
        names = ", ".join(params) or "none"
        return None, f"{spec.id} has no parameter '{name}' (its parameters: {names})"
    return params[name], ""


def _meta_module(graph: Graph, report: Report, node: str) -> torch.nn.Module | None:
    """`node`'s module built on meta tensors from its inferred inputs (None when they are
    unknown)."""
    inputs = {e.dst_port: report.outputs[e.source] for e in graph.edges_into(node)
              if e.source in report.outputs}
    try:
        with torch.device("meta"):
            return report.specs[node].build(report.params[node], inputs)
    except Exception:  # noqa: BLE001 (the node's own problem is reported elsewhere)
        return None


def _shown(report: Report, node: str) -> str:
    """A flat node id as the user wrote it: `inst/inner` for a node inside an instance."""
    return node.replace(groups.SEP, "/") if report.flat else node


def _tie_problem(report: Report, seen: set[Problem], node: str, param: str, why: str) -> None:
    origin = report.flat.origin.get(node, node) if report.flat else node
    where = f"inside, at '{_shown(report, node)}': " if origin != node else ""
    problem = Problem(origin, param, "bad_tie", f"{where}tie of '{param}': {why}",
                      "tie two parameters of the same shape of layers with weights")
    if problem not in seen:
        seen.add(problem)
        report.problems.append(problem)


def _count_ties_once(graph: Graph, report: Report) -> None:
    """A tied parameter is one tensor: count it at the tie's source, not again at its
    destination (an LM head tied to its embedding adds no weights). The flat graph's ties
    include those declared in group bodies, one set per instance."""
    flat = report.flat
    run_graph = flat.graph if flat else graph
    for dst, name in dict.fromkeys((t.dst, t.dst_param) for t in run_graph.ties):
        spec = report.specs.get(dst)
        if spec is None or spec.kind != "op" or \
                (flat and (dst in flat.shared or dst in flat.frozen)):
            continue  # a bad tie (reported above), a sharer (counted at its owner), frozen
        module = _meta_module(run_graph, report, dst)
        param = None if module is None else dict(module.named_parameters()).get(name)
        owner = flat.origin.get(dst, dst) if flat else dst
        if param is not None and param.requires_grad and owner in report.param_counts:
            report.param_counts[owner] -= param.numel()


def check(graph: Graph, for_training: bool = False, cache: OpCache | None = None) -> Report:
    """`validate`, raising ValidationError when there are errors."""
    report = validate(graph, for_training, cache)
    report.raise_if_errors()
    return report


def _check_nodes(graph: Graph, report: Report) -> None:
    registry = graph.registry
    for node in graph:
        if node.type not in registry:
            report.problems.append(Problem(node.id, None, "unknown_block",
                                           f"unknown block type '{node.type}'",
                                           "install the package that provides it, or replace "
                                           "the node"))
            continue
        spec = registry.get(node.type)
        report.specs[node.id] = spec
        values, bad = spec.resolve_params(node.params)
        for name, message in bad.items():
            kind = ("unknown_param" if spec.param(name) is None
                    else "missing_param" if name not in node.params else "bad_param")
            hint = "" if kind != "unknown_param" else "remove it, or check the spelling"
            report.problems.append(Problem(node.id, name, kind, message, hint))
        if not bad:
            report.params[node.id] = values


def _check_code(graph: Graph, report: Report) -> None:
    """Names of Python outside the allowlist, unless trusted: reported before anything is
    built, so the node is skipped by inference and nothing is imported."""
    for node, param, message, hint in allowlist.refusals(graph, allowlist.trusted_now()):
        report.problems.append(Problem(node, param, "untrusted_code", message, hint))
        report.params.pop(node, None)


def _check_edges(graph: Graph, report: Report) -> None:
    fed = Counter((e.dst, e.dst_port) for e in graph.edges)
    for e in graph.edges:
        missing = [n for n in (e.src, e.dst) if n not in graph.nodes]
        if missing:  # a graph built in code with strict=False (files are checked on load)
            report.problems.append(Problem(e.dst if e.dst in graph.nodes else e.src, None,
                                           "dangling_edge", f"wire {e} names missing node(s) "
                                           f"{', '.join(missing)}", "remove the wire"))
            continue
        src, dst = report.specs.get(e.src), report.specs.get(e.dst)
        out = src.output(e.src_port) if src else None
        inp = dst.input(e.dst_port) if dst else None
        if src and out is None:
            names = ", ".join(p.name for p in src.outputs) or "none"
            report.problems.append(Problem(e.src, e.src_port, "unknown_port",
                                           f"{src.id} has no output '{e.src_port}' "
                                           f"(outputs: {names})"))
        if dst and inp is None:
            names = ", ".join(p.name for p in dst.inputs) or "none"
            report.problems.append(Problem(e.dst, e.dst_port, "unknown_port",
                                           f"{dst.id} has no input '{e.dst_port}' "
                                           f"(inputs: {names})"))
        if out and inp and out.type is not inp.type:  # the same type: nothing to say
            reason = why_incompatible(out.type, inp.type)
            if reason:
                report.problems.append(Problem(e.dst, e.dst_port, "type_mismatch",
                                               f"wire from {e.src}.{e.src_port}: {reason}"))
    for (node_id, port_name), count in fed.items():
        if count > 1:
            report.problems.append(Problem(node_id, port_name, "multiple_inputs",
                                           f"input '{port_name}' is fed by {count} wires",
                                           "an input takes one wire; remove the extra ones"))
    for node in graph:
        spec = report.specs.get(node.id)
        for port in spec.inputs if spec else ():
            if not port.optional and (node.id, port.name) not in fed:
                report.problems.append(Problem(node.id, port.name, "missing_input",
                                               f"input '{port.name}' is not connected",
                                               f"wire a {port.type.name} output into it"))


def _infer(graph: Graph, report: Report, cache: OpCache) -> None:
    """Walk the nodes in order, giving each output a meta tensor of its shape and dtype."""
    broken = {p.node for p in report.errors}
    cache.make_room(2 * len(report.order))  # a big graph must not evict its own entries
    for node_id in report.order:
        spec = report.specs.get(node_id)
        params = report.params.get(node_id)
        if spec is None or params is None or node_id in broken or spec.kind not in _INFERRED:
            continue
        inputs, sources = {}, {}
        for e in graph.edges_into(node_id):
            source = e.source
            meta: torch.Tensor | Chain | None = report.outputs.get(source)
            if meta is None:
                meta = report.transforms.get(source)
                if meta is None:
                    break  # an upstream node failed; it has been reported already
            inputs[e.dst_port] = meta
            sources[e.dst_port] = source
        else:
            try:
                dtype = dtypes.node_dtype(spec, params, report.settings)
                with classes.declared() as declared:
                    _infer_node(node_id, spec, params, inputs, report, cache, dtype)
                _follow_labels(node_id, spec, inputs, sources, report)
                _check_classes(node_id, spec, declared, sources, report)
            except PortError as e:
                report.problems.append(Problem(node_id, e.port, e.kind,
                                               f"{spec.id} '{node_id}' {e}",
                                               _data_hint(graph, e)))
            except NodegraphError as e:
                report.problems.append(Problem(node_id, None, "bad_config",
                                               f"{spec.id} '{node_id}': {e}"))
            except Exception as e:  # a torch error at the meta forward, most often shapes
                report.problems.append(Problem(node_id, None, "shape_error",
                                               f"{spec.id} '{node_id}' cannot run on its "
                                               f"inputs {_shapes(inputs)}: {first_line(e)}",
                                               "check the shapes of the wires into it"))


def _data_hint(graph: Graph, e: PortError) -> str:
    """A missing data file's hint: how the graph file says its data is made (its top-level
    `"data_hint"`, text shown and never run), else the block's own hint."""
    made = graph.extra.get("data_hint")
    if e.kind == "data_error" and "does not exist" in str(e) and isinstance(made, str):
        return made[:300]
    return e.hint


def _infer_node(node_id: str, spec: BlockSpec, params: Params, inputs: dict,
                report: Report, cache: OpCache, dtype: torch.dtype = torch.float32) -> None:
    if spec.kind == "transform":
        chain = inputs.get("input", Chain())
        report.transforms[(node_id, spec.outputs[0].name)] = chain.then(spec.build(params))
    elif spec.kind == "data":
        chain = inputs.get("augment")
        if chain is not None:
            report.augments[node_id] = chain
        with augmenting(chain):
            data = _data_meta(node_id, spec, params, report)
        report.data[node_id] = data
        meta = {k: dtypes.cast_tensor(v, dtype) for k, v in data.meta().items()}
        missing = [p.name for p in spec.outputs if p.name not in meta]
        if missing:
            raise NodegraphError(f"the dataset provides no {missing}")
        for port in spec.outputs:
            report.outputs[(node_id, port.name)] = meta[port.name]
        b = meta[spec.outputs[0].name].shape[0] if spec.outputs else None
        report.batch_size = report.batch_size if report.batch_size is not None else b
    elif spec.kind == "op":
        outs, count, nbytes = _infer_op(spec, params, inputs, cache, dtype, node_id)
        report.param_counts[node_id] = count
        footprint.check_op(spec, params, inputs, sum(nbytes))
        report.module_bytes[node_id] = nbytes
        for port, value in zip(spec.outputs, outs, strict=True):
            report.outputs[(node_id, port.name)] = value
    elif spec.kind == "metric":
        spec.build(params, inputs)


def _follow_labels(node_id: str, spec: BlockSpec, inputs: dict,
                   sources: dict[str, tuple[str, str]], report: Report) -> None:
    """Mark the outputs that carry class indices: a data block's integer ports, and the
    output of a block that only rearranges them (one integer input, an output of the same
    dtype and size and no weights: Reshape, Flatten, Identity, StopGradient). Blocks that
    run code of the file's (`opaque.*`) are not followed: they may change the values."""
    if spec.kind == "data":
        data = report.data.get(node_id)
        for port in spec.outputs:
            meta = report.outputs.get((node_id, port.name))
            if meta is not None and not meta.is_floating_point() and meta.dtype != torch.bool:
                count = data.classes.get(port.name) if data is not None else None
                report.labels[(node_id, port.name)] = classes.Labels((node_id, port.name),
                                                                     spec.id, count)
        return
    if not report.labels or spec.kind != "op" or spec.code is not None or len(inputs) != 1 \
            or len(spec.outputs) != 1:
        return  # no labels anywhere yet (most graphs' float chains), or not a rearranging op
    (port, value), = inputs.items()
    source = sources.get(port)
    labels = report.labels.get(source) if source is not None else None
    out = report.outputs.get((node_id, spec.outputs[0].name))
    if labels is not None and out is not None and out.dtype == value.dtype and \
            out.numel() == value.numel() and not report.param_counts.get(node_id):
        report.labels[(node_id, spec.outputs[0].name)] = labels


# params that set how many values a layer gives per sample: the fix a class count names
_WIDTH_PARAMS = ("out_features", "out_channels", "num_classes", "classes")


def _check_classes(node_id: str, spec: BlockSpec, declared: list[classes.Indices],
                   sources: dict[str, tuple[str, str]], report: Report) -> None:
    """Each port node `node_id` declared to take class indices: remembered with the data
    port its labels come from, and, where that block says how many classes there are, an
    error when the scores have fewer (a label would be out of range) and a warning when
    they have more (scores no sample is labelled with)."""
    for ind in dict.fromkeys(declared):  # a rule and a build may both declare
        source = sources.get(ind.port)
        labels = report.labels.get(source) if source is not None else None
        if labels is None:
            continue
        report.class_targets[(node_id, ind.port)] = classes.Target(
            node_id, ind.port, labels.source, labels.block, ind.width, ind.ignore)
        count = labels.count
        if count is None or count == ind.width:
            continue
        data_node, data_port = labels.source
        scores_from = sources.get(ind.scores)
        message = (f"{spec.id} '{node_id}' gets {ind.width} class score(s) per sample on "
                   f"'{ind.scores}', but '{ind.port}' takes the class indices of "
                   f"{labels.block} '{data_node}' (port {data_port}), which has {count} "
                   "classes")
        if count < ind.width:
            message += f": scores {count} to {ind.width - 1} are no sample's class"
        report.problems.append(Problem(
            node_id, ind.scores, "shape_mismatch", message,
            _width_fix(report, scores_from, count, ind.scores),
            "error" if count > ind.width else "warning"))


def _width_fix(report: Report, source: tuple[str, str] | None, count: int,
               port: str) -> str:
    """The fix of a class count: the param of the layer feeding the scores that sets their
    width (``out.out_features = 4``), or what the scores need."""
    if source is not None:
        spec, params = report.specs.get(source[0]), report.params.get(source[0])
        name = next((n for n in _WIDTH_PARAMS if spec is not None and spec.param(n)), None)
        if name is not None and params is not None and isinstance(params.get(name), int):
            shown = _shown(report, source[0])
            return f"set {shown}.{name} = {count}"
    return f"give the scores on '{port}' {count} classes (their last dimension)"


def _data_meta(node_id: str, spec: BlockSpec, params: Params, report: Report) -> DataMeta:
    """What data block `node_id` will hold: from its declared `meta` without making the
    data, or else by building the dataset (kept on the report for compile); a dataset
    handed in from Python (`nodegraph.kinds.given`) in its place."""
    handed = given.dataset_for(node_id)
    if handed is not None:
        report.datasets[node_id] = handed
        return DataMeta.of(handed)
    try:
        data = spec.meta(params) if spec.meta is not None else None
        if data is None:
            dataset = spec.build(params)
    except footprint.TooLarge:
        raise
    except (NodegraphError, OSError, ValueError) as e:
        raise PortError(spec.outputs[0].name if spec.outputs else None, str(e),
                        "check the data block's params and files", kind="data_error") from e
    if data is not None:
        footprint.check_data(params, data.nbytes)
        report.problems += [Problem(node_id, spec.outputs[0].name if spec.outputs else None,
                                    "data_error", text, "set strict = true to refuse the data "
                                    "instead", severity="warning") for text in data.warnings]
        return data
    footprint.check_data(params, footprint.dataset_bytes(dataset))
    report.datasets[node_id] = dataset
    return DataMeta.of(dataset)


def _infer_op(spec: BlockSpec, params: Params, inputs: dict, cache: OpCache,
              dtype: torch.dtype = torch.float32, node_id: str = ""
              ) -> tuple[tuple, int, tuple]:
    """Output meta tensors, trainable-parameter count and the bytes of its parameters,
    buffers and the tensors one forward makes (`footprint.run_counted`), of an op block,
    remembered in `cache` by block, params, dtype and input shapes. A floating input in
    another dtype than the block's weights is a PortError (see `nodegraph.kinds.dtypes`).
    A block's declared shape rule (`nodegraph.kinds.shapes`) gives them without building
    anything, and needs no cache; it reads the node's resolved dtype from its `dtype` param
    and declines (None) a mixed-dtype input, which the meta path below then reports."""
    if spec.shape is not None:
        ruled_params = Params({**params, "dtype": dtypes.name_of(dtype)}) \
            if dtypes.follows_graph(spec) else params
        ruled = shapes.infer(spec.shape, ruled_params, inputs)
        if ruled is not None:
            return (tuple(torch.empty(s, dtype=d, device="meta") for s, d in ruled.outputs),
                    ruled.count, ruled.nbytes)
    key = (spec.id, id(spec.build), allowlist.trusted_now(), repr(sorted(params.items())),
           tuple((k, tuple(v.shape), v.dtype) for k, v in sorted(inputs.items())), dtype)
    hit = cache.get(key)
    if hit is None:
        with torch.device("meta"), classes.declared() as declared:  # no draws to match
            module = dtypes.cast_module(spec.build(params, inputs), dtype)  # cast, not built
        _check_dtypes(spec, node_id, module, inputs, dtype)
        args = [inputs.get(p.name) for p in spec.inputs]
        try:
            out, work = footprint.run_counted(module, args)
        except ValueError as e:  # batch norm on one sample: shapes as in eval mode
            if "more than 1 value per channel" not in str(e):
                raise
            out, work = footprint.run_counted(module.eval(), args)
        outs = (out,) if len(spec.outputs) == 1 else tuple(out)
        count = sum(p.numel() for p in module.parameters() if p.requires_grad)
        hit = (tuple((tuple(t.shape), t.dtype) for t in outs), count,
               (*footprint.module_bytes(module), work), tuple(declared))
        cache.put(key, hit)
    for indices in hit[3]:  # what the build declared (now or when cached), to the caller
        classes.takes_indices(indices.port, indices.scores, indices.width, indices.ignore)
    outs, count, nbytes, _ = hit
    return tuple(torch.empty(s, dtype=d, device="meta") for s, d in outs), count, nbytes


def _check_dtypes(spec: BlockSpec, node_id: str, module: Any, inputs: dict,
                  dtype: torch.dtype) -> None:
    """Refuse a floating input whose dtype differs from the block's weights (torch would
    fail, or silently compute in the other dtype), on the port that receives it."""
    if not dtypes.has_float_state(module):
        return
    for port in spec.inputs:
        value = inputs.get(port.name)
        if isinstance(value, torch.Tensor) and value.is_floating_point() and \
                value.dtype != dtype:
            message, hint = dtypes.mismatch(port.name, value.dtype, dtype)
            raise PortError(port.name, message, hint, kind="dtype_mismatch")


def _check_optimizers(graph: Graph, report: Report) -> None:
    """Build each optimizer on a stand-in parameter, and each schedule on the optimizer it
    feeds, so settings they refuse (momentum a schedule needs, mismatched lists) are
    reported on their node before a run."""
    with eager.untraced():  # nothing is compiled here: no torch._dynamo import
        _check_optimizers_eagerly(graph, report)


def _check_optimizers_eagerly(graph: Graph, report: Report) -> None:
    for node_id in report.order:
        spec, params = report.specs.get(node_id), report.params.get(node_id)
        if spec is None or params is None or spec.kind != "optimizer":
            continue
        _check_scalar_loss(graph, report, node_id, spec.id)
        try:
            optimizer = spec.build(params, [("stand_in.weight",
                                             torch.nn.Parameter(torch.zeros(2, 2)))])
        except Exception as e:
            report.problems.append(Problem(node_id, None, "bad_config",
                                           f"{spec.id} '{node_id}': {first_line(e)}"))
            continue
        edge = graph.source_of(node_id, "schedule")
        sched = report.specs.get(edge.src) if edge else None
        if edge is None or sched is None or edge.src not in report.params:
            continue
        try:
            sched.build(report.params[edge.src], optimizer)
        except Exception as e:
            report.problems.append(Problem(edge.src, None, "bad_config",
                                           f"{sched.id} '{edge.src}' on optimizer "
                                           f"'{node_id}': {first_line(e)}"))


def _check_scalar_loss(graph: Graph, report: Report, opt: str, opt_block: str) -> None:
    """An optimizer minimises one number: a loss left unreduced (reduction none) is refused
    on the optimizer's loss port, naming the loss node and port that feed it."""
    edge = graph.source_of(opt, "loss")
    if edge is None:
        return
    meta = report.outputs.get(edge.source)
    if meta is None or meta.ndim == 0:
        return
    report.problems.append(Problem(
        opt, "loss", "shape_mismatch",
        f"{opt_block} '{opt}' needs a scalar on 'loss', but {edge.src}.{edge.src_port} "
        f"is {tuple(meta.shape)} (unreduced per-sample losses)",
        f"set reduction to mean or sum on '{edge.src}', or reduce it before the optimizer"))


# Checked for training, which is compile's default: how to ask for inference instead.
FORWARD_ONLY = ("to run the graph forward only, use nodegraph.forward(graph), "
                "compile(graph, for_training=False) or `nodegraph forward`")


def _check_trainable(graph: Graph, report: Report) -> None:
    kinds = {nid: s.kind for nid, s in report.specs.items()}
    if "data" not in kinds.values():
        report.problems.append(Problem(None, None, "no_data", "the graph has no data block",
                                       "add a data block and wire it into the model"))
    optimizers = [nid for nid, k in kinds.items() if k == "optimizer"]
    if not optimizers:
        report.problems.append(Problem(None, None, "no_optimizer", "the graph has no "
                                       "optimizer, so there is nothing to train",
                                       "wire the loss into an optimizer block; " + FORWARD_ONLY))
    for opt in optimizers:
        edge = graph.source_of(opt, "loss")
        if edge is None:
            continue
        upstream = graph.upstream([edge.src])
        named = report.params.get(opt, Params()).get("scope") or []  # unknown ones: `references`
        scope = [m for s in named for m in (report.flat.members(s) if report.flat else None)
                 or [s]]
        counted = [n for n in (scope or upstream) if report.param_counts.get(n)]
        # a node upstream that failed (too large, bad shapes) left its weights uncounted
        if not counted and not {edge.src, *upstream} & {p.node for p in report.errors}:
            report.problems.append(Problem(opt, "loss", "nothing_to_train",
                                           "no trainable parameters upstream of its loss",
                                           "put a layer with weights between data and loss"))
    sizes = {nid: data.num_batches("train") for nid, data in report.data.items()}
    if len(set(sizes.values())) > 1:
        report.problems.append(Problem(None, None, "data_mismatch", "data blocks give different"
                                       f" numbers of batches per epoch: {sizes}",
                                       "give them the same size and batch size"))


def _shapes(inputs: dict[str, Any]) -> str:
    return ", ".join(f"{k} {tuple(v.shape)}" for k, v in inputs.items() if v is not None) or "-"

