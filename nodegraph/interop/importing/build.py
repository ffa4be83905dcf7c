"""The whole import: trace (either front end), plan, graph, guards, weights, check, layout.

`import_graph` is the entry point of `nodegraph import` and of the Python API.
"""

from __future__ import annotations

import inspect
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.fx
from safetensors.torch import save_file
from torch import nn

from nodegraph.interop.export.record import Recorder
from nodegraph.interop.importing import finish, targets
from nodegraph.interop.importing import groups as scope_groups
from nodegraph.interop.importing.check import _check
from nodegraph.interop.importing.exporting import export_trace
from nodegraph.interop.importing.fxtrace import _CAUTIOUS, _with_training_outputs, trace
from nodegraph.interop.importing.guards import _guard_sizes
from nodegraph.interop.importing.naming import _import_path, _where
from nodegraph.interop.importing.planner import Importer, Planned
from nodegraph.interop.importing.probing import _run, probe
from nodegraph.interop.importing.values import _Alias, _Constant, _leaves
from nodegraph.model import allowlist
from nodegraph.model.errors import NodegraphError
from nodegraph.model.graph import Graph, Tie

# -- the whole import ----------------------------------------------------------------------------


@dataclass
class Imported:
    """An imported graph and what came with it."""

    graph: Graph
    weights: dict[str, torch.Tensor]
    outputs: list[tuple[str, str]]
    max_difference: float = 0.0  # relative to the largest output (at least 1)
    reference: list[torch.Tensor] = field(default_factory=list)  # the module's outputs
    placeholders: list[str] = field(default_factory=list)  # the input nodes, in order
    fixed_sizes: dict[str, dict[str, int]] = field(default_factory=dict)  # input -> dim -> size
    notes: list[str] = field(default_factory=list)  # why those sizes are fixed
    module: Any = None  # the module imported (eval mode)


def import_module(module_or_instance: Any, example_inputs: Any, path: str | Path | None = None,
                  kwargs: dict | None = None, name: str | None = None) -> Graph:
    """Trace a module into an editable graph; see `import_graph` (this returns its graph)."""
    return import_graph(module_or_instance, example_inputs, path, kwargs, name).graph


TRACERS = ("auto", "fx", "export")
# errors about what the user gave, the same whichever tracer runs
USER_ERRORS = ("itself fails on the example inputs", "has no submodule of that name",
               "cannot be built with", "fails as it is imported", "cannot import '")


def import_graph(module_or_instance: Any, example_inputs: Any, path: str | Path | None = None,
                 kwargs: dict | None = None, name: str | None = None,
                 leaves: Iterable[str] = (), loss: str | None = None,
                 optimizer: str | None = None, groups: bool = True,
                 tracer: str = "auto") -> Imported:
    """See `_import_graph`. `tracer` picks the front end: "fx" (torch.fx, `fxtrace`),
    "export" (torch.export, `exporting`) or "auto": fx first, and where fx cannot import
    the module, torch.export; when both fail the error says what each said."""
    if tracer not in TRACERS:
        raise NodegraphError(f"tracer '{tracer}': use one of {', '.join(TRACERS)}")
    given = dict(kwargs or {})
    call = (module_or_instance, example_inputs, path)
    if tracer == "export":
        try:
            return _import_graph(*call, dict(given), name, leaves, loss, optimizer, groups,
                                 "export")
        except NodegraphError:
            raise
        except Exception as e:
            raise NodegraphError(f"torch.export: {type(e).__name__}: "
                                 f"{' '.join(str(e).split())[:300]}{_where(e)}") from None
    try:
        return _fx_import(*call, given, name, leaves, loss, optimizer, groups)
    except NodegraphError as e:
        if tracer == "fx" or any(why in str(e) for why in USER_ERRORS):
            raise
        fx_error = str(e)
    try:
        imported = _import_graph(*call, dict(given), name, leaves, loss, optimizer, groups,
                                 "export")
    except Exception as e:  # (what export's graph holds is torch's, not the user's, to vary)
        said = str(e) if isinstance(e, NodegraphError) else \
            f"{type(e).__name__}: {' '.join(str(e).split())[:300]}{_where(e)}"
        raise NodegraphError(f"neither tracer imports it. torch.fx: {fx_error} -- "
                             f"torch.export: {said}") from None
    imported.notes.insert(0, f"torch.fx could not import it ({fx_error}); torch.export did")
    return imported


