"""Garbage collection on the GUI thread only, while the editor's own threads run Python.

Python's cycle collector runs in whichever thread happens to allocate when a threshold is
passed, and it frees every unreachable cycle in the process, whoever made it. A cycle of
Qt wrappers the GUI thread dropped (a menu and its actions, say) is then destroyed on a
training or validation thread: shiboken releases the interpreter lock to run the C++
destructor there, or queues it for the GUI thread, and the two threads can each end up
waiting for what the other holds (the runner's deadlock of issue #12). Keeping the
background threads free of Qt objects is not enough, because the garbage is not theirs.

So while any editor thread runs (`hold`), automatic collection is off and a timer on the
GUI thread collects the generations whose thresholds were passed, as the interpreter
would have; a collection some code still starts off the GUI thread (`gc.collect()` in a
library, a test) finds nothing, because for its duration every tracked object is parked
in the permanent generation (`gc.freeze`; the editor freezes nothing itself). When the last
holder lets go, automatic collection is restored as it was.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Callable

from PySide6.QtCore import QObject, QTimer

CHECK_MS = 100


class _State:
    holds = 0
    was_enabled = True
    timer: QTimer | None = None


_state = _State()
_parked = threading.local()  # this thread's collection froze everything


def _off_gui_thread(phase: str, info: dict) -> None:
    """gc callback while held: a collection started off the GUI thread sees no object."""
    if threading.current_thread() is threading.main_thread():
        return
    if phase == "start":
        gc.freeze()
        _parked.active = True
    elif getattr(_parked, "active", False):
        _parked.active = False
        gc.unfreeze()


def collect_due() -> int:
    """Collect the oldest generation whose threshold was passed (none: nothing); the number
    of unreachable objects found. Call on the GUI thread."""
    counts, thresholds = gc.get_count(), gc.get_threshold()
    for generation in (2, 1, 0):
        if thresholds[generation] and counts[generation] > thresholds[generation]:
            return gc.collect(generation)
    return 0


def holding() -> bool:
    """Whether automatic collection is handed to the GUI thread now."""
    return _state.holds > 0


def hold() -> Callable[[], None]:
    """Hand collection to the GUI thread until the returned function is called (once; later
    calls do nothing). Call on the GUI thread, before starting a thread that runs Python."""
    if threading.current_thread() is not threading.main_thread():  # the editor's GUI thread
        raise RuntimeError("internal error: collector.hold called off the GUI thread")
    if _state.holds == 0:
        _state.was_enabled = gc.isenabled()
        gc.disable()
        gc.callbacks.append(_off_gui_thread)
        _state.timer = QTimer(interval=CHECK_MS)
        _state.timer.timeout.connect(collect_due)
        _state.timer.start()
    _state.holds += 1
    released = False

    def release() -> None:
        nonlocal released
        if released:
            return
        released = True
        _state.holds -= 1
        if _state.holds == 0:
            if _state.timer is not None:
                _state.timer.stop()
                _state.timer = None
            collect_due()
            if _off_gui_thread in gc.callbacks:
                gc.callbacks.remove(_off_gui_thread)
            if _state.was_enabled:
                gc.enable()
    return release


class Hold:
    """One owner's hold (a runner, a validator): taken while its thread runs, let go when
    the thread is done or, at the latest, when the owner is destroyed."""

    def __init__(self, owner: QObject):
        self._release: Callable[[], None] | None = None
        owner.destroyed.connect(lambda *_: self.release())  # holds this, not the owner

    def take(self) -> None:
        if self._release is None:
            self._release = hold()

    def release(self) -> None:
        if self._release is not None:
            release, self._release = self._release, None
            release()
