"""Where a graph's data and weights paths may lead: inside the graph's folder by default.

A graph file is data, and so are the paths in it. A relative data or weights path is read
from the graph's folder and, after symlinks are resolved, may not leave it (``../../etc``,
a symlink pointing out); an absolute path is taken only inside a folder the user allowed.
The user widens this, never the file: `allowing` adds folders (CLI ``--data-root DIR``,
`Graph.data_roots` in Python and the editor, which asks naming what `outside` finds) or
lifts the fence (``--trust``; `ANYWHERE`). Outside any graph
folder (a graph built in code, paths from the caller's script) nothing is fenced.

`inside` is checked by `nodegraph.kinds.dataset.data_path`, the one place data paths are
turned into files; `may_echo` tells a reader whether an error may quote a file's contents
(a CSV's column names): only for files inside the graph's folder or an allowed one.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from pathlib import Path

from nodegraph.kinds.urls import allowing as allowing_urls
from nodegraph.kinds.urls import is_url
from nodegraph.model.errors import NodegraphError
from nodegraph.model.sanitize import clean

ANYWHERE = "anywhere"

# folders the user allowed beyond the graph's own (resolved), or ANYWHERE
_allowed: ContextVar[tuple[Path, ...] | str] = ContextVar("nodegraph_data_roots", default=())

HINT = ("put the file in the graph's folder and name it relative to the graph, or allow its "
        "folder: --data-root DIR (or --trust) on the command line, graph.data_roots in Python; "
        "the editor asks on opening")


class OutsideDataRoot(NodegraphError):
    """A data or weights path that leads outside the folders the user allowed."""


@contextlib.contextmanager
def allowing(roots: tuple[str | Path, ...] | list | str) -> Iterator[None]:
    """Within this block, data may also come from `roots` (or from ANYWHERE); it adds to
    what an enclosing block allowed."""
    now = _allowed.get()
    urls = [] if roots == ANYWHERE else [str(r) for r in roots if is_url(r)]  # s3://
    if roots == ANYWHERE or now == ANYWHERE:
        new: tuple[Path, ...] | str = ANYWHERE
    else:
        new = (*now, *(Path(r).expanduser().resolve() for r in roots if not is_url(r)))
    token = _allowed.set(new)
    try:
        with allowing_urls(urls):
            yield
    finally:
        _allowed.reset(token)


def allowed_now() -> tuple[Path, ...] | str:
    """What the current context allows beyond a graph's folder."""
    return _allowed.get()


def _roots(folder: Path) -> list[Path]:
    extra = _allowed.get()
    return [folder.resolve(), *(extra if isinstance(extra, tuple) else ())]


def _within(path: Path, roots: list[Path]) -> bool:
    return any(path == r or path.is_relative_to(r) for r in roots)


def inside(given: str, path: Path, folder: Path | None) -> Path:
    """`path` (what `given` names, from `folder`) when it may be read, else OutsideDataRoot
    naming `given` and how to allow it. No folder, or ANYWHERE allowed: any path."""
    if folder is None or _allowed.get() == ANYWHERE:
        return path
    try:
        real = path.resolve()  # symlinks followed: a link inside pointing out is out
    except (OSError, RuntimeError) as e:  # a symlink loop
        raise NodegraphError(f"data path {clean(given)!r} cannot be resolved ({e})") from None
    if not _within(real, _roots(folder)):
        raise OutsideDataRoot(f"data path {clean(given)!r} leads outside the graph's folder "
                              f"{clean(folder)}; a graph file reads only files beside it "
                              f"unless you allow more ({HINT})")
    return path


def may_echo(path: Path, folder: Path | None) -> bool:
    """Whether an error may quote what `path` holds: not for a file outside the graph's
    folder and the folders allowed by name (ANYWHERE lets it be read, not shown)."""
    if folder is None:
        return True
    try:
        return _within(path.resolve(), _roots(folder))
    except (OSError, RuntimeError):
        return False


def outside(graph) -> list[tuple[str, str, Path]]:
    """(node, param, file) for each existing file or folder a data block of `graph` (or an
    imported graph's weights entry) names outside the graph's folder and its allowed
    folders: what the editor asks about before allowing (only names that exist count, so
    a delimiter or a column name is never taken for a path)."""
    if graph.folder is None or graph.data_roots == ANYWHERE:
        return []
    folder = Path(graph.folder)
    roots = [folder.resolve(), *(Path(r).resolve() for r in graph.data_roots
                                 if not is_url(r))]
    named = [(node.id, key, value) for node in graph if node.type in graph.registry
             and graph.registry.get(node.type).kind == "data" and isinstance(node.params, dict)
             for key, value in node.params.items()]
    imported = graph.extra.get("imported") if isinstance(graph.extra, dict) else None
    if isinstance(imported, dict):
        named.append(("(graph)", "imported.weights", imported.get("weights")))
    found = []
    for node, key, value in named:
        if not isinstance(value, str) or not value or "\x00" in value:
            continue
        path = Path(value).expanduser()
        try:
            real = (path if path.is_absolute() else folder / path).resolve()
            if real.exists() and not _within(real, roots):
                found.append((node, key, real))
        except (OSError, RuntimeError, ValueError):
            continue
    return found


def folders_for(found: list[tuple[str, str, Path]]) -> tuple[Path, ...]:
    """The folders that allow exactly these files (a folder named is allowed itself)."""
    return tuple(sorted({p if p.is_dir() else p.parent for _, _, p in found}))
