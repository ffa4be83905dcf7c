"""Keep Python's cycle collector out of the hot paths: building, validating, compiling.

Opt-in, by the program that owns the process: the collector is process-wide state, and a
library that froze or paused it would keep a host program's garbage alive (a reference
cycle made before the first `Graph` would never be freed). `nodegraph`'s own entry points,
the CLI (`nodegraph.cli.main.main`) and the editor (`nodegraph.gui.shell.app.main`), call
`tune_process()`; a host program may too. Untuned, both remedies below do nothing.

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
  threads run (`nodegraph.gui.base.collector`).
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_tuned = False
_frozen = False


def tune_process() -> None:
    """Let nodegraph tune the collector of this process from now on: freeze what the block
    library leaves once it is loaded, pause collection while validating and compiling.
    For programs that own their process (nodegraph's CLI and editor), not for libraries."""
    global _tuned
    _tuned = True


def tuned() -> bool:
    return _tuned


def freeze_imports() -> None:
    """In a tuned process, move every object alive now to the permanent generation, the
    first time only; otherwise nothing."""
    global _frozen
    if _tuned and not _frozen:
        _frozen = True
        gc.freeze()


@contextmanager
def paused() -> Iterator[None]:
    """In a tuned process, automatic collection off inside and restored to what it was
    after (main thread only); otherwise nothing."""
    if not _tuned or threading.current_thread() is not threading.main_thread() \
            or not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
