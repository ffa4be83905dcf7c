"""Reading a `.ngz` archive as hostile: the file, its members, and their tensors, bounded.

A saved model may come from anyone. Before `zipfile` sees it, the path is opened without
blocking and the opened descriptor must be a regular file (a FIFO would hang the reader, a
symlink to ``/dev/zero`` would feed it forever); `zipfile` then reads that descriptor, not
the path again. The archive may list only the known members, once each. A member is read
in chunks and refused as soon as it passes its bound — what its entry declares, and the
member's own limit — never read whole and checked after. A safetensors member is read
header first: its tensors' names, dtypes and shapes must be those the compiled graph
expects (`TensorSpec`), so the data it may hold is known, and bounded, before a byte of it
is read. Every refusal is a `NodegraphError` naming the file and the member.
"""

from __future__ import annotations

import json
import os
import stat
import struct
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import torch

from nodegraph.model.errors import NodegraphError, first_line
from nodegraph.model.outputs import reason

CHUNK = 1 << 20
MAX_HEADER = 16 << 20  # a safetensors header: names, dtypes, shapes (~100 bytes a tensor)

DTYPES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1,
          "U8": 1, "BOOL": 1, "F8_E4M3": 1, "F8_E5M2": 1, "U16": 2, "U32": 4, "U64": 8}


def damaged(path: Path, member: str, problem: str) -> NodegraphError:
    return NodegraphError(f"model file '{path}': member {member} is damaged: {problem}")


