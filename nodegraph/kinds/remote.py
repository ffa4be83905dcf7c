"""Data in object storage: ``s3://``, ``gs://``, ``az://`` and ``hf://`` paths, read through fsspec.

The file gate (`nodegraph.kinds.gate`) keeps its promises for objects as for files:

- **Allowed like an outside folder.** A graph file reads a remote path only under a prefix
  the user allowed (``--data-root s3://bucket/prefix``, ``graph.data_roots`` in Python) or
  with the fence lifted (``--trust``); a graph built in code (no graph folder) reads any.
- **Only keys under the prefix.** A URL with ``.`` / ``..`` / empty parts, a query, or
  credentials (``user:secret@``) is refused by name; a listing returns only keys under the
  listed prefix, and a key with such parts found there is refused, never skipped.
- **Bounded.** A size limit is checked against the object's listed size before reading;
  a listing stops at `MAX_LISTING` keys; every call has a connect and read timeout and a
  bounded number of retries, so a server that stops gives an error naming the object.

Credentials come only from the environment and the usual config files (``AWS_*``,
``~/.aws``; ``GOOGLE_APPLICATION_CREDENTIALS``; ``AZURE_STORAGE_*``; ``HF_TOKEN``) as
each back end reads them: a graph file names a path, never how to sign in. The back ends
(s3fs, gcsfs, adlfs, huggingface_hub) are fsspec's; the ``remote`` extra installs s3fs.
"""

from __future__ import annotations

import contextlib
import fnmatch
import os
from collections.abc import Callable, Iterator
from typing import Any

from nodegraph.kinds import confine
from nodegraph.kinds.dataset import data_folder
from nodegraph.kinds.urls import (  # noqa: F401 (the URL names, served here too)
    SCHEMES,
    _allowed,
    _under,
    allowed_now,
    allowing,
    is_url,
    normal,
)
from nodegraph.model.errors import NodegraphError
from nodegraph.model.sanitize import clean

PACKAGES = {"s3": "s3fs", "gcs": "gcsfs", "abfs": "adlfs", "hf": "huggingface_hub"}
CONNECT_TIMEOUT = 10.0  # seconds to open a connection
READ_TIMEOUT = 30.0  # seconds one read may wait for bytes
RETRIES = 3  # attempts of one call before its error is reported
MAX_LISTING = 2_000_000  # keys one listing may return
ENV_PREFIXES = ("AWS_", "GOOGLE_", "GCS_", "AZURE_", "HF_")



class RemoteError(NodegraphError):
    """Object storage could not be reached or read (after the retries). Raised in a
    DataLoader worker, torch makes it again in the reading process from its traceback
    ("Caught RemoteError in DataLoader worker process 1. Original Traceback ..."): the
    message is then the original one, naming the object, and the worker."""

    def __init__(self, message: str = ""):
        head, found, rest = message.partition("\nOriginal Traceback")
        if found and head.startswith("Caught ") and "RemoteError: " in rest:
            where = head.removeprefix("Caught RemoteError ").rstrip(".")
            message = f"{rest.rpartition('RemoteError: ')[2].strip()} ({where})"
        super().__init__(message)


def check_allowed(url: str, what: str = "data path") -> str:
    """`url` normalised when a graph may read it: no graph folder (a graph built in code),
    the fence lifted, or under a prefix the user allowed; else OutsideDataRoot."""
    url = normal(url, what)
    if data_folder() is None or confine.allowed_now() == confine.ANYWHERE:
        return url
    if not any(_under(url, root) for root in _allowed.get()):
        scheme, rest = url.split("://", 1)
        raise confine.OutsideDataRoot(
            f"{what} '{clean(url)}' is in object storage no one allowed; a graph file reads "
            f"remote data only under a prefix you allow: --data-root {scheme}://"
            f"{rest.split('/')[0]}/... on the command line (or --trust), graph.data_roots "
            "in Python")
    return url


def storage_env() -> dict[str, str]:
    """The environment variables the back ends read their endpoint, region and credentials
    from, as they are now: handed to DataLoader workers (`adopt_env`), since a fork server
    started earlier holds the environment of then."""
    return {k: v for k, v in os.environ.items() if k.startswith(ENV_PREFIXES)}


def adopt_env(env: dict[str, str]) -> None:
    """Make this process's storage variables `env` (in a worker); fsspec's cached clients
    are dropped when that changes anything, so none keeps an old endpoint."""
    if env == storage_env():
        return
    for k in [k for k in os.environ if k.startswith(ENV_PREFIXES)]:
        del os.environ[k]
    os.environ.update(env)
    import sys

    if "fsspec" in sys.modules:
        from fsspec.registry import registry

        for protocol in set(SCHEMES.values()) & set(registry):  # the classes imported
            registry[protocol].clear_instance_cache()


def _options(protocol: str) -> dict[str, Any]:
    """Each back end's timeouts and retries (credentials: its own defaults only)."""
    if protocol == "s3":
        return {"config_kwargs": {"connect_timeout": CONNECT_TIMEOUT,
                                  "read_timeout": READ_TIMEOUT,
                                  "retries": {"max_attempts": RETRIES, "mode": "standard"}}}
    if protocol == "gcs":
        return {"requests_timeout": READ_TIMEOUT, "retries": RETRIES}
    return {}


