"""`nodegraph ...`: the command line's parser and dispatch; each subcommand is its own module.

Every user mistake ends in a message that names the node and port and a non-zero exit, never
a bare traceback: errors of ours (`NodegraphError`) are printed as they are; anything else is
reported as an internal error, with the traceback only under ``NODEGRAPH_DEBUG=1``.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import signal
import sys
import traceback
import warnings
from collections.abc import Iterator
from types import FrameType

from nodegraph.cli.common import (
    EXIT_INTERRUPTED,
    EXIT_PROBLEMS,
    allowed_roots,
    print_problems,
    say,
)
from nodegraph.model import gcpause
from nodegraph.model.errors import NodegraphError, ValidationError
from nodegraph.model.sanitize import clean_lines

# Every command lives in its own module, which exposes `register(subparsers)`, adding its
# parser with `set_defaults(func=...)`; the function takes the parsed args, returns the exit code.
# A module is imported only when its command is named, so `nodegraph --help` imports no torch;
# the line here is what the command list shows (in this order).
COMMANDS: dict[str, tuple[str, str]] = {
    "run": ("nodegraph.cli.run", "train a graph file headless"),
    "validate": ("nodegraph.cli.validate", "check a graph file; exit 1 when it has problems"),
    "info": ("nodegraph.cli.info", "nodes, inferred shapes and parameter counts of a graph"),
    "edit": ("nodegraph.cli.edit", "open the graph editor"),
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


def main(argv: list[str] | None = None) -> int:
    with _noting_interrupts() as heard:
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
        except KeyboardInterrupt:
            say("interrupted", file=sys.stderr)
            return EXIT_INTERRUPTED
        except Exception as e:
            if heard:  # Ctrl-C, turned into another error by the code it interrupted
                say("interrupted", file=sys.stderr)
                return EXIT_INTERRUPTED
            return _reported(e, args)


def _reported(e: Exception, args: argparse.Namespace) -> int:
    """The exit code for `e`, said the way its kind is said."""
    if isinstance(e, ValidationError):
        print_problems(e.problems, getattr(args, "graph", None))
        return EXIT_PROBLEMS
    if isinstance(e, NodegraphError):
        say(f"error: {e}", file=sys.stderr)
        return EXIT_PROBLEMS
    if isinstance(e, BrokenPipeError):  # `nodegraph info --json | head`: the reader is done
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # so the interpreter's final flush stays quiet
        return 0
    # the edge: never let a traceback be the user's only clue
    if os.environ.get("NODEGRAPH_DEBUG"):
        traceback.print_exception(e)
    say(f"internal error: {type(e).__name__}: {e}\n(set NODEGRAPH_DEBUG=1 for the "
        "traceback, and please report it)", file=sys.stderr)
    return EXIT_PROBLEMS


@contextlib.contextmanager
def _noting_interrupts() -> Iterator[list[int]]:
    """Ctrl-C raises KeyboardInterrupt as usual, and is remembered: code that catches it and
    raises something else (torch's first import of torch._dynamo, which validation's first
    optimizer starts, turns it into a RecursionError) is still reported as the interrupt it
    was. (The training loop catches the KeyboardInterrupt itself: a clean cancel.)"""
    heard: list[int] = []

    def note(signum: int, frame: FrameType | None) -> None:
        heard.append(signum)
        signal.default_int_handler(signum, frame)

    try:
        previous = signal.signal(signal.SIGINT, note)
    except ValueError:  # main() called off the main thread: Python's own handling stays
        yield heard
        return
    try:
        yield heard
    finally:
        signal.signal(signal.SIGINT, previous)


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


def _command_named(argv: list[str]) -> str | None:
    """The subcommand on the command line: the first word that is not an option."""
    return next((a for a in argv if not a.startswith("-")), None)


def _parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser, with the full parser of `command` only (the others as a line of help)."""
    p = argparse.ArgumentParser(prog="nodegraph", description="Build, check and train "
                                "machine-learning graphs.")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module, summary) in COMMANDS.items():
        if name == command:
            importlib.import_module(module).register(sub)
        else:
            sub.add_parser(name, help=summary)
    return p


if __name__ == "__main__":
    sys.exit(main())
