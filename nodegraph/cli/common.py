"""What every `nodegraph` subcommand shares: printing, the graph argument, opening the file.

Each subcommand module (`run`, `validate`, `info`, `export`, ...) imports these; none imports
`nodegraph.cli.main`, which only assembles the parser and dispatches (an import-linter
contract in pyproject.toml). Like the rest of the command line this module imports no torch
at start-up: what it needs of the layers below is imported inside the helper that needs it.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from nodegraph.model.errors import NodegraphError
from nodegraph.model.sanitize import clean, clean_lines

EXIT_PROBLEMS = 1
EXIT_INTERRUPTED = 130


def say(*parts: object, file=None, **kwargs) -> None:
    """`print`, with control characters from a file escaped (`nodegraph.model.sanitize`):
    every line the CLI writes about a graph passes here, so no file writes to the terminal."""
    print(*(clean_lines(p) for p in parts), file=file or sys.stdout, **kwargs)


def add_graph_argument(parser: argparse.ArgumentParser) -> None:
    """The graph file argument, with --trust: every command that opens a graph has both."""
    parser.add_argument("graph")
    parser.add_argument("--trust", action="store_true", help="let this graph run code from "
                        "the modules it names outside nodegraph's allowlist of tensor "
                        "functions and torch.nn modules (your own modules, brought in by "
                        "nodegraph import); without it those nodes are reported and nothing "
                        "is imported; its data files may then come from anywhere. Callables "
                        "that read or write files, unpickle, run processes or open the "
                        "network (numpy:load, numpy:save, ...) need --grant too")
    parser.add_argument("--grant", action="append", default=[], metavar="MODULE:NAME",
                        help="let this graph call MODULE:NAME, a callable that does more "
                        "than compute (numpy:load reads files and unpickles): trusting its "
                        "module does not grant it (repeatable)")
    parser.add_argument("--data-root", action="append", default=[], metavar="DIR",
                        help="let this graph's data and weights files come from DIR too, "
                        "or from under an object-storage prefix such as s3://bucket/prefix "
                        "(repeatable); without it they must lie in the graph's folder")


def open_graph(args: argparse.Namespace):
    """The graph file `args.graph`, trusted to import its modules when --trust was given."""
    from nodegraph.model import allowlist, fileformat
    from nodegraph.runtime import distributed

    graph = fileformat.load(args.graph)
    graph.data_roots = allowed_roots(args)
    grants = list(getattr(args, "grant", None) or [])
    if getattr(args, "trust", False) or grants:
        trusts = allowlist.trust(graph, grants, modules=bool(getattr(args, "trust", False)))
        if distributed.is_main():  # under torchrun, rank 0 says it once
            say_trust(args.graph, allowlist.granted(graph), trusts, grants)
    return graph


def say_trust(path: str, grant: dict[str, list[str]], trusts: list[str],
              grants: list[str]) -> None:
    """What --trust and --grant let the graph at `path` run, name by name: each callable
    that does more than compute with what it can do, granted or not."""
    from nodegraph.model import allowlist

    powerful = allowlist.powerful(grant)
    shown = {m: kept for m, names in grant.items() if m in trusts and (kept := [
        n for n in names if f"{m}:{n}" not in powerful or f"{m}:{n}" in grants])}
    if shown:
        say(f"trusting code from module(s) {allowlist.describe_grant(shown)} for {path}: "
            "only these names, nothing they import", file=sys.stderr)
    for name, powers in powerful.items():
        if name in grants:
            say(f"  granted {name}: it {', '.join(powers)} (--grant {name})", file=sys.stderr)
        elif allowlist.module_of(name) in trusts:
            say(f"  not granted {name}: it {', '.join(powers)}; trusting "
                f"{allowlist.module_of(name)} does not grant it (add --grant {name})",
                file=sys.stderr)
    named = {f"{m}:{n}" for m, names in grant.items() for n in names}
    for name in grants:
        if name not in named:
            say(f"  --grant {name}: {path} does not name it", file=sys.stderr)


def allowed_roots(args: argparse.Namespace) -> tuple[Path | str, ...] | str:
    """The folders beyond the graph's that its data may come from: --data-root DIR, or
    anywhere under --trust (see `nodegraph.kinds.confine`)."""
    from nodegraph.kinds import confine

    if getattr(args, "trust", False):
        return confine.ANYWHERE
    from nodegraph.kinds import urls  # not `remote`: that imports torch, and `diff` must not

    given = getattr(args, "data_root", None) or ()
    return tuple(urls.normal(d, "--data-root") if urls.is_url(d)  # s3://bucket/prefix
                 else Path(d).expanduser().resolve() for d in given)


def beside(graph_path: str):
    """Relative data paths in a graph file are read beside the file."""
    from nodegraph.kinds.dataset import files_relative_to

    return files_relative_to(Path(graph_path).parent)


def file_log_dir(graph) -> str | None:
    """The graph file's own `training.log_dir`, only inside the graph's folder (else an
    error saying how to write elsewhere: `nodegraph.kinds.write_confine`); None for none."""
    from nodegraph.kinds import write_confine

    given = graph.training.get("log_dir")
    return str(write_confine.file_folder(graph, "training.log_dir", given)) if given else None


def given_log_dir(args: argparse.Namespace, assignments: dict[str, Any]) -> None:
    """`--set training.log_dir=DIR` is the user's, as `--log-dir DIR` is: moved from the
    assignments (which change the graph's own settings) to `args.log_dir`."""
    if getattr(args, "log_dir", None) is None and isinstance(
            assignments.get("training.log_dir"), str):
        args.log_dir = assignments.pop("training.log_dir")


def parse_assignments(items: list[str]) -> dict[str, Any]:
    """`NODE.PARAM=VALUE` strings as a dict; VALUE is JSON when it parses, else text."""
    out: dict[str, Any] = {}
    for item in items:
        target, sep, raw = item.partition("=")
        if not sep or "." not in target:
            raise NodegraphError(f"--set '{item}': write NODE.PARAM=VALUE, e.g. opt.lr=0.1")
        try:
            out[target.strip()] = json.loads(raw)
        except json.JSONDecodeError:
            out[target.strip()] = raw
    return out


def with_assignments(graph, assignments: dict[str, Any]):
    """A copy of `graph` with `node.param` (or `training.key`) values set."""
    from nodegraph.model.settings import TRAINING_PARAMS

    g = graph.copy()
    for target, value in assignments.items():
        node, _, name = target.partition(".")
        if node == "training":
            param = next((p for p in TRAINING_PARAMS if p.name == name), None)
            g.set_training(name, _as_choice(param, value))
        elif node not in g.nodes:
            raise NodegraphError(f"--set {target}: no node '{node}' in the graph "
                                 f"(nodes: {', '.join(g.nodes)})")
        else:
            spec = g.registry.get(g.nodes[node].type) if g.nodes[node].type in g.registry else None
            g.set_param(node, name, _as_choice(spec.param(name) if spec else None, value))
    return g


def _as_choice(param, value: Any) -> Any:
    """A value the command line read as JSON, as the text of a choice when that is what it
    names: `--set training.precision=32` means the choice "32", not the number 32."""
    if param is None or param.kind != "choice" or isinstance(value, str):
        return value
    text = json.dumps(value)
    return text if value not in param.choices and text in param.choices else value


def weights_loader(path: str):
    """What loads the weights of `path` into the compiled graph before training; the file
    is read now, so a missing or broken one fails before anything is built."""
    from nodegraph.interop.export.weights import load_weights, read_weights

    weights = read_weights(path)
    return lambda compiled: load_weights(compiled, weights, path)


def trains(graph) -> bool:
    """Graphs with an optimizer are meant to train, so validate checks what training needs."""
    reg = graph.registry
    return any(n.type in reg and reg.get(n.type).kind == "optimizer" for n in graph)


def print_json(graph, report) -> int:
    """The graph and its validation `report` as the JSON of `validate --json`."""
    from nodegraph.check.describe import describe

    print(json.dumps(describe(graph, report), indent=1, default=str))
    return 0 if report.ok else EXIT_PROBLEMS


def print_problems(problems, source: str | None) -> None:
    """Validation problems on stderr, one line each with its hint, after a count."""
    errors = [p for p in problems if p.severity == "error"]
    head = f"{source}: " if source else ""
    say(f"{head}{len(errors)} problem(s)" + (f", {len(problems) - len(errors)} warning(s)"
                                              if len(problems) > len(errors) else ""),
        file=sys.stderr)
    for p in problems:
        tag = "error" if p.severity == "error" else "warning"
        say(f"  {tag} [{clean(p.kind)}] {clean(p.location())}: {p.message}", file=sys.stderr)
        if p.hint:
            say(f"      hint: {p.hint}", file=sys.stderr)
