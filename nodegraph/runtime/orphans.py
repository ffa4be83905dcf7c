"""Processes that outlive the launcher that started them: adopted, then stopped.

`nodegraph run --nproc N` starts torchrun, which starts each rank in a session of its own
and stops them when told to stop. But a SIGTERM that reaches torchrun while it is still
starting them ends it before its agent holds them (it has no process context to close
yet), and the ranks train on with nobody to report to: seen once in CI, two ranks alive
minutes after the run had ended. On Linux the launcher makes itself a child subreaper
(`prctl(PR_SET_CHILD_SUBREAPER)`), so such orphans are re-parented to it instead of to
init, and `stop_adopted` ends them once torchrun is gone. Elsewhere both do nothing.
Only for a process that owns its children (the CLI's launcher), never a host program.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import time

PR_SET_CHILD_SUBREAPER = 36  # <linux/prctl.h>
ROUNDS = 3  # an adopted rank's own children are adopted in turn when it ends


def adopt_orphans() -> bool:
    """Make this process the one orphans below it are re-parented to (Linux); whether it
    took effect."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _children() -> list[int]:
    """The processes whose parent is this one, read from /proc."""
    me, found = os.getpid(), []
    for entry in os.listdir("/proc"):  # gated: the kernel's process table, no user file
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:  # gated: the kernel's process table
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == me:
                        found.append(int(entry))
            except (OSError, IndexError, ValueError):
                continue
    return found


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def _reaped(pids: set[int], until: float) -> set[int]:
    """`pids` reaped as they end, until the monotonic time `until`; those still running."""
    while pids and time.monotonic() < until:
        for pid in list(pids):
            try:
                done, _ = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                done = pid
            if done:
                pids.discard(pid)
        time.sleep(0.05)
    return pids


def stop_adopted(grace: float = 10.0) -> list[int]:
    """Every child still below this process once its own child has been waited for (an
    adopted orphan): SIGTERM, then SIGKILL to what is left after `grace` seconds, each
    reaped; the pids stopped. Nothing on other systems."""
    if not sys.platform.startswith("linux"):
        return []
    stopped: list[int] = []
    for _ in range(ROUNDS):
        left = _children()
        if not left:
            break
        stopped += left
        for pid in left:
            _signal(pid, signal.SIGTERM)
        for pid in _reaped(set(left), time.monotonic() + grace):
            _signal(pid, signal.SIGKILL)
            _reaped({pid}, time.monotonic() + grace)
    return stopped
