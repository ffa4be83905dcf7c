"""Hyperparameter searches on Optuna: search spaces, the study, one training run per trial.

A search space per param comes from text (`opt.lr=loguniform:1e-4:1e-1`,
`hidden.out_features=int:8:64`, `act.kind=choice:relu,tanh`); a study draws values with a
random, TPE or grid sampler, trains the graph with them in this process, and reports the
watched number after every epoch to the trial so that its pruner can end hopeless runs early
(`callbacks.pruning`). With a storage URL (a SQLite file or any database Optuna supports)
and a study name, every process that runs the same search works on one study, on one
machine or many: each asks the storage for the next trial.

Optuna is optional (the `search` extra) and imported only when a search starts.
"""

from __future__ import annotations

import json
import math
import os
import socket
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from nodegraph.model.errors import NodegraphError
from nodegraph.model.graph import Graph
from nodegraph.model.settings import monitor_rises
from nodegraph.runtime import endpoint

KINDS = ("float", "uniform", "loguniform", "int", "logint", "choice")
SAMPLERS = ("random", "tpe", "grid")


@dataclass(frozen=True)
class Space:
    """The values one param (`node.param` or `training.key`) may take in a search."""

    target: str
    kind: str  # one of KINDS
    low: float = 0.0
    high: float = 0.0
    step: float | None = None
    choices: tuple[Any, ...] = ()

    def suggest(self, trial) -> Any:
        """A value drawn by `trial` (an optuna.Trial), decoded for the graph."""
        name = self.target
        if self.kind in ("float", "uniform"):
            return trial.suggest_float(name, self.low, self.high, step=self.step)
        if self.kind == "loguniform":
            return trial.suggest_float(name, self.low, self.high, log=True)
        if self.kind in ("int", "logint"):
            return trial.suggest_int(name, int(self.low), int(self.high),
                                     step=int(self.step or 1), log=self.kind == "logint")
        return decode(trial.suggest_categorical(name, [encode(c) for c in self.choices]))

    def grid(self) -> list[Any]:
        """Every value, for the grid sampler (encoded as Optuna stores them)."""
        if self.kind == "choice":
            return [encode(c) for c in self.choices]
        if self.kind == "int":
            return list(range(int(self.low), int(self.high) + 1, int(self.step or 1)))
        raise NodegraphError(f"--param {self.target}: the grid sampler needs a list of values; "
                             f"write {self.target}=choice:v1,v2 (or int:LOW:HIGH[:STEP]) "
                             f"instead of {self.kind}:…")

    def samples(self) -> list[Any]:
        """Values that test the space against the graph before any trial: the ends of a
        range, every choice."""
        if self.kind == "choice":
            return list(self.choices)
        if self.kind in ("int", "logint"):
            return [int(self.low), int(self.high)]
        return [float(self.low), float(self.high)]


def encode(value: Any) -> Any:
    """Optuna stores None, bools, numbers and text; a list or dict travels as JSON text."""
    return json.dumps(value) if isinstance(value, list | dict) else value


def shown(value: Any) -> str:
    """A param value as the tables print it: floats to 6 significant digits, else JSON."""
    return f"{value:.6g}" if isinstance(value, float) else json.dumps(value)


def decode(value: Any) -> Any:
    if isinstance(value, str) and value[:1] in "[{":
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return value
    return value


def parse_space(item: str) -> Space:
    """`NODE.PARAM=KIND:…`: float:LOW:HIGH[:STEP], loguniform:LOW:HIGH, int:LOW:HIGH[:STEP],
    logint:LOW:HIGH, choice:v1,v2 (values JSON where they parse, else text)."""
    target, sep, spec = item.partition("=")
    target = target.strip()
    if not sep or "." not in target or not target.split(".", 1)[1]:
        raise NodegraphError(f"--param '{item}': write NODE.PARAM=KIND:..., e.g. "
                             "opt.lr=loguniform:1e-4:1e-1, fc.out_features=int:8:64 or "
                             "act.kind=choice:relu,tanh")
    kind, _, rest = spec.strip().partition(":")
    node, _, param = target.partition(".")
    where = f"--param {target} (node '{node}', param '{param}')"
    if kind not in KINDS:
        raise NodegraphError(f"{where}: unknown kind '{kind}'; use one of {', '.join(KINDS)} "
                             "as in KIND:LOW:HIGH or choice:v1,v2")
    if kind == "choice":
        values = [parse_value(v) for v in _split_choices(rest)]
        if not values:
            raise NodegraphError(f"{where}: choice needs at least one value: choice:v1,v2")
        return Space(target, kind, choices=tuple(values))
    parts = rest.split(":")
    if len(parts) not in (2, 3) or (len(parts) == 3 and kind in ("loguniform", "logint")):
        form = f"{kind}:LOW:HIGH" + ("" if kind.startswith("log") else "[:STEP]")
        raise NodegraphError(f"{where}: write {form}, not {kind}:{rest}")
    try:
        numbers = [float(p) for p in parts]
    except ValueError:
        raise NodegraphError(f"{where}: {kind}:{rest} holds something that is not a "
                             "number") from None
    low, high = numbers[0], numbers[1]
    step = numbers[2] if len(numbers) == 3 else None
    if kind in ("int", "logint") and not all(n == int(n) for n in numbers):
        raise NodegraphError(f"{where}: {kind} needs whole numbers, got {rest}")
    if not (math.isfinite(low) and math.isfinite(high)) or low > high:
        raise NodegraphError(f"{where}: LOW must not exceed HIGH (got {low:g} > {high:g})"
                             if low > high else f"{where}: the bounds must be finite")
    if kind.startswith("log") and low <= 0:
        raise NodegraphError(f"{where}: {kind} needs 0 < LOW (got {low:g}); use "
                             f"{'float' if kind == 'loguniform' else 'int'}:LOW:HIGH for "
                             "a range that includes 0")
    if step is not None and step <= 0:
        raise NodegraphError(f"{where}: STEP must be positive (got {step:g})")
    return Space(target, kind, low, high, step)


