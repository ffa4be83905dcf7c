"""File menu actions: new, open, save, recent files, examples, autosave and recovery.

Opening never loses work: unsaved changes are offered for saving first, a newer autosave
is offered for restoring, and a damaged file opens with what could be read and a report of
the rest. Saving is atomic (the core writes a temp file and renames it) and clears the
autosave.
"""

from __future__ import annotations

from pathlib import Path

from nodegraph.errors import GraphFileError
from nodegraph.fileformat import load, save
from nodegraph.graph import Graph
from nodegraph.gui import files
from nodegraph.gui.document import Document
from nodegraph.gui.prompts import Prompts

AUTOSAVE_MS = 30_000


class FileActions:
    """Files for one window's document."""

    def __init__(self, doc: Document, prompts: Prompts, recent: files.RecentFiles,
                 recovery_dir: Path, notify, after_open):
        self.doc, self.prompts, self.recent = doc, prompts, recent
        self.recovery_dir = recovery_dir
        self.notify = notify  # one-line status message
        self.after_open = after_open  # called after a graph was opened (fit the view, ...)
        self.autosaved: Path | None = None  # the autosave file this window wrote last

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
        if not self.doc.edit_guard() or not self.maybe_save():
            return False
        try:
            graph = load(path, self.doc.graph.base_registry)
        except GraphFileError as e:
            self.prompts.error("Cannot open the file", str(e))
            self.recent.remove(str(Path(path).resolve()))
            return False
        restored = self._offer_autosave(path)
        self.discard_autosave()
        self.doc.set_graph(restored or graph, path)
        if restored is not None:
            self.doc.undo_stack.resetClean()  # restored work is unsaved work
            self.notify("Restored the autosaved copy; save to keep it.")
        self.recent.add(path)
        if graph.load_problems and restored is None:
            self.prompts.load_report(path, graph.load_problems)
        self.after_open()
        return True

    def _offer_autosave(self, path: str) -> Graph | None:
        auto = files.pending_autosave(path)
        if auto is None:
            return None
        if not self.prompts.restore_autosave(str(auto), files.describe_time(auto)):
            auto.unlink(missing_ok=True)
            return None
        try:
            graph = load(auto, self.doc.graph.base_registry)
        except GraphFileError as e:
            self.prompts.error("Cannot restore the autosave", str(e))
            return None
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
        try:
            graph = load(newest, self.doc.graph.base_registry)
        except GraphFileError as e:
            self.prompts.error("Cannot restore the autosave", str(e))
            return False
        self.doc.set_graph(graph)
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
        return bool(path) and self._write(path)

    def _write(self, path: str) -> bool:
        try:
            save(self.doc.graph, path)
        except OSError as e:
            self.prompts.error("Cannot save", f"{path}: {e}")
            return False
        self.discard_autosave()
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
