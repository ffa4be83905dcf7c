"""`nodegraph ...`: run, validate, inspect and edit graph files from the command line.

Every user mistake ends in a message that names the node and port and a non-zero exit, never
a bare traceback: errors of ours (`NodegraphError`) are printed as they are; anything else is
reported as an internal error, with the traceback only under ``NODEGRAPH_DEBUG=1``.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import os
import sys
import traceback
import warnings
from pathlib import Path
from typing import Any

from nodegraph.model import gcpause
from nodegraph.model.errors import NodegraphError, ValidationError
from nodegraph.model.sanitize import clean, clean_lines

EXIT_PROBLEMS = 1
EXIT_INTERRUPTED = 130

# Commands that live in their own modules: each exposes `register(subparsers)`, adding its
# parser with `set_defaults(func=...)`; the function takes the parsed args, returns the exit code.
# A module is imported only when its command is named, so `nodegraph --help` imports no torch;
# the line here is what the command list shows.
COMMANDS: dict[str, tuple[str, str]] = {
    "blocks": ("nodegraph.cli.blocks", "list every block type with its ports and params"),
    "import": ("nodegraph.cli.import_model",
               "trace a PyTorch module into an editable graph file"),
    "forward": ("nodegraph.cli.forward",
                "run the graph forward on one batch and save every output (.npz)"),
    "export": ("nodegraph.cli.export",
               "write a graph as plain PyTorch code, as ONNX, or its weights"),
    "lr-find": ("nodegraph.cli.lrfind",
                "learning-rate range test: loss against a growing rate"),
    "sample": ("nodegraph.cli.sample", "run a procedure block (sampling, recall, decoding, "
               "forecasting) and write its trajectory"),
    "sweep": ("nodegraph.cli.sweep", "train a parameter grid, or search one on Optuna"),
    "diff": ("nodegraph.cli.diff", "what changed between two graph files (also a git "
             "textconv driver)"),
}


def say(*parts: object, file=None, **kwargs) -> None:
    """`print`, with control characters from a file escaped (`nodegraph.model.sanitize`):
    every line the CLI writes about a graph passes here, so no file writes to the terminal."""
    print(*(clean_lines(p) for p in parts), file=file or sys.stdout, **kwargs)


def main(argv: list[str] | None = None) -> int:
    gcpause.tune_process()  # this process is ours: keep the collector out of the hot paths
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = _parser(_command_named(argv))
    args = parser.parse_args(argv)
    args.argv = argv
    if not getattr(args, "command", None):
        parser.print_help()
        return 2
    try:
        with _allowing(args), _sanitised_warnings():
            return args.func(args)
    except ValidationError as e:
        _print_problems(e.problems, getattr(args, "graph", None))
        return EXIT_PROBLEMS
    except NodegraphError as e:
        say(f"error: {e}", file=sys.stderr)
        return EXIT_PROBLEMS
    except KeyboardInterrupt:
        say("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # `nodegraph info --json | head`: the reader has what it wanted
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # so the interpreter's final flush stays quiet
        return 0
    except Exception as e:  # the edge: never let a traceback be the user's only clue
        if os.environ.get("NODEGRAPH_DEBUG"):
            traceback.print_exc()
        say(f"internal error: {type(e).__name__}: {e}\n(set NODEGRAPH_DEBUG=1 for the "
              "traceback, and please report it)", file=sys.stderr)
        return EXIT_PROBLEMS


def _allowing(args: argparse.Namespace):
    """The data folders the command line allows, for everything the command reads."""
    from nodegraph.kinds import confine

    return confine.allowing(allowed_roots(args))


@contextlib.contextmanager
def _sanitised_warnings():
    """Python warnings (a weights file's node names, a data block's) printed as `say` prints:
    their text can come from the file."""
    show = warnings.showwarning

    def shown(message, category, filename, lineno, file=None, line=None):
        text = warnings.formatwarning(message, category, filename, lineno, line)
        (file or sys.stderr).write(clean_lines(text))

    warnings.showwarning = shown
    try:
        yield
    finally:
        warnings.showwarning = show


def _beside(graph_path: str):
    """Relative data paths in a graph file are read beside the file."""
    from nodegraph.kinds.dataset import files_relative_to

    return files_relative_to(Path(graph_path).parent)


def _command_named(argv: list[str]) -> str | None:
    """The subcommand on the command line: the first word that is not an option."""
    return next((a for a in argv if not a.startswith("-")), None)


def _parser(command: str | None = None) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="nodegraph", description="Build, check and train "
                                "machine-learning graphs.")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")

    run = sub.add_parser("run", help="train a graph file headless")
    add_graph_argument(run)
    run.add_argument("--epochs", type=int, help="override training.epochs")
    run.add_argument("--set", action="append", default=[], metavar="NODE.PARAM=VALUE",
                     help="change a param (or training.KEY) for this run; repeatable")
    run.add_argument("--seed", type=int)
    run.add_argument("--device", help="cpu, cuda, cuda:N or auto")
    run.add_argument("--threads", type=int, metavar="N", help="CPU threads for the arithmetic "
                     "(overrides training.threads and OMP_NUM_THREADS; default: chosen from "
                     "the model's work per step)")
    run.add_argument("--metrics-out", metavar="FILE.json", help="write history and final "
                     "metrics (- for stdout)")
    run.add_argument("--checkpoint-dir", metavar="DIR", help="write checkpoints here each epoch")
    run.add_argument("--resume", action="store_true", help="continue from the checkpoint in DIR")
    run.add_argument("--probe-out", metavar="FILE.jsonl", help="record activation and gradient "
                     "probe frames for replay in the editor")
    run.add_argument("--log-dir", metavar="DIR", help="write TensorBoard event files here "
                     "(scalars, learning rates, hyperparameters, probe histograms)")
    run.add_argument("--mlflow", metavar="URI", help="record the run in MLflow at this "
                     "tracking URI (params, metrics per epoch, the graph as an artifact)")
    run.add_argument("--quiet", action="store_true", help="print only the final result")
    run.add_argument("--compile", action="store_true", help="run the training forward through "
                     "torch.compile (inductor); falls back to eager where it cannot")
    run.add_argument("--init-weights", metavar="FILE.safetensors", help="start from these "
                     "weights, keyed node.param like `nodegraph export --to weights` and "
                     "checkpoints write them")
    run.add_argument("--nproc", type=int, metavar="N", help="train data-parallel on N processes "
                     "(starts torchrun; DistributedDataParallel, gloo on CPU, nccl on GPUs); "
                     "with --nnodes: processes on this machine (default 1)")
    run.add_argument("--nnodes", type=int, metavar="N", help="train across N machines: run the "
                     "same command on each, with its own --node-rank and the same --rdzv")
    run.add_argument("--node-rank", type=int, metavar="R", help="with --nnodes: this machine's "
                     "number, 0 to N-1 (machine 0 hosts the rendezvous)")
    run.add_argument("--rdzv", metavar="HOST:PORT", help="with --nnodes: the address of "
                     "machine 0 and a free port there, where the machines meet")
    run.set_defaults(func=cmd_run)

    val = sub.add_parser("validate", help="check a graph file; exit 1 when it has problems")
    add_graph_argument(val)
    val.add_argument("--json", action="store_true", help="print the problems, every wire's "
                     "shape and dtype, parameter counts and the memory estimate as JSON")
    val.set_defaults(func=cmd_validate)

    info = sub.add_parser("info", help="nodes, inferred shapes and parameter counts of a graph")
    add_graph_argument(info)
    info.add_argument("--json", action="store_true", help="the same as JSON (as validate --json)")
    info.set_defaults(func=cmd_info)

    edit = sub.add_parser("edit", help="open the graph editor")
    edit.add_argument("graph", nargs="?")
    edit.set_defaults(func=cmd_edit)

    for name, (module, summary) in COMMANDS.items():
        if name == command:
            importlib.import_module(module).register(sub)
        else:
            sub.add_parser(name, help=summary)
    return p


def add_graph_argument(parser: argparse.ArgumentParser) -> None:
    """The graph file argument, with --trust: every command that opens a graph has both."""
    parser.add_argument("graph")
    parser.add_argument("--trust", action="store_true", help="let this graph run code from "
                        "the modules it names outside nodegraph's allowlist of tensor "
                        "functions and torch.nn modules (your own modules, brought in by "
                        "nodegraph import); without it those nodes are reported and nothing "
                        "is imported; its data files may then come from anywhere")
    parser.add_argument("--data-root", action="append", default=[], metavar="DIR",
                        help="let this graph's data and weights files come from DIR too "
                        "(repeatable); without it they must lie in the graph's folder")


def open_graph(args: argparse.Namespace):
    """The graph file `args.graph`, trusted to import its modules when --trust was given."""
    from nodegraph.model import allowlist, fileformat
    from nodegraph.runtime import distributed

    graph = fileformat.load(args.graph)
    graph.data_roots = allowed_roots(args)
    if getattr(args, "trust", False):
        grant = allowlist.granted(graph)
        allowlist.trust(graph)
        if grant and distributed.is_main():  # under torchrun, rank 0 says it once
            say(f"trusting code from module(s) {allowlist.describe_grant(grant)} for "
                f"{args.graph}: only these names, nothing they import", file=sys.stderr)
    return graph


def allowed_roots(args: argparse.Namespace) -> tuple[Path, ...] | str:
    """The folders beyond the graph's that its data may come from: --data-root DIR, or
    anywhere under --trust (see `nodegraph.kinds.confine`)."""
    from nodegraph.kinds import confine

    if getattr(args, "trust", False):
        return confine.ANYWHERE
    return tuple(Path(d).expanduser().resolve() for d in getattr(args, "data_root", None) or ())


# -- commands ----------------------------------------------------------------------------

def cmd_run(args: argparse.Namespace) -> int:
    from nodegraph.model.events import Emitter
    from nodegraph.runtime import distributed
    from nodegraph.runtime.render import ConsoleRenderer
    from nodegraph.runtime.train import train

    if args.nnodes:
        argv = args.argv
        for option in ("--nproc", "--nnodes", "--node-rank", "--rdzv"):
            argv = _without_option(argv, option)
        return distributed.launch_nodes(args.nnodes, args.node_rank, args.rdzv,
                                        args.nproc or 1, argv)
    if args.node_rank is not None or args.rdzv:
        raise NodegraphError("--node-rank and --rdzv belong with --nnodes")
    if args.nproc:
        return distributed.launch(args.nproc, _without_option(args.argv, "--nproc"))
    main_rank = distributed.is_main()  # under torchrun only rank 0 talks and writes
    graph = with_assignments(open_graph(args), parse_assignments(args.set))
    if main_rank:  # a path that cannot be written fails now, not after the whole run
        _check_outputs(args)
    prepare = _weights_loader(args.init_weights) if args.init_weights else None
    if args.compile:
        graph.set_training("compile", "inductor")
    events = Emitter()
    renderer = ConsoleRenderer(graph.name, quiet=args.quiet or not main_rank)
    renderer.attach(events)
    writer = None
    if args.probe_out and main_rank:
        from nodegraph.runtime.probes import ProbeFrame, ProbeWriter

        writer = ProbeWriter(args.probe_out)
        events.subscribe(writer, ProbeFrame)
    try:
        with _beside(args.graph):
            result = train(graph, epochs=args.epochs, seed=args.seed, device=args.device,
                           events=events, checkpoint_dir=args.checkpoint_dir,
                           resume=args.resume, prepare=prepare, log_dir=args.log_dir,
                           mlflow=args.mlflow, threads=args.threads)
    except KeyboardInterrupt:  # before the loop started (the loop itself returns cancelled)
        renderer.close()
        _say_checkpoint(args.checkpoint_dir)
        return EXIT_INTERRUPTED
    finally:
        renderer.close()
        if writer is not None:
            writer.close()
        distributed.teardown()
    if not main_rank:
        return 0
    if args.metrics_out:
        from nodegraph.model.outputs import write_text

        text = json.dumps({"history": result.history, "final": result.final,
                           "cancelled": result.cancelled}, indent=1, default=float)
        if args.metrics_out == "-":  # stdout, as the usual convention has it
            print(text)
        else:
            write_text(args.metrics_out, text, "--metrics-out")
    if result.cancelled:
        _say_checkpoint(args.checkpoint_dir)
        return EXIT_INTERRUPTED
    if args.metrics_out == "-":  # stdout holds the JSON alone; the summary goes to stderr
        renderer.out = renderer.err
    renderer.print_final(result)
    return 0


def _say_checkpoint(folder: str | None) -> None:
    """After an interrupt: where the checkpoint is, only when one is on disk."""
    from nodegraph.runtime.checkpoint import written_epoch

    epoch = written_epoch(folder) if folder else None
    if epoch is None:
        say("interrupted" + (f"; no checkpoint was written in {folder}" if folder else ""),
            file=sys.stderr)
    else:
        say(f"interrupted; the checkpoint of epoch {epoch} is in {folder} (continue with "
            "--resume)", file=sys.stderr)


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
    with _beside(args.graph):
        report = validate(graph, for_training=_trains(graph))
    if args.json:
        return _print_json(graph, report)
    if report.problems:
        _print_problems(report.problems, args.graph)
    if report.ok:
        can = capabilities(graph)
        trains = "trainable" if can["train"] else (
            f"forward-only: {can['why_not_train']}, so `run` cannot train it (add a loss and "
            "an optimizer; `nodegraph import` does with --loss and --optimizer)")
        say(f"{args.graph}: ok ({len(graph)} nodes, {len(graph.edges)} wires, "
              f"{sum(report.param_counts.values()):,} parameters; {trains})")
    return 0 if report.ok else EXIT_PROBLEMS


def _print_json(graph, report) -> int:
    from nodegraph.check.describe import describe

    print(json.dumps(describe(graph, report), indent=1, default=str))
    return 0 if report.ok else EXIT_PROBLEMS


def _print_failure(path: str, problems: list, message: str) -> int:
    """`validate --json` on a file that did not load: the reason as a JSON document (and on
    stderr, as always)."""
    from nodegraph.check.describe import FORMAT

    print(json.dumps({"describe_format": FORMAT, "file": path, "ok": False, "loaded": False,
                      "error": message, "problems": problems}, indent=1, default=str))
    say(f"error: {message}", file=sys.stderr)
    return EXIT_PROBLEMS


def cmd_info(args: argparse.Namespace) -> int:
    from nodegraph.check.validate import validate

    graph = open_graph(args)
    with _beside(args.graph):
        report = validate(graph)
    if args.json:
        _print_json(graph, report)
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
        _print_problems(report.problems, args.graph)
    return 0 if report.ok else EXIT_PROBLEMS


def cmd_edit(args: argparse.Namespace) -> int:
    try:
        from nodegraph.gui.shell.app import main as gui_main
    except ImportError as e:
        raise NodegraphError(f"the editor needs PySide6 and pyqtgraph ({e}); install them with "
                             "pip install 'nodegraph[gui]'") from None
    if _no_display():
        raise NodegraphError("the editor needs a display, and this session has none (no "
                             "DISPLAY or WAYLAND_DISPLAY): run it under xvfb-run, or train "
                             f"headless with: nodegraph run {args.graph or 'GRAPH'}")
    return gui_main(args.graph)


def _no_display() -> bool:
    """On Linux, Qt aborts the process when no display can be reached; say so instead.
    An explicit QT_QPA_PLATFORM (offscreen, vnc, ...) is the user's choice."""
    return (sys.platform.startswith("linux") and not os.environ.get("QT_QPA_PLATFORM")
            and not os.environ.get("DISPLAY") and not os.environ.get("WAYLAND_DISPLAY"))


