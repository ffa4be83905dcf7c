"""What may be wired to what, asked while the user drags a wire (Qt-free).

The graph refuses bad wires when they are made; the canvas asks first, on every mouse
move, so it can refuse a target while dragging and say why in a tooltip. The same rules
pick the blocks offered when a wire is dropped on empty canvas.
"""

from __future__ import annotations

from collections.abc import Iterable

from nodegraph.model.graph import Edge, Graph
from nodegraph.model.spec import BlockSpec, Port
from nodegraph.model.types import why_incompatible

PortRef = tuple[str, str]


def port_spec(graph: Graph, node: str, port: str, output: bool) -> Port | None:
    """The declared port, or None when the node's block or the port is unknown."""
    n = graph.nodes.get(node)
    if n is None or n.type not in graph.registry:
        return None
    spec = graph.registry.get(n.type)
    return spec.output(port) if output else spec.input(port)


def why_refused(graph: Graph, source: PortRef, target: PortRef) -> str | None:
    """Why a wire from output `source` to input `target` cannot be made, or None."""
    if source[0] == target[0]:
        return "a node cannot feed itself"
    out = port_spec(graph, *source, output=True)
    inp = port_spec(graph, *target, output=False)
    if out is None or inp is None:
        return "this port belongs to an unknown block"
    reason = why_incompatible(out.type, inp.type)
    if reason:
        return reason
    if Edge(*source, *target) in graph.edges:
        return "these ports are already wired"
    if target[0] in graph.upstream([source[0]]):
        return f"'{target[0]}' already feeds '{source[0]}'; this wire would make a cycle"
    return None


def replaced_edge(graph: Graph, target: PortRef) -> Edge | None:
    """The wire a new wire into `target` would replace (an input takes one wire)."""
    return graph.source_of(*target)


def compatible_input(graph: Graph, source: PortRef, spec: BlockSpec) -> Port | None:
    """The first input of block `spec` a wire from `source` may feed."""
    out = port_spec(graph, *source, output=True)
    if out is None:
        return None
    return next((p for p in spec.inputs if why_incompatible(out.type, p.type) is None), None)


def compatible_output(graph: Graph, target: PortRef, spec: BlockSpec) -> Port | None:
    """The first output of block `spec` that may feed input `target`."""
    inp = port_spec(graph, *target, output=False)
    if inp is None:
        return None
    return next((p for p in spec.outputs if why_incompatible(p.type, inp.type) is None), None)


def blocks_for_source(graph: Graph, source: PortRef) -> list[BlockSpec]:
    """Block types with an input that output `source` may feed."""
    return [s for s in graph.registry if compatible_input(graph, source, s) is not None]


def blocks_for_target(graph: Graph, target: PortRef) -> list[BlockSpec]:
    """Block types with an output that may feed input `target`."""
    return [s for s in graph.registry if compatible_output(graph, target, s) is not None]


def edges_among(graph: Graph, nodes: Iterable[str]) -> list[Edge]:
    """The wires whose both ends are in `nodes`."""
    keep = set(nodes)
    return [e for e in graph.edges if e.src in keep and e.dst in keep]
