"""A guard against a reference-counting bug of PySide6 6.12.0 on Python 3.11.

That release returns None, True and False from C++ calls without taking the reference it
gives back (safe from Python 3.12 on, where these objects are immortal). On 3.11 every such
call lowers the objects' counts by one, and after some ten thousand paints the interpreter
aborts with "deallocating None". PySide6 6.11 does not have the bug (pin it where you can).
When a probe shows the leak, the counts of the three objects are raised far out of reach —
what Python 3.12 does by design — so the editor cannot be brought down by it.
"""

from __future__ import annotations

import ctypes
import sys

PROBE_CALLS = 64
HEADROOM = 1 << 60  # calls before the count could reach zero again: never


def leaks_singletons() -> bool:
    """True when void Qt calls drop a reference to None (the PySide6 6.12 bug)."""
    from PySide6.QtGui import QPen

    pen = QPen()
    before = sys.getrefcount(None)
    for _ in range(PROBE_CALLS):
        pen.setWidth(1)
    return sys.getrefcount(None) <= before - PROBE_CALLS // 2


def protect_singletons() -> bool:
    """Make None, True and False immortal when the bug is present; True when it was."""
    if sys.version_info >= (3, 12) or not leaks_singletons():
        return False
    for obj in (None, True, False):
        # ob_refcnt is the first field of every object (CPython 3.11 layout)
        ctypes.c_ssize_t.from_address(id(obj)).value += HEADROOM
    return True


PROTECTED = protect_singletons()
