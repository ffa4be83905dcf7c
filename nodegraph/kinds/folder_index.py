"""A class folder's listing and per-file header index, cached so later starts read no header.

A folder of a million photos costs ~200 µs of CPU per file to open each header through
Pillow: minutes on every start. `index` reads each header once, in parallel processes on
first use (with a progress line; a plain JPEG's header from its first bytes, ~20 µs), and
keeps the result in a cache file keyed on the folder's entries' names, sizes and
modification times: every row whose name, size and mtime are unchanged is reused; a
changed, added or renamed file is read again.

The listing itself (one `lstat` a file, ~5-10 µs: seconds at a million) is kept too, and
reused by a later start while no class folder's entries changed (the folder's device,
inode, mtime and ctime; a folder changed within `SETTLED_NS` of its listing is listed
again). A file rewritten in place without its folder changing keeps its listed size and
mtime until then: what is trusted from memory is its header, and the reader decodes
the file as it is now (`ImageFiles`: where all photos must share a size, one of another
size is a sample error naming it); refused files are stat-ed again on every start.

The cache lives in ``$NODEGRAPH_CACHE`` or else ``$XDG_CACHE_HOME/nodegraph`` (default
``~/.cache/nodegraph``), under ``folder-index/``; never beside the user's data, which may
be read-only or shared. A cache file is treated as data from anyone: its size is bounded,
it is an uncompressed ``.npz`` read with ``allow_pickle=False``, every array's dtype and
shape is checked, and a file that fails any check is ignored (and rewritten). A cache
folder that cannot be written leaves the index uncached, not the run stopped.

`list_classes` is the one place a class folder is listed (`nodegraph.kinds.gate` checks
each class folder and each symlinked entry); `Names` holds a million relative names in
two arrays instead of a million `Path` objects.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import sys
import time
import zipfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np

from nodegraph.kinds import gate
from nodegraph.model.errors import NodegraphError

VERSION = 1
MAX_CACHE = 1 << 30  # bytes one cache file may hold (about 12 M files)
PARALLEL_FROM = 2000  # headers to read before worker processes pay for themselves
STAT_THREADS_FROM = 20000  # files of one folder to stat before threads pay for themselves
Header = tuple[int, int, int]  # (channels, height, width)


class Names(Sequence[str]):
    """Relative file names, packed: one UTF-8 blob and offsets (cheap to pickle to workers)."""

    def __init__(self, blob: bytes, offsets: np.ndarray):
        self.blob, self.offsets = blob, offsets

    @classmethod
    def of(cls, names: Sequence[str]) -> Names:
        blob = "".join(names).encode("utf-8", "surrogateescape")
        lengths = np.fromiter(map(len, names), np.int64, len(names))
        if len(blob) != int(lengths.sum()):  # a name not in ASCII: count its bytes
            lengths = np.fromiter((len(n.encode("utf-8", "surrogateescape")) for n in names),
                                  np.int64, len(names))
        return cls(blob, np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64))

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __getitem__(self, i):  # type: ignore[override]
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self)))]
        i = int(i) + (len(self) if int(i) < 0 else 0)
        a, b = self.offsets[i], self.offsets[i + 1]
        return self.blob[a:b].decode("utf-8", "surrogateescape")

    def take(self, rows: Sequence[int] | np.ndarray) -> Names:
        """The names at `rows`, in that order (in numpy: no Python object per name)."""
        rows = np.asarray(rows, np.int64)
        starts = self.offsets[rows]
        lengths = self.offsets[rows + 1] - starts
        offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        picked = np.repeat(starts - offsets[:-1], lengths) + np.arange(offsets[-1])
        return Names(np.frombuffer(self.blob, np.uint8)[picked].tobytes(), offsets)


@dataclass
class Listing:
    """A class folder listed: the class names, and per file its name relative to `root`
    ("class/file"), class index, size and mtime (ns), sorted by class then name. A
    folder in object storage has a URL for `root` and each object's version (ETag) for
    its mtime (`nodes.data._images.list_images`)."""

    root: Path | str
    classes: list[str]
    names: Names
    labels: np.ndarray
    sizes: np.ndarray
    mtimes: np.ndarray

    def path(self, i: int) -> Path | str:
        return _joined(self.root, self.names[i])


def list_classes(root: Path, what: str, suffixes: tuple[str, ...]) -> Listing:
    """`root`'s class subfolders and the files in each whose suffix is in `suffixes`,
    with their sizes and mtimes (`_listed_now`), or the listing kept from an earlier start
    when no class folder changed since (`_kept`: a million files are then not listed
    again). The class folders pass `gate.check`. Inside `one_listing` a folder is listed
    once."""
    classes = [d.name for d in gate.listing(root, what, want="folder")]
    key = (str(root), what, suffixes)
    stamps = [_stamp(root / cls, what) for cls in classes]
    memo = _listed.get()
    if memo is not None and key in memo and memo[key][0] == (classes, stamps):
        return memo[key][1]
    listing = _kept(root, what, suffixes, classes, stamps)
    if listing is None:
        listing = _listed_now(root, what, suffixes, classes)
        _keep(listing, what, suffixes, stamps)
    if memo is not None:
        memo[key] = ((classes, stamps), listing)
    return listing


def _listed_now(root: Path, what: str, suffixes: tuple[str, ...], classes: list[str]
                ) -> Listing:
    """Each class folder listed, with one `lstat` a file relative to the folder's
    descriptor. A symlinked file passes `gate.check` (fenced, a regular file); a FIFO,
    device or socket whose name matches is refused by name. Hidden names are left out. The
    one listing of image folders on disk (a remote store is listed in `_images`).

    The work per file is one system call and a few list operations in C: names filtered
    with `str.endswith`, sorted as plain strings, sizes and mtimes gathered by `np.fromiter`
    (~5 µs of CPU a file, most of it the kernel's `lstat`)."""
    wanted = tuple({s.lower() for s in suffixes})
    simple = all(s.startswith(".") and s.count(".") == 1 for s in wanted)
    parts: list[list[str]] = []
    stats: list = []
    for cls in classes:
        folder = root / cls
        try:
            fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))  # gated: (above)
        except OSError as e:
            raise gate.FileRefused(f"cannot list {what} folder '{folder}': {e.strerror}") \
                from None
        try:
            entries = os.listdir(fd)  # gated: the class folder checked above
            names = [n for n in entries
                     if n.lower().endswith(wanted) and not n.startswith(".")] if simple else [
                n for n in entries if not n.startswith(".") and "." in n
                and n[n.rfind("."):].lower() in wanted]
            names.sort()
            found = _lstat_all(fd, names)
        except OSError as e:
            raise gate.FileRefused(f"cannot list {what} folder '{folder}': {e.strerror}") \
                from None
        finally:
            os.close(fd)
        modes = np.fromiter((s.st_mode for s in found), np.int64, len(found))
        for k in np.flatnonzero((modes & 0o170000) != 0o100000):  # not a regular file
            gate.check(folder / names[k], what)  # fenced, a regular file, or refused
            found[k] = os.stat(folder / names[k])  # gated: checked just above
        prefix = f"{cls}/"
        parts.append([prefix + n for n in names])
        stats += found
    labels = np.repeat(np.arange(len(classes), dtype=np.int64), [len(p) for p in parts])
    return Listing(root, classes, Names.of([n for p in parts for n in p]), labels,
                   np.fromiter((s.st_size for s in stats), np.int64, len(stats)),
                   np.fromiter((s.st_mtime_ns for s in stats), np.int64, len(stats)))


