"""`nodegraph sweep GRAPH --grid NODE.PARAM=v1,v2 ...`: every combination, one run each.

(With `--search` or `--param` the sweep is a search on an Optuna study instead:
`nodegraph.cli.sweep_search`.)

Each combination of the grid is one `nodegraph run ... --set ... --metrics-out` in a process
of its own (up to `--jobs` at a time), so runs cannot disturb each other and a crash ends
only its own run. Each writes its metrics file and log into the output folder; when all are
done the sweep writes `summary.csv` — one row per run: its settings, the chosen metric from
the run's final numbers, status and time — prints the same table, and marks the best run:
the lowest value for loss-like metrics, the highest for accuracy-like ones
(`settings.monitor_rises`). Each process gets an equal share of the CPU threads unless
OMP_NUM_THREADS is set, so parallel runs do not oversubscribe the machine.
"""

from __future__ import annotations

import argparse
import csv
import itertools
import json
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nodegraph.cli import sweep_search
from nodegraph.cli.common import (
    add_graph_argument,
    open_graph,
    parse_assignments,
    say,  # control characters from the file escaped
    with_assignments,
)
from nodegraph.cli.sweep_grid import default_metric, parse_grid
from nodegraph.model.errors import NodegraphError
from nodegraph.model.settings import monitor_rises
from nodegraph.runtime.search import final_value as metric_of


@dataclass
class Run:
    """One combination of the grid and what became of it."""

    name: str
    settings: dict[str, Any]
    metrics: Path
    log: Path
    status: str = "pending"
    value: float | None = None
    seconds: float = 0.0
    error: str = ""
    best: bool = field(default=False)


def combinations(grid: dict[str, list[Any]]) -> list[dict[str, Any]]:
    return [dict(zip(grid, values, strict=True)) for values in itertools.product(*grid.values())]


@dataclass
class Sweep:
    """The runs of a sweep, the best marked, and the metric that chose it."""

    runs: list[Run]
    metric: str

    @property
    def best(self) -> Run | None:
        return next((r for r in self.runs if r.best), None)


def sweep(graph: str | Path, grid: dict[str, list[Any]], out: str | Path, jobs: int = 1,
          metric: str | None = None, epochs: int | None = None,
          extra: Sequence[str] = (), echo=print) -> Sweep:
    """Run every combination of `grid` on `graph` (with the `nodegraph run` arguments
    `extra`), writing into `out`; `metric` (split.key) picks the best."""
    from nodegraph.model import fileformat

    base = fileformat.load(graph)
    combos = combinations(grid)
    for combo in combos:  # a misspelt node or a bad value fails here, before any run starts
        with_assignments(base, combo)
    metric = metric or default_metric(base)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    width = max(2, len(str(len(combos))))
    runs = [Run(f"run-{i:0{width}d}", combo, out / f"run-{i:0{width}d}.json",
                out / f"run-{i:0{width}d}.log") for i, combo in enumerate(combos, 1)]
    env = dict(os.environ)
    env.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // max(1, jobs))))
    echo(f"{len(runs)} runs of {graph}, {min(jobs, len(runs))} at a time, into {out}")
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        for run in pool.map(lambda r: _execute(r, graph, epochs, extra, env, metric), runs):
            echo(f"  {run.name} {run.status:<6} {_format(run.value):>10}  {_settings(run)}"
                 + (f"  ({run.error})" if run.error else ""))
    _mark_best(runs, metric)
    _write_summary(out / "summary.csv", runs, list(grid), metric)
    return Sweep(runs, metric)


def _execute(run: Run, graph, epochs, extra, env, metric) -> Run:
    cmd = [sys.executable, "-m", "nodegraph", "run", str(graph), "--metrics-out",
           str(run.metrics), "--quiet", *extra]
    for target, value in run.settings.items():
        cmd += ["--set", f"{target}={json.dumps(value)}"]
    if epochs is not None:
        cmd += ["--epochs", str(epochs)]
    began = time.perf_counter()
    with open(run.log, "w") as log:
        code = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, env=env).returncode
    run.seconds = time.perf_counter() - began
    if code != 0 or not run.metrics.exists():
        run.status = "failed"
        lines = [line for line in run.log.read_text().splitlines() if line.strip()]
        run.error = (lines[-1] if lines else f"exit code {code}")[:200]
        return run
    run.status = "ok"
    run.value = metric_of(json.loads(run.metrics.read_text()), metric)
    if run.value is None:
        run.error = f"no {metric} in its metrics"
    return run


