"""Data outside the graph's folder, asked about wherever its path comes from.

Opening a file that names data outside its folder asks whether it may read there
(`FileActions._ask_data_roots`); typing such a path into a data block's field asks the same
question, as soon as the edit is made, instead of leaving a validation error that says no
one asked. Each answer is remembered for that graph file and those places (in the editor's
settings, by the file's absolute path), so the question is not asked again on the next
open or the next edit — as trusting a file's code is remembered.
"""

from __future__ import annotations

import json
from pathlib import Path

import shiboken6
from PySide6.QtCore import QTimer

from nodegraph.kinds import confine
from nodegraph.model.graph import GraphChanged

KEY = "data/answers"  # settings: {graph file: {"allowed": [folders], "refused": [files]}}


class DataAccess:
    """Asks (once per graph file and place) before a graph reads data outside its folder."""

    def __init__(self, window):
        self.window = window
        self._asking = False

    # -- what was answered ------------------------------------------------------------------

    def _answers(self) -> dict:
        try:
            got = json.loads(str(self.window.settings.value(KEY, "{}")))
        except ValueError:
            got = {}
        return got if isinstance(got, dict) else {}

    def _entry(self, path: str) -> dict:
        entry = self._answers().get(str(Path(path).resolve()), {})
        return entry if isinstance(entry, dict) else {}

    def _remember(self, path: str, allowed: list[Path], refused: list[Path]) -> None:
        answers = self._answers()
        key = str(Path(path).resolve())
        got = answers.get(key)
        entry: dict = got if isinstance(got, dict) else {}
        entry = {"allowed": sorted({*entry.get("allowed", []), *map(str, allowed)}),
                 "refused": sorted({*entry.get("refused", []), *map(str, refused)})}
        answers[key] = entry
        self.window.settings.setValue(KEY, json.dumps(answers))

    # -- asking -----------------------------------------------------------------------------

    def ask(self, graph, path: str | None, found: list[tuple[str, str, Path]]) -> None:
        """Allow `graph` the folders of `found` the user allows (asked once per file and
        place; the graph's own file `path` keys the answers, an untitled graph asks)."""
        entry = self._entry(path) if path else {}
        allowed = [Path(p) for p in entry.get("allowed", [])]
        refused = {str(p) for p in entry.get("refused", [])}
        roots = [*graph.data_roots]
        known = [f for f in found if _inside(f[2], allowed)]
        new = [f for f in found if f not in known and str(f[2]) not in refused]
        roots += [p for p in allowed if any(_inside(f[2], [p]) for f in known)]
        if new:
            said = self.window.prompts.allow_data(
                str(path or self.window.doc.title),
                [f"{node}.{key}: {file}" for node, key, file in new])
            folders = list(confine.folders_for(new))
            if said:
                roots += folders
            if path:
                self._remember(path, folders if said else [],
                               [] if said else [f[2] for f in new])
        if roots != list(graph.data_roots):
            graph.data_roots = tuple(dict.fromkeys(roots))

    def param_changed(self, event: GraphChanged) -> None:
        """A data block's path was typed: ask now (after the edit is done), then check."""
        if event.kind != "param_changed" or self._asking:
            return
        QTimer.singleShot(0, self._ask_after_edit)

    def _ask_after_edit(self) -> None:
        w = self.window
        if not shiboken6.isValid(w) or self._asking:
            return
        graph = w.doc.graph
        found = confine.outside(graph)
        if not found:
            return
        self._asking = True
        try:
            before = tuple(graph.data_roots)
            self.ask(graph, w.doc.path, found)
            if tuple(graph.data_roots) != before:
                w.validator.schedule()  # the error it gave goes
        finally:
            self._asking = False


def _inside(file: Path, folders: list[Path]) -> bool:
    return any(file == f or f in file.parents for f in folders)


def install(window) -> DataAccess:
    access = DataAccess(window)
    window.doc.changed.connect(access.param_changed)
    window.file_actions.data_access = access  # the open asks through it too (remembered)
    return access