def _lstat_chunk(fd: int, names: list[str]) -> list[os.stat_result]:
    lstat = os.stat
    return [lstat(n, dir_fd=fd, follow_symlinks=False) for n in names]


def _lstat_all(fd: int, names: list[str]) -> list[os.stat_result]:
    """`lstat` of each name in the folder open as `fd`; a large folder in a few threads
    (the system call releases the GIL: the kernel's part, most of the cost, runs on
    every core)."""
    threads = min(4, os.cpu_count() or 1)
    if len(names) < STAT_THREADS_FROM or threads < 2:
        return _lstat_chunk(fd, names)
    step = -(-len(names) // (threads * 4))
    with ThreadPoolExecutor(threads) as pool:
        parts = pool.map(_lstat_chunk, [fd] * threads * 4,
                         [names[i:i + step] for i in range(0, len(names), step)])
        return [s for part in parts for s in part]


def _stamp(folder: Path, what: str) -> tuple[int, int, int, int]:
    """What changes when an entry of the class folder is added, removed or renamed: its
    device, inode, mtime and ctime (the folder checked by the file gate)."""
    gate.check(folder, what, want="folder")
    try:
        st = os.stat(folder)  # gated: checked just above
    except OSError as e:
        raise gate.FileRefused(f"cannot list {what} folder '{folder}': {e.strerror}") from None
    return st.st_dev, st.st_ino, st.st_mtime_ns, st.st_ctime_ns


_listed: ContextVar[dict | None] = ContextVar("nodegraph_one_listing", default=None)


@contextlib.contextmanager
def one_listing() -> Iterator[None]:
    """Within (this thread, this context): each folder is listed and indexed once (a
    compile's validation and its build read one listing), reused while no class folder
    changed. Outside, every call lists and stats again, so a file rewritten in place
    between two starts is seen."""
    if _listed.get() is not None:
        yield
        return
    token = _listed.set({})
    try:
        yield
    finally:
        _listed.reset(token)


def cache_folder() -> Path:
    """Where index files are kept: $NODEGRAPH_CACHE, else the user's cache folder."""
    given = os.environ.get("NODEGRAPH_CACHE")
    if given:
        return Path(given).expanduser() / "folder-index"
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "nodegraph" / "folder-index"


def _cache_file(root: Path | str, tag: str) -> Path:
    where = root if isinstance(root, str) else root.resolve()  # a URL as it is
    key = hashlib.sha256(f"{where}\0{tag}".encode("utf-8", "surrogateescape"))
    return cache_folder() / f"{key.hexdigest()[:40]}.npz"


_FIELDS = {"version": (np.int64, 0), "blob": (np.uint8, 1), "offsets": (np.int64, 1),
           "sizes": (np.int64, 1), "mtimes": (np.int64, 1), "headers": (np.int32, 2),
           "bad_rows": (np.int64, 1), "bad_blob": (np.uint8, 1), "bad_offsets": (np.int64, 1)}


def _arrays(path: Path, fields: Mapping[str, tuple[type, int]]
            ) -> dict[str, np.ndarray] | None:
    """The arrays of a cache file, each of the dtype and rank `fields` says, or None when
    any check fails (the file is then rebuilt): bounded, stored, no pickle."""
    try:
        # gated: the index's own cache file, not a graph's: bounded and type-checked here
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))  # gated: (above)
    except OSError:
        return None
    try:
        with os.fdopen(fd, "rb") as f:  # gated: the cache file (above)
            if os.fstat(f.fileno()).st_size > MAX_CACHE:
                return None
            with zipfile.ZipFile(f) as z:  # gated: the cache file (above)
                infos = z.infolist()
                if (sum(i.file_size for i in infos) > MAX_CACHE
                        or any(i.compress_type != zipfile.ZIP_STORED for i in infos)
                        or {i.filename for i in infos} != {f"{k}.npy" for k in fields}):
                    return None
            f.seek(0)
            with np.load(f, allow_pickle=False) as npz:  # gated: the cache file
                out = {k: npz[k] for k in fields}
    except (OSError, ValueError, zipfile.BadZipFile, EOFError, KeyError):
        return None
    for k, (dtype, ndim) in fields.items():
        if out[k].dtype != dtype or out[k].ndim != ndim:
            return None
    return out if int(out["version"]) == VERSION else None


