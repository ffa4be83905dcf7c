"""What shape inference learnt about op blocks, kept by whoever validates again and again.

Meta kernels run in Python and cost ~0.5 ms per op, so the outcome of inferring one op —
its output shapes and dtypes, its trainable-parameter count and its bytes — is remembered
by block, params and input shapes. The cache is an object its owner passes to
`validate(graph, cache=...)`: the editor keeps one per open document (only nodes whose
inputs or params changed are inferred again), a test makes a fresh one. Without one,
validation uses the one its caller installed with `using(cache)` (code that calls
validation through layers that do not pass it on), else the cache of the graph's registry
(`for_registry`), so repeated validation of graphs of the same blocks stays fast and a
registry built for a test has its own.
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

SIZE = 4096

# (output (shape, dtype) pairs, trainable-parameter count, (parameter, buffer, work) bytes,
# the ports its build declared to take class indices: `nodegraph.kinds.classes.Indices`)
Entry = tuple[tuple[tuple[tuple[int, ...], Any], ...], int, tuple[int, int, int],
              tuple[Any, ...]]


class OpCache:
    """A bounded least-recently-used map from an op's inference key to its `Entry`."""

    def __init__(self, size: int = SIZE):
        self.size = size
        self._entries: OrderedDict[tuple, Entry] = OrderedDict()
        self._lock = threading.Lock()  # the editor validates on a worker thread

    def get(self, key: tuple) -> Entry | None:
        with self._lock:
            hit = self._entries.get(key)
            if hit is not None:
                self._entries.move_to_end(key)
            return hit

    def put(self, key: tuple, entry: Entry) -> None:
        with self._lock:
            self._entries[key] = entry
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)

    def make_room(self, entries: int) -> None:
        """Hold at least `entries`: the cache grows with the largest graph validated, so a
        graph larger than the default size does not evict its own entries while it is
        walked (warm validation would be as slow as cold)."""
        with self._lock:
            self.size = max(self.size, entries)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)


_by_registry: weakref.WeakKeyDictionary[Any, OpCache] = weakref.WeakKeyDictionary()


def for_registry(registry: Any) -> OpCache:
    """The cache that belongs to `registry` (made on first use, dropped with it)."""
    cache = _by_registry.get(registry)
    if cache is None:
        cache = _by_registry.setdefault(registry, OpCache())
    return cache


_current: ContextVar[OpCache | None] = ContextVar("nodegraph_op_cache", default=None)


@contextmanager
def using(cache: OpCache) -> Iterator[OpCache]:
    """Validation in this block (this thread or task) uses `cache` unless given another."""
    token = _current.set(cache)
    try:
        yield cache
    finally:
        _current.reset(token)


def default(registry: Any) -> OpCache:
    """The cache a validation without one uses: the installed one, else the registry's."""
    cache = _current.get()  # not `or`: an empty cache is falsy
    return cache if cache is not None else for_registry(registry)