def open_regular(path: Path) -> IO[bytes]:
    """`path` opened for reading, refused unless it is a regular file (after symlinks):
    opened without blocking, then the descriptor checked, so a FIFO or a device is never
    read and a file swapped in between is the one checked."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise NodegraphError(f"model file '{path}' does not exist") from None
    except IsADirectoryError:
        raise NodegraphError(f"model file '{path}' is a folder, not a saved model") from None
    except OSError as e:
        raise NodegraphError(f"cannot read model file '{path}': {reason(e)}") from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        kind = ("a folder" if stat.S_ISDIR(mode) else "a FIFO (named pipe)"
                if stat.S_ISFIFO(mode) else "a device" if stat.S_ISCHR(mode) or
                stat.S_ISBLK(mode) else "a socket" if stat.S_ISSOCK(mode)
                else "not a regular file")
        raise NodegraphError(f"model file '{path}' is {kind}, not a saved model; only a "
                             "regular file is read (a symlink may point to one)")
    os.set_blocking(fd, True)
    return os.fdopen(fd, "rb")


def read_member(path: Path, zf: zipfile.ZipFile, info: zipfile.ZipInfo, limit: int,
                why: str) -> bytes:
    """The bytes of member `info`, read in chunks and refused the moment they pass
    `limit` (or what the entry declares); `why` says what the limit is and how to raise it."""
    name = info.filename
    if info.file_size > limit:
        raise damaged(path, name, f"it declares {info.file_size:,} bytes unpacked, more "
                      f"than the {limit:,} allowed ({why})")
    with _opened(path, zf, info) as f:
        data = _bounded(path, name, f, min(limit, info.file_size), why)
    return bytes(data)


@dataclass(frozen=True)
class TensorSpec:
    """What one tensor of a member may be: its dtype names (safetensors' words, None: any)
    and its shape (None: any shape of at most `most` elements)."""

    dtypes: tuple[str, ...] | None
    shape: tuple[int, ...] | None
    most: int = 0


def read_tensors(path: Path, zf: zipfile.ZipFile, info: zipfile.ZipInfo,
                 spec: Callable[[str], TensorSpec | str], limit: int
                 ) -> dict[str, torch.Tensor]:
    """The tensors of safetensors member `info`: the header read first and each entry held
    to `spec(name)` (a `TensorSpec`, or a string saying why the name cannot be there), so
    the data is bounded before it is read; then exactly that much data, in chunks."""
    name = info.filename
    if info.file_size > limit:
        raise damaged(path, name, f"it declares {info.file_size:,} bytes unpacked, more than "
                      f"the {limit:,} allowed (load_model(max_bytes=...) raises it)")
    with _opened(path, zf, info) as f:
        head = _exactly(path, name, f, 8, "its header size")
        (size,) = struct.unpack("<Q", head)
        if size > min(MAX_HEADER, info.file_size):
            raise damaged(path, name, f"its header claims {size:,} bytes (at most "
                          f"{MAX_HEADER:,}, and no more than the member)")
        header = _exactly(path, name, f, size, "its header")
        length = _check_header(path, name, header, spec)
        if 8 + size + length != info.file_size:
            raise damaged(path, name, f"its header describes {length:,} bytes of data but the "
                          f"member declares {info.file_size - 8 - size:,}")
        buffer = bytearray(8 + size + length)
        buffer[:8], buffer[8:8 + size] = head, header
        view = memoryview(buffer)
        done = 8 + size
        while done < len(buffer):
            got = f.readinto(view[done:done + CHUNK])
            if not got:
                raise damaged(path, name, "it is cut short (less data than its header says)")
            done += got
        if f.read(1):
            raise damaged(path, name, "it holds more data than its header says")
    from safetensors import SafetensorError
    from safetensors.torch import load as load_tensors

    try:
        return load_tensors(bytes(buffer))
    except (SafetensorError, ValueError, TypeError, RuntimeError) as e:
        raise damaged(path, name, f"it is not a valid safetensors file ({first_line(e)})"
                      ) from None


def _check_header(path: Path, name: str, raw: bytes,
                  spec: Callable[[str], TensorSpec | str]) -> int:
    """The data length the header `raw` describes, every entry checked against `spec`."""
    try:
        header = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
        raise damaged(path, name, "its header is not JSON text") from None
    if not isinstance(header, dict):
        raise damaged(path, name, "its header is not a JSON object")
    end = 0
    spans = []
    for key, entry in header.items():
        if key == "__metadata__":
            continue
        where = f"tensor {key[:80]!r}"
        if not isinstance(entry, dict) or set(entry) != {"dtype", "shape", "data_offsets"}:
            raise damaged(path, name, f"{where} lacks dtype, shape or data_offsets")
        dtype, shape, offsets = entry["dtype"], entry["shape"], entry["data_offsets"]
        if dtype not in DTYPES or not _ints(shape) or not _ints(offsets) or len(offsets) != 2:
            raise damaged(path, name, f"{where} has a malformed dtype, shape or offsets")
        allowed = spec(key)
        if isinstance(allowed, str):
            raise damaged(path, name, f"{where} {allowed}")
        numel = 1
        for n in shape:
            numel *= n
        if allowed.dtypes is not None and dtype not in allowed.dtypes:
            raise damaged(path, name, f"{where} is {dtype}; the graph has "
                          f"{'/'.join(allowed.dtypes)}")
        if allowed.shape is not None and tuple(shape) != allowed.shape:
            raise damaged(path, name, f"{where} is shaped {tuple(shape)} in the file but "
                          f"{allowed.shape} in the graph")
        if allowed.shape is None and numel > allowed.most:
            raise damaged(path, name, f"{where} holds {numel:,} values, more than the "
                          f"{allowed.most:,} it can hold for this graph")
        begin, stop = offsets
        if stop - begin != numel * DTYPES[dtype] or begin > stop:
            raise damaged(path, name, f"{where}'s offsets do not match its shape and dtype")
        spans.append((begin, stop))
        end = max(end, stop)
    spans.sort()
    position = 0
    for begin, stop in spans:  # safetensors' own rule: the data is packed, no gaps
        if begin != position:
            raise damaged(path, name, "its tensors overlap or leave gaps")
        position = stop
    return end


def _ints(value: object) -> bool:
    return isinstance(value, list) and all(
        isinstance(n, int) and not isinstance(n, bool) and 0 <= n < 2 ** 53 for n in value)


class _opened:
    """`zf.open(info)` with its errors (a bad CRC, zlib, an unknown method) named."""

    def __init__(self, path: Path, zf: zipfile.ZipFile, info: zipfile.ZipInfo):
        self.path, self.zf, self.info = path, zf, info

    def __enter__(self) -> _Named:
        try:
            self.f = self.zf.open(self.info)
        except Exception as e:  # BadZipFile, NotImplementedError (a method), RuntimeError
            raise damaged(self.path, self.info.filename, f"it cannot be unpacked "
                          f"({first_line(e)})") from None
        return _Named(self.f, self.path, self.info.filename)

    def __exit__(self, *exc: object) -> None:
        self.f.close()


class _Named:
    """A member's stream whose read errors (a CRC or zlib error mid-way) name it."""

    def __init__(self, f: IO[bytes], path: Path, name: str):
        self.f, self.path, self.name = f, path, name

    def read(self, n: int = -1) -> bytes:
        try:
            return self.f.read(n)
        except Exception as e:
            raise damaged(self.path, self.name, f"it cannot be unpacked ({first_line(e)})"
                          ) from None

    def readinto(self, view: memoryview) -> int:
        data = self.read(len(view))
        view[:len(data)] = data
        return len(data)


def _exactly(path: Path, name: str, f: _Named, n: int, what: str) -> bytes:
    data = bytearray()
    while len(data) < n:
        chunk = f.read(min(CHUNK, n - len(data)))
        if not chunk:
            raise damaged(path, name, f"it is cut short (in {what})")
        data += chunk
    return bytes(data)


def _bounded(path: Path, name: str, f: _Named, limit: int, why: str) -> bytearray:
    data = bytearray()
    while chunk := f.read(min(CHUNK, limit + 1 - len(data))):
        data += chunk
        if len(data) > limit:
            raise damaged(path, name, f"it unpacks to more than {limit:,} bytes ({why})")
    return data
