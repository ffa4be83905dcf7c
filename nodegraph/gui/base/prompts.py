"""The questions the editor asks the user, in one replaceable object.

Every modal dialog goes through a `Prompts` method, so tests (and scripted use) swap in an
object that answers without a dialog, and the wording of every question lives in one place.
"""

from __future__ import annotations

import html

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QFileDialog, QInputDialog, QMessageBox, QWidget

from nodegraph.model.errors import Problem
from nodegraph.model.sanitize import clean_lines

FILE_FILTER = "Graph files (*.json);;All files (*)"


class Prompts:
    """Dialogs shown over `parent`."""

    def __init__(self, parent: QWidget | None = None):
        self.parent = parent

    def unsaved_changes(self, name: str) -> str:
        """'save', 'discard' or 'cancel'."""
        box = QMessageBox(QMessageBox.Icon.Warning, "Unsaved changes",
                          f"{name} has unsaved changes. Save them first?",
                          QMessageBox.StandardButton.Save | QMessageBox.StandardButton.Discard
                          | QMessageBox.StandardButton.Cancel, self.parent)
        answer = box.exec()
        return {QMessageBox.StandardButton.Save: "save",
                QMessageBox.StandardButton.Discard: "discard"}.get(
            QMessageBox.StandardButton(answer), "cancel")

    def stop_run_to_edit(self) -> str:
        """'stop' (stop the run, then edit), 'keep' (edit; the run goes on) or 'cancel'."""
        box = QMessageBox(QMessageBox.Icon.Question, "Training is running",
                          "The graph is training. Stop the run before changing it?\n\n"
                          "If training goes on, it keeps using the graph as it was when it "
                          "started.", parent=self.parent)
        stop = box.addButton("Stop training", QMessageBox.ButtonRole.AcceptRole)
        keep = box.addButton("Edit, keep training", QMessageBox.ButtonRole.ActionRole)
        box.addButton(QMessageBox.StandardButton.Cancel)
        box.exec()
        clicked = box.clickedButton()
        return "stop" if clicked is stop else "keep" if clicked is keep else "cancel"

    def restore_autosave(self, path: str, when: str) -> bool:
        answer = QMessageBox.question(
            self.parent, "Recover unsaved work",
            f"An autosaved copy from {when} was found, newer than the last save:\n{path}\n\n"
            "The editor may have closed without saving. Restore it?")
        return answer == QMessageBox.StandardButton.Yes

    def trust_code(self, path: str, modules: list[str]) -> bool:
        """Whether the file at `path` may import and run these modules of the user's."""
        names = clean_lines(", ".join(modules))
        # `allowlist.described` marks a name that does more than compute: [writes files]
        powers = ("\n\nNames marked [...] do more than compute: they read or write files, "
                  "unpickle (which runs any code stored in the file), run processes or "
                  "open the network, as marked. Trusting the file grants them too."
                  if "[" in names else "")
        box = QMessageBox(QMessageBox.Icon.Warning, "This file runs code",
                          f"{clean_lines(path)} runs code from the module(s) {names}, and "
                          "only those names (nothing they import): Python outside the "
                          f"tensor functions and torch.nn modules a graph file may name.{powers}"
                          "\n\n"
                          "Checking, previewing or training it imports and runs that code "
                          "with your permissions. Trust it only if you trust where it came "
                          "from. Until you do, those nodes are listed as problems and nothing "
                          "is imported.\n\nThe answer is remembered for this file as it is "
                          "now; a changed file, or any change to those modules' packages, is "
                          "asked about again.",
                          parent=self.parent)
        box.setTextFormat(Qt.TextFormat.PlainText)  # module names come from the file
        trust = box.addButton("Trust and run these", QMessageBox.ButtonRole.AcceptRole)
        box.setDefaultButton(box.addButton("Don't trust", QMessageBox.ButtonRole.RejectRole))
        box.exec()
        return box.clickedButton() is trust

    def allow_data(self, path: str, files: list[str]) -> bool:
        """Whether the graph at `path` may read these files outside its folder."""
        box = QMessageBox(QMessageBox.Icon.Warning, "This file reads data from elsewhere",
                          f"{clean_lines(path)} names files outside its folder:\n\n"
                          + clean_lines("\n".join(files[:20]))
                          + (f"\n… and {len(files) - 20} more" if len(files) > 20 else "")
                          + "\n\nAllow it to read them (their folders, for this session)? "
                          "Until you do, those blocks are listed as problems and nothing "
                          "outside the graph's folder is read.", parent=self.parent)
        box.setTextFormat(Qt.TextFormat.PlainText)
        allow = box.addButton("Allow", QMessageBox.ButtonRole.AcceptRole)
        box.setDefaultButton(box.addButton("Don't allow", QMessageBox.ButtonRole.RejectRole))
        box.exec()
        return box.clickedButton() is allow

    def load_report(self, path: str, problems: list[Problem]) -> None:
        """What the loader could not place, shown once when a damaged file opens."""
        lines = "".join(f"<li>{html.escape(clean_lines(p))}</li>" for p in problems[:30])
        more = f"<p>… and {len(problems) - 30} more</p>" if len(problems) > 30 else ""
        QMessageBox.warning(self.parent, "Opened with problems",
                            f"<p>{html.escape(clean_lines(path))} opened, but not everything "
                            f"in it could be used:</p><ul>{lines}</ul>{more}<p>What could be "
                            "read is on the canvas; the problems list shows what needs fixing.</p>")

    def group_name(self, suggested: str) -> str | None:
        """The name of a new group (its block type is group.NAME); None cancels."""
        name, ok = QInputDialog.getText(self.parent, "Group selection",
                                        "Name of the new group (letters, digits and _):",
                                        text=suggested)
        return name.strip() if ok and name.strip() else None

    def error(self, title: str, text: str) -> None:
        """`text` (often from a file) shown as written: its markup escaped (Qt would render
        a message that looks like HTML), its control characters visible."""
        shown = html.escape(clean_lines(text)).replace("\n", "<br>")
        QMessageBox.critical(self.parent, title, f"<p>{shown}</p>")

    def open_path(self, directory: str) -> str | None:
        path, _ = QFileDialog.getOpenFileName(self.parent, "Open graph", directory, FILE_FILTER)
        return path or None

    def save_path(self, suggested: str) -> str | None:
        path, _ = QFileDialog.getSaveFileName(self.parent, "Save graph as", suggested,
                                              FILE_FILTER)
        if path and not path.endswith(".json"):
            path += ".json"
        return path or None

    def model_path(self, suggested: str) -> str | None:
        path, _ = QFileDialog.getSaveFileName(self.parent, "Save trained model", suggested,
                                              "nodegraph model (*.ngz)")
        if path and not path.endswith(".ngz"):
            path += ".ngz"
        return path or None

    def image_path(self, suggested: str) -> str | None:
        path, _ = QFileDialog.getSaveFileName(self.parent, "Export image", suggested,
                                              "PNG image (*.png);;SVG vector image (*.svg)")
        return path or None
