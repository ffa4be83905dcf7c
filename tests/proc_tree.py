"""Processes seen through /proc (Linux; psutil is not a dependency): a process's
descendants, and every process carrying an environment marker — which finds orphans too,
as a process reparented to init still carries the environment it was started with."""

from __future__ import annotations

import os
from pathlib import Path


def _read(pid: int, name: str) -> bytes:
    try:
        return (Path("/proc") / str(pid) / name).read_bytes()
    except OSError:  # gone meanwhile, or not ours to read
        return b""


def parent(pid: int) -> int | None:
    stat = _read(pid, "stat").decode(errors="replace")
    if not stat:
        return None
    fields = stat.rsplit(")", 1)[-1].split()  # the name in (...) may hold spaces
    return int(fields[1]) if fields[0] != "Z" else None  # a zombie is already over


def command(pid: int) -> str:
    return _read(pid, "cmdline").replace(b"\0", b" ").decode(errors="replace").strip()


def pids() -> list[int]:
    return [int(p) for p in os.listdir("/proc") if p.isdigit()]


def descendants(root: int) -> dict[int, int]:
    """Living descendants of `root`, pid -> parent pid."""
    parents = {p: parent(p) for p in pids()}
    found: dict[int, int] = {}
    frontier = [root]
    while frontier:
        here = frontier.pop()
        for p, pp in parents.items():
            if pp == here and p not in found:
                found[p] = here
                frontier.append(p)
    return found


def marked(name: str, value: str) -> list[int]:
    """Living processes whose environment holds name=value (descendants of the process that
    set it, wherever they were reparented)."""
    needle = f"{name}={value}".encode()
    return [p for p in pids() if p != os.getpid() and parent(p) is not None
            and needle in _read(p, "environ").split(b"\0")]


def servers(root: int) -> set[int]:
    """The helper servers multiprocessing starts (fork server, resource tracker) among the
    descendants of `root`: started with -c, and not forked from a fork server (a worker
    forked from one has its command line)."""
    tree = descendants(root)
    out = set()
    for p, pp in tree.items():
        cmd = command(p)
        is_server = ("multiprocessing.forkserver import main" in cmd
                     or "multiprocessing.resource_tracker import main" in cmd)
        if is_server and "multiprocessing.forkserver import main" not in command(pp):
            out.add(p)
    return out