def filesystem(url: str):
    """The fsspec filesystem of `url`'s scheme (fsspec keeps one per process and options)."""
    import fsspec

    protocol = SCHEMES[url.split("://", 1)[0].lower()]
    try:
        return fsspec.filesystem(protocol, **_options(protocol))
    except ImportError as e:
        raise NodegraphError(f"reading '{clean(url)}' needs the {PACKAGES[protocol]} package "
                             f"(pip install 'nodegraph[remote]' for s3://): {e}") from None


def key(url: str) -> str:
    """The path fsspec takes: the URL without its scheme."""
    return url.split("://", 1)[1]


def _url(scheme: str, name: str) -> str:
    return f"{scheme}://{name.rstrip('/')}"


@contextlib.contextmanager
def reading(url: str, what: str) -> Iterator[None]:
    """Errors of the storage (connection refused, timeouts, missing keys, denied access)
    as a RemoteError naming the object; a NodegraphError passes unchanged."""
    try:
        yield
    except NodegraphError:
        raise
    except FileNotFoundError:
        raise NodegraphError(f"{what} '{clean(url)}' does not exist") from None
    except PermissionError as e:
        raise RemoteError(f"{what} '{clean(url)}': access denied ({e}); credentials come "
                          "from the environment or the usual config files") from None
    except Exception as e:  # botocore, aiohttp, asyncio timeouts: any failure of the call
        raise RemoteError(f"cannot read {what} '{clean(url)}' from object storage "
                          f"({type(e).__name__}: {clean(str(e))[:300]}; tried {RETRIES} "
                          f"times, {READ_TIMEOUT:g} s read timeout)") from None


def info(url: str, what: str, *, want: str = "file", limit: int | None = None) -> dict:
    """The object's (or prefix's) details when it may be read: allowed, of kind `want`
    ("file" or "folder"), a file no larger than `limit` bytes."""
    url = check_allowed(url, what)
    fs = filesystem(url)
    with reading(url, what):
        found = fs.info(key(url))
    kind = "folder" if found.get("type") == "directory" else "file"
    if kind != want:
        raise NodegraphError(f"{what} '{clean(url)}' is a {kind}, not a {want}")
    size = int(found.get("size") or 0)
    if limit is not None and size > limit:
        raise NodegraphError(f"{what} '{clean(url)}' is larger than {limit:,} bytes, the "
                             "most nodegraph reads for one")
    return found


def is_folder(url: str, what: str) -> bool:
    """Whether `url` is a prefix holding objects (a "folder") rather than one object."""
    url = check_allowed(url, what)
    fs = filesystem(url)
    with reading(url, what):
        return bool(fs.isdir(key(url)))


def entries(folder: str, what: str, match: Callable[[str], bool] = lambda name: True, *,
            want: str = "file", recursive: bool = False, hidden: bool = False,
            skip: tuple[str, ...] = ()) -> list[tuple[str, dict]]:
    """`listing`'s URLs with each one's details as the back end lists them (size, ETag,
    modification time: what `stamp` reads), sorted by URL."""
    folder = check_allowed(folder, what)
    scheme = folder.split("://", 1)[0]
    fs = filesystem(folder)
    base = key(folder)
    with reading(folder, what):
        if recursive and want == "file":
            found = fs.find(base, maxdepth=None, withdirs=False, detail=True)
        else:
            found = {e["name"]: e for e in fs.ls(base, detail=True)}
    if len(found) > MAX_LISTING:
        raise NodegraphError(f"{what} '{clean(folder)}' lists more than {MAX_LISTING:,} keys")
    out = []
    for name, entry in found.items():
        name = name.rstrip("/")
        if not name.startswith(base + "/"):
            if name == base:
                continue
            raise NodegraphError(f"listing {what} '{clean(folder)}' gave '{clean(name)}', "
                                 "outside the prefix; refused")
        rel = name[len(base) + 1:].split("/")
        if any(p in ("", ".", "..") for p in rel):
            raise NodegraphError(f"{what} '{clean(_url(scheme, name))}' has an empty, '.' "
                                 "or '..' part; refused")
        if any((p.startswith(".") and not hidden) or (skip and p.startswith(skip)) for p in rel):
            continue
        kind = "folder" if entry.get("type") == "directory" else "file"
        if kind == want and match(rel[-1]):
            out.append((_url(scheme, name), entry))
    return sorted(out, key=lambda e: e[0])


def listing(folder: str, what: str, match: Callable[[str], bool] = lambda name: True, *,
            want: str = "file", recursive: bool = False, hidden: bool = False,
            skip: tuple[str, ...] = ()) -> list[str]:
    """The URLs under `folder` whose name `match`es, as `gate.listing` gives a folder's
    entries: of kind `want`, sorted, names starting with "." (unless `hidden`) or one of
    `skip` left out (in any part below `folder`, when `recursive`). Only keys under the
    prefix come back; a key with an empty, "." or ".." part is refused by name."""
    return [url for url, _ in entries(folder, what, match, want=want, recursive=recursive,
                                      hidden=hidden, skip=skip)]


