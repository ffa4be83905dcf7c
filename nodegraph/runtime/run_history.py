"""The history of a graph's runs: what each run was (its settings) and what it reached.

The editor records every finished or stopped run of the open graph so that two runs can be
compared: their curves overlaid and the settings that differed listed. A run is defined by
the graph it trained: every node's params (defaults filled in, so "lr unset" and "lr 0.001"
compare equal when the default is 0.001) and the training settings, flattened to keys such
as ``opt.lr`` and ``training.epochs``; the wiring and the groups are summed up in a digest,
so a rewired graph shows as "graph (wires, blocks)" when no param tells the runs apart.

The history lives beside the graph file (``NAME.runs.json`` next to ``NAME.json``), written
atomically and never touching the graph file, so it survives restarts; an unsaved graph's
history stays in memory until the graph gets a file. This module is Qt-free: the editor's
panel (`nodegraph.gui.training.run_history`) shows what it holds.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from nodegraph.model import settings as training_settings
from nodegraph.model.errors import GraphFileError
from nodegraph.model.fileformat import atomic_write_text, to_document
from nodegraph.model.graph import Graph

FORMAT = "nodegraph-runs"
VERSION = 1
MAX_RUNS = 100  # the oldest go first: a file that grows without end slows every open
STRUCTURE = "graph (wires, blocks)"  # the diff row of a digest that differs


@dataclass
class RunRecord:
    """One run: when, how long, how it ended, its numbers per epoch and what defined it."""

    number: int  # 1, 2, ... within the history: the name the editor shows
    started: str  # ISO 8601, UTC
    seconds: float
    status: str  # finished, stopped, early stop
    final: dict[str, dict[str, Any]]
    history: list[dict[str, Any]]  # per epoch: {"epoch", "train": {...}, "val": {...}}
    settings: dict[str, Any]  # flattened: "node.param" and "training.key" -> value
    digest: str  # of the graph's nodes, wires, groups and training (not its layout)
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return f"run {self.number}"

    @property
    def epochs(self) -> int:
        return len(self.history)

    def series(self, split: str, key: str) -> tuple[list[int], list[float]]:
        """(epochs, values) of one number of a split, e.g. ("val", "loss")."""
        xs: list[int] = []
        ys: list[float] = []
        for entry in self.history:
            value = entry.get(split, {}).get(key)
            if isinstance(value, int | float) and not isinstance(value, bool):
                xs.append(int(entry.get("epoch", len(xs) + 1)))
                ys.append(float(value))
        return xs, ys

    def keys(self) -> list[tuple[str, str]]:
        """The (split, key) pairs that have numbers in this run, in first-seen order."""
        seen: dict[tuple[str, str], None] = {}
        for entry in self.history:
            for split in ("train", "val"):
                for key, value in entry.get(split, {}).items():
                    if isinstance(value, int | float) and not isinstance(value, bool):
                        seen[(split, key)] = None
        return list(seen)


def definition(graph: Graph) -> tuple[dict[str, Any], str]:
    """The settings that define a run of `graph` (flattened, defaults filled in) and a
    digest of everything that does (nodes, wires, groups, training; not positions)."""
    flat: dict[str, Any] = {}
    values, _ = training_settings.resolve(graph.training)
    for name, value in values.items():
        flat[f"training.{name}"] = _plain(value)
    for node in graph.nodes.values():
        flat[f"{node.id}.type"] = node.type
        params = dict(node.params)
        if node.type in graph.registry:
            resolved, _ = graph.registry.get(node.type).resolve_params(node.params)
            params = {**params, **resolved}  # checked values and defaults; unknown as given
        for name, value in params.items():
            flat[f"{node.id}.{name}"] = _plain(value)
    doc = to_document(graph)
    doc.pop("ui", None)
    doc.pop("name", None)
    doc["training"] = {k: flat[f"training.{k}"] for k in values}
    text = json.dumps(doc, sort_keys=True, default=str, allow_nan=True)
    return flat, hashlib.sha256(text.encode()).hexdigest()[:16]


def _plain(value: Any) -> Any:
    """A JSON-ready copy (tuples as lists, odd objects as text) so records compare after a
    round trip through the file as they did before it."""
    try:
        return json.loads(json.dumps(value, allow_nan=True))
    except (TypeError, ValueError):
        return str(value)


def diff(runs: list[RunRecord]) -> list[tuple[str, list[Any]]]:
    """The settings whose values are not the same in all `runs`: (key, value per run), a
    missing key as None; a differing digest with no differing node adds the STRUCTURE row
    (its values the digests)."""
    keys = list(dict.fromkeys(k for run in runs for k in run.settings))
    rows = [(k, [run.settings.get(k) for run in runs]) for k in keys]
    rows = [(k, vs) for k, vs in rows if any(not _same(vs[0], v) for v in vs[1:])]
    if len({run.digest for run in runs}) > 1 and not any(
            not k.startswith("training.") for k, _ in rows):
        rows.append((STRUCTURE, [run.digest for run in runs]))
    return rows


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return type(a) is type(b) and a == b or (
        isinstance(a, int | float) and isinstance(b, int | float)
        and not isinstance(a, bool) and not isinstance(b, bool) and a == b)


def history_path(graph_path: str | Path) -> Path:
    """Where the runs of the graph file `graph_path` are kept: NAME.runs.json beside it."""
    p = Path(graph_path)
    stem = p.name[:-len(".json")] if p.name.endswith(".json") else p.name
    return p.with_name(f"{stem}.runs.json")


class RunHistory:
    """The runs of one graph, oldest first; kept in `path` when the graph has a file."""

    def __init__(self, path: str | Path | None = None):
        self.path = Path(path) if path else None
        self.runs: list[RunRecord] = []
        if self.path is not None and self.path.exists():
            self.runs = load(self.path)

    def add(self, graph: Graph, started: str, seconds: float, history: list[dict],
            final: dict, *, stopped_early: bool = False, cancelled: bool = False,
            settings: tuple[dict[str, Any], str] | None = None,
            extra: dict[str, Any] | None = None) -> RunRecord:
        """Record a run that ended (and write the file, when there is one). `settings` is
        `definition(graph)` taken when the run started, if the graph may have changed."""
        flat, digest = settings or definition(graph)
        status = "stopped" if cancelled else "early stop" if stopped_early else "finished"
        number = self.runs[-1].number + 1 if self.runs else 1
        record = RunRecord(number, started, round(seconds, 3), status, _plain(final),
                           [_epoch(e) for e in history], flat, digest, _plain(extra or {}))
        self.runs.append(record)
        del self.runs[:-MAX_RUNS]
        self.save()
        return record

    def attach(self, path: str | Path) -> None:
        """The graph got a file (Save As): keep its runs there, after any already there
        (renumbered after them), and write the file."""
        new = Path(path)
        if new == self.path:
            return
        ours, self.path = self.runs, new
        self.runs = load(new) if new.exists() else []
        for run in ours:
            run.number = self.runs[-1].number + 1 if self.runs else 1
            self.runs.append(run)
        del self.runs[:-MAX_RUNS]
        if ours:
            self.save()

    def remove(self, numbers: set[int]) -> None:
        self.runs = [r for r in self.runs if r.number not in numbers]
        self.save()

    def get(self, number: int) -> RunRecord | None:
        return next((r for r in self.runs if r.number == number), None)

    def save(self) -> None:
        if self.path is None:
            return
        doc = {"format": FORMAT, "version": VERSION, "runs": [asdict(r) for r in self.runs]}
        atomic_write_text(self.path, json.dumps(doc, indent=1, allow_nan=True) + "\n")


def _epoch(entry: dict) -> dict:
    """The parts of a history entry a comparison plots: epoch, train, val, lr."""
    keep = {k: entry[k] for k in ("epoch", "train", "val", "lr", "stage") if k in entry}
    return _plain(keep)


def load(path: str | Path) -> list[RunRecord]:
    """The runs kept in a NAME.runs.json file; errors name the file and what is wrong."""
    p = Path(path)
    try:
        doc = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise GraphFileError(f"{p}: cannot read the run history ({e}); move the file "
                             "away to start a new one") from e
    if not isinstance(doc, dict) or doc.get("format") != FORMAT or not isinstance(
            doc.get("runs"), list):
        raise GraphFileError(f"{p}: not a run history (expected {{\"format\": \"{FORMAT}\", "
                             "\"runs\": [...]}); move the file away to start a new one")
    runs = []
    names = RunRecord.__dataclass_fields__
    for i, item in enumerate(doc["runs"]):
        try:
            if not isinstance(item, dict):
                raise TypeError("expected an object")
            run = RunRecord(**{k: v for k, v in item.items() if k in names})
            for name, kind in _KINDS.items():
                if not isinstance(getattr(run, name), kind):
                    raise TypeError(f"'{name}' is not {kind[0].__name__}")
            if not all(isinstance(e, dict) for e in run.history):
                raise TypeError("'history' holds a non-object")
        except TypeError as e:
            raise GraphFileError(f"{p}: runs[{i}] is not a run record ({e}); move the file "
                                 "away to start a new one") from e
        runs.append(run)
    return runs


_KINDS: dict[str, tuple[type, ...]] = {
    "number": (int,), "started": (str,), "seconds": (int, float), "status": (str,),
    "final": (dict,), "history": (list,), "settings": (dict,), "digest": (str,),
    "extra": (dict,)}