def _packed(blob: np.ndarray, offsets: np.ndarray, n: int) -> bool:
    """`offsets` cut `blob` into `n` names: n + 1 of them, from 0 to its end, not falling."""
    return (len(offsets) == n + 1 and offsets[0] == 0 and offsets[-1] == len(blob)
            and not np.any(np.diff(offsets) < 0))


def _load(path: Path) -> dict[str, np.ndarray] | None:
    """The arrays of a header index file when every check passes, else None."""
    out = _arrays(path, _FIELDS)
    if out is None:
        return None
    n = len(out["sizes"])
    if (len(out["mtimes"]) != n or out["headers"].shape != (n, 3)
            or not _packed(out["blob"], out["offsets"], n)
            or not _packed(out["bad_blob"], out["bad_offsets"], len(out["bad_rows"]))
            or np.any((out["bad_rows"] < 0) | (out["bad_rows"] >= max(n, 1)))):
        return None
    return out


def _save(path: Path, listing: Listing, headers: np.ndarray, bad: dict[int, str]) -> None:
    """Write the index atomically; a cache folder that cannot be written is no error."""
    reasons = Names.of([bad[r] for r in sorted(bad)])
    _write(path, blob=np.frombuffer(listing.names.blob, np.uint8),
           offsets=listing.names.offsets, sizes=listing.sizes, mtimes=listing.mtimes,
           headers=headers.astype(np.int32), bad_rows=np.asarray(sorted(bad), np.int64),
           bad_blob=np.frombuffer(reasons.blob, np.uint8), bad_offsets=reasons.offsets)


