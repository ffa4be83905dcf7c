"""Which files outside a fuzz case were opened: the fuzzer's measure of an *escape*.

A damaged case may hold symlinks that point inside its own folder (allowed by design: a
graph's folder may link within itself) or outside it, to valid files kept in the samples'
``outside`` folder. Whether a link is followed is not what matters; whether a file outside
the allowed folders is *read* is. Readers open files from C++ too (pyarrow, `datasets`'
memory maps), which Python's audit hooks never see, so the kernel is asked: an inotify
watch on every file and folder under ``outside`` reports each open of a file there, by any
code of this process (and, with ``--jobs`` above 1, of the other workers: an open there is
an escape whichever case made it; the case it is charged to may then be a neighbour's).
Linux only; elsewhere `Watch` sees nothing and says so (`available`).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import struct
from pathlib import Path

IN_OPEN, IN_ISDIR, IN_NONBLOCK, IN_CLOEXEC = 0x20, 0x40000000, 0o4000, 0o2000000
_EVENT = struct.Struct("iIII")


class Watch:
    """An inotify watch on `root` (and every folder under it): `opened()` returns the files
    under it opened since the last call."""

    def __init__(self, root: Path):
        self.names: dict[int, Path] = {}
        self.fd = -1
        try:
            libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
            self.fd = libc.inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
        except (OSError, AttributeError):
            return
        if self.fd < 0:
            return
        for folder in [root, *(p for p in root.rglob("*") if p.is_dir())]:
            wd = libc.inotify_add_watch(self.fd, str(folder).encode(), IN_OPEN)
            if wd >= 0:
                self.names[wd] = folder

    @property
    def available(self) -> bool:
        return self.fd >= 0 and bool(self.names)

    def opened(self) -> list[Path]:
        """The files (not folders) under the root opened since the last call, in order."""
        found: list[Path] = []
        while self.fd >= 0:
            try:
                data = os.read(self.fd, 1 << 16)
            except BlockingIOError:
                break
            at = 0
            while at + _EVENT.size <= len(data):
                wd, mask, _, length = _EVENT.unpack_from(data, at)
                name = data[at + _EVENT.size:at + _EVENT.size + length].rstrip(b"\0")
                at += _EVENT.size + length
                if mask & IN_OPEN and not mask & IN_ISDIR and wd in self.names:
                    path = self.names[wd] / os.fsdecode(name) if name else self.names[wd]
                    if path not in found:
                        found.append(path)
        return found

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