def _mark_best(runs: list[Run], metric: str) -> None:
    done = [(r, r.value) for r in runs if r.value is not None]
    if done:
        pick = max if monitor_rises(metric, "auto") else min
        pick(done, key=lambda done_run: done_run[1])[0].best = True


def _write_summary(path: Path, runs: list[Run], targets: list[str], metric: str) -> None:
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["run", *targets, metric, "best", "status", "seconds", "metrics",
                         "error"])
        for r in runs:
            writer.writerow([r.name, *(json.dumps(r.settings[t]) for t in targets),
                             "" if r.value is None else repr(r.value), "*" if r.best else "",
                             r.status, f"{r.seconds:.1f}", r.metrics.name, r.error])


def _format(value: float | None) -> str:
    return "-" if value is None else f"{value:.6g}"


def _settings(run: Run) -> str:
    return "  ".join(f"{k}={json.dumps(v)}" for k, v in run.settings.items())


def table(runs: list[Run], metric: str) -> str:
    """The summary as aligned text, the best run starred."""
    targets = list(runs[0].settings) if runs else []
    rows = [["", "run", *targets, metric, "status"]]
    rows += [["*" if r.best else "", r.name, *(json.dumps(r.settings[t]) for t in targets),
              _format(r.value), r.status] for r in runs]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
                     for row in rows)


# -- the command ---------------------------------------------------------------------------


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "sweep", description="Each combination runs as `nodegraph run GRAPH --set ...`; the folder "
        "gets one metrics file and log per run and summary.csv; the best run is marked. Runs go "
        "one at a time unless --jobs says more. With --search (or --param) the sweep is a "
        "search on an Optuna study: random, TPE or grid sampling, pruning of bad trials, a "
        "study shared by several processes through --study.")
    add_graph_argument(p)
    p.add_argument("--grid", action="append", default=[], metavar="NODE.PARAM=v1,v2",
                   help="values to try for a param (or training.KEY); repeat for more")
    p.add_argument("--jobs", type=int, default=1, metavar="K", help="runs at a time, each "
                   "in its own process (default 1); with --search, K processes on the study "
                   "given by --study")
    p.add_argument("--metric", help="split.key that picks the best run (default val.loss, "
                   "or train.loss without a validation split)")
    p.add_argument("--epochs", type=int, help="override training.epochs in every run")
    p.add_argument("--set", action="append", default=[], metavar="NODE.PARAM=VALUE",
                   help="a fixed change for every run; repeatable")
    p.add_argument("-o", "--output", metavar="DIR",
                   help="where runs and summary go (default: GRAPH-sweep beside the graph)")
    sweep_search.add_arguments(p)
    p.set_defaults(func=cmd_sweep)


def cmd_sweep(args: argparse.Namespace) -> int:
    if sweep_search.wants_search(args):
        return sweep_search.cmd_search(args)
    search_only = [flag for flag, value in (("--trials", args.trials), ("--study", args.study),
                                            ("--study-name", args.study_name),
                                            ("--sampler-seed", args.sampler_seed),
                                            ("--write", args.write), ("--log-dir", args.log_dir))
                   if value is not None]
    if search_only:
        raise NodegraphError(f"{', '.join(search_only)} belong to a search: add --search "
                             "random|tpe|grid")
    grid = parse_grid(args.grid)
    if args.jobs < 1:
        raise NodegraphError("--jobs must be at least 1")
    fixed = [x for item in args.set for x in ("--set", item)] + (["--trust"] if args.trust
                                                                  else []) + [
        x for root in args.data_root for x in ("--data-root", root)] + [
        x for name in getattr(args, "grant", []) for x in ("--grant", name)]  # as this one
    out = args.output or str(Path(args.graph).with_name(f"{Path(args.graph).stem}-sweep"))
    with_assignments(open_graph(args), parse_assignments(args.set))
    result = sweep(args.graph, grid, out, args.jobs, args.metric, args.epochs, fixed)
    say(table(result.runs, result.metric))
    best = result.best
    if best is not None:
        say(f"best: {best.name} ({_settings(best)}) with {result.metric} {_format(best.value)}")
    say(f"summary written to {Path(out) / 'summary.csv'}")
    failed = [r.name for r in result.runs if r.status != "ok"]
    if failed:
        say(f"{len(failed)} run(s) failed: {', '.join(failed)} (see their .log files)",
              file=sys.stderr)
        return 1
    return 0