# -- helpers -----------------------------------------------------------------------------

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
    g = graph.copy()
    for target, value in assignments.items():
        node, _, name = target.partition(".")
        if node == "training":
            g.set_training(name, value)
        elif node not in g.nodes:
            raise NodegraphError(f"--set {target}: no node '{node}' in the graph "
                                 f"(nodes: {', '.join(g.nodes)})")
        else:
            g.set_param(node, name, value)
    return g


def _check_outputs(args: argparse.Namespace) -> None:
    """Every file `run` will write can be written (a device such as /dev/stdout is fine)."""
    from nodegraph.model.outputs import check_file

    for flag, path in (("--metrics-out", args.metrics_out), ("--probe-out", args.probe_out)):
        if path and not (flag == "--metrics-out" and path == "-"):
            check_file(path, flag, special_ok=True)


def _weights_loader(path: str):
    """What loads the weights of `path` into the compiled graph before training; the file
    is read now, so a missing or broken one fails before anything is built."""
    from nodegraph.interop.export.weights import load_weights, read_weights

    weights = read_weights(path)
    return lambda compiled: load_weights(compiled, weights, path)


def _without_option(argv: list[str], option: str) -> list[str]:
    """`argv` less `option VALUE` / `option=VALUE`."""
    out, skip = [], False
    for item in argv:
        if skip:
            skip = False
        elif item == option:
            skip = True
        elif not item.startswith(option + "="):
            out.append(item)
    return out


def _trains(graph) -> bool:
    """Graphs with an optimizer are meant to train, so validate checks what training needs."""
    reg = graph.registry
    return any(n.type in reg and reg.get(n.type).kind == "optimizer" for n in graph)


def _print_problems(problems, source: str | None) -> None:
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


if __name__ == "__main__":
    sys.exit(main())
