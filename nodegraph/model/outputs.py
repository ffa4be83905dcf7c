"""Files a run writes (metrics, probes, checkpoints, exports): checked before the work
starts, replaced whole or not at all, and named in every error.

A run can take hours; learning at its end that `--metrics-out` points under a regular file
throws the run away, so `check_file` and `check_folder` try the real thing now (make the
folder, create and remove a scratch file there). That fails exactly when the later write
would, also for root, whom permission bits do not stop. `AtomicFile` writes beside the
target and renames over it at the end, so a failed write (a full disk) leaves the old file
or none, never half of one, and no temp file. A target that exists but is no regular file
(``/dev/stdout``, a pipe) is written in place: renaming over it would replace the device.
"""

from __future__ import annotations

import errno
import os
import re
import stat
import tempfile
from pathlib import Path

from nodegraph.model.errors import NodegraphError

_REASONS = {
    errno.ENOSPC: "the disk is full",
    errno.EDQUOT: "the disk quota is used up",
    errno.EROFS: "the file system is read-only",
    errno.EACCES: "permission denied",
    errno.EPERM: "permission denied",
    errno.EISDIR: "it is a folder, not a file",
    errno.ENAMETOOLONG: "the name is too long",
}


class OutputError(NodegraphError):
    """A file or folder a run must write that cannot be written; names it and says why."""


def reason(e: OSError | Exception, path: Path | None = None) -> str:
    """What a failed write means, in words: a full disk, a file where a folder must be..."""
    code = _errno(e)
    if code in (errno.ENOTDIR, errno.EEXIST) and path is not None:
        blocker = _file_in_the_way(path)
        if blocker is not None:
            return f"{blocker} is a file, not a folder"
    if code == errno.ENOENT:
        return "no file can be created in that folder"
    if code in _REASONS:
        return _REASONS[code]
    return getattr(e, "strerror", None) or str(e)


def advice(e: OSError | Exception) -> str:
    """What to do about a failed write."""
    if _errno(e) in (errno.ENOSPC, errno.EDQUOT):
        return "free some space or choose a path on another disk"
    return "choose another path"


def cannot_write(what: str, path: Path, e: OSError | Exception) -> OutputError:
    return OutputError(f"{what} '{path}': cannot write there: {reason(e, path)}; "
                       f"{advice(e)} (nothing was written there)")


def _errno(e: OSError | Exception) -> int | None:
    code = getattr(e, "errno", None)
    if code is None:  # safetensors reports I/O failures as text: "... (os error 28) ..."
        found = re.search(r"os error (\d+)", str(e))
        code = int(found.group(1)) if found else None
    return code


def check_file(path: str | Path, what: str, special_ok: bool = False) -> Path:
    """Fail now, naming `what` (a flag, 'the metrics file'), when `path` could not be
    written later. `special_ok` allows a device or pipe (written in place)."""
    path = Path(path)
    if path.is_dir():
        raise OutputError(f"{what} '{path}': is a folder; give a file path, e.g. "
                          f"{path / 'out.json'}")
    if is_special(path):
        if special_ok:
            return path  # written in place; its folder gets no scratch file
        raise OutputError(f"{what} '{path}': is not a regular file (a device or a pipe); "
                          "give the path of a file")
    check_folder(path.parent, what, path)
    return path


def check_folder(folder: str | Path, what: str, target: Path | None = None) -> Path:
    """Prove a file can be created in `folder` (making it and its parents for the test,
    then removing those again), or fail naming `what` and `target` (default: the folder)."""
    folder = Path(folder)
    target = folder if target is None else target
    made = [p for p in (folder, *folder.parents) if not os.path.lexists(p)]
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, scratch = tempfile.mkstemp(prefix=".nodegraph-check.", dir=folder)
        os.close(fd)
        os.unlink(scratch)
    except OSError as e:
        raise cannot_write(what, target, e) from None
    finally:
        for part in made:  # deepest first; the real write makes them again
            try:
                part.rmdir()
            except OSError:
                break
    return folder


class AtomicFile:
    """A text file that replaces `path` on `commit` (temp file beside it, then a rename);
    `discard`, or any failed write, removes the temp file and leaves `path` as it was."""

    def __init__(self, path: str | Path, what: str):
        self.path, self.what, self.tmp = Path(path), what, None
        try:
            if is_special(self.path):
                self.file = open(self.path, "w", encoding="utf-8")  # noqa: SIM115 (commit closes)
            else:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                fd, tmp = tempfile.mkstemp(prefix=f".{self.path.name}.", suffix=".tmp",
                                           dir=self.path.parent)
                self.tmp = Path(tmp)
                self.file = os.fdopen(fd, "w", encoding="utf-8")
        except OSError as e:
            raise cannot_write(what, self.path, e) from None

    def write(self, text: str) -> None:
        if self.file.closed:
            return  # discarded after a failed write; the error was raised then
        try:
            self.file.write(text)
        except OSError as e:
            self.discard()
            raise cannot_write(self.what, self.path, e) from None

    def commit(self) -> None:
        """Make what was written the content of `path` (a no-op once discarded)."""
        if self.file.closed:
            return
        try:
            self.file.flush()
            if self.tmp is not None:
                os.fsync(self.file.fileno())
            self.file.close()
            if self.tmp is not None:
                os.replace(self.tmp, self.path)
        except OSError as e:
            self.discard()
            raise cannot_write(self.what, self.path, e) from None

    def discard(self) -> None:
        try:
            self.file.close()
        except OSError:
            pass  # the buffer could not be flushed: that data is being thrown away anyway
        if self.tmp is not None:
            self.tmp.unlink(missing_ok=True)


def write_text(path: str | Path, text: str, what: str) -> None:
    """Replace `path` with `text` whole, or raise an `OutputError` naming it and `what`."""
    try:
        atomic_write_text(Path(path), text)
    except OSError as e:
        raise cannot_write(what, Path(path), e) from None


def is_special(path: Path) -> bool:
    """An existing target that is no regular file or folder (a device, a pipe): written in
    place, since renaming over it would replace it."""
    try:
        return not stat.S_ISREG(path.stat().st_mode) and not path.is_dir()
    except OSError:
        return False


def _file_in_the_way(path: Path) -> Path | None:
    """The deepest existing part of `path` (itself included) that is not a folder."""
    for part in (path, *path.parents):
        if part.exists() or part.is_symlink():
            return None if part.is_dir() else part
    return None


def atomic_write_text(path: Path, text: str) -> None:
    """Replace `path` with `text` so that a crash leaves the old file or the new, never half.
    A target that is no regular file (``/dev/stdout``, a pipe) is written in place:
    renaming over it would replace the device."""
    if is_special(path):
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
