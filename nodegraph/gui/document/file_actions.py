"""File menu actions: new, open, save, recent files, examples, autosave and recovery.

Opening never loses work: the file is read (and what the canvas needs of it tried) before
anything else happens, so a file that cannot be opened — malformed, damaged, a folder, or
one that makes the reader fail in a way we did not foresee — ends in a message, and the
open graph, its undo history and its file stay as they were; nothing is ever written to
the file that failed. Unsaved changes are offered for saving before a good file replaces
them, a newer autosave is offered for restoring, and a damaged file opens with what could
be read and a report of the rest. Saving is atomic (the core writes a temp file and
renames it) and clears the autosave.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from nodegraph.gui.base.later import later
from nodegraph.gui.base.prompts import Prompts
from nodegraph.gui.document import files
from nodegraph.gui.document.document import Document
from nodegraph.gui.document.trusted_files import TrustedFiles
from nodegraph.kinds import confine
from nodegraph.model.errors import NodegraphError
from nodegraph.model.fileformat import load, save
from nodegraph.model.graph import Graph

allowlist = later("nodegraph.model.allowlist")  # torch: its table is built from torch


class OpenFailed(Exception):
    """A graph that was read could not be shown; the message says why."""


def read_graph(path: str | Path, registry) -> Graph:
    """Load `path` and try what the canvas needs of it (every node's block, a group's
    definition included). Raises NodegraphError for what the file gets wrong, anything
    else for a bug of ours."""
    graph = load(path, registry)
    for node in graph:
        if node.type in graph.registry:
            graph.registry.get(node.type)
    return graph


def describe_failure(path: str | Path, error: BaseException) -> str:
    """What the user reads when `path` cannot be opened."""
    if isinstance(error, NodegraphError):
        text = str(error)
        return text if str(path) in text else f"{path}: {text}"
    return (f"{path}: internal error while reading it ({type(error).__name__}: {error}). "
            "The editor and the open graph are unchanged; please report this with the file.")


@contextmanager
def slot_errors() -> Iterator[list[BaseException]]:
    """Collect exceptions raised in Qt slots meanwhile (Qt hands them to sys.excepthook and
    carries on), so a caller can tell a half-done change from a done one."""
    caught: list[BaseException] = []
    previous = sys.excepthook
    sys.excepthook = lambda kind, value, tb: caught.append(value)
    try:
        yield caught
    finally:
        sys.excepthook = previous


class FileActions:
    """Files for one window's document."""

    def __init__(self, doc: Document, prompts: Prompts, recent: files.RecentFiles,
                 recovery_dir: Path, notify, after_open):
        self.doc, self.prompts, self.recent = doc, prompts, recent
        self.recovery_dir = recovery_dir
        self.notify = notify  # one-line status message
        self.after_open = after_open  # called after a graph was opened (fit the view, ...)
        self.autosaved: Path | None = None  # the autosave file this window wrote last
        self.trusted = TrustedFiles(recovery_dir)  # files the user let run their code
        self.data_access: Any = None  # asks about data outside the folder (shell/data_access)

    # -- new and open ----------------------------------------------------------------------

    def new(self) -> bool:
        if not self.doc.edit_guard() or not self.maybe_save():
            return False
        self.discard_autosave()
        self.doc.set_graph(Graph(registry=self.doc.graph.base_registry))
        self.after_open()
        return True

    def open(self, path: str | None = None) -> bool:
        if path is None:
            start = str(Path(self.doc.path).parent) if self.doc.path else str(Path.cwd())
            path = self.prompts.open_path(start)
            if not path:
                return False
        graph = self._read(path, "Cannot open the file")
        if graph is None:
            if not Path(path).exists():
                self.recent.remove(str(Path(path).resolve()))
            return False
        if not self.doc.edit_guard() or not self.maybe_save():
            return False
        restored = self._offer_autosave(path)
        self._ask_trust(restored or graph, path)
        self._ask_data_roots(restored or graph, path)
        if not self._replace(restored or graph, path, "Cannot open the file"):
            return False
        if restored is not None:
            self.doc.undo_stack.resetClean()  # restored work is unsaved work
            self.notify("Restored the autosaved copy; save to keep it.")
        self.recent.add(path)
        if graph.load_problems and restored is None:
            self.prompts.load_report(path, graph.load_problems)
        self.after_open()
        return True

    def _read(self, path: str | Path, title: str) -> Graph | None:
        """The graph in `path`, or None after telling the user why not."""
        try:
            return read_graph(path, self.doc.graph.base_registry)
        except Exception as e:  # whatever a file does to the reader, the editor stays up
            self.prompts.error(title, describe_failure(path, e))
            return None

    def _ask_trust(self, graph: Graph, path: str) -> None:
        """Let `graph` import the modules of the user's it names when the user trusts this
        file's content (asked once per content); otherwise validation lists those nodes."""
        grant = allowlist.granted(graph)  # shown name by name: trust grants just these
        if not grant:
            return
        # a callable that does more than compute is shown with what it can do, and a yes
        # grants it by its full name (remembered so, beside the modules)
        powers = sorted(allowlist.powerful(grant))
        names = [*grant, *powers]
        try:
            data = Path(path).read_bytes()
        except OSError:
            return  # gone since it was read: stays untrusted
        if self.trusted.knows(data, names) or self.prompts.trust_code(
                str(path), [allowlist.described(m, n) for m, n in grant.items()]):
            self.trusted.remember(data, names)
            allowlist.trust(graph, grant=powers)

    def _ask_data_roots(self, graph: Graph, path: str) -> None:
        """Let `graph` read the data files it names outside its folder when the user says
        so (asked on each open, naming them); otherwise validation reports those nodes."""
        found = confine.outside(graph)
        if found and self.data_access is not None:  # the window's: answers remembered
            self.data_access.ask(graph, str(path), found)
            return
        if found and self.prompts.allow_data(str(path), [
                f"{node}.{key}: {file}" for node, key, file in found]):
            graph.data_roots = confine.folders_for(found)

    def _replace(self, graph: Graph, path: str | None, title: str) -> bool:
        """Show `graph` in place of the open one; when a part of the window fails on it,
        put the open graph back as it was (undo history and unsaved changes too), say why."""
        old_graph, old_path = self.doc.graph, self.doc.path
        old_autosave, self.autosaved = self.autosaved, None
        with slot_errors() as caught:
            try:
                self.doc.set_graph(graph, path, keep_history=True)
            except Exception as e:
                caught.append(e)
        if not caught:
            self.doc.undo_stack.clear()
            if old_autosave is not None:
                old_autosave.unlink(missing_ok=True)
            return True
        with slot_errors():
            self.doc.set_graph(old_graph, old_path, keep_history=True)
        self.autosaved = old_autosave
        self.prompts.error(title, describe_failure(path or "the graph", caught[0]))
        return False

    def _offer_autosave(self, path: str) -> Graph | None:
        auto = files.pending_autosave(path, self.recovery_dir)
        if auto is None:
            return None
        if not self.prompts.restore_autosave(str(auto), files.describe_time(auto)):
            auto.unlink(missing_ok=True)
            return None
        graph = self._read(auto, "Cannot restore the autosave")
        if graph is None:
            return None  # kept: the user may want to look at it
        auto.unlink(missing_ok=True)
        return graph

    def recover_untitled(self) -> bool:
        """At start-up without a file: offer the autosave an untitled graph left behind."""
        orphans = files.orphaned_untitled(self.recovery_dir)
        if not orphans:
            return False
        newest = orphans[0]
        if not self.prompts.restore_autosave(str(newest), files.describe_time(newest)):
            newest.unlink(missing_ok=True)
            return False
        graph = self._read(newest, "Cannot restore the autosave")
        if graph is None or not self._replace(graph, None, "Cannot restore the autosave"):
            return False
        self.doc.undo_stack.resetClean()
        newest.unlink(missing_ok=True)
        self.after_open()
        return True

    # -- save ------------------------------------------------------------------------------

    def save(self) -> bool:
        if not self.doc.path:
            return self.save_as()
        return self._write(self.doc.path)

    def save_as(self) -> bool:
        suggested = self.doc.path or str(Path.cwd() / f"{self.doc.graph.name}.json")
        path = self.prompts.save_path(suggested)
        return self._write(path) if path else False

    def _write(self, path: str) -> bool:
        if self.doc.graph.name == "untitled":  # a new graph takes its file's name
            self.doc.graph.name = Path(path).stem
        try:
            save(self.doc.graph, path)
        except OSError as e:
            self.prompts.error("Cannot save", f"{path}: {e}")
            return False
        self.discard_autosave()
        if self.doc.graph.trusted:  # the user's own save of a trusted graph stays trusted
            with contextlib.suppress(OSError):
                self.trusted.remember(Path(path).read_bytes(), sorted(self.doc.graph.trusted))
        self.doc.graph.load_problems = []  # what the loader could not place is gone now
        self.doc.mark_saved(path)
        self.recent.add(path)
        self.notify(f"Saved {path}")
        return True

    def maybe_save(self) -> bool:
        """Offer to save unsaved changes; False when the user cancelled."""
        if not self.doc.dirty:
            return True
        answer = self.prompts.unsaved_changes(self.doc.title)
        if answer == "save":
            return self.save()
        return answer == "discard"

    # -- autosave --------------------------------------------------------------------------

    def autosave(self) -> Path | None:
        """Write the autosave when there are unsaved changes; returns where."""
        if not self.doc.dirty:
            return None
        target = files.autosave_path(self.doc.path, self.recovery_dir)
        if self.autosaved is not None and self.autosaved != target:
            self.autosaved.unlink(missing_ok=True)
        try:
            files.write_autosave(self.doc.graph, target)
        except OSError as e:
            self.notify(f"Autosave failed: {e}")
            return None
        self.autosaved = target
        return target

    def discard_autosave(self) -> None:
        if self.autosaved is not None:
            self.autosaved.unlink(missing_ok=True)
            self.autosaved = None
