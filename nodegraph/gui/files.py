"""Files around the graph file: recent files, examples, autosave and crash recovery.

Recent files live in QSettings (a test passes its own). Autosave writes the open graph
beside its file as ``<file>.autosave.json`` (an untitled graph goes to the recovery folder)
every little while when there are unsaved changes; a clean save or close deletes it. When
a file is opened and its autosave is newer, the editor offers to restore it — the trace a
crash leaves behind. Autosave writes atomically, like a save, so a crash while autosaving
cannot damage the last good copy.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from PySide6.QtCore import QSettings

from nodegraph.fileformat import atomic_write_text, dumps
from nodegraph.graph import Graph

MAX_RECENT = 10
AUTOSAVE_SUFFIX = ".autosave.json"


def examples_dir() -> Path:
    """The repository's examples folder (beside the `nodegraph` package)."""
    return Path(__file__).resolve().parents[2] / "examples"


def example_files() -> list[Path]:
    folder = examples_dir()
    return sorted(folder.glob("*.json")) if folder.is_dir() else []


class RecentFiles:
    """The most recently opened or saved files, newest first."""

    KEY = "recent_files"

    def __init__(self, settings: QSettings):
        self.settings = settings

    def list(self) -> list[str]:
        value = self.settings.value(self.KEY, [])
        if isinstance(value, str):  # QSettings returns a lone item as a string
            value = [value]
        return [p for p in (value or []) if isinstance(p, str)]

    def add(self, path: str) -> None:
        path = str(Path(path).resolve())
        items = [path, *[p for p in self.list() if p != path]][:MAX_RECENT]
        self.settings.setValue(self.KEY, items)

    def remove(self, path: str) -> None:
        self.settings.setValue(self.KEY, [p for p in self.list() if p != path])


def autosave_path(path: str | None, recovery_dir: Path) -> Path:
    """Where the autosave of `path` goes (untitled graphs: the recovery folder)."""
    if path:
        p = Path(path)
        return p.with_name(p.stem + AUTOSAVE_SUFFIX)
    return recovery_dir / f"untitled-{os.getpid()}{AUTOSAVE_SUFFIX}"


def write_autosave(graph: Graph, target: Path) -> None:
    atomic_write_text(target, dumps(graph))


def pending_autosave(path: str) -> Path | None:
    """The autosave of `path` when it is newer than the file itself (a crash left it)."""
    auto = autosave_path(path, Path("."))
    if not auto.exists():
        return None
    try:
        newer = auto.stat().st_mtime > Path(path).stat().st_mtime
    except OSError:
        newer = True
    return auto if newer else None


def orphaned_untitled(recovery_dir: Path) -> list[Path]:
    """Autosaves of untitled graphs whose editor is gone (not this process's own)."""
    if not recovery_dir.is_dir():
        return []
    mine = f"untitled-{os.getpid()}{AUTOSAVE_SUFFIX}"
    return sorted((p for p in recovery_dir.glob(f"untitled-*{AUTOSAVE_SUFFIX}")
                   if p.name != mine), key=lambda p: p.stat().st_mtime, reverse=True)


def describe_time(path: Path) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(path.stat().st_mtime))
