"""What a group is: its definition, the registry view that resolves `group.NAME`, and the
groups a block library ships. `Graph` holds these, so they live apart from the expansion
and editing in `nodegraph.model.groups`, which works on graphs (and imports `Graph`).
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator, Mapping
from dataclasses import replace
from typing import Any

from nodegraph.model.errors import GraphError
from nodegraph.model.spec import BlockSpec, Param, Port, Registry, UnknownBlockError
from nodegraph.model.types import TENSOR

PREFIX = "group."
SEP = "__"
MAX_DEPTH = 16
MAX_NODES = 10_000  # expanded; validating 5,000 nodes takes ~0.5 s, and ten instances of
# a group of ten instances of ... make a bomb of a file of a few lines
GROUP_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")  # what a block id's `Name` part allows


class GroupError(GraphError):
    """A group that cannot be expanded (it uses itself, a bad `share`); names the top-level
    node it was found under, when there is one."""

    def __init__(self, message: str, node: str | None = None):
        self.node = node
        super().__init__(message)


class GroupDef:
    """A named subgraph with ports. Its `ui` (the positions inside it, saved with the
    file) is its body's: an editor tab on the body edits what the file keeps."""

    # `body` is a `Graph`, not named as one: graph.py imports this module (no import circle)
    def __init__(self, name: str, body: Any,
                 inputs: dict[str, list[tuple[str, str]]] | None = None,
                 outputs: dict[str, tuple[str, str]] | None = None,
                 ui: Mapping[str, Any] | None = None):
        self.name, self.body = name, body
        self.inputs: dict[str, list[tuple[str, str]]] = {} if inputs is None else inputs
        self.outputs: dict[str, tuple[str, str]] = {} if outputs is None else outputs
        if ui:
            body.update_ui(ui)

    @property
    def ui(self) -> Mapping[str, Any]:
        return self.body.ui

    def __repr__(self) -> str:
        return (f"GroupDef(name={self.name!r}, body={self.body!r}, inputs={self.inputs!r}, "
                f"outputs={self.outputs!r})")


def is_group(block_type: str) -> bool:
    return block_type.startswith(PREFIX)


def group_spec(defn: GroupDef, registry: Registry | GroupRegistry) -> BlockSpec:
    """The block declaration of a group: its ports typed as the inner ports they stand for."""
    def inner_type(node: str, port: str, outputs: bool):
        inner = defn.body.nodes.get(node)
        return TENSOR if inner is None else _port_type(registry, inner.type, port, outputs,
                                                       {defn.name})

    inputs = tuple(Port(name, inner_type(*targets[0], False) if targets else TENSOR,
                        f"feeds {', '.join(f'{n}.{p}' for n, p in targets)}")
                   for name, targets in defn.inputs.items())
    outputs = tuple(Port(name, inner_type(*src, True), f"is {src[0]}.{src[1]}")
                    for name, src in defn.outputs.items())
    return BlockSpec(id=PREFIX + defn.name, kind="group", doc=f"The group '{defn.name}': "
                     f"{len(defn.body.nodes)} nodes used as one block.", build=_not_built,
                     inputs=inputs, outputs=outputs,
                     params=(Param("share", "node", "", "another instance of this group whose "
                                   "weights this one uses; empty: weights of its own",
                                   of=("group",)),
                             Param("trainable", "bool", True, "false freezes every weight "
                                   "inside (fine-tuning: the imported layers stay as they "
                                   "are); no optimizer steps them")),
                     category="groups", declared="group")


