"""The wire labels of the last clean check of a graph, remembered by its content.

A graph opened before shows the labels its last check gave at the first paint, before
its block library is in (`nodegraph.model.wire_labels`: kept under a digest of what
decides shapes, so an edit that matters is a miss, never a wrong label). Data files can
change under an unchanged graph: the real check follows within seconds and replaces every
label. The memo lives in the user's state folder; a damaged or oversized entry is
ignored, the worst it costs is labels that wait.

The shipped examples come with their labels (`example_shapes.json` beside this module,
written by `tools/example_shapes.py`, kept current by a test): an example opened for the
first time on a machine is labelled at the first paint too.
"""

from __future__ import annotations

import functools
import json
import os
from pathlib import Path
from typing import Any

from nodegraph.model.outputs import atomic_write_text
from nodegraph.model.wire_labels import (  # noqa: F401 (the editor's names for them)
    MAX_LABEL,
    Labels,
    content_key,
    labels_of,
    parsed,
    rows,
)

FOLDER = "shapes"
SHIPPED = Path(__file__).with_name("example_shapes.json")  # the examples' labels
KEEP = 64  # entries kept, newest first (one small file each)
MAX_BYTES = 2_000_000  # an entry larger than this is not read


class ShapeMemo:
    """`recall` and `remember` the wire labels of a graph's content, under `folder`."""

    def __init__(self, folder: Path):
        self.folder = Path(folder) / FOLDER

    def recall(self, key: str) -> Labels | None:
        """This machine's labels for the content `key`, else the shipped examples'."""
        own = parsed(_read(self.folder / f"{key}.json"))
        return own if own is not None else shipped().get(key)

    def remember(self, key: str, labels: Labels) -> None:
        try:
            atomic_write_text(self.folder / f"{key}.json", json.dumps({"labels": rows(labels)}))
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


@functools.cache
def shipped() -> dict[str, Labels]:
    """The shipped examples' labels by content key (`SHIPPED`; none when it is absent)."""
    entries = _read(SHIPPED)
    if not isinstance(entries, dict):
        return {}
    found = {key: parsed(entry) for key, entry in entries.items()}
    return {key: labels for key, labels in found.items() if labels}


def _mtime(path: Path) -> float:
    try:
        return os.stat(path).st_mtime
    except OSError:
        return 0.0
