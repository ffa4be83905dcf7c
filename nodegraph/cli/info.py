"""`nodegraph info GRAPH`: a graph's nodes in order, with inferred output shapes and
parameter counts, the trainable total and the memory estimate.

The numbers come from validation (`nodegraph.check.validate`); problems are listed after the
table and make the exit code 1. `--json` prints the same document as `validate --json`.
"""

from __future__ import annotations

import argparse

from nodegraph.cli.common import (
    EXIT_PROBLEMS,
    add_graph_argument,
    beside,
    open_graph,
    print_json,
    print_problems,
    say,  # control characters from the file escaped
)
from nodegraph.model.errors import NodegraphError
from nodegraph.model.sanitize import clean


def register(sub) -> None:
    info = sub.add_parser("info", description="Nodes, inferred shapes and parameter counts of a "
                          "graph.")
    add_graph_argument(info)
    info.add_argument("--json", action="store_true", help="the same as JSON (as validate --json)")
    info.set_defaults(func=cmd_info)


def cmd_info(args: argparse.Namespace) -> int:
    from nodegraph.check.validate import validate

    graph = open_graph(args)
    with beside(args.graph):
        report = validate(graph)
    if args.json:
        print_json(graph, report)
        return 0
    say(f"{graph.name}: {len(graph)} nodes, {len(graph.edges)} wires")
    width = max((len(n) for n in graph.nodes), default=4)
    try:
        order = graph.topological_order()
    except NodegraphError:
        order = list(graph.nodes)
    for node_id in order:
        node = graph.nodes[node_id]
        spec = graph.registry.get(node.type) if node.type in graph.registry else None
        outs = ", ".join(f"{p.name} {report.shape_text(node_id, p.name)}"
                         for p in (spec.outputs if spec else ())
                         if (node_id, p.name) in report.outputs)
        count = report.param_counts.get(node_id)
        params = f"{count:,} params" if count else ""
        say(f"  {clean(node_id):<{width}}  {clean(node.type):<24} {params:>14}  {outs}")
    say(f"trainable parameters: {sum(report.param_counts.values()):,}")
    if report.memory is not None:
        say(f"memory: {report.memory.text()}")
    if report.problems:
        print_problems(report.problems, args.graph)
    return 0 if report.ok else EXIT_PROBLEMS
