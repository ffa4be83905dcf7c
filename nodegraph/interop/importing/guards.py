"""Guards: a node after each input valid at some sizes only, refusing the others by name."""

from __future__ import annotations

from typing import Any

from nodegraph.interop.importing.planner import Importer
from nodegraph.interop.importing.values import _tree_inputs, _tree_json
from nodegraph.model.errors import NodeRuntimeError
from nodegraph.model.graph import Graph

# what each guard's refusal says (its messages below): an input's size named
REFUSALS = ("was imported at size", "these input sizes take the other one")


def refuses_size(error: Exception) -> bool:
    """Whether `error` is a size guard's refusal of an input size (see `_guard_sizes`), as
    opposed to a node of the graph failing at run time (a `NodeRuntimeError`)."""
    return not isinstance(error, NodeRuntimeError) and any(
        phrase in str(error) for phrase in REFUSALS)


def _guard_sizes(graph: Graph, placeholders: list, ids: dict, importer: Importer,
                 inputs: tuple) -> dict[str, dict[str, int]]:
    """For each input with dims the import is valid at one size only (`Importer.fixed`):
    a node right after it that passes it on unchanged where those dims have that size and
    refuses any other size, naming it (validation reports it on that node), so no other
    size computes wrong numbers. Returns {input: {dim: size}} for the file."""
    checks: dict[int, list[tuple[Any, bool, str, list]]] = {}
    for tree, outcome, where in importer.traced.meta.get("size_check_trees", []):
        reads = _tree_inputs(tree) if tree is not None else []
        if tree is None or not reads or any(r not in placeholders for r in reads):
            for i, x in enumerate(inputs):  # no expression: every size stays as it is
                importer.fixed.setdefault(i, {}).update({d: int(x.shape[d])
                                                         for d in range(1, x.ndim)})
            importer.notes.append(f"the size check at {where} has no expression; the "
                                  "import is valid for the example's sizes only")
            continue
        first = placeholders.index(reads[0])
        checks.setdefault(first, []).append((tree, outcome, where, reads))
    recorded: dict[str, dict[str, int]] = {}
    for i in sorted(set(importer.fixed) | set(checks)):
        dims = importer.fixed.get(i, {})
        if i >= len(placeholders) or not dims and i not in checks:
            continue
        name = ids[placeholders[i]]
        ports = [placeholders[i]]  # the guard's inputs: this one, then any a check reads
        for _, _, _, reads in checks.get(i, []):
            ports += [r for r in reads if r not in ports]
        sizes: list[Any] = []
        for d in range(inputs[i].ndim):
            size: Any = {"size": [0, d]}
            if d == 0:
                for tree, outcome, where, _ in checks.get(i, []):
                    size = {"expr": ["check", _tree_json(tree, ports), outcome,
                                     f"the check at {where} was {outcome} when the module "
                                     "was imported and the graph follows that branch; "
                                     "these input sizes take the other one", size]}
            if d in dims:
                size = {"expr": ["expect", size, dims[d],
                                 f"'{name}' was imported at size {dims[d]} in dim {d} and "
                                 "the module computes with that size in a way the graph "
                                 "cannot follow (see the import's notes); import it again "
                                 "at this size"]}
            sizes.append(size)
        guard = f"{name}_sizes"
        graph.add("opaque.Function", id=guard, function="torch:Tensor.expand",
                  args=[{"input": 0}, {"tuple": sizes}], kwargs={})
        spec = graph.registry.get("opaque.Function")
        for port, source in zip(spec.inputs, ports, strict=False):
            graph.connect((ids[source], "x"), (guard, port.name))
        importer.guards[placeholders[i]] = guard
        if dims:
            recorded[name] = {str(d): s for d, s in sorted(dims.items())}
    return recorded
