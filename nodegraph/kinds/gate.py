"""The one gate every file and folder a graph names passes on its way to a reader.

`nodegraph.kinds.confine` fences the path a param names; what a reader then finds inside
(an image in a class folder, a `.parquet` in a table folder, a shard matched by a glob, an
Arrow file a Hugging Face folder's state.json names) is a path too, and a symlink or a
FIFO there is as hostile as in the param. So every reader goes through this module for
*each* file and folder it opens, not once for the top folder:

- `check`: symlinks resolved, the result inside an allowed root (the graph's folder and
  the folders the user allowed, `confine`), a regular file (or a folder, when listing),
  no larger than the caller expects; the resolved path comes back.
- `open_file` / `read_bytes`: the checked path opened with ``O_NOFOLLOW | O_NONBLOCK`` (a
  link swapped in after the check is refused, a FIFO never blocks), then `fstat`-ed, so
  what is read is what was checked; `read_bytes` stops at the limit while reading.
- `listing`, `matching` (a glob, wildcards in any part) and `brace_range`
  (``x-{000..999}.tar``, at most `MAX_BRACE_NAMES` names, existence checked from one
  listing per folder): each entry that matches is checked as above; one that leads
  outside, is a FIFO, device or socket, or a broken link is refused by name, never
  skipped in silence.

Third-party readers (Pillow, pyarrow, `datasets`, `tokenizers`, tarfile, numpy) get only
a file object this module opened or, where a reader takes only paths (`pyarrow.dataset`),
paths this module returned with the filesystem of `arrow_files`, through which each open
finds the file checked (same device and inode, no link followed) or is refused. A
refusal is a `NodegraphError` naming the file as the graph or the listing names it, never
the target of a link that leads outside. With no graph folder (a graph built in code) or
the fence lifted (``--trust``), where a file may lie is not checked; its kind and size
still are.
`tests/test_file_gate.py` fails when code opens a path without this module.
"""

from __future__ import annotations

import contextlib
import fnmatch
import os
import re
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO, Literal

from nodegraph.kinds import confine
from nodegraph.kinds.dataset import data_folder, data_path
from nodegraph.model.errors import NodegraphError
from nodegraph.model.safe_read import FileRefused
from nodegraph.model.sanitize import clean

MAX_BRACE_NAMES = 100_000  # names one brace range may expand to
CHUNK = 1 << 20
BRACES = re.compile(r"\{(\d+)\.\.(\d+)\}")
_OPEN = (os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
         | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0))


def roots() -> list[Path] | None:
    """The folders files may lie in now (resolved), or None when nothing is fenced."""
    folder = data_folder()
    allowed = confine.allowed_now()
    if folder is None or allowed == confine.ANYWHERE:
        return None
    return [folder.resolve(), *(allowed if isinstance(allowed, tuple) else ())]


def _name(path: Path | str, shown: str | None) -> str:
    return clean(shown if shown is not None else str(path))


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISDIR, "a folder"), (stat.S_ISREG, "a file")):
        if test(mode):
            return name
    return "not a regular file"


def _resolve(path: Path, what: str, shown: str | None, fence: list[Path] | None) -> Path:
    """`path` with every symlink followed, inside `fence` (when fenced), or refused."""
    try:
        real = path.resolve(strict=True)
    except FileNotFoundError:
        gone = " (a link to nothing)" if path.is_symlink() else ""
        raise NodegraphError(f"{what} '{_name(path, shown)}' does not exist{gone}") from None
    except (OSError, RuntimeError) as e:  # a symlink loop, a name too long
        why = getattr(e, "strerror", None) or "a symlink loop"
        raise FileRefused(f"{what} '{_name(path, shown)}' cannot be resolved ({why})") from None
    if fence is not None and not any(real == r or real.is_relative_to(r) for r in fence):
        raise confine.OutsideDataRoot(
            f"{what} '{_name(path, shown)}' leads outside the graph's folder (a symlink "
            f"pointing out); a graph file reads only files beside it unless you allow more "
            f"({confine.HINT})")
    return real