def _split_choices(text: str) -> list[str]:
    """Values split at commas outside brackets, so `choice:[3,3],[5,5]` holds two lists."""
    out, depth, current = [], 0, ""
    for ch in text:
        depth += ch in "[{"
        depth -= ch in "]}"
        if ch == "," and depth == 0:
            out.append(current)
            current = ""
        else:
            current += ch
    out.append(current)
    return [v for v in out if v.strip()]


def parse_value(text: str) -> Any:
    """A command-line value: JSON where it parses (numbers, lists, true), else the text."""
    text = text.strip()
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def grid_spaces(grid: dict[str, list[Any]]) -> list[Space]:
    """`--grid NODE.PARAM=v1,v2` entries as choice spaces."""
    return [Space(target, "choice", choices=tuple(values)) for target, values in grid.items()]


def check_spaces(spaces: Sequence[Space], build: Callable[[dict[str, Any]], Graph]) -> None:
    """Every space names a node and param of the graph and holds values it accepts: fails
    before any trial with the node, the param and what to change."""
    seen: set[str] = set()
    for s in spaces:
        if s.target in seen:
            raise NodegraphError(f"--param names {s.target} twice; give each param one space")
        seen.add(s.target)
        for value in s.samples():
            try:
                build({s.target: value})
            except NodegraphError as e:
                node, _, param = s.target.partition(".")
                raise NodegraphError(f"--param {s.target} (node '{node}', param '{param}') "
                                     f"value {json.dumps(value)}: {e}") from None


# -- samplers, pruners, storage --------------------------------------------------------------


def sampler_for(name: str, spaces: Sequence[Space], seed: int | None):
    import optuna

    if name == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    if name == "tpe":
        return optuna.samplers.TPESampler(seed=seed)
    if name == "grid":
        return optuna.samplers.GridSampler({s.target: s.grid() for s in spaces}, seed=seed)
    raise NodegraphError(f"--search {name}: use one of {', '.join(SAMPLERS)}")


STARTUP_TRIALS = 5  # trials that run whole before a median or percentile pruner judges


