"""Keep Python's cycle collector out of the hot paths: building, validating, compiling.

A full collection walks every tracked object in the process, and importing torch and the
block library leaves a few hundred thousand of them; it runs whenever enough new objects
have survived, so building or compiling a graph of thousands of nodes paid for several walks
over torch's heap (70-94 % of the time of a 5,000-node build). Two remedies, measured in
`benchmarks/scale.py`:

- `freeze_imports`: once per process, after the block library is loaded (the first `Graph`),
  park the objects that exist then in the permanent generation (`gc.freeze`), so later
  collections walk only what was made since. Those objects are still freed by reference
  counting; only a cycle among them would outlive its use (modules and classes, nearly all).
- `paused`: no automatic collection for the duration of validate and compile, which make
  and drop many small objects, and the previous state back after. Only on the main thread:
  collection is process-wide, and the editor hands it to its GUI thread while its own
  threads run (`nodegraph.gui.collector`).
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_frozen = False


def freeze_imports() -> None:
    """Move every object alive now to the permanent generation, the first time only."""
    global _frozen
    if not _frozen:
        _frozen = True
        gc.freeze()


@contextmanager
def paused() -> Iterator[None]:
    """Automatic collection off inside, restored to what it was after (main thread only)."""
    if threading.current_thread() is not threading.main_thread() or not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