def _refuse_kind(path: Path, what: str, shown: str | None, mode: int, want: str) -> FileRefused:
    return FileRefused(f"{what} '{_name(path, shown)}' is {_kind(mode)}; only a "
                       f"{'folder' if want == 'folder' else 'regular file'} is read here (a "
                       "symlink may point to one inside the allowed folders)")


def _too_big(path: Path, what: str, shown: str | None, limit: int) -> FileRefused:
    return FileRefused(f"{what} '{_name(path, shown)}' is larger than {limit:,} bytes, the "
                       "most nodegraph reads for one")


def check(path: Path, what: str, *, want: str = "file", limit: int | None = None,
          shown: str | None = None) -> Path:
    """The resolved `path` when it may be read: inside the allowed folders, a regular file
    (`want` "file") or a folder ("folder"), a file no larger than `limit` bytes; else a
    NodegraphError naming it as `shown` (default: `path` as given)."""
    return checked(path, what, want=want, limit=limit, shown=shown)[0]


def checked(path: Path, what: str, *, want: str = "file", limit: int | None = None,
            shown: str | None = None) -> tuple[Path, os.stat_result]:
    """`check`, with what `stat` said of the resolved path then: its device and inode are
    what a later open must find again (`open_file`, `arrow_files`)."""
    real = _resolve(Path(path), what, shown, roots())
    try:
        st = os.stat(real)
    except OSError as e:
        raise FileRefused(f"cannot read {what} '{_name(path, shown)}': {e.strerror}") from None
    ok = stat.S_ISDIR(st.st_mode) if want == "folder" else stat.S_ISREG(st.st_mode)
    if not ok:
        raise _refuse_kind(Path(path), what, shown, st.st_mode, want)
    if limit is not None and want != "folder" and st.st_size > limit:
        raise _too_big(Path(path), what, shown, limit)
    return real, st


