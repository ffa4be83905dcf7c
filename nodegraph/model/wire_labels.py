"""The shape labels a checked graph shows on its wires, kept with what decides them.

The editor draws a file's cards before its block library (torch) is in, and a wire's
shape is known only once the graph is checked: seconds later. Labels of an earlier clean
check are shown at the first paint instead, when they belong to the graph as it is now:
they are kept under `content_key`, a SHA-256 of what decides shapes (nodes, types,
params, wires, ties, groups, training settings; not positions), so any edit that matters
is a miss, never a wrong label. Kept by the editor's memo (`gui/document/shape_memo.py`),
and by `nodegraph import` in the graph file it writes (`extra.imported.shapes`: the
import checked the graph, so a fresh import opens labelled). No torch here: this runs
before the library is in.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from nodegraph.model import fileformat
from nodegraph.model.graph import Graph

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


def for_training(graph: Graph) -> bool:
    """Whether the editor checks `graph` with the run checks: it has a data block and an
    optimizer (the labels are those of that check)."""
    kinds = {graph.registry.get(n.type).kind for n in graph if n.type in graph.registry}
    return {"data", "optimizer"} <= kinds


def labels_of(report: Any, graph: Graph) -> Labels:
    """The label each wire of `graph` shows for `report` (the sources' shapes)."""
    return {e.source: report.shown_shape(*e.source) for e in graph.edges
            if e.source in report.outputs}


def rows(labels: Labels) -> list[list[str]]:
    """`labels` as JSON rows [node, port, label] (empty and overlong ones left out)."""
    return [[n, p, t] for (n, p), t in labels.items() if t and len(t) <= MAX_LABEL]


def parsed(entry: Any) -> Labels | None:
    """The labels of a stored entry {"labels": rows}; rows of another form are left out,
    an entry of another form is None."""
    found = entry.get("labels") if isinstance(entry, dict) else None
    if not isinstance(found, list):
        return None
    return {(r[0], r[1]): r[2] for r in found
            if isinstance(r, list) and len(r) == 3 and all(isinstance(v, str) for v in r)
            and len(r[2]) <= MAX_LABEL}


def recorded(graph: Graph) -> Labels | None:
    """The labels the file's importer recorded, when they belong to the graph as it is."""
    imported = graph.extra.get("imported")
    entry = imported.get("shapes") if isinstance(imported, dict) else None
    if not isinstance(entry, dict) or entry.get("key") != content_key(graph):
        return None
    return parsed(entry) or None
