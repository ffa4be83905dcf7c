"""The block library, loaded in the background after the editor's window is drawn.

Importing the blocks imports torch, which takes seconds on a busy machine; the editor draws
its window first (the file's cards, titled by their ids and types) and loads the library
right after the first paint. The loading runs in a plain `threading.Thread` that creates
and touches no Qt object: it imports the block library and what the first check needs, and
posts what it made to a queue, which a timer on the GUI thread drains and announces with
`loaded` (or `failed`, with the message). The modules only the first run needs (the
compiler, the training loop, torch's optimizer stack: seconds more) are imported by the
same thread only when `warm` is called, once the first check is in: imported before, they
held the wire labels back and slowed the check sharing the two cores and the GIL.
"""

from __future__ import annotations

import queue
import threading

from PySide6.QtCore import QObject, QTimer, Signal

from nodegraph.model.spec import default_registry

POLL_MS = 30


def devices() -> list[str]:
    """The training devices to offer: auto, cpu and each CUDA device (imports torch)."""
    import torch
    names = ["auto", "cpu"]
    if torch.cuda.is_available():
        names += ["cuda"] + [f"cuda:{i}" for i in range(torch.cuda.device_count())]
    return names


def _first_optimizer() -> None:
    """Make one optimizer and drop it: torch imports its compiler stack (torch._dynamo,
    over a second) when the first optimizer of a process is made, which would otherwise
    delay the first Train's first step."""
    import torch
    torch.optim.Adam([torch.zeros(1, requires_grad=True)])


def _load(outbox: queue.SimpleQueue, warm: threading.Event, closing: threading.Event) -> None:
    """The worker thread: the library and what the first check imports, announced; then,
    once `warm` is set, what the first run imports (nothing more when `closing` is). No Qt."""
    try:
        registry = default_registry()
        found = devices()
        import nodegraph.check.validate  # noqa: F401 — the first check imports this
    except Exception as e:  # no library installed, a broken third-party block package
        outbox.put(("failed", f"{type(e).__name__}: {e}"))
        return
    outbox.put(("loaded", registry, found))
    warm.wait()
    if closing.is_set():
        return
    try:
        import nodegraph.runtime.compile  # noqa: F401 — the first preview and run
        import nodegraph.runtime.train  # noqa: F401 — and the first Train this
        _first_optimizer()
    except Exception:  # noqa: S110 — only a head start: the run itself will say what fails
        pass


class BlocksLoader(QObject):
    """Loads the default block library once, off the GUI thread; answers on it."""

    loaded = Signal(object, list)  # Registry, device names
    failed = Signal(str)

    def __init__(self, parent=None):
        super().__init__(parent)
        self._outbox: queue.SimpleQueue = queue.SimpleQueue()
        self._poll = QTimer(self, interval=POLL_MS)
        self._poll.timeout.connect(self._collect)
        self._thread: threading.Thread | None = None
        self._warm = threading.Event()  # set: import what the first run needs
        self._closing = threading.Event()  # set: the window closes, import nothing more

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=_load, args=(self._outbox, self._warm,
                                                                  self._closing),
                                            name="nodegraph-blocks", daemon=True)
            self._thread.start()
            self._poll.start()

    def warm(self) -> None:
        """Import, in the loading thread, what the first preview and Train need (call it
        once the first check is in, so that it waits for nothing of this)."""
        self._warm.set()

    def join(self) -> None:
        """Wait for the loading thread and announce nothing (its window is closing: a thread
        still importing torch when the interpreter exits would abort the process)."""
        self._poll.stop()
        if self._thread is not None:
            self._closing.set()
            self._warm.set()
            self._thread.join()

    def _collect(self) -> None:
        try:
            message = self._outbox.get_nowait()
        except queue.Empty:
            return
        self._poll.stop()
        if message[0] == "loaded":
            self.loaded.emit(message[1], message[2])
        else:
            self.failed.emit(message[1])

