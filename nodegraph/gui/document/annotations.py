"""Comments and backdrops: notes on the canvas, kept in the graph file's `ui` section.

A note is plain data, so a script can read and write it and the file format needs nothing
new: `graph.ui["comments"]` is a list of notes, each ``{"id": "note_1", "kind": "comment" or
"backdrop", "rect": [x, y, w, h], "text": "...", "color": "#rrggbb"}``.
A comment is a text note on top of the canvas; a backdrop is a titled, coloured rectangle
behind nodes that carries the nodes inside it when it moves. Training ignores the `ui`
section, so notes never change what a graph computes. No Qt here (scripts use it).
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable, Mapping
from typing import Any

KEY = "comments"
KINDS = ("comment", "backdrop")
# muted so that node headers stay the brightest thing on the canvas
BACKDROP_COLORS = ("#3f6f9e", "#4f8a5b", "#8a6a3a", "#7a4f8a", "#8a4a4a", "#3f8585")
COMMENT_COLOR = "#c9b458"
MIN_SIZE = (80.0, 40.0)
TITLE_HEIGHT = 28.0  # a backdrop's title bar; the margin above the nodes it was made around
MARGIN = 24.0


def notes(ui: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The notes of a graph's (or group body's) `ui` data; well-formed ones only."""
    found = ui.get(KEY)
    return [n for n in found if is_note(n)] if isinstance(found, list) else []


def is_note(note: Any) -> bool:
    rect = note.get("rect") if isinstance(note, dict) else None
    return (isinstance(note, dict) and isinstance(note.get("id"), str)
            and note.get("kind") in KINDS and isinstance(rect, list) and len(rect) == 4
            and all(isinstance(v, int | float) and not isinstance(v, bool) for v in rect))


def by_id(ui: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    return {n["id"]: n for n in notes(ui)}


def put(ui: dict[str, Any], note_id: str, note: dict[str, Any] | None,
        index: int | None = None) -> None:
    """Replace (or add, or with None remove) one note, in place, keeping the list order
    (the later note paints above the earlier one); `index` places a new note."""
    store = ui.get(KEY)
    if not isinstance(store, list):
        store = ui[KEY] = []
    at = next((i for i, n in enumerate(store) if isinstance(n, dict) and n.get("id") == note_id),
              None)
    if note is None:
        if at is not None:
            del store[at]
    elif at is not None:
        store[at] = copy.deepcopy(note)
    else:
        store.insert(len(store) if index is None else min(index, len(store)),
                     copy.deepcopy(note))


def index_of(ui: Mapping[str, Any], note_id: str) -> int | None:
    store = ui.get(KEY)
    if not isinstance(store, list):
        return None
    return next((i for i, n in enumerate(store) if isinstance(n, dict)
                 and n.get("id") == note_id), None)


def fresh_id(taken: Iterable[str], base: str = "note") -> str:
    taken = set(taken)
    base = re.sub(r"_\d+$", "", base) or "note"
    i = 1
    while f"{base}_{i}" in taken:
        i += 1
    return f"{base}_{i}"


def make(kind: str, rect: tuple[float, float, float, float], text: str, taken: Iterable[str],
         color: str | None = None) -> dict[str, Any]:
    """A new note with a fresh id; a backdrop without a colour takes the next in turn."""
    taken = list(taken)
    if color is None:
        color = (COMMENT_COLOR if kind == "comment"
                 else BACKDROP_COLORS[len(taken) % len(BACKDROP_COLORS)])
    x, y, w, h = rect
    return {"id": fresh_id(taken), "kind": kind,
            "rect": [round(x, 1), round(y, 1), round(max(w, MIN_SIZE[0]), 1),
                     round(max(h, MIN_SIZE[1]), 1)],
            "text": text, "color": color}


def around(rects: Iterable[tuple[float, float, float, float]]
           ) -> tuple[float, float, float, float] | None:
    """A backdrop's rectangle around node rectangles (x, y, w, h): a margin on every side
    and room for the title above."""
    rects = list(rects)
    if not rects:
        return None
    left = min(x for x, _, _, _ in rects) - MARGIN
    top = min(y for _, y, _, _ in rects) - MARGIN - TITLE_HEIGHT
    right = max(x + w for x, _, w, _ in rects) + MARGIN
    bottom = max(y + h for _, y, _, h in rects) + MARGIN
    return (left, top, right - left, bottom - top)


def moved(note: dict[str, Any], dx: float, dy: float) -> dict[str, Any]:
    out = copy.deepcopy(note)
    x, y, w, h = out["rect"]
    out["rect"] = [round(x + dx, 1), round(y + dy, 1), w, h]
    return out
