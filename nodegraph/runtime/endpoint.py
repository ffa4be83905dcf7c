"""A network service a run talks to (an MLflow server, an Optuna study's database), reached
before training starts: a line says whom we wait for, and a service that does not answer
within the connect timeout is an error naming it, never a silent wait of minutes.

`NODEGRAPH_CONNECT_TIMEOUT` (seconds, default 10) sets the wait. A service reached once in
a process is not reached again (the command line reaches it before importing torch, so the
line comes at once; the run itself reaches it again when called from Python).
"""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import Callable
from urllib.parse import urlsplit

from nodegraph.model.errors import NodegraphError

TIMEOUT_VAR = "NODEGRAPH_CONNECT_TIMEOUT"
DEFAULT_TIMEOUT = 10.0
_reached: set[str] = set()
PORTS = {"http": 80, "https": 443, "postgresql": 5432, "postgres": 5432, "mysql": 3306,
         "mariadb": 3306, "mssql": 1433, "oracle": 1521}


def timeout() -> float:
    """The connect timeout in seconds (`NODEGRAPH_CONNECT_TIMEOUT`, default 10)."""
    text = os.environ.get(TIMEOUT_VAR, "").strip()
    if not text:
        return DEFAULT_TIMEOUT
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value <= 3600:
        raise NodegraphError(f"{TIMEOUT_VAR}={text!r}: give the seconds to wait for a "
                             "server, a number above 0 (at most 3600)")
    return value


def shown(url: str) -> str:
    """`url` with any password hidden, for messages."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return parts._replace(netloc=netloc).geturl()


def address(url: str) -> tuple[str, int] | None:
    """(host, port) of a network URL (`http://host:5000`, `postgresql+psycopg2://u@h/db`),
    or None for a local one (a file, SQLite, a path)."""
    parts = urlsplit(url)
    scheme = parts.scheme.split("+", 1)[0].lower()
    if scheme not in PORTS or not parts.hostname:
        return None
    try:
        port = parts.port
    except ValueError as e:
        raise NodegraphError(f"{shown(url)}: {e}") from None
    return parts.hostname, port or PORTS[scheme]


def reach(what: str, url: str, flag: str,
          echo: Callable[[str], None] | None = None) -> None:
    """Say that we connect to `what` at `url`, then open (and close) a TCP connection to it
    within the timeout; an error, naming `flag` and what to do, when nothing answers.
    Local URLs pass without a word."""
    where = address(url)
    if where is None or url in _reached:
        return
    wait = timeout()
    say = echo or (lambda line: print(line, file=sys.stderr, flush=True))
    say(f"connecting to {what} at {shown(url)} …")
    host, port = where
    try:
        socket.create_connection((host, port), timeout=wait).close()
    except TimeoutError:
        raise NodegraphError(
            f"{flag} {shown(url)}: no answer from {host}:{port} within {wait:g} s; is the "
            f"server running and reachable? ({TIMEOUT_VAR}=SECONDS waits longer)") from None
    except OSError as e:
        reason = e.strerror or str(e)
        raise NodegraphError(
            f"{flag} {shown(url)}: cannot connect to {host}:{port} ({reason}); is the "
            "server running there?") from None
    _reached.add(url)