def _write(path: Path, **arrays: np.ndarray) -> None:
    """A cache file written atomically (a temporary file, then renamed); a cache folder
    that cannot be written is no error."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(tmp, "wb") as f:  # gated: writes the cache file
            np.savez(f, version=np.int64(VERSION), **arrays)  # type: ignore[arg-type]
        os.replace(tmp, path)
    except OSError:
        tmp.unlink(missing_ok=True)


# -- the listing kept across starts ------------------------------------------------------

# A folder whose mtime or ctime is this recent may change again within the same tick of
# the file system's clock without its stamp moving ("racy" stamps, as git calls them): its
# listing is kept, but not trusted by the next start, which lists it again.
SETTLED_NS = 2 * 10**9
_LISTING = {"version": (np.int64, 0), "stamps": (np.uint8, 1), "classes_blob": (np.uint8, 1),
            "classes_offsets": (np.int64, 1), "blob": (np.uint8, 1), "offsets": (np.int64, 1),
            "labels": (np.int64, 1), "sizes": (np.int64, 1), "mtimes": (np.int64, 1)}


def _listing_file(root: Path, what: str, suffixes: tuple[str, ...]) -> Path:
    index = _cache_file(root, f"listing {what} {' '.join(sorted(suffixes))}")
    return index.with_suffix(".listing.npz")


def _stamps_key(stamps: list[tuple[int, int, int, int]]) -> np.ndarray:
    return np.frombuffer(hashlib.sha256(repr(stamps).encode()).digest(), np.uint8)


def _kept(root: Path, what: str, suffixes: tuple[str, ...], classes: list[str],
          stamps: list[tuple[int, int, int, int]]) -> Listing | None:
    """The listing an earlier start kept, when the class folders are the same and each
    one's stamp (`_stamp`) is the one taken before it was listed: no entry was added,
    removed or renamed since. Its names are checked as the listing would make them (one
    class folder and one plain name each); the files' sizes and mtimes are those listed
    then: a file rewritten in place is seen when it is read (`ImageFiles` checks what it
    decodes), and the index stats its refused files again (`_refused_again`)."""
    old = _arrays(_listing_file(root, what, suffixes), _LISTING)
    if old is None or not np.array_equal(old["stamps"], _stamps_key(stamps)):
        return None
    n = len(old["sizes"])
    if (not _packed(old["classes_blob"], old["classes_offsets"], len(classes))
            or list(Names(old["classes_blob"].tobytes(), old["classes_offsets"])) != classes
            or len(old["labels"]) != n or len(old["mtimes"]) != n
            or not _packed(old["blob"], old["offsets"], n)):
        return None
    names = Names(old["blob"].tobytes(), old["offsets"])
    if not _sound(names, old["labels"], classes):
        return None
    return Listing(root, classes, names, old["labels"], old["sizes"], old["mtimes"])


def _sound(names: Names, labels: np.ndarray, classes: list[str]) -> bool:
    """Each name is "<its class>/<file>", the file a plain name (no "/", not hidden, not
    empty), labels sorted and in range: checked in numpy, a few passes over the names."""
    blob = np.frombuffer(names.blob, np.uint8)
    starts, lengths = names.offsets[:-1], np.diff(names.offsets)
    if len(labels) and (labels[0] < 0 or labels[-1] >= len(classes)
                        or np.any(np.diff(labels) < 0)):
        return False
    if np.count_nonzero(blob == ord("/")) != len(labels) or np.any(blob == 0):
        return False
    bounds = np.searchsorted(labels, np.arange(len(classes) + 1))
    for c, cls in enumerate(classes):
        at, prefix = starts[bounds[c]:bounds[c + 1]], f"{cls}/".encode("utf-8", "surrogateescape")
        if np.any(lengths[bounds[c]:bounds[c + 1]] <= len(prefix)):
            return False
        for j, byte in enumerate(prefix):
            if np.any(blob[at + j] != byte):
                return False
        if np.any(blob[at + len(prefix)] == ord(".")):
            return False
    return True


def _keep(listing: Listing, what: str, suffixes: tuple[str, ...],
          stamps: list[tuple[int, int, int, int]]) -> None:
    """Keep `listing` for the next start, under the class folders' stamps taken before it
    was made; under a stamp that never matches if a folder changed too recently to be
    sure of (`SETTLED_NS`)."""
    now = time.time_ns()
    settled = all(now - max(st[2], st[3]) > SETTLED_NS for st in stamps)
    classes = Names.of(listing.classes)
    _write(_listing_file(Path(listing.root), what, suffixes),
           stamps=_stamps_key(stamps) if settled else np.zeros(32, np.uint8),
           classes_blob=np.frombuffer(classes.blob, np.uint8),
           classes_offsets=classes.offsets, blob=np.frombuffer(listing.names.blob, np.uint8),
           offsets=listing.names.offsets, labels=listing.labels, sizes=listing.sizes,
           mtimes=listing.mtimes)


def _reused(listing: Listing, old: dict[str, np.ndarray] | None
            ) -> tuple[np.ndarray, dict[int, str], np.ndarray]:
    """From a cache: the headers and refusals of the rows whose name, size and mtime are
    unchanged, and the rows to read again."""
    n = len(listing.names)
    headers = np.zeros((n, 3), np.int32)
    if old is None:
        return headers, {}, np.arange(n)
    bad_names = Names(old["bad_blob"].tobytes(), old["bad_offsets"])
    old_bad = {int(r): bad_names[i] for i, r in enumerate(old["bad_rows"])}
    if (old["blob"].tobytes() == listing.names.blob
            and np.array_equal(old["offsets"], listing.names.offsets)):
        rows = np.arange(n)  # the same names, row for row
        same = (old["sizes"] == listing.sizes) & (old["mtimes"] == listing.mtimes)
    else:
        olds = Names(old["blob"].tobytes(), old["offsets"])
        where = {olds[i]: i for i in range(len(olds))}
        rows = np.asarray([where.get(listing.names[i], -1) for i in range(n)], np.int64)
        known = rows >= 0
        same = known.copy()
        same[known] = ((old["sizes"][rows[known]] == listing.sizes[known])
                       & (old["mtimes"][rows[known]] == listing.mtimes[known]))
    headers[same] = old["headers"][rows[same]]
    kept = np.flatnonzero(same)
    hit = np.isin(rows[kept], old["bad_rows"])  # in numpy: no Python step per file
    bad = {int(i): old_bad[int(r)] for i, r in zip(kept[hit], rows[kept][hit], strict=True)}
    return headers, bad, np.flatnonzero(~same)


class HeadReader(Protocol):
    """A header reader that also answers from a file's first bytes (`LocalHeaders`):
    `from_head` gives the header, or None for a file it leaves to `__call__`."""

    what: str  # the kind of file, as the file gate names it
    limit: int  # the largest file read
    head_bytes: int  # the bytes `from_head` wants

    def __call__(self, path: Path | str) -> Header | str: ...

    def from_head(self, head: bytes) -> Header | None: ...


def _refused_again(listing: Listing, bad: dict[int, str]) -> list[int]:
    """The refused files that changed since `listing` took their size and mtime (stat
    again: few files). A listing kept from an earlier start (`_kept`) holds that start's
    figures, so a refused file fixed in place is read again, never refused from memory."""
    if not isinstance(listing.root, Path):
        return []
    again = []
    for row in bad:
        try:
            st = os.stat(listing.path(row))  # gated: a stat, nothing read
        except OSError:
            continue  # gone: its class folder's stamp moved, the next listing leaves it out
        if (st.st_size, st.st_mtime_ns) != (listing.sizes[row], listing.mtimes[row]):
            again.append(row)
    return again


def _read_chunk(args: tuple[Callable[[Path | str], Header | str], Path | str, Names]
                ) -> list:
    """Each file's header or refusal. A reader with `from_head` gets the first bytes of
    each plain file, opened by name in its class folder's descriptor (`gate.folder_opened`,
    `gate.head_in`: one open, no path resolved per file); any other file, and any it does
    not answer for, goes through `read` (the checked open, which names a refusal)."""
    read, root, names = args
    if not hasattr(read, "from_head") or not isinstance(root, Path):
        return [read(_joined(root, n)) for n in names]
    reader: HeadReader = read  # type: ignore[assignment]
    out: list = []
    with contextlib.ExitStack() as opened:
        folder, fd = None, None
        for name in names:
            cls, _, file = name.rpartition("/")
            if cls != folder:
                opened.close()
                folder = cls
                try:
                    fd = opened.enter_context(gate.folder_opened(root / cls, reader.what))
                except NodegraphError:
                    fd = None  # each file then refused by the checked way, by name
            head = None if fd is None else gate.head_in(fd, file, reader.limit,
                                                        reader.head_bytes)
            found = None if head is None else reader.from_head(head)
            out.append(found if found is not None else reader(root / name))
    return out


def _joined(root: Path | str, name: str) -> Path | str:
    return f"{root}/{name}" if isinstance(root, str) else root / name


def _read_all(read: Callable[[Path | str], Header | str], listing: Listing,
              rows: np.ndarray, say: Callable[[str], None]) -> list:
    """The header or refusal of each file of `listing` at `rows`, in worker processes when
    there are many (fork only: the workers inherit the file gate's allowed folders); a
    progress line as they come. Names go to the workers packed (`Names`), not as paths."""
    import multiprocessing as mp

    many = getattr(read, "many", None)
    if many is not None:  # a reader that reads in bulk itself (objects, concurrently)
        return many([listing.path(int(i)) for i in rows], say)
    names = listing.names.take(rows)
    cores = os.cpu_count() or 1
    began, out = time.perf_counter(), []
    if len(rows) < PARALLEL_FROM or cores < 2 or "fork" not in mp.get_all_start_methods():
        return _read_chunk((read, listing.root, names))
    step = max(200, len(rows) // (cores * 20))
    chunks = [(read, listing.root, names.take(np.arange(i, min(i + step, len(rows)))))
              for i in range(0, len(rows), step)]
    shown = 0.0
    with mp.get_context("fork").Pool(cores) as pool:
        for part in pool.imap(_read_chunk, chunks):
            out += part
            done = len(out) / len(rows)
            if done - shown >= 0.1 or done == 1:
                shown = done
                say(f"  {len(out):,} of {len(rows):,} headers read "
                    f"({time.perf_counter() - began:.1f} s)")
    return out


def _stderr(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def index(listing: Listing, tag: str, read: Callable[[Path | str], Header | str],
          say: Callable[[str], None] = _stderr) -> tuple[np.ndarray, dict[int, str]]:
    """Per file of `listing`: its header (channels, height, width; zeros when refused) and,
    for the refused, why (`read` returns a header or the reason as text). Rows cached for
    `tag` (what `read` reads) under unchanged name, size and mtime are not read again."""
    path = _cache_file(listing.root, tag)
    memo = _listed.get()
    if memo is not None and memo.get((path, tag), (None,))[0] is listing:
        headers, bad = memo[(path, tag)][1]
        return headers.copy(), dict(bad)
    headers, bad = _indexed(listing, path, read, say)
    if memo is not None:
        memo[(path, tag)] = (listing, (headers.copy(), dict(bad)))
    return headers, bad


def _indexed(listing: Listing, path: Path, read: Callable[[Path | str], Header | str],
             say: Callable[[str], None]) -> tuple[np.ndarray, dict[int, str]]:
    headers, bad, todo = _reused(listing, _load(path))
    again = _refused_again(listing, bad)
    for row in again:
        del bad[row]
    todo = np.union1d(todo, np.asarray(again, np.int64)).astype(np.int64)
    if len(todo) == 0:
        return headers, bad
    if len(todo) >= PARALLEL_FROM:
        say(f"indexing {len(todo):,} files of '{listing.root}' (once; kept in "
            f"{cache_folder()})")
    for row, got in zip(todo, _read_all(read, listing, todo, say), strict=True):
        if isinstance(got, str):
            bad[int(row)] = got
        else:
            headers[row] = got
    _save(path, listing, headers, bad)
    return headers, bad
