"""The files the user has trusted to run their own code, remembered by content.

A graph that names Python outside `nodegraph.model.allowlist` (a module of the user's, brought in
by `nodegraph import`) runs only when the user says so. The editor asks once per file
content, naming the modules (and the callables that do more than compute, granted by their
full names), and remembers the answer by the file's SHA-256 together with a SHA-256 of each
module's package (every source file, or its installed RECORD: `allowlist.source_digest`):
an edited or replaced graph (a colleague's new version, a download of the same name) or a
change to any file of a module's package beside an unchanged graph is asked about again.
The record lives in the user's state folder, never beside the graph; a damaged record is
treated as empty, so the worst it costs is a question asked twice.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from nodegraph.gui.base.later import later
from nodegraph.model.fileformat import atomic_write_text

allowlist = later("nodegraph.model.allowlist")  # torch: its table is built from torch

RECORD = "trusted-files.json"


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _source(name: str) -> str:
    """A digest of the package a module, or a full ``module:name``, comes from."""
    return allowlist.source_digest(allowlist.module_of(name))


class TrustedFiles:
    """`knows` and `remember` file contents the user trusted, with the modules they name."""

    def __init__(self, folder: Path):
        self.path = Path(folder) / RECORD

    def _read(self) -> dict[str, dict[str, str]]:
        try:
            record = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        files = record.get("files") if isinstance(record, dict) else None
        # an older record (modules without their sources' digests) is asked about again
        return {k: v for k, v in files.items() if isinstance(v, dict)} if isinstance(
            files, dict) else {}

    def knows(self, data: bytes, modules: list[str]) -> bool:
        """True when this content was trusted for (at least) these modules, each with the
        source it has now."""
        known = self._read().get(digest(data), {})
        return all(m in known and known[m] == _source(m) for m in modules)

    def remember(self, data: bytes, modules: list[str]) -> None:
        files = self._read()
        files[digest(data)] = {m: _source(m) for m in sorted(set(modules))}
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_text(self.path, json.dumps({"files": files}, indent=1))
        except OSError:
            pass  # not remembered: the question comes again next time, nothing worse
