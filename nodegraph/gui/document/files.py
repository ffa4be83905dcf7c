"""Files around the graph file: recent files, examples, autosave and crash recovery.

Recent files live in QSettings (a test passes its own). Autosave writes the open graph
every little while, when there are unsaved changes, into the user's state folder (never
beside the file: that may be an install folder, a shared drive, a read-only checkout): one
file per graph, named by a hash of the graph file's absolute path, ``untitled-<pid>`` for
an untitled graph. A clean save or close deletes it. When a file is opened and its
autosave is newer, the editor offers to restore it — the trace a crash leaves behind.
Autosave writes atomically, like a save, so a crash while autosaving cannot damage the last
good copy. `NODEGRAPH_STATE_DIR` and `NODEGRAPH_AUTOSAVE_MS` move the folder and change the
interval (tests, several editor set-ups side by side).
"""

from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path

from PySide6.QtCore import QSettings, QStandardPaths

from nodegraph.model.fileformat import atomic_write_text, dumps
from nodegraph.model.graph import Graph

MAX_RECENT = 10
AUTOSAVE_SUFFIX = ".autosave.json"
AUTOSAVE_MS = 30_000
STATE_DIR_ENV = "NODEGRAPH_STATE_DIR"
AUTOSAVE_MS_ENV = "NODEGRAPH_AUTOSAVE_MS"


def state_dir() -> Path:
    """Where autosaves go: `NODEGRAPH_STATE_DIR`, else the user's application data folder
    (on Linux ~/.local/share/nodegraph/nodegraph/recovery)."""
    chosen = os.environ.get(STATE_DIR_ENV)
    if chosen:
        return Path(chosen).expanduser()
    data = QStandardPaths.writableLocation(QStandardPaths.StandardLocation.AppDataLocation)
    # never a relative path: that would put autosaves wherever the editor was started
    return (Path(data) if data else Path.home() / ".nodegraph") / "recovery"


def autosave_interval_ms() -> int:
    """`NODEGRAPH_AUTOSAVE_MS` when it is a positive number of milliseconds, else 30 s."""
    try:
        value = int(os.environ.get(AUTOSAVE_MS_ENV, ""))
    except ValueError:
        return AUTOSAVE_MS
    return value if value > 0 else AUTOSAVE_MS


def examples_dir() -> Path:
    """The repository's examples folder (beside the `nodegraph` package)."""
    return Path(__file__).resolve().parents[3] / "examples"


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
        # anything else (None when unset, a damaged file's number) reads as no entries
        return [p for p in value if isinstance(p, str)] if isinstance(value, list) else []

    def add(self, path: str) -> None:
        path = str(Path(path).resolve())
        items = [path, *[p for p in self.list() if p != path]][:MAX_RECENT]
        self.settings.setValue(self.KEY, items)

    def remove(self, path: str) -> None:
        self.settings.setValue(self.KEY, [p for p in self.list() if p != path])


def autosave_path(path: str | None, recovery_dir: Path) -> Path:
    """Where the autosave of the graph file `path` goes, in `recovery_dir`: its name and a
    hash of its absolute path (files of one name in two folders do not share one)."""
    if path:
        absolute = os.path.normcase(str(Path(path).resolve()))
        key = hashlib.sha256(absolute.encode("utf-8", "surrogatepass")).hexdigest()[:16]
        return recovery_dir / f"{Path(path).stem}-{key}{AUTOSAVE_SUFFIX}"
    return recovery_dir / f"untitled-{os.getpid()}{AUTOSAVE_SUFFIX}"


def write_autosave(graph: Graph, target: Path) -> None:
    atomic_write_text(target, dumps(graph))


def pending_autosave(path: str, recovery_dir: Path) -> Path | None:
    """The autosave of `path` when it is newer than the file itself (a crash left it); an
    older editor's autosave beside the file counts too."""
    for auto in (autosave_path(path, recovery_dir), _beside(path)):
        if not auto.is_file():
            continue
        try:
            newer = auto.stat().st_mtime > Path(path).stat().st_mtime
        except OSError:
            newer = True
        if newer:
            return auto
    return None


def _beside(path: str) -> Path:
    """Where editors before the state folder put a file's autosave."""
    p = Path(path)
    return p.with_name(p.stem + AUTOSAVE_SUFFIX)


def orphaned_untitled(recovery_dir: Path) -> list[Path]:
    """Autosaves of untitled graphs whose editor is gone (not this process's own)."""
    if not recovery_dir.is_dir():
        return []
    mine = f"untitled-{os.getpid()}{AUTOSAVE_SUFFIX}"
    return sorted((p for p in recovery_dir.glob(f"untitled-*{AUTOSAVE_SUFFIX}")
                   if p.name != mine), key=lambda p: p.stat().st_mtime, reverse=True)


def describe_time(path: Path) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(path.stat().st_mtime))
