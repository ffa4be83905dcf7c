"""Where a graph names its own nodes, read from the declarations instead of known names.

A block param of kind ``node`` or ``nodes`` (see `nodegraph.model.spec`) holds node ids; ties
name the nodes they join; training stages name optimizers and frozen nodes; the `monitor`
setting names a metric as ``split.node``. Renaming a node rewrites all of them
(`rename_params`, `rename_training`), validation checks that each named node exists and
has a kind the param allows (`problems`), and `referenced` lists every node something
points at. A name ``instance__inner`` (a node inside a group instance, as the flattened
graph calls it) follows a renamed instance.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from nodegraph.model.errors import Problem, ProblemKind
from nodegraph.model.groupdefs import SEP, is_group
from nodegraph.model.spec import BlockSpec, Param, Registry


def renamed_id(name: Any, old: str, new: str) -> Any:
    """`name` with node `old` called `new`; `old__inner` (inside instance `old`) follows."""
    if name == old:
        return new
    if isinstance(name, str) and name.startswith(old + SEP):
        return new + name[len(old):]
    return name


def renamed_value(param: Param, value: Any, old: str, new: str) -> Any:
    """`value` of `param` with node `old` called `new` (unchanged when it names no nodes)."""
    if param.kind == "node":
        return renamed_id(value, old, new)
    if param.kind == "nodes" and isinstance(value, list):
        return [renamed_id(v, old, new) for v in value]
    return value


def rename_params(spec: BlockSpec, params: dict[str, Any], old: str, new: str
                  ) -> dict[str, Any]:
    """The params of a node of block `spec` that change when node `old` becomes `new`."""
    changed = {}
    for param in spec.params:
        if param.names_nodes and param.name in params:
            value = renamed_value(param, params[param.name], old, new)
            if value != params[param.name]:
                changed[param.name] = value
    return changed


def rename_training(training: dict[str, Any], old: str, new: str) -> dict[str, Any]:
    """The training settings that change when node `old` becomes `new`: the stages'
    optimizers and frozen nodes, and a monitor ``split.old[.key]``."""
    changed: dict[str, Any] = {}
    stages = training.get("stages")
    if isinstance(stages, list):
        renamed = [_renamed_stage(s, old, new) for s in stages]
        if renamed != stages:
            changed["stages"] = renamed
    monitor = training.get("monitor")
    if isinstance(monitor, str) and "." in monitor:
        split, _, key = monitor.partition(".")
        if key == old or key.startswith(old + "."):
            changed["monitor"] = f"{split}.{new}{key[len(old):]}"
    return changed


def _stages(training: dict[str, Any]) -> list[dict]:
    """The well-formed stages (the rest is reported by the stage check)."""
    stages = training.get("stages")
    return [s for s in stages if isinstance(s, dict)] if isinstance(stages, list) else []


def _stage_names(training: dict[str, Any]) -> list[str]:
    """The names of the well-formed stages (a name of another type, which the settings
    check reports, names nothing)."""
    return [name for s in _stages(training) if isinstance(name := s.get("name"), str)]


def _renamed_stage(stage: Any, old: str, new: str) -> Any:
    if not isinstance(stage, dict):
        return stage
    out = dict(stage)
    for key in ("optimizers", "frozen"):
        if isinstance(stage.get(key), list):
            out[key] = [renamed_id(n, old, new) for n in stage[key]]
    return out


def named_in(spec: BlockSpec, params: dict[str, Any]) -> Iterator[tuple[Param, str]]:
    """Each (param, node id) that a node of block `spec` with `params` names."""
    for param in spec.naming_params:
        value = params.get(param.name)
        if param.kind == "node" and isinstance(value, str) and value:
            yield param, value
        elif param.kind == "nodes" and isinstance(value, list):
            yield from ((param, v) for v in value if isinstance(v, str) and v)


def referenced(graph) -> set[str]:
    """Every node of `graph` that a param, a tie or a training stage names."""
    return {n.split(SEP)[0] for n in mentioned(graph)} & set(graph.nodes)


def mentioned(graph) -> set[str]:
    """Every name that a param, a tie or a training stage uses as a node id, whether or not
    the graph has such a node."""
    names: set[str] = set()
    for node in graph:
        if node.type in graph.registry:
            names |= {n for _, n in named_in(graph.registry.get(node.type), node.params)}
    for tie in graph.ties:
        names |= {tie.src, tie.dst}
    for stage in _stages(graph.training):
        for key in ("optimizers", "frozen"):
            value = stage.get(key)
            names |= {n for n in value if isinstance(n, str)} if isinstance(value, list) \
                else set()
    return names


def kind_of(registry: Registry, block_type: str) -> str | None:
    """The kind of a block type ("group" for a group instance), None when unknown."""
    if is_group(block_type):
        return "group"
    return registry.get(block_type).kind if block_type in registry else None


def problems(graph, flat_ids: frozenset[str] | set[str] = frozenset()) -> list[Problem]:
    """One problem per node and param that names nodes the graph lacks or nodes of a kind
    the param does not allow, or a stage the training settings lack. `flat_ids` are the
    flattened graph's ids (``instance__inner``), which params may name too. The param an
    op or metric `binds` is left to the check of what compile can bind."""
    stages = set(_stage_names(graph.training))
    found = []
    for node in graph:
        if node.type not in graph.registry:
            continue
        spec = graph.registry.get(node.type)
        bound = spec.binds if spec.kind in ("op", "metric") else ""
        missing: dict[str, list[str]] = {}
        wrong: dict[str, list[str]] = {}
        for param, name in named_in(spec, node.params):
            if param.name == bound:
                continue
            target = graph.nodes.get(name)
            if target is None:
                if name not in flat_ids:
                    missing.setdefault(param.name, []).append(name)
                continue
            kind = kind_of(graph.registry, target.type)
            if param.of and kind is not None and kind not in param.of:
                wrong.setdefault(param.name, []).append(f"'{name}' ({kind})")
        for param in spec.naming_params:
            value = node.params.get(param.name)
            if param.name in missing:
                names = ", ".join(f"'{n}'" for n in missing[param.name])
                found.append(Problem(node.id, param.name, ProblemKind.BAD_PARAM,
                                     f"'{param.name}' names {names}, which is not a node of "
                                     "this graph", "pick one of the graph's nodes"))
            elif param.name in wrong:
                allowed = " or ".join(param.of)
                found.append(Problem(node.id, param.name, ProblemKind.BAD_PARAM,
                                     f"'{param.name}' names {', '.join(wrong[param.name])}; "
                                     f"it takes {allowed} blocks", f"pick a {allowed} node"))
            elif param.kind == "node" and param.required and value == "":
                found.append(Problem(node.id, param.name, ProblemKind.MISSING_PARAM,
                                     f"'{param.name}' needs a node", "pick one of the graph's "
                                     "nodes"))
            elif param.kind == "stage" and isinstance(value, str) and value \
                    and value not in stages:
                found.append(Problem(node.id, param.name, ProblemKind.BAD_PARAM,
                                     f"'{param.name}' names stage '{value}', which the "
                                     "training settings do not have",
                                     "name one of training.stages"))
    return found


def choices(graph, param: Param, node: str | None = None) -> list[str]:
    """What `param` of node `node` may name, for a picker: the graph's nodes of the kinds
    it allows (itself excepted), or the training stages' names."""
    if param.kind == "stage":
        return _stage_names(graph.training)
    if not param.names_nodes:
        return []
    return sorted(n.id for n in graph if n.id != node and (
        not param.of or kind_of(graph.registry, n.type) in param.of))
