"""Readers for data files: CSV tables, NumPy arrays and MNIST's IDX format.

Each reader returns numpy arrays and raises `NodegraphError` with the file's path in the
message when the file is missing or does not hold what the block expects, so the validator
can show the problem on the node. No reader needs anything beyond numpy and the standard
library.
"""

from __future__ import annotations

import contextlib
import csv
import gzip
import io
import math
import os
import zipfile
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np

from nodegraph.kinds import confine, footprint, gate
from nodegraph.kinds.dataset import data_folder, data_path
from nodegraph.model.errors import NodegraphError


def resolve(path: str, what: str) -> Path:
    """`path` as an existing file (``~`` expanded, relative to the graph file's folder), or
    an error naming it; checked by the file gate (`nodegraph.kinds.gate`)."""
    if not path:
        raise NodegraphError(f"no {what} given")
    p = data_path(path)
    if not p.is_file():
        state = "is not a file" if p.exists() else "does not exist"
        raise NodegraphError(f"{what} '{path}'{looked_at(path, p)} {state}")
    gate.check(p, what, shown=path)
    return p


def open_file(path: str, what: str):
    """The file a data param names (`resolve`), opened through the file gate."""
    return gate.open_file(resolve(path, what), what, shown=path)


def looked_at(given: str, found: Path) -> str:
    """' (looked for FOUND)' when a relative `given` was resolved elsewhere, else ''."""
    return "" if str(found) == given else f" (looked for {found})"


# what a gzip member may unpack to, per byte packed: real data (MNIST's files: 2-5) stays far
# below; deflate reaches 200-1,000 only on runs of one byte, the stuff of a gzip bomb
MAX_GZIP_RATIO = 100


def _bomb(path: str, what: str, packed: int) -> NodegraphError:
    return NodegraphError(f"{what} '{path}' unpacks to more than {MAX_GZIP_RATIO} times its "
                          f"{footprint.size_text(packed)}: a decompression bomb is not read")


def read_bytes(path: str, what: str) -> bytes:
    """The contents of a file, gunzipped when it is gzip-compressed (by content, not name);
    refused once larger than the memory a graph may use (`footprint.limit_bytes`), packed
    or unpacked, while it is read."""
    limit = footprint.limit_bytes() or 2**62

    def refuse() -> NodegraphError:
        return NodegraphError(f"{what} '{path}' is larger than the "
                              f"{footprint.size_text(limit)} of memory available")

    try:
        with open_file(path, what) as f:
            if f.read(2) == b"\x1f\x8b":
                f.seek(0)
                packed = os.fstat(f.fileno()).st_size
                with gzip.GzipFile(fileobj=f) as unzipped:
                    if MAX_GZIP_RATIO * packed < limit:
                        return gate.read_bounded(unzipped, MAX_GZIP_RATIO * packed,
                                                 lambda: _bomb(path, what, packed))
                    return gate.read_bounded(unzipped, limit, refuse)
            f.seek(0)
            return gate.read_bounded(f, limit, refuse)
    except (OSError, EOFError, zlib.error) as e:
        raise NodegraphError(f"cannot read {what} '{path}': {e}") from e


# -- IDX (MNIST) -------------------------------------------------------------------------