def _fx_import(module_or_instance: Any, example_inputs: Any, path: str | Path | None,
               given: dict, name: str | None, leaves: Iterable[str], loss: str | None,
               optimizer: str | None, groups: bool) -> Imported:
    """The fx front end's import; where the graph's outputs differ from the module's, it is
    traced again cautiously (`_CAUTIOUS`) before the difference is reported."""
    try:
        return _import_graph(module_or_instance, example_inputs, path, dict(given), name,
                             leaves, loss, optimizer, groups)
    except NodegraphError as e:
        if not any(why in str(e) for why in ("differ from the module's", "cannot be traced",
                                             "fails on the example inputs")):
            raise
    token = _CAUTIOUS.set(True)
    try:
        return _import_graph(module_or_instance, example_inputs, path, dict(given), name,
                             leaves, loss, optimizer, groups)
    finally:
        _CAUTIOUS.reset(token)


def _import_graph(module_or_instance: Any, example_inputs: Any, path: str | Path | None = None,
                  kwargs: dict | None = None, name: str | None = None,
                  leaves: Iterable[str] = (), loss: str | None = None,
                  optimizer: str | None = None, groups: bool = True,
                  tracer: str = "fx") -> Imported:
    """Trace `module_or_instance` — an nn.Module, its class or factory, or a target string
    (see `targets`; built with `kwargs`) — on `example_inputs` (a tensor or a tuple of
    them) into a graph; the submodules named in `leaves` stay opaque blocks, and `loss` /
    `optimizer` (see `finish.add_training`) make it trainable at once. With `groups`
    the module hierarchy becomes nested groups (`groups`).

    With `path` the graph is saved there, with its weights (``STEM.safetensors``) and
    example inputs (``STEM.inputs.npz``) beside it; without, those two go to a temporary
    folder. The graph is compiled and checked against the module before it is returned.
    """
    inputs = example_inputs if isinstance(example_inputs, tuple | list) else (example_inputs,)
    inputs = tuple(torch.as_tensor(x) for x in inputs)
    kwargs = dict(kwargs or {})
    root, recorder, target = _instantiate(module_or_instance, kwargs)
    root.eval()
    try:  # inputs the module itself refuses are the user's to change, not a trace problem
        with torch.no_grad():
            root(*inputs)
    except Exception as e:
        text = " ".join(str(e).split())[:300]
        raise NodegraphError(f"{type(root).__name__} itself fails on the example inputs "
                             f"{[tuple(x.shape) for x in inputs]}{_where(e)}: "
                             f"{type(e).__name__}: {text} (give inputs it takes: "
                             "--input-shape, --input-dtype or --inputs)") from None
    if tracer == "export":
        traced, heads = export_trace(root, inputs), 0
    else:
        traced = trace(root, leaves, len(inputs), inputs)
        traced, heads = _with_training_outputs(root, traced, leaves, inputs)
    values = _run(traced, inputs)
    importer = Importer(root, traced, values, recorder, target, kwargs)
    importer.probes = probe(root, traced, inputs, importer.fixed)
    for extra in [n for n in traced.graph.nodes if n.op == "placeholder"][len(inputs):]:
        importer.symbols[extra] = _Constant(values.get(extra))  # a default left as it is
    planned = importer.plan()
    placeholders = [n for n in traced.graph.nodes if n.op == "placeholder"][:len(inputs)]
    [output] = [n for n in traced.graph.nodes if n.op == "output"]
    outs = _leaves(output.args[0], torch.fx.Node)
    with torch.no_grad():
        reference = root(*inputs)
    first = next(iter(_leaves(reference, torch.Tensor)), None)
    graph_name = name or type(root).__name__
    base = Path(path) if path is not None else Path(tempfile.mkdtemp(prefix="nodegraph-import-")) \
        / f"{graph_name}.json"
    npz = base.with_name(base.stem + ".inputs.npz")
    weights_path = base.with_name(base.stem + ".safetensors")
    graph = Graph(graph_name)
    graph.folder = base.parent.absolute()  # relative paths (data, weights) start there
    ids = {p: p.name for p in placeholders}
    for p in placeholders:
        graph.add("opaque.Arrays", id=ids[p], path=npz.name, x_key=p.name, y_key="output")
    fixed = _guard_sizes(graph, placeholders, ids, importer, inputs)
    weights: dict[str, torch.Tensor] = {}
    for item in planned:
        graph.add(item.type, id=item.id, **item.params)
        spec = graph.registry.get(item.type)
        for port, source in zip(spec.inputs, item.inputs, strict=False):
            graph.connect(_source_of(source, ids, importer), (item.id, port.name))
        weights.update({f"{item.id}.{k}": v.detach().clone() for k, v in item.weights.items()})
    for src, dst, param, src_param in importer.ties:  # one parameter, several blocks
        graph.add_tie(Tie(src.id, src_param, dst.id, param))
    out_keys = [_source_of(o, ids, importer) for o in outs]
    if groups:  # the module hierarchy as nested groups; execution's ids key the weights
        flat = scope_groups.group_by_scope(graph, importer.scopes(), {
            *(n for n, _ in out_keys), *ids.values(), *importer.guards.values()})
        weights = {f"{flat.get(k.partition('.')[0], k.partition('.')[0])}."
                   f"{k.partition('.')[2]}": v for k, v in weights.items()}
    allowlist.trust(graph)  # the user's own module, imported at their request
    graph.extra["imported"] = {"source": target or type(root).__qualname__,
                               "weights": weights_path.name,  # beside the graph
                               "outputs": [f"{n}.{p}" for n, p in out_keys]}
    if tracer == "export":  # which front end captured it
        graph.extra["imported"]["tracer"] = "export"
    if fixed:  # the sizes the import is valid for (the guards refuse others)
        graph.extra["imported"]["fixed_sizes"] = fixed
        graph.extra["imported"]["notes"] = list(importer.notes)
    if traced.meta.get("size_checks"):  # `if H != W:` in forward, decided at import
        graph.extra["imported"]["size_checks"] = list(traced.meta["size_checks"])
    arrays = {p.name: x.numpy() for p, x in zip(placeholders, inputs, strict=False)}
    arrays["output"] = first.detach().numpy() if first is not None and first.ndim and \
        len(first) == len(inputs[0]) else inputs[0].numpy()
    base.parent.mkdir(parents=True, exist_ok=True)
    np.savez(npz, **arrays)
    if heads:  # the training-only heads (googlenet's aux logits), after the eval outputs
        graph.extra["imported"]["training_outputs"] = graph.extra["imported"]["outputs"][-heads:]
    difference = _check(graph, weights, out_keys[:len(out_keys) - heads], placeholders, ids,
                        inputs, reference)
    save_file({k: v.contiguous() for k, v in weights.items()}, str(weights_path))
    finish.add_training(graph, base.parent, loss, optimizer)
    graph.set_ui("positions", finish.layered_positions(graph))
    for defn in graph.groups.values():
        defn.body.set_ui("positions", finish.layered_positions(defn.body))
    if path is not None:
        from nodegraph.model.fileformat import save

        save(graph, base)
    return Imported(graph, weights, out_keys, difference,
                    [t.detach() for t in _leaves(reference, torch.Tensor)],
                    [ids[p] for p in placeholders], fixed, list(importer.notes), root)