def warmup_for(epochs: int | None) -> int:
    """Epochs a trial runs before the median/percentile pruner may end it: a quarter of
    the run (early epochs rank learning rates badly: a fast rate is often behind at epoch 3
    and ahead at the end), at least 1."""
    return max(1, -(-int(epochs) // 4)) if epochs else 1


def pruner_for(spec: str, rises: bool, epochs: int | None = None):
    """`median[:WARMUP]`, `percentile:P[:WARMUP]`, `hyperband`, `threshold:LIMIT` (prune
    once the number is worse than LIMIT) or `none`. Without WARMUP, the median and
    percentile pruners wait a quarter of the `epochs` (`warmup_for`) and 5 trials."""
    import optuna

    name, _, rest = spec.partition(":")
    args = [a for a in rest.split(":") if a] if rest else []
    usage = ("--pruner: use median[:WARMUP], percentile:P[:WARMUP], hyperband, "
             f"threshold:LIMIT or none (got '{spec}')")
    try:
        if name == "none" and not args:
            return optuna.pruners.NopPruner()
        if name == "median" and len(args) <= 1:
            return optuna.pruners.MedianPruner(
                n_startup_trials=STARTUP_TRIALS,
                n_warmup_steps=int(args[0]) if args else warmup_for(epochs))
        if name == "percentile" and len(args) in (1, 2):
            return optuna.pruners.PercentilePruner(
                float(args[0]), n_startup_trials=STARTUP_TRIALS,
                n_warmup_steps=int(args[1]) if len(args) > 1 else warmup_for(epochs))
        if name == "hyperband" and not args:
            return optuna.pruners.HyperbandPruner()
        if name == "threshold" and len(args) == 1:
            limit = float(args[0])
            return (optuna.pruners.ThresholdPruner(lower=limit) if rises
                    else optuna.pruners.ThresholdPruner(upper=limit))
    except ValueError as e:
        raise NodegraphError(f"{usage}: {e}") from None
    raise NodegraphError(usage)


def storage_for(url: str | None):
    """None (a study in memory), a database URL, or a plain path to a SQLite file. SQLite
    waits for a lock rather than failing when several processes write at once."""
    if not url:
        return None
    import optuna

    if "://" not in url:
        url = f"sqlite:///{Path(url).resolve()}"
    kwargs: dict[str, Any] = {}
    if endpoint.address(url) is not None:  # a database server: reached within the timeout
        endpoint.reach("the study's database", url, "--study")
        if url.startswith(("postgres", "mysql", "mariadb")):  # their drivers' own wait
            kwargs = {"engine_kwargs": {"connect_args": {
                "connect_timeout": max(1, round(endpoint.timeout()))}}}
    elif url.startswith("sqlite:///"):
        folder = Path(url[len("sqlite:///"):]).parent
        if not folder.is_dir():
            raise NodegraphError(f"--study {url}: the folder {folder} does not exist")
        kwargs = {"engine_kwargs": {"connect_args": {"timeout": 60}}}
    import sqlalchemy.exc

    try:
        return _retrying(lambda: optuna.storages.RDBStorage(url, **kwargs))
    except (ImportError, ValueError, sqlalchemy.exc.ArgumentError) as e:
        raise NodegraphError(f"--study {url}: Optuna cannot open this storage ({e})") from None


def _retrying(make, tries: int = 6):
    """`make()`, tried again when the database refuses: processes that open a new SQLite
    file at once race to create its tables, and all but one see "already exists"."""
    import sqlalchemy.exc

    for attempt in range(tries):
        try:
            return make()
        except (sqlalchemy.exc.OperationalError, sqlalchemy.exc.IntegrityError) as e:
            if attempt == tries - 1:
                raise NodegraphError(f"--study: the storage refused the study ({e})") from None
            time.sleep(0.2 + 0.5 * attempt)
    raise AssertionError("unreachable")


def open_study(storage, name: str | None, sampler, pruner,
               direction: Literal["minimize", "maximize"]):
    """The study `name` in `storage`, created on first use and joined afterwards (by this
    and every other process that runs the same search)."""
    import optuna

    def create():
        return optuna.create_study(storage=storage, study_name=name, sampler=sampler,
                                   pruner=pruner, direction=direction, load_if_exists=True)

    # a study in memory needs no retries, nor SQLAlchemy's import (most of a second)
    study = create() if storage is None else _retrying(create)
    if study.direction.name.lower() != direction:
        raise NodegraphError(f"--study-name {study.study_name}: the stored study seeks to "
                             f"{study.direction.name.lower()} its value but this search "
                             f"would {direction} it; choose another --study-name or --metric")
    return study


# -- the search ------------------------------------------------------------------------------


@dataclass
class TrialRow:
    """One trial as the summary and the plot show it (free of Optuna's types)."""

    number: int
    params: dict[str, Any]
    value: float | None
    state: str  # COMPLETE, PRUNED, FAIL, RUNNING, WAITING
    curve: list[tuple[int, float]] = field(default_factory=list)  # (epoch, reported value)
    error: str = ""
    best: bool = False


@dataclass
class SearchResult:
    """The study's trials (from every process that worked on it) and the best of them."""

    trials: list[TrialRow]
    metric: str
    rises: bool
    study_name: str
    study: Any = None  # the optuna.Study it came from

    @property
    def best(self) -> TrialRow | None:
        return next((t for t in self.trials if t.best), None)


def final_value(result: dict, key: str) -> float | None:
    """`split.name` from a run's numbers: the final evaluation, else the last epoch's."""
    split, _, name = key.partition(".")
    for stats in (result.get("final", {}).get(split),
                  (result.get("history") or [{}])[-1].get(split)):
        if isinstance(stats, dict) and isinstance(stats.get(name), int | float):
            return float(stats[name])
    return None


def search(build: Callable[[dict[str, Any]], Graph], spaces: Sequence[Space], metric: str, *,
           sampler: str = "tpe", trials: int | None = None, pruner: str = "median",
           storage: str | None = None, study_name: str | None = None,
           epochs: int | None = None, log_dir: str | Path | None = None,
           seed: int | None = None, echo: Callable[[str], None] = print,
           ready: Callable[[], None] | None = None) -> SearchResult:
    """Run trials of `build(params)` until the study holds `trials` finished ones (all
    processes together; for the grid, by default, until every combination ran).
    `metric` (split.key) is minimised, or maximised for accuracy-like numbers. `ready` is
    called once the study is open, before the first trial (`--jobs` starts helpers there)."""
    import optuna

    from nodegraph.runtime.callbacks.pruning import MissingNumber, TrialPruning
    from nodegraph.runtime.train import train

    if trials is not None and trials < 1:
        raise NodegraphError("--trials must be at least 1")
    if trials is None and sampler != "grid":
        raise NodegraphError(f"--search {sampler} needs --trials N (how many trials the "
                             "study should hold)")
    check_spaces(spaces, build)
    run_epochs = epochs if epochs is not None else _file_epochs(build({}))  # for the warm-up
    rises = monitor_rises(metric, "auto")
    direction: Literal["minimize", "maximize"] = "maximize" if rises else "minimize"
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = open_study(storage_for(storage), study_name, sampler_for(sampler, spaces, seed),
                       pruner_for(pruner, rises, run_epochs), direction)
    worker = f"{socket.gethostname()}:{os.getpid()}"
    folder = Path(log_dir) if log_dir else None
    fatal: list[NodegraphError] = []  # a mistake every trial would repeat: ends the search

    def objective(trial) -> float:
        params = {s.target: s.suggest(trial) for s in spaces}
        trial.set_user_attr("worker", worker)
        pruning = TrialPruning(trial, metric)
        try:
            result = train(build(params), epochs=epochs, callbacks=[pruning],
                           log_dir=folder / f"trial-{trial.number:03d}" if folder else None
                           ).unless_cancelled()  # Ctrl-C ends the search, not the trial
        except NodegraphError as e:
            trial.set_user_attr("error", " ".join(str(e).split())[:500])
            if isinstance(e, MissingNumber):
                fatal.append(e)
                study.stop()
            raise
        if pruning.pruned:
            raise optuna.TrialPruned(f"pruned after epoch {pruning.epochs}")
        value = final_value(result.to_json(), metric)
        if value is None or not math.isfinite(value):
            message = (f"the run has no {metric}; choose --metric among its numbers"
                       if value is None else f"{metric} is {value}")
            trial.set_user_attr("error", message)
            raise NodegraphError(message)
        return value

    def report(study_, frozen) -> None:
        value = "-" if frozen.value is None else f"{frozen.value:.6g}"
        settings = "  ".join(f"{k}={shown(decode(v))}" for k, v in frozen.params.items())
        note = frozen.user_attrs.get("error", "")
        echo(f"  trial {frozen.number:>3} {frozen.state.name:<8} {value:>10}  {settings}"
             + (f"  ({note})" if note else ""))

    finished = (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED,
                optuna.trial.TrialState.FAIL)
    callbacks: list[Any] = [report]
    if trials is not None:
        done = len(study.get_trials(deepcopy=False, states=finished))
        if done >= trials:
            echo(f"study {study.study_name} already holds {done} finished trials "
                 f"(--trials {trials}); nothing to run")
        callbacks.append(optuna.study.MaxTrialsCallback(trials, states=finished))
    else:
        done = 0
    echo(f"searching {', '.join(s.target for s in spaces)} with the {sampler} sampler for "
         f"{'the highest' if rises else 'the lowest'} {metric} (study {study.study_name})")
    if ready is not None:
        ready()
    if trials is None or done < trials:
        study.optimize(objective, n_trials=None if trials is None else trials - done,
                       catch=(NodegraphError,), callbacks=callbacks)
    if fatal:
        raise fatal[0]
    return collect(study, metric, rises)


def _file_epochs(graph: Graph) -> int | None:
    value = graph.training.get("epochs")
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def refreshed(result: SearchResult) -> SearchResult:
    """`result` read again from its study: with the trials other processes ran since."""
    return collect(result.study, result.metric, result.rises)


def collect(study, metric: str, rises: bool) -> SearchResult:
    """The study's trials as rows, the best one marked."""
    rows = [TrialRow(t.number, {k: decode(v) for k, v in t.params.items()}, t.value,
                     t.state.name, sorted(t.intermediate_values.items()),
                     t.user_attrs.get("error", ""))
            for t in study.get_trials(deepcopy=False)]
    done = [(r, r.value) for r in rows if r.state == "COMPLETE" and r.value is not None]
    if done:
        pick = max if rises else min
        pick(done, key=lambda pair: pair[1])[0].best = True
    return SearchResult(rows, metric, rises, study.study_name, study)
