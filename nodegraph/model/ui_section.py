"""The editor's `ui` section of a graph file, type-checked at load like block params.

A run never reads `ui`, but the editor, `info` and the SVG drawing do, and a file anyone
sends may hold anything there. Each entry whose meaning nodegraph knows is held to its
type here — card positions ``{node: [x, y]}``, notes ``[{"id", "kind", "rect", "text",
"color"}]``, collapsed node ids, wire reroute points ``{wire: [[x, y], ...]}`` and the
layout direction — and a malformed entry is left out with a warning naming its JSON path
(``ui/positions/hidden``), so no code that reads the section meets a value of another type.
Keys nodegraph does not know are kept as they are (a later editor's), and round-trip.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from nodegraph.model.errors import Problem
from nodegraph.model.sanitize import clean

NOTE_KINDS = ("comment", "backdrop")
DIRECTIONS = ("LR", "TB")


def _number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


def _point(v: Any) -> bool:
    return isinstance(v, list) and len(v) == 2 and all(_number(x) for x in v)


def _note(v: Any) -> bool:
    if not isinstance(v, dict) or not isinstance(v.get("id"), str):
        return False
    rect = v.get("rect")
    return (v.get("kind") in NOTE_KINDS and isinstance(rect, list) and len(rect) == 4
            and all(_number(x) for x in rect)
            and all(isinstance(v.get(k, ""), str) for k in ("text", "color")))


def _points(v: Any) -> bool:
    return isinstance(v, list) and all(_point(p) for p in v)


# key -> (container type, the check of each entry, what an entry must be)
_TABLES: dict[str, tuple[type, Callable[[Any], bool], str]] = {
    "positions": (dict, _point, "[x, y], two numbers"),
    "comments": (list, _note, 'a note {"id": text, "kind": "comment" or "backdrop", '
                              '"rect": [x, y, w, h], "text": text, "color": text}'),
    "collapsed": (list, lambda v: isinstance(v, str), "a node id"),
    "reroutes": (dict, _points, "a list of [x, y] points"),
}


def checked_ui(ui: Any, where: str = "ui") -> tuple[dict[str, Any], list[Problem]]:
    """`ui` with every known entry of the wrong type left out, and a warning for each,
    naming its JSON path under `where` (``ui``, ``groups/NAME/ui``)."""
    problems: list[Problem] = []

    def warn(path: str, message: str) -> None:
        problems.append(Problem(None, None, "bad_entry", f"{clean(path)}: {message}; it was "
                                "left out", severity="warning"))

    if not isinstance(ui, dict):
        warn(where, f"must be an object, not {type(ui).__name__}")
        return {}, problems
    out: dict[str, Any] = {}
    for key, value in ui.items():
        if key == "layout_direction":
            if value in DIRECTIONS:
                out[key] = value
            else:
                warn(f"{where}/{key}", f"must be one of {', '.join(DIRECTIONS)}")
            continue
        if key not in _TABLES:
            out[key] = value  # not ours to judge: kept for the editor that wrote it
            continue
        kind, ok, what = _TABLES[key]
        if not isinstance(value, kind):
            warn(f"{where}/{key}", f"must be {'an object' if kind is dict else 'a list'}")
            continue
        if isinstance(value, dict):
            kept: Any = {k: v for k, v in value.items() if ok(v)}
            bad = [k for k in value if k not in kept]
        elif isinstance(value, list):
            kept = [v for v in value if ok(v)]
            bad = [f"#{i + 1}" for i, v in enumerate(value) if not ok(v)]
        for name in bad[:3]:
            warn(f"{where}/{key}/{name}", f"must be {what}")
        if len(bad) > 3:
            warn(f"{where}/{key}", f"{len(bad) - 3} more entries are not {what}")
        out[key] = kept
    return out, problems