def _instantiate(obj: Any, kwargs: dict) -> tuple[nn.Module, Recorder | None, str | None]:
    """The module to trace, the recorder that watched it being built (when it was built
    here) and the import path of what builds it again (its class, or its factory)."""
    if isinstance(obj, nn.Module):
        return obj, None, _import_path(type(obj)) if _rebuilds_default(type(obj)) else None
    model_name = path = None
    if isinstance(obj, str):  # named by the user on the command line: imported as asked
        obj, path, model_name = targets.resolve(obj)
    elif isinstance(obj, type):
        path = _import_path(obj)
    built = targets.build(obj, kwargs, model_name, path)
    given = dict(built.kwargs)  # (timm: with the model name)
    kwargs.clear()
    kwargs.update(given)
    return built.module, built.recorder, built.target


def _rebuilds_default(cls: type) -> bool:
    try:
        signature = inspect.signature(cls)
    except (TypeError, ValueError):
        return False
    return all(p.default is not p.empty or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
               for p in signature.parameters.values())


def _source_of(value, ids: dict, importer: Importer) -> tuple[str, str]:
    if isinstance(value, Planned):  # a link of a chain (see Importer._concat)
        return (value.id, "output")
    symbol = importer.symbols.get(value)
    if isinstance(symbol, _Alias):
        value = symbol.node
    if value in importer.guards:  # an input valid at one size: through its guard
        return (importer.guards[value], "output")
    if value in ids:
        return (ids[value], "x")
    if value in importer.planned:
        return (importer.planned[value].id, "output")
    raise NodegraphError(f"'{value}' is not a tensor a block can pass on")
