"""Where a graph file may have a run write: inside the graph's own folder, nowhere else.

A graph file names one place to write, `training.log_dir` (TensorBoard event files); the
other outputs of a run (checkpoints, probe frames, metrics, MLflow) are named only on the
command line or in Python. Like a data path (`nodegraph.kinds.confine`), a file's log
folder is taken from the graph's folder when relative and, after symlinks are resolved,
may not leave it: ``../elsewhere`` or ``/home/you/.config`` from a file someone sent is
refused, naming the setting and how to write there on purpose (``--log-dir DIR``, the
``log_dir=`` argument), which are the user's and are never fenced. Reading from a folder
(``--data-root``) does not allow writing to it; only ``--trust`` (`confine.ANYWHERE`),
under which the file's code may do anything anyway, lifts the fence. A graph built in
code (no folder), or a value set since the file was read (`Graph.file_training` keeps what
the file said), writes where its settings say, from the current directory.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from nodegraph.kinds import confine
from nodegraph.model.errors import NodegraphError
from nodegraph.model.sanitize import clean


class OutsideGraphFolder(NodegraphError):
    """A folder a graph file asks a run to write to that lies outside the graph's folder."""


def file_folder(graph: Any, setting: str, given: Any) -> Path:
    """The folder `setting` (``training.NAME``) of `graph`, `given`, names for writing.
    The file's own value (what `graph.file_training` holds) is taken from the graph's
    folder when relative, and must lie inside it, else OutsideGraphFolder; a value the
    user set since (in Python, the editor) is theirs, taken as it is."""
    if not isinstance(given, str) or not given or "\x00" in given:
        raise NodegraphError(f"{setting} must be the text of a folder, got {given!r:.80}")
    path = Path(given).expanduser()
    loaded = graph.file_training
    if graph.folder is None or loaded is None or loaded.get(setting.rpartition(".")[2]) \
            != given:
        return path
    folder = Path(graph.folder)
    path = path if path.is_absolute() else folder / path
    if graph.data_roots == confine.ANYWHERE:
        return path
    try:
        real, home = path.resolve(), folder.resolve()  # a link inside pointing out is out
    except (OSError, RuntimeError) as e:  # a symlink loop
        raise NodegraphError(f"{setting} {clean(given)!r} cannot be resolved ({e})") from None
    if real != home and not real.is_relative_to(home):
        raise OutsideGraphFolder(
            f"{setting} {clean(given)!r} leads outside the graph's folder {clean(home)}; a "
            "graph file writes only beside itself. To write there, say so yourself: "
            "--log-dir DIR on the command line, log_dir= in Python")
    return path
