"""`nodegraph validate GRAPH`: check a graph file before anything runs; exit 1 on problems.

Validation is `nodegraph.check.validate` (shapes, dtypes, wiring, what training needs when
the graph has an optimizer); this module prints its problems, or one line saying the file is
ok and whether `run` can train it. `--json` prints the whole description instead
(`nodegraph.check.describe`): a JSON document on stdout whatever happens, a file that does
not load included.
"""

from __future__ import annotations

import argparse
import json
import sys

from nodegraph.cli.common import (
    EXIT_PROBLEMS,
    add_graph_argument,
    beside,
    open_graph,
    print_json,
    print_problems,
    say,  # control characters from the file escaped
    trains,
)
from nodegraph.model.errors import NodegraphError, ValidationError


def register(sub) -> None:
    val = sub.add_parser("validate", description="Check a graph file; exit 1 when it has "
                         "problems.")
    add_graph_argument(val)
    val.add_argument("--json", action="store_true", help="print the problems, every wire's "
                     "shape and dtype, parameter counts and the memory estimate as JSON")
    val.set_defaults(func=cmd_validate)


def cmd_validate(args: argparse.Namespace) -> int:
    from nodegraph.check.describe import capabilities
    from nodegraph.check.validate import validate

    if args.json:  # a JSON document on stdout whatever happens, a load failure included
        try:
            graph = open_graph(args)
        except ValidationError as e:
            return _print_failure(args.graph, [p.to_dict() for p in e.problems], str(e))
        except NodegraphError as e:
            return _print_failure(args.graph, [], str(e))
    else:
        graph = open_graph(args)
    with beside(args.graph):
        report = validate(graph, for_training=trains(graph))
    if args.json:
        return print_json(graph, report)
    if report.problems:
        print_problems(report.problems, args.graph)
    if report.ok:
        can = capabilities(graph)
        trainable = "trainable" if can["train"] else (
            f"forward-only: {can['why_not_train']}, so `run` cannot train it (add a loss and "
            "an optimizer; `nodegraph import` does with --loss and --optimizer)")
        say(f"{args.graph}: ok ({len(graph)} nodes, {len(graph.edges)} wires, "
            f"{sum(report.param_counts.values()):,} parameters; {trainable})")
    return 0 if report.ok else EXIT_PROBLEMS


def _print_failure(path: str, problems: list, message: str) -> int:
    """`validate --json` on a file that did not load: the reason as a JSON document (and on
    stderr, as always)."""
    from nodegraph.check.describe import FORMAT

    print(json.dumps({"describe_format": FORMAT, "file": path, "ok": False, "loaded": False,
                      "error": message, "problems": problems}, indent=1, default=str))
    say(f"error: {message}", file=sys.stderr)
    return EXIT_PROBLEMS
