"""A read-only pyarrow filesystem that opens only the files the gate checked, as checked.

`pyarrow.dataset` takes paths, not file objects, and opens each file when it reads it
(its schema first, then each row group, in each DataLoader worker): a file swapped for a
symlink or another file between the gate's check and that open would be read. Given this
filesystem, every open pyarrow makes goes through `GatedFiles.open_input_file`: the path
must be one the gate checked, it is opened with ``O_NOFOLLOW | O_NONBLOCK`` (no link
followed, no FIFO waited on) and its `fstat` device and inode must equal those recorded
when the gate checked it; anything else is refused naming the file. pyarrow reads the
descriptor so opened (`pyarrow.PythonFile`), never the name again. Listing and file
information are the local filesystem's (pyarrow asks them of the paths it was given).
"""

from __future__ import annotations

import os
import stat

import pyarrow as pa
import pyarrow.fs as pafs

from nodegraph.model.safe_read import FileRefused
from nodegraph.model.sanitize import clean

_OPEN = (os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
         | getattr(os, "O_CLOEXEC", 0))


class GatedFiles(pafs.FileSystemHandler):
    """Opens `files` (resolved path -> (device, inode) when checked) and nothing else."""

    def __init__(self, files: dict[str, tuple[int, int]], what: str = "table file"):
        self.files, self.what = dict(files), what
        self.local = pafs.LocalFileSystem()

    def __reduce__(self):  # pickled into DataLoader workers with the dataset
        return GatedFiles, (self.files, self.what)

    def __eq__(self, other) -> bool:
        return isinstance(other, GatedFiles) and other.files == self.files

    def __ne__(self, other) -> bool:
        return not self == other

    def get_type_name(self) -> str:
        return "nodegraph-gated"

    def normalize_path(self, path: str) -> str:
        return path

    def get_file_info(self, paths):
        return self.local.get_file_info(paths)

    def get_file_info_selector(self, selector):
        return self.local.get_file_info(selector)

    def open_input_file(self, path: str):
        return pa.PythonFile(self._open(path), mode="r")

    def open_input_stream(self, path: str):
        return pa.PythonFile(self._open(path), mode="r")

    def _open(self, path: str):
        shown = clean(path)
        if path not in self.files:
            raise FileRefused(f"{self.what} '{shown}' was not checked by the file gate")
        try:
            fd = os.open(path, _OPEN)
        except OSError as e:  # ELOOP: a symlink put there since the check
            raise FileRefused(f"cannot open {self.what} '{shown}': {e.strerror} (it changed "
                              "since it was checked)") from None
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or (st.st_dev, st.st_ino) != self.files[path]:
                raise FileRefused(f"{self.what} '{shown}' is not the file the gate checked "
                                  "(it was replaced since); nothing of it is read")
            return os.fdopen(fd, "rb")
        except BaseException:
            os.close(fd)
            raise

    def _read_only(self, *args, **kwargs):
        raise OSError("nodegraph reads tables; it never writes through this filesystem")

    create_dir = delete_dir = delete_dir_contents = delete_root_dir_contents = _read_only
    delete_file = move = copy_file = open_output_stream = open_append_stream = _read_only


def filesystem(files: dict[str, tuple[int, int]], what: str) -> pafs.PyFileSystem:
    """A filesystem for pyarrow that opens exactly `files` (resolved path -> device and
    inode, as `nodegraph.kinds.gate.checked` found them), each only while it is that file."""
    return pafs.PyFileSystem(GatedFiles(files, what))
