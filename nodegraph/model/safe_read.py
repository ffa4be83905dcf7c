"""Reading a file a graph names: regular files only, and never more than a limit.

A graph file, a weights file or a data file named by a graph may be a symlink to
``/dev/zero``, a FIFO that blocks its reader forever, or a device; `os.stat` sizes say
nothing about those, and a read of "the whole file" never ends. Everything nodegraph reads
on a file's say-so goes through `require_regular` (for libraries that open the path
themselves: safetensors, numpy, pyarrow) or `read_regular` (which opens without blocking,
checks the opened descriptor, and stops at the limit while reading, so a file that grows
or lies about its size is still refused).
"""

from __future__ import annotations

import os
import stat

from nodegraph.model.errors import NodegraphError

CHUNK = 1 << 20


class FileRefused(NodegraphError):
    """A file a graph names that nodegraph will not read: not a regular file, or too big."""


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISDIR, "a folder")):
        if test(mode):
            return name
    return "not a regular file"


def _refuse(path: str | os.PathLike, what: str, mode: int) -> FileRefused:
    from nodegraph.model.sanitize import clean

    return FileRefused(f"{what} {clean(str(path))!r} is {_kind(mode)}; only a regular file "
                       "is read (a symlink may point to one)")


def require_regular(path: str | os.PathLike, what: str) -> None:
    """Refuse `path` (after following symlinks) unless it is a regular file; a missing file
    passes, so that the reader's own "no such file" message says so."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return
    if not stat.S_ISREG(mode):
        raise _refuse(path, what, mode)


def read_regular(path: str | os.PathLike, limit: int, what: str) -> bytes:
    """The bytes of the regular file `path`, refused when larger than `limit` bytes as read
    (OSError as the system raises it: FileNotFoundError, PermissionError...)."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            if stat.S_ISDIR(mode):
                raise IsADirectoryError(21, "Is a directory", str(path))
            raise _refuse(path, what, mode)
        chunks, total = [], 0
        while chunk := os.read(fd, min(CHUNK, limit + 1 - total)):
            chunks.append(chunk)
            total += len(chunk)
            if total > limit:
                from nodegraph.model.sanitize import clean

                raise FileRefused(f"{what} {clean(str(path))!r} is larger than "
                                  f"{limit:,} bytes, the most nodegraph reads for one")
        return b"".join(chunks)
    finally:
        os.close(fd)