# IDX type codes (third byte of the magic number) and the big-endian dtypes they mean
_IDX_TYPES = {0x08: ">u1", 0x09: ">i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}
_IDX_TYPES_SIZE = {code: np.dtype(t).itemsize for code, t in _IDX_TYPES.items()}


def read_idx(path: str, what: str = "IDX file") -> np.ndarray:
    """An IDX file (MNIST's idx3-ubyte images, idx1-ubyte labels; gzipped or not).

    Layout: two zero bytes, a type code, the number of dimensions d, then d big-endian
    uint32 sizes, then the values in C order, big-endian.
    """
    dims, dtype = idx_header(path, what)  # the promise checked streaming, before holding it
    return idx_values(path, what, dims, dtype).astype(dtype.newbyteorder("=")).reshape(dims)


def idx_values(path: str, what: str, dims: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """The values (big-endian, flat) of an IDX file whose header `idx_header` read: only the
    bytes that header promises are read, into one buffer of that size (what follows them is
    never held, so a file with megabytes after a small promise costs the promise)."""
    start = 4 + 4 * len(dims)
    buf = bytearray(start + math.prod(dims) * dtype.itemsize)
    view, got = memoryview(buf), 0
    try:
        with open_file(path, what) as f:
            gz = f.read(2) == b"\x1f\x8b"
            f.seek(0)
            with gzip.GzipFile(fileobj=f) if gz else contextlib.nullcontext(f) as src:
                while got < len(buf) and (n := src.readinto(view[got:])):
                    got += n
    except (OSError, EOFError, zlib.error) as e:
        raise NodegraphError(f"cannot read {what} '{path}': {e}") from e
    finally:
        view.release()
    if got < len(buf):  # changed since its header was read
        raise NodegraphError(f"IDX file '{path}' is truncated: its header promises "
                             f"{'x'.join(map(str, dims))} values")
    return np.frombuffer(buf, dtype, math.prod(dims), start)


_IDX_HEAD = 4 + 4 * 255  # the longest header: the magic number and 255 sizes
MAX_IDX_DIMS = 32  # numpy's arrays hold 64 (32 before numpy 2); MNIST's files have 1 or 3


def idx_header(path: str, what: str = "IDX file") -> tuple[tuple[int, ...], np.dtype]:
    """The dims and dtype `read_idx` gives for a file, checked as it checks them (the file
    holds every value its header promises) without keeping the values: a gzipped file is
    decompressed in pieces and counted up to what the header promises (a promise larger
    than the memory a graph may use is refused first: a gzip bomb is never unpacked)."""
    try:
        with open_file(path, what) as f:
            if f.read(2) == b"\x1f\x8b":
                f.seek(0)
                packed = os.fstat(f.fileno()).st_size
                with gzip.GzipFile(fileobj=f) as unzipped:
                    head = unzipped.read(_IDX_HEAD)
                    promised = _promised(head, path, what)
                    if promised > MAX_GZIP_RATIO * packed:
                        raise _bomb(path, what, packed)
                    size = len(head) + _count(unzipped, promised - len(head))
            else:
                f.seek(0)
                head = f.read(_IDX_HEAD)
                size = os.fstat(f.fileno()).st_size
    except (OSError, EOFError, zlib.error) as e:
        raise NodegraphError(f"cannot read {what} '{path}': {e}") from e
    dims, dtype, _ = _idx_layout(head, size, path)
    return dims, dtype


def _promised(head: bytes, path: str, what: str) -> int:
    """The bytes an IDX file whose first bytes are `head` holds by its header (0 when it is
    no IDX header: `_idx_layout` says so); refused when more than memory holds."""
    if len(head) < 4 or head[2] not in _IDX_TYPES or len(head) < 4 + 4 * head[3]:
        return 0
    dims = [int(d) for d in np.frombuffer(head, ">u4", head[3], 4)]
    need = 4 + 4 * head[3] + math.prod(dims) * _IDX_TYPES_SIZE[head[2]]
    limit = footprint.limit_bytes()
    if limit is not None and need > limit:
        raise NodegraphError(f"{what} '{path}' promises {footprint.size_text(need)} of "
                             f"values, more than the {footprint.size_text(limit)} of memory "
                             "available")
    return need


def _count(f, most: int) -> int:
    """Bytes `f` gives, read in pieces, stopping once `most` are counted."""
    total = 0
    while total < most and (piece := f.read(min(1 << 20, most - total))):
        total += len(piece)
    return total


def _idx_layout(head: bytes, size: int, path: str) -> tuple[tuple[int, ...], np.dtype, int]:
    """The dims, big-endian dtype and first value's offset of an IDX file whose contents
    (`size` bytes) begin with `head`; refuses a file that is not IDX or is cut short."""
    if len(head) < 4 or head[0] != 0 or head[1] != 0 or head[2] not in _IDX_TYPES:
        raise NodegraphError(f"'{path}' is not an IDX file (its first bytes are "
                             f"{head[:4].hex(' ') or 'missing'})")
    ndim, start = head[3], 4 + 4 * head[3]
    if size < start:
        raise NodegraphError(f"IDX file '{path}' ends inside its header")
    if ndim > MAX_IDX_DIMS:  # numpy refused, unnamed (fuzz idx seed 8844 case 376: 255)
        raise NodegraphError(f"IDX file '{path}' has {ndim} dimensions; at most "
                             f"{MAX_IDX_DIMS} are read")
    dims = tuple(int(d) for d in np.frombuffer(head, ">u4", ndim, 4))
    dtype = np.dtype(_IDX_TYPES[head[2]])
    if math.prod(d for d in dims if d) * dtype.itemsize >= 2**63:  # numpy refuses the shape
        raise NodegraphError(f"IDX file '{path}' has sizes {'x'.join(map(str, dims))}, "  # even
                             "larger than any array can be")  # with a 0 among them: no values
    if size - start < math.prod(dims) * dtype.itemsize:  # (np.prod wraps past 2**63: a
        # header of four sizes 65,536 promised 0 values, and reading them asked for 2**64)
        raise NodegraphError(f"IDX file '{path}' is truncated: its header promises "
                             f"{'x'.join(map(str, dims))} values")
    return dims, dtype, start


# -- CSV ---------------------------------------------------------------------------------

def read_csv(path: str, header: bool, delimiter: str) -> tuple[list[str], list[list[str]]]:
    """Column names (from the header, else "0", "1", ...) and the rows as text cells."""
    rows: list[list[str]] = []
    names = _csv_rows(path, header, delimiter, rows.append)
    return names, rows


def csv_shape(path: str, header: bool, delimiter: str) -> tuple[list[str], int]:
    """Column names and the number of data rows, checked as `read_csv` checks them, without
    keeping the cells (what validation needs of a CSV)."""
    count = [0]

    def counted(row: list[str]) -> None:
        count[0] += 1

    return _csv_rows(path, header, delimiter, counted), count[0]


def _csv_rows(path: str, header: bool, delimiter: str,
              take: Callable[[list[str]], None]) -> list[str]:
    """The column names; each data row to `take`, after its cells are counted."""
    text = read_bytes(path, "CSV file").decode("utf-8-sig", errors="replace")
    delim = {"\\t": "\t", "tab": "\t", "space": " "}.get(delimiter, delimiter)
    if len(delim) != 1:
        raise NodegraphError(f"delimiter must be one character (or 'tab'), got {delimiter!r}")
    rows = _csv_reader(csv.reader(io.StringIO(text), delimiter=delim,
                                  skipinitialspace=delim == " "), path)
    first = next(rows, None)
    if first is None:
        raise NodegraphError(f"CSV file '{path}' holds no rows")
    names = [c.strip() for c in first] if header else [str(i) for i in range(len(first))]
    if not header:
        take(first)
    line = 2 - header  # data rows are numbered from 1
    for row in rows:
        if len(row) != len(names):
            raise NodegraphError(f"CSV file '{path}': data row {line} has {len(row)} cells, "
                                 f"expected {len(names)}")
        take(row)
        line += 1
    if line == 1:
        raise NodegraphError(f"CSV file '{path}' has a header but no data rows")
    return names


def _csv_reader(reader, path: str) -> Iterator[list[str]]:
    """The non-blank rows of `reader`; a row the csv module cannot split (a lone carriage
    return inside an unquoted field, a NUL) refused naming the file and the line."""
    while True:
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as e:
            raise NodegraphError(f"CSV file '{path}': line {reader.line_num} cannot be read "
                                 f"({e})") from None
        if any(c.strip() for c in row):
            yield row


def column_index(names: list[str], ref: str, path: str) -> int:
    """The position of column `ref`: a header name, or an integer index (negative from
    the end) when no column has that name."""
    ref = ref.strip()
    if ref in names:
        return names.index(ref)
    try:
        i = int(ref)
    except ValueError:
        shown = f" (columns: {', '.join(names)})" if _may_echo(path) else ""
        raise NodegraphError(f"CSV file '{path}' has no column '{ref}'{shown}") from None
    if not -len(names) <= i < len(names):
        raise NodegraphError(f"column index {i} is outside the {len(names)} columns of "
                             f"'{path}'")
    return i % len(names)


def numeric_column(rows: list[list[str]], i: int, name: str, path: str) -> np.ndarray:
    try:
        return np.array([float(r[i]) for r in rows], dtype=np.float64)
    except ValueError:
        bad = next(n for n, r in enumerate(rows) if not _is_number(r[i]))
        cell = f" holds {rows[bad][i]!r}" if _may_echo(path) else " holds a cell"
        raise NodegraphError(f"CSV file '{path}': column '{name}'{cell} (data row {bad + 1}), "
                             "not a number") from None


def _may_echo(path: str) -> bool:
    """Whether an error may quote the file's cells: not from outside the graph's folder and
    the folders allowed by name (`nodegraph.kinds.confine.may_echo`)."""
    return confine.may_echo(data_path(path), data_folder())


def class_column(rows: list[list[str]], i: int) -> tuple[np.ndarray, list[str]]:
    """Class indices of a column: the numbers themselves when every cell is an integer,
    else the position of each label among the sorted distinct labels."""
    cells = [r[i].strip() for r in rows]
    if all(_is_int(c) for c in cells):
        return np.array([int(float(c)) for c in cells], dtype=np.int64), []
    labels = sorted(set(cells))
    lookup = {c: k for k, c in enumerate(labels)}
    return np.array([lookup[c] for c in cells], dtype=np.int64), labels


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _is_int(text: str) -> bool:
    return _is_number(text) and float(text).is_integer()


# -- NumPy -------------------------------------------------------------------------------

def read_npy(path: str, what: str) -> np.ndarray:
    """One array from a .npy file (pickles refused: they can run code)."""
    try:
        with open_file(path, what) as f:
            return np.load(f, allow_pickle=False)  # gated: f from open_file
    except (OSError, ValueError) as e:
        raise NodegraphError(f"cannot read {what} '{path}': {e}") from e


def npy_header(path: str, what: str, key: str | None = None
               ) -> tuple[tuple[int, ...], np.dtype] | None:
    """The shape and dtype an .npy file (or array `key` of an .npz) holds, from its header;
    None when the header cannot be read this way (`read_npy`/`read_npz` then say why)."""
    try:
        with open_file(path, what) as file:
            if key is None:
                return _header(file)
            with zipfile.ZipFile(file) as archive, archive.open(  # gated: from open_file
                    f"{key}.npy") as f:
                return _header(f)
    except (OSError, ValueError, KeyError, zipfile.BadZipFile):
        return None


def _header(f) -> tuple[tuple[int, ...], np.dtype]:
    version = np.lib.format.read_magic(f)
    read = (np.lib.format.read_array_header_1_0 if version == (1, 0)
            else np.lib.format.read_array_header_2_0)
    shape, _, dtype = read(f)
    return tuple(shape), dtype


def npz_headers(path: str, keys: tuple[str, str]
                ) -> list[tuple[tuple[int, ...], np.dtype] | None]:
    """The shape and dtype of arrays `keys` of a .npz archive from their headers, refused
    as `read_npz` refuses a missing file or array; None for an array whose header does not
    read as a plain .npy (`read_npz` then says why)."""
    try:
        with open_file(path, ".npz file") as f, \
                np.load(f, allow_pickle=False) as archive:  # gated: lists the arrays, reads none
            missing = [k for k in keys if k not in archive.files]
            if missing:
                raise NodegraphError(f"'{path}' has no array {missing[0]!r} (arrays: "
                                     f"{', '.join(archive.files) or 'none'})")
            names = archive.zip.namelist()
            heads: list[tuple[tuple[int, ...], np.dtype] | None] = []
            for k in keys:
                try:
                    member = f"{k}.npy" if f"{k}.npy" in names else k
                    with archive.zip.open(member) as f:  # gated: a member of the gated archive
                        heads.append(_header(f))
                except (OSError, ValueError, KeyError, zipfile.BadZipFile):
                    heads.append(None)
            return heads
    except (OSError, ValueError, zipfile.BadZipFile) as e:
        raise NodegraphError(f"cannot read .npz file '{path}': {e}") from e


def read_npz(path: str, keys: tuple[str, str]) -> tuple[np.ndarray, np.ndarray]:
    """The arrays named `keys` from a .npz archive."""
    try:
        with open_file(path, ".npz file") as f, \
                np.load(f, allow_pickle=False) as archive:  # gated: f from open_file
            missing = [k for k in keys if k not in archive.files]
            if missing:
                raise NodegraphError(f"'{path}' has no array {missing[0]!r} (arrays: "
                                     f"{', '.join(archive.files) or 'none'})")
            return archive[keys[0]], archive[keys[1]]
    except (OSError, ValueError, zipfile.BadZipFile) as e:
        raise NodegraphError(f"cannot read .npz file '{path}': {e}") from e
