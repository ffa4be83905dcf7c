"""A validated graph as JSON: every wire's shape and dtype, parameter counts, memory, problems.

What `nodegraph info --json` and `validate --json` print, for scripts and CI that read a graph
without parsing text. Shapes keep the batch dimension as a number and also give it as "N" in
`shape_text`, as the editor shows it. A port of class indices whose data block says how
many classes there are gives the count as `classes`.
"""

from __future__ import annotations

from typing import Any

from nodegraph.check.validate import Report
from nodegraph.model.graph import Graph

FORMAT = 1  # bumped when a key changes meaning


def describe(graph: Graph, report: Report) -> dict[str, Any]:
    """The graph, what validation inferred about it, and what it can do."""
    nodes = []
    for node in graph:
        spec = graph.registry.get(node.type) if node.type in graph.registry else None
        outputs = {port.name: _port(report, node.id, port.name)
                   for port in (spec.outputs if spec else ())}
        nodes.append({"id": node.id, "type": node.type, "kind": spec.kind if spec else None,
                      "parameters": report.param_counts.get(node.id, 0),
                      "outputs": {k: v for k, v in outputs.items() if v is not None}})
    wires = [{"from": [e.src, e.src_port], "to": [e.dst, e.dst_port],
              **(_port(report, e.src, e.src_port) or {})} for e in graph.edges]
    memory = report.memory
    return {
        "describe_format": FORMAT,
        "name": graph.name,
        "ok": report.ok,
        "can": capabilities(graph),
        "batch_size": report.batch_size,
        "parameters": sum(report.param_counts.values()),
        "memory": None if memory is None else {
            "total_bytes": memory.total, "parameters": memory.parameters,
            "buffers": memory.buffers, "activations": memory.activations,
            "data": memory.data, "text": memory.text()},
        "nodes": nodes,
        "wires": wires,
        "problems": [p.to_dict() for p in report.problems],
    }


def capabilities(graph: Graph) -> dict[str, Any]:
    """Whether the graph can run forward and whether it can train, and why not."""
    kinds = {graph.registry.get(n.type).kind for n in graph if n.type in graph.registry}
    missing = [what for what, kind in (("data block", "data"), ("optimizer", "optimizer"))
               if kind not in kinds]
    return {"forward": True, "train": not missing,
            "why_not_train": f"it has no {' and no '.join(missing)}" if missing else None}


def _port(report: Report, node: str, port: str) -> dict[str, Any] | None:
    tensor = report.outputs.get((node, port))
    if tensor is None:
        return None
    described: dict[str, Any] = {"shape": list(tensor.shape),
                                 "shape_text": report.shape_text(node, port),
                                 "dtype": str(tensor.dtype).removeprefix("torch.")}
    labels = report.labels.get((node, port))
    if labels is not None and labels.count is not None:  # class indices over that many
        described["classes"] = labels.count
    return described
