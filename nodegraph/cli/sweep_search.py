"""`nodegraph sweep GRAPH --search random|tpe|grid --param NODE.PARAM=KIND:...`: a search
on an Optuna study (`nodegraph.runtime.search`).

Trials run one after another in this process; several processes or machines running the
same command with `--study URL --study-name NAME` share the study and its trial budget
(`--trials`, counted over all of them). The output folder gets `summary.csv` (every trial of
the study: its params, value, state and epochs) and the plot of trials; `--write` saves the
graph with the best trial's params, `--log-dir` gives each trial a TensorBoard folder.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from pathlib import Path

from nodegraph.cli.common import (
    file_log_dir,
    given_log_dir,
    open_graph,
    parse_assignments,
    say,  # control characters from the file escaped
    with_assignments,
)
from nodegraph.cli.sweep_grid import default_metric, parse_grid
from nodegraph.model.errors import NodegraphError
from nodegraph.model.graph import Graph
from nodegraph.runtime.search import (
    SearchResult,
    TrialRow,
    grid_spaces,
    parse_space,
    refreshed,
    search,
    shown,
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("searches on Optuna (pip install 'nodegraph[search]')")
    g.add_argument("--search", choices=("random", "tpe", "grid"),
                   help="search with this Optuna sampler instead of running every --grid "
                   "combination in its own process (--grid values become choices)")
    g.add_argument("--param", action="append", default=[], metavar="NODE.PARAM=KIND:...",
                   help="a search space: float:LOW:HIGH[:STEP], loguniform:LOW:HIGH, "
                   "int:LOW:HIGH[:STEP], logint:LOW:HIGH or choice:v1,v2; repeatable "
                   "(implies --search tpe)")
    g.add_argument("--trials", type=int, metavar="N", help="trials the study should hold, "
                   "counted over every process working on it (default for the grid: every "
                   "combination)")
    g.add_argument("--pruner", default="median", metavar="SPEC",
                   help="ends bad trials from their per-epoch numbers: median[:WARMUP] "
                   "(default), percentile:P[:WARMUP], hyperband, threshold:LIMIT or none")
    g.add_argument("--study", metavar="URL", help="where the study lives: a SQLite file "
                   "(study.db or sqlite:///study.db) or any database URL Optuna supports; "
                   "processes given the same URL and --study-name share the search "
                   "(default: in memory, this process only)")
    g.add_argument("--study-name", metavar="NAME", help="the study in that storage (default: "
                   "the graph's file name)")
    g.add_argument("--sampler-seed", type=int, metavar="S", help="seed of the sampler")
    g.add_argument("--write", metavar="BEST.json", help="save the graph with the best "
                   "trial's params")
    g.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)  # a --jobs helper
    g.add_argument("--log-dir", metavar="DIR", help="TensorBoard event files, one folder per "
                   "trial (DIR/trial-000 ...)")


def wants_search(args: argparse.Namespace) -> bool:
    return bool(args.search or args.param)


def cmd_search(args: argparse.Namespace) -> int:
    from nodegraph.model import fileformat

    if args.jobs < 1:
        raise NodegraphError("--jobs must be at least 1")
    if args.jobs > 1 and not args.study:
        raise NodegraphError(f"--jobs {args.jobs} runs the search in {args.jobs} processes, "
                             "which share the study through its storage: give --study "
                             "FILE.db (or a database URL)")
    if args.study:  # a database server: a line at once, an error if it does not answer
        from nodegraph.runtime.endpoint import reach

        reach("the study's database", args.study, "--study")
    try:
        import optuna  # noqa: F401
    except ImportError:
        raise NodegraphError("--search needs Optuna: pip install 'nodegraph[search]'") from None
    assignments = parse_assignments(args.set)
    given_log_dir(args, assignments)  # --set training.log_dir=DIR: the user's own
    base = with_assignments(open_graph(args), assignments)
    spaces = [parse_space(item) for item in args.param]
    spaces += grid_spaces(parse_grid(args.grid)) if args.grid else []
    if not spaces:
        raise NodegraphError("give the search at least one --param NODE.PARAM=KIND:... "
                             "(or --grid NODE.PARAM=v1,v2)")
    for s in spaces:
        node = s.target.partition(".")[0]
        if node != "training" and node not in base.nodes:
            raise NodegraphError(f"--param {s.target}: no node '{node}' in the graph "
                                 f"(nodes: {', '.join(base.nodes)})")
    out = Path(args.output or Path(args.graph).with_name(f"{Path(args.graph).stem}-sweep"))
    metric = args.metric or default_metric(base)

    def build(params: dict) -> Graph:
        return with_assignments(base, params)

    if args.write:  # an unwritable file fails now, not after the search
        from nodegraph.model.outputs import check_file

        check_file(args.write, "--write")
    helpers: list = []

    def start_helpers() -> None:  # once the study exists and the spaces passed their checks
        if args.jobs > 1:
            from nodegraph.cli import search_workers

            helpers.extend(search_workers.start(getattr(args, "argv", []), args.jobs - 1, out))

    try:
        result = search(build, spaces, metric, sampler=args.search or "tpe",
                        trials=args.trials, pruner=args.pruner, storage=args.study,
                        study_name=args.study_name or Path(args.graph).stem,
                        epochs=args.epochs, seed=args.sampler_seed,
                        # the file's training.log_dir, too, becomes one folder per trial
                        log_dir=args.log_dir or file_log_dir(base),
                        ready=start_helpers)
    except BaseException:
        if helpers:
            from nodegraph.cli import search_workers

            search_workers.stop(helpers)
        raise
    if args.worker:
        return 0
    if helpers:
        from nodegraph.cli import search_workers

        for complaint in search_workers.wait(helpers):
            say(f"a helper process failed: {complaint}", file=sys.stderr)
        result = refreshed(result)  # the trials the helpers ran since
    out.mkdir(parents=True, exist_ok=True)
    targets = [s.target for s in spaces]
    say(table(result, targets))
    write_summary(out / "summary.csv", result, targets)
    from nodegraph.cli.search_plot import write_plot

    plot = write_plot(result, out)
    best = result.best
    if best is None:
        say(f"no trial finished with a {metric}; summary in {out / 'summary.csv'}",
              file=sys.stderr)
        return 1
    say(f"best: trial {best.number} ({_settings(best)}) with {metric} {best.value:.6g}")
    failed = [str(t.number) for t in result.trials if t.state == "FAIL"]
    if failed:
        say(f"{len(failed)} trial(s) failed: {', '.join(failed)} (summary.csv says why)",
              file=sys.stderr)
    if args.write:
        fileformat.save(build(best.params), args.write)
        say(f"wrote {args.write} with the best params")
    say(f"summary written to {out / 'summary.csv'}, plot to {plot}")
    return 0


def _settings(t: TrialRow) -> str:
    return "  ".join(f"{k}={shown(v)}" for k, v in t.params.items())


def _format(value: float | None) -> str:
    return "-" if value is None else f"{value:.6g}"


def table(result: SearchResult, targets: list[str]) -> str:
    """Every trial of the study as aligned text: number, params, value, state, epochs; the
    best starred."""
    rows = [["", "trial", *targets, result.metric, "state", "epochs"]]
    for t in sorted(result.trials, key=lambda t: t.number):
        rows.append(["*" if t.best else "", str(t.number),
                     *(shown(t.params[k]) if k in t.params else "-" for k in targets),
                     _format(t.value), t.state, str(len(t.curve))])
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
                     for row in rows)


def write_summary(path: Path, result: SearchResult, targets: list[str]) -> None:
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["trial", *targets, result.metric, "best", "state", "epochs", "error"])
        for t in sorted(result.trials, key=lambda t: t.number):
            writer.writerow([t.number, *(json.dumps(t.params[k]) if k in t.params else ""
                                         for k in targets),
                             "" if t.value is None else repr(t.value), "*" if t.best else "",
                             t.state, len(t.curve), t.error])