# what tells one version of an object from another, per back end (S3, Azure: ETag; GCS:
# generation and md5; any: the modification time)
_VERSION_KEYS = ("ETag", "etag", "generation", "md5Hash", "LastModified", "last_modified",
                 "updated", "mtime")


def stamp(entry: dict) -> int:
    """A listed object's version as one int64 (its ETag and modification time hashed with
    its size): what the folder index keys a file's cached header on in place of an mtime,
    so a rewritten object is read again."""
    import hashlib

    text = "\0".join(f"{k}={entry[k]}" for k in _VERSION_KEYS if entry.get(k) is not None)
    digest = hashlib.blake2b(f"{text}\0{entry.get('size')}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little", signed=True)


def _empty_range(e: BaseException) -> bool:
    """Whether `e` is the answer to a range read of an empty object (S3: 416)."""
    return isinstance(e, OSError) and "range" in str(e).lower() and "satisf" in str(e).lower()


def fetch(url: str, what: str, limit: int) -> bytes:
    """The whole object `url` in one ranged GET of at most `limit` + 1 bytes (no separate
    request for its size): more than `limit` bytes is refused by name."""
    url = check_allowed(url, what)
    fs = filesystem(url)
    with reading(url, what):
        try:
            data = fs.cat_file(key(url), start=0, end=limit + 1)
        except OSError as e:
            if not _empty_range(e):
                raise
            data = b""
    if len(data) > limit:
        raise NodegraphError(f"{what} '{clean(url)}' is larger than {limit:,} bytes, the "
                             "most nodegraph reads for one")
    return bytes(data)


def heads(urls: list[str], what: str, length: int, batch: int = 256
          ) -> list[bytes | NodegraphError]:
    """The first `length` bytes of each object (all of a smaller one), read concurrently
    `batch` at a time: the bytes, or for a missing object a NodegraphError naming it; any
    other failure (after the back end's retries) raises a RemoteError naming the object."""
    if not urls:
        return []
    urls = [check_allowed(u, what) for u in urls]
    fs = filesystem(urls[0])
    out: list[bytes | NodegraphError] = []
    for i in range(0, len(urls), batch):
        part = urls[i:i + batch]
        with reading(part[0], what):
            got = fs.cat_ranges([key(u) for u in part], [0] * len(part), [length] * len(part),
                                on_error="return")
        for url, g in zip(part, got, strict=True):
            if isinstance(g, bytes | bytearray):
                out.append(bytes(g))
            elif isinstance(g, FileNotFoundError):
                out.append(NodegraphError(f"{what} '{clean(url)}' does not exist"))
            elif isinstance(g, BaseException) and _empty_range(g):
                out.append(b"")
            else:
                with reading(url, what):
                    raise g if isinstance(g, BaseException) else OSError(repr(g))
    return out


def matching(pattern: str, what: str) -> list[str]:
    """The objects a glob names (wildcards in the last part only, under a literal prefix)."""
    parent, _, last = normal(pattern, what).rpartition("/")
    if any(c in parent for c in "*?[") or "://" not in parent:
        raise NodegraphError(f"{what} '{clean(pattern)}': a remote glob has its wildcards in "
                             "the last part only (s3://bucket/shards/train-*.tar)")
    return listing(parent, what, lambda name: fnmatch.fnmatchcase(name, last))


def open_file(url: str, what: str, limit: int | None = None) -> tuple[Any, int]:
    """`url` opened for reading (after `info`), and its size; the caller closes it."""
    found = info(url, what, limit=limit)
    url = normal(url, what)
    fs = filesystem(url)
    with reading(url, what):
        f = fs.open(key(url), "rb")  # gated: the object `info` checked (allowed, its size)
    return _Guarded(f, url, what), int(found.get("size") or 0)


def read_bytes(url: str, what: str, limit: int) -> bytes:
    f, _ = open_file(url, what, limit)
    with f:
        return f.read()


class _Guarded:
    """A remote file whose read and seek errors are RemoteErrors naming the object."""

    def __init__(self, f: Any, url: str, what: str):
        self._f, self._url, self._what = f, url, what

    def read(self, n: int = -1) -> bytes:
        with reading(self._url, self._what):
            return self._f.read(n)

    def seek(self, offset: int, whence: int = 0) -> int:
        with reading(self._url, self._what):
            return self._f.seek(offset, whence)

    def tell(self) -> int:
        return self._f.tell()

    def seekable(self) -> bool:
        return True

    def readable(self) -> bool:
        return True

    def close(self) -> None:
        self._f.close()

    def __enter__(self) -> _Guarded:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def arrow_filesystem(url: str):
    """`url`'s filesystem for pyarrow (its reads go through fsspec, timeouts and all)."""
    from pyarrow.fs import FSSpecHandler, PyFileSystem

    return PyFileSystem(FSSpecHandler(filesystem(url)))
