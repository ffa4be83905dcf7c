"""The wire labels of the last clean check of a graph, remembered by its content.

The editor draws a file's cards before its block library is in (importing torch takes
seconds on a small machine), and a wire's shape is known only once the library is in and
the graph checked. A graph opened before shows the labels its last check gave, at the
first paint: they are remembered under a SHA-256 of what decides shapes (nodes, types,
params, wires, ties, groups, training settings; not positions), so any edit to those is a
miss, never a wrong label. Data files can change under an unchanged graph: the real check
follows within seconds and replaces every label. The memo lives in the user's state
folder; a damaged or oversized entry is ignored, the worst it costs is labels that wait.

The shipped examples come with their labels (`example_shapes.json` beside this module,
written by `tools/example_shapes.py`, kept current by a test): an example opened for the
first time on a machine is labelled at the first paint too.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from pathlib import Path
from typing import Any

from nodegraph.model import fileformat
from nodegraph.model.graph import Graph
from nodegraph.model.outputs import atomic_write_text

FOLDER = "shapes"
SHIPPED = Path(__file__).with_name("example_shapes.json")  # the examples' labels
KEEP = 64  # entries kept, newest first (one small file each)
MAX_BYTES = 2_000_000  # an entry larger than this is not read
MAX_LABEL = 64  # characters of one label (a shape: "(N, 3, 224, 224)")

Labels = dict[tuple[str, str], str]


def content_key(graph: Graph) -> str:
    """A digest of everything in `graph` that decides its shapes (not its layout)."""
    body = fileformat.body(graph)
    groups = {name: {k: v for k, v in fileformat.group_entry(d).items() if k != "ui"}
              for name, d in graph.groups.items()}
    text = json.dumps({"body": body, "groups": groups, "training": dict(graph.training)},
                      sort_keys=True, default=repr)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class ShapeMemo:
    """`recall` and `remember` the wire labels of a graph's content, under `folder`."""

    def __init__(self, folder: Path):
        self.folder = Path(folder) / FOLDER

    def recall(self, key: str) -> Labels | None:
        """This machine's labels for the content `key`, else the shipped examples'."""
        own = _labels(_read(self.folder / f"{key}.json"))
        return own if own is not None else shipped().get(key)

    def remember(self, key: str, labels: Labels) -> None:
        rows = [[n, p, t] for (n, p), t in labels.items() if t and len(t) <= MAX_LABEL]
        try:
            atomic_write_text(self.folder / f"{key}.json", json.dumps({"labels": rows}))
            self._prune()
        except OSError:
            pass  # not remembered: the next open waits for its check, nothing worse

    def _prune(self) -> None:
        entries = sorted(self.folder.glob("*.json"), key=_mtime, reverse=True)
        for old in entries[KEEP:]:
            old.unlink(missing_ok=True)


def _read(path: Path) -> Any:
    """A memo file's JSON, or None when it is missing, a link, oversized or damaged."""
    try:
        if path.is_symlink() or path.stat().st_size > MAX_BYTES:
            return None
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _labels(entry: Any) -> Labels | None:
    rows = entry.get("labels") if isinstance(entry, dict) else None
    if not isinstance(rows, list):
        return None
    return {(r[0], r[1]): r[2] for r in rows
            if isinstance(r, list) and len(r) == 3 and all(isinstance(v, str) for v in r)
            and len(r[2]) <= MAX_LABEL}


@functools.cache
def shipped() -> dict[str, Labels]:
    """The shipped examples' labels by content key (`SHIPPED`; none when it is absent)."""
    entries = _read(SHIPPED)
    if not isinstance(entries, dict):
        return {}
    found = {key: _labels(entry) for key, entry in entries.items()}
    return {key: labels for key, labels in found.items() if labels}


def _mtime(path: Path) -> float:
    try:
        return os.stat(path).st_mtime
    except OSError:
        return 0.0


def labels_of(report: Any, graph: Graph) -> Labels:
    """The label each wire of `graph` shows for `report` (the sources' shapes)."""
    return {e.source: report.shown_shape(*e.source) for e in graph.edges
            if e.source in report.outputs}