def open_file(path: Path, what: str, limit: int | None = None,
              shown: str | None = None) -> BinaryIO:
    """`path` checked (`check`) and opened for reading without following a link or
    blocking, its descriptor checked again; the caller closes it."""
    real, was = checked(path, what, limit=limit, shown=shown)
    try:
        fd = os.open(real, _OPEN)
    except OSError as e:  # ELOOP: a link put there since the check
        raise FileRefused(f"cannot open {what} '{_name(path, shown)}': {e.strerror}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise _refuse_kind(Path(path), what, shown, st.st_mode, "file")
        if (st.st_dev, st.st_ino) != (was.st_dev, was.st_ino):
            raise FileRefused(f"{what} '{_name(path, shown)}' was replaced while it was "
                              "checked; nothing of it is read")
        if limit is not None and st.st_size > limit:
            raise _too_big(Path(path), what, shown, limit)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


@contextlib.contextmanager
def folder_opened(path: Path, what: str) -> Iterator[int]:
    """A descriptor of the folder `path`, checked (`check`, want "folder") and opened
    without following a link: names opened through it (`head_in`) are found in the folder
    that was checked, whatever is moved or linked in its place afterwards."""
    real, was = checked(path, what, want="folder")
    try:
        fd = os.open(real, _OPEN | getattr(os, "O_DIRECTORY", 0))
    except OSError as e:
        raise FileRefused(f"cannot list {what} folder '{path}': {e.strerror}") from None
    try:
        st = os.fstat(fd)
        if (st.st_dev, st.st_ino) != (was.st_dev, was.st_ino):
            raise FileRefused(f"{what} folder '{path}' was replaced while it was checked; "
                              "nothing of it is read")
        yield fd
    finally:
        os.close(fd)


def head_in(folder: int, name: str, limit: int, size: int) -> bytes | None:
    """The first `size` bytes of the file `name` directly in the open folder `folder`
    (`folder_opened`) when it is a plain case: a regular file, not a link, not empty, no
    larger than `limit`. Otherwise None, and the caller goes the checked way (`open_file`),
    which follows a link inside the fence and names why a file is refused. Costs one
    open, fstat and read: the folder index's reader of a million headers."""
    if "/" in name or name in ("", ".", ".."):
        return None
    try:
        fd = os.open(name, _OPEN, dir_fd=folder)  # gated: a plain name in a checked folder
    except OSError:  # a link (ELOOP), gone, not readable: the checked way says which
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or not 0 < st.st_size <= limit:
            return None
        return os.read(fd, size)
    except OSError:
        return None
    finally:
        os.close(fd)


def read_bytes(path: Path, what: str, limit: int, shown: str | None = None) -> bytes:
    """The bytes of `path` (`open_file`), refused once more than `limit` are read (a file
    that grows while read, or lies about its size)."""
    with open_file(path, what, limit, shown) as f:
        return read_bounded(f, limit, lambda: _too_big(Path(path), what, shown, limit))


def read_bounded(f, limit: int, refuse: Callable[[], Exception]) -> bytes:
    """Everything `f` gives, stopping with `refuse()` past `limit` bytes (never more than
    one chunk beyond it held)."""
    chunks, total = [], 0
    while chunk := f.read(min(CHUNK, limit + 1 - total)):
        chunks.append(chunk)
        total += len(chunk)
        if total > limit:
            raise refuse()
    return b"".join(chunks)


def _entry_kind(entry: os.DirEntry, what: str, fence: list[Path] | None) -> str:
    """"file" or "folder" for a listed entry (a link followed and fenced), else refused."""
    path = Path(entry.path)
    if not entry.is_symlink():
        if entry.is_file(follow_symlinks=False):
            return "file"
        if entry.is_dir(follow_symlinks=False):
            return "folder"
        mode = entry.stat(follow_symlinks=False).st_mode
        raise _refuse_kind(path, what, None, mode, "file")
    real = _resolve(path, what, None, fence)
    mode = os.stat(real).st_mode
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISDIR(mode):
        return "folder"
    raise _refuse_kind(path, what, None, mode, "file")


def _scan(folder: Path, what: str) -> list[os.DirEntry]:
    try:
        with os.scandir(folder) as entries:
            return list(entries)
    except OSError as e:
        raise FileRefused(f"cannot list {what} '{clean(folder)}': {e.strerror}") from None


def listing(folder: Path, what: str, match: Callable[[str], bool] = lambda name: True, *,
            want: str = "file", recursive: bool = False, hidden: bool = False,
            skip: tuple[str, ...] = ()) -> list[Path]:
    """The entries of `folder` (itself checked as a folder) whose name `match`es, of kind
    `want` ("file" or "folder"), sorted; each checked by `_entry_kind` (a link that leads
    outside, a FIFO or device whose name matches is refused). `recursive` walks the
    subfolders too (not those behind a symlink, as `Path.rglob` does not); names starting
    with "." are left out unless `hidden`, and so are names starting with one of `skip`.
    The paths come back as listed (under `folder`), not resolved."""
    check(folder, what, want="folder")
    fence = roots()
    found: list[Path] = []
    todo = [folder]
    while todo:
        here = todo.pop()
        for entry in _scan(here, what):
            name = entry.name
            if (name.startswith(".") and not hidden) or (skip and name.startswith(skip)):
                continue
            walk = recursive and entry.is_dir(follow_symlinks=False)
            if not match(name) and not walk:
                continue
            kind = _entry_kind(entry, what, fence)
            if walk:
                todo.append(Path(entry.path))
            if kind == want and match(name):
                found.append(Path(entry.path))
    return sorted(found)


def matching(pattern: str, what: str) -> list[Path]:
    """The files a glob names (``*``, ``?``, ``[...]`` in any part, as `glob.glob` reads it,
    relative to the graph's folder): each folder on the way and each file checked, sorted."""
    given = Path(pattern).expanduser()
    parts = given.parts
    first = next(i for i, part in enumerate(parts) if _wild(part))
    start = data_path(str(Path(*parts[:first]))) if first else data_path(".")
    here = [start]
    for k, part in enumerate(parts[first:]):
        last = first + k == len(parts) - 1
        nxt: list[Path] = []
        for folder in here:
            if not _wild(part):
                nxt.append(folder / part)
                continue
            nxt += listing(folder, what, _matcher(part),
                           want="file" if last else "folder", hidden=part.startswith("."))
        here = nxt
    if not _wild(parts[-1]):  # a literal file name after the wildcards: not listed yet
        for f in here:
            check(f, what)
    return sorted(here)


def _matcher(pattern: str) -> Callable[[str], bool]:
    return lambda name: fnmatch.fnmatchcase(name, pattern)


def _wild(part: str) -> bool:
    return any(c in part for c in "*?[")


def brace_range(pattern: str, what: str) -> list[Path] | None:
    """The files a WebDataset brace range names (``train-{000..009}.tar``: numbers padded
    to the width of the first), or None when `pattern` holds none. At most
    `MAX_BRACE_NAMES` names; which exist is read from one listing of each folder (not a
    look-up per name); each checked as `listing` checks its entries."""
    m = BRACES.search(pattern)
    if m is None:
        return None
    lo, hi = int(m.group(1)), int(m.group(2))
    count = hi - lo + 1
    if count < 1:
        raise NodegraphError(f"{what} range '{clean(pattern)}' runs backwards ({lo} > {hi})")
    if count > MAX_BRACE_NAMES:
        raise NodegraphError(f"{what} range '{clean(pattern)}' names {count:,} files; a range "
                             f"may name at most {MAX_BRACE_NAMES:,} (use a folder or a glob)")
    width = len(m.group(1))
    head, tail = pattern[:m.start()], pattern[m.end():]
    names = [head + str(i).zfill(width) + tail for i in range(lo, hi + 1)]
    if any(BRACES.search(n) or "/" in n[len(head):] for n in names[:1]):
        raise NodegraphError(f"{what} range '{clean(pattern)}': one brace range, in the file "
                             "name, is read")
    parent = data_path(str(Path(names[0]).parent) or ".")
    check(parent, what, want="folder")
    present = {e.name: e for e in _scan(parent, what)}
    fence = roots()
    found = []
    for name in names:
        base = Path(name).name
        entry = present.get(base)
        if entry is None:
            raise NodegraphError(f"{what} '{clean(parent / base)}' (from '{clean(pattern)}') "
                                 "does not exist")
        if _entry_kind(entry, what, fence) != "file":
            raise FileRefused(f"{what} '{clean(entry.path)}' is a folder, not a file")
        found.append(Path(entry.path))
    return found


def arrow_files(paths: list[Path], what: str) -> tuple[list[str], object]:
    """`paths` checked (`checked`), for a reader that takes only paths (`pyarrow.dataset`):
    the resolved paths, and a `pyarrow.fs` filesystem that opens only those, as the gate
    opens a file, and only while each is the file checked (same device and inode:
    `nodegraph.kinds.gate_arrow`)."""
    from nodegraph.kinds import gate_arrow

    found = {str(real): (st.st_dev, st.st_ino)
             for real, st in (checked(p, what) for p in paths)}
    return list(found), gate_arrow.filesystem(found, what)


def memmap(path: Path, what: str, dtype, offset: int, shape: tuple[int, ...],
           order: Literal["C", "F"] = "C"):
    """A read-only `np.memmap` of `path` opened through `open_file` (numpy maps the checked
    descriptor, never the name again)."""
    import numpy as np

    with open_file(path, what) as f:
        return np.memmap(f, dtype, "r", offset, shape, order)


def map_npy(path: Path, what: str):
    """The array of an .npy file memory-mapped (`np.load(mmap_mode="r")` through the gate);
    an object array, which cannot be mapped, is refused as np.load refuses it."""
    import numpy as np

    with open_file(path, what) as f:
        version = np.lib.format.read_magic(f)
        read = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                else np.lib.format.read_array_header_2_0)
        shape, fortran, dtype = read(f)
        if dtype.hasobject:
            raise ValueError("Array can't be memory-mapped: Python objects in dtype.")
        offset = f.tell()
        return np.memmap(f, dtype, "r", offset, shape, "F" if fortran else "C")