def _port_type(registry, block_type: str, port: str, outputs: bool, seen: set[str]):
    """The type of a port of `block_type`, following group ports inward; a group met again
    (one that uses itself) gives the plain tensor type instead of recursing for ever."""
    while is_group(block_type):
        name = block_type[len(PREFIX):]
        base = registry.base if isinstance(registry, GroupRegistry) else registry
        defn = (registry.groups.get(name) if isinstance(registry, GroupRegistry) else None) \
            or getattr(getattr(_spec_or_none(base, block_type), "build", None), "definition",
                       None)
        if defn is None:
            break
        if name in seen or len(seen) > MAX_DEPTH:
            return TENSOR
        seen = seen | {name}
        ref = defn.outputs.get(port) if outputs else next(iter(defn.inputs.get(port) or []),
                                                           None)
        inner = defn.body.nodes.get(ref[0]) if ref else None
        if inner is None or ref is None:
            return TENSOR
        block_type, port = inner.type, ref[1]
    spec = _spec_or_none(registry, block_type)
    p = None if spec is None else spec.output(port) if outputs else spec.input(port)
    return p.type if p is not None else TENSOR


def _spec_or_none(registry, block_type: str) -> BlockSpec | None:
    try:
        return registry.get(block_type) if block_type in registry else None
    except (UnknownBlockError, GraphError, ValueError):
        return None


def _not_built(*_: Any) -> Any:
    raise GraphError("groups are flattened before they are built")


class Shipped:
    """The `build` of a group a block library ships: never called, it carries the body."""

    def __init__(self, definition: GroupDef):
        self.definition = definition

    def __call__(self, *_: Any) -> Any:
        return _not_built()


def shipped_spec(defn: GroupDef, doc: str, registry: Registry) -> BlockSpec:
    """The registry block of a shipped group: its ports, `doc`, and `Shipped(defn)`."""
    spec = group_spec(defn, registry)
    return replace(spec, doc=doc or spec.doc, build=Shipped(defn))


def definition(graph, name: str) -> GroupDef | None:
    """Group `name` as `graph` sees it: its own definition, else one its registry ships."""
    defn = graph.groups.get(name)
    if defn is None and PREFIX + name in graph.base_registry:
        defn = getattr(graph.base_registry.get(PREFIX + name).build, "definition", None)
    return defn


def import_group(graph, name: str) -> GroupDef:
    """Copy shipped group `name` (and the shipped groups inside it) into `graph.groups`,
    where it can be edited and is saved with the file; returns the graph's definition."""
    if name in graph.groups:
        return graph.groups[name]
    shipped = definition(graph, name)
    if shipped is None:
        raise GraphError(f"no group '{name}' in this graph or the block library")
    body = shipped.body._copy_body()  # the shipped body's ui comes along
    body.base_registry = graph.base_registry
    graph.define_group(GroupDef(name, body, copy.deepcopy(shipped.inputs),
                                dict(shipped.outputs)))
    for node in body:
        if is_group(node.type):
            import_group(graph, node.type[len(PREFIX):])
    return graph.groups[name]


class GroupRegistry:
    """The base registry plus the group definitions of one graph, read-only."""

    def __init__(self, base: Registry, groups: Mapping[str, GroupDef]):
        self.base, self.groups = base, groups

    def canonical(self, block_id: str) -> str:
        return block_id if is_group(block_id) else self.base.canonical(block_id)

    def __contains__(self, block_id: str) -> bool:
        if is_group(block_id) and block_id[len(PREFIX):] in self.groups:
            return True
        return block_id in self.base

    def get(self, block_id: str) -> BlockSpec:
        if is_group(block_id):
            defn = self.groups.get(block_id[len(PREFIX):])
            if defn is not None:
                return group_spec(defn, self)
            if block_id not in self.base:  # shipped groups are in the base registry
                raise UnknownBlockError(f"unknown group '{block_id}' (groups: "
                                        f"{', '.join(self.groups) or 'none'})")
        return self.base.get(block_id)

    def __iter__(self) -> Iterator[BlockSpec]:
        own = {PREFIX + name for name in self.groups}
        yield from (spec for spec in self.base if spec.id not in own)  # own groups win
        for defn in self.groups.values():
            yield group_spec(defn, self)

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def categories(self) -> dict[str, list[BlockSpec]]:
        out: dict[str, list[BlockSpec]] = {}
        for spec in self:
            out.setdefault(spec.category, []).append(spec)
        return out
