"""Object-storage URLs (``s3://`` …): which are ours, their plain form, and the prefixes the
user allowed. Below the file fence (`nodegraph.kinds.confine` names allowed roots with
these) and the remote reader (`nodegraph.kinds.remote`, which reads through fsspec)."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from contextvars import ContextVar

from nodegraph.model.errors import NodegraphError
from nodegraph.model.sanitize import clean

# URL scheme -> fsspec protocol
SCHEMES = {"s3": "s3", "s3a": "s3", "gs": "gcs", "gcs": "gcs", "az": "abfs", "abfs": "abfs",
           "abfss": "abfs", "hf": "hf"}
_URL = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://(.*)$", re.S)

# prefixes the user allowed ("s3://bucket/prefix", without a trailing slash)
_allowed: ContextVar[tuple[str, ...]] = ContextVar("nodegraph_remote_roots", default=())


def is_url(path: object) -> bool:
    """Whether `path` names an object in a storage this module reads (``s3://`` ...)."""
    if not isinstance(path, str):
        return False
    m = _URL.match(path)
    return m is not None and m.group(1).lower() in SCHEMES


def normal(url: str, what: str = "data path") -> str:
    """`url` as ``scheme://bucket/key`` (scheme lower case, no trailing slash), or an error
    naming it when it holds credentials, a query or a part that is ``.``, ``..`` or empty."""
    m = _URL.match(url)
    if m is None or m.group(1).lower() not in SCHEMES:
        raise NodegraphError(f"{what} '{clean(url)}' is no s3://, gs://, az:// or hf:// URL")
    scheme, rest = m.group(1).lower(), m.group(2).rstrip("/")
    parts = rest.split("/")
    bucket = parts[0]
    if ("@" in bucket and scheme != "hf") or ":" in bucket:
        shown = f"{scheme}://…@{bucket.rpartition('@')[2]}" if "@" in bucket else clean(url)
        raise NodegraphError(f"{what} '{shown}' holds credentials or a port; they come "
                             "from the environment or the usual config files, never from a "
                             "graph")
    control = any(ord(c) < 32 or ord(c) == 127 for c in rest)
    if control or any(c in rest for c in "?#\\") or any(p in ("", ".", "..") for p in parts):
        raise NodegraphError(f"{what} '{clean(url)}' has an empty, '.' or '..' part, a query, "
                             "a control character or a backslash; name the object plainly")
    return f"{scheme}://{rest}"


def _under(url: str, root: str) -> bool:
    return url == root or url.startswith(root + "/")


@contextlib.contextmanager
def allowing(roots: tuple[str, ...] | list[str]) -> Iterator[None]:
    """Within this block, remote data may also come from under `roots` (URL prefixes)."""
    token = _allowed.set((*_allowed.get(), *(normal(r, "--data-root") for r in roots)))
    try:
        yield
    finally:
        _allowed.reset(token)


def allowed_now() -> tuple[str, ...]:
    return _allowed.get()
