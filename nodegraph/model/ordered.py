"""A sequence kept in order by a float key per item, in blocks, so that no edit is O(n).

`Wires` keeps the graph's wire order here. Each item has a position key; the keys ascend
along the sequence. Items live in blocks of at most `2 * LOAD` (the layout of the
`sortedcontainers` package's SortedList, reduced to what the graph needs): finding a key is
a bisection over the blocks' last keys and one inside a block, an insertion or removal
moves at most one block's entries, and a position is the lengths of the blocks before it
added up (a few hundred blocks at most for the graphs nodegraph edits). Reading the whole
sequence joins the blocks once per change.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable
from itertools import chain
from typing import Generic, TypeVar

T = TypeVar("T")
LOAD = 256  # a block splits in two past 2 * LOAD entries


class Ordered(Generic[T]):
    """Items in ascending key order; keys are floats, given by the caller, unique."""

    def __init__(self, pairs: Iterable[tuple[float, T]] = ()) -> None:
        self._keys: list[list[float]] = []
        self._items: list[list[T]] = []
        self._maxes: list[float] = []  # the last key of each block
        self._len = 0
        for key, item in pairs:
            self.append(key, item)

    def __len__(self) -> int:
        return self._len

    def items(self) -> list[T]:
        """Every item, in order."""
        return list(chain.from_iterable(self._items))

    def keys(self) -> list[float]:
        return list(chain.from_iterable(self._keys))

    def next_key(self) -> float:
        """The key of an item appended now: one above the last."""
        return self._maxes[-1] + 1.0 if self._maxes else 0.0

    def append(self, key: float, item: T) -> None:
        """Add an item after every other (its key above every key)."""
        keys = self._keys
        if keys and len(keys[-1]) < LOAD:
            keys[-1].append(key)
            self._items[-1].append(item)
            self._maxes[-1] = key
        else:
            keys.append([key])
            self._items.append([item])
            self._maxes.append(key)
        self._len += 1

    def position(self, key: float) -> int:
        """Where the item of `key` stands in the sequence."""
        b, i = self._locate(key)
        return sum(map(len, self._keys[:b])) + i

    def key_at(self, index: int) -> float:
        """The key of the item at position `index` (0 <= index < len)."""
        b, i = self._block_of(index)
        return self._keys[b][i]

    def replace(self, key: float, item: T) -> None:
        """The item of `key` becomes `item`, in the same place."""
        b, i = self._locate(key)
        self._items[b][i] = item

    def remove(self, key: float) -> None:
        """Take out the item of `key`."""
        b, i = self._locate(key)
        del self._keys[b][i]
        del self._items[b][i]
        self._len -= 1
        if not self._keys[b]:
            del self._keys[b], self._items[b], self._maxes[b]
        else:
            self._maxes[b] = self._keys[b][-1]

    def insert(self, index: int, key: float, item: T) -> None:
        """Put an item at position `index`; `key` must lie between its neighbours' keys."""
        if index >= self._len:
            self.append(key, item)
            return
        b, i = self._block_of(index)
        self._keys[b].insert(i, key)
        self._items[b].insert(i, item)
        self._len += 1
        if len(self._keys[b]) > 2 * LOAD:  # split: blocks stay small
            keys, items = self._keys[b], self._items[b]
            self._keys[b:b + 1] = [keys[:LOAD], keys[LOAD:]]
            self._items[b:b + 1] = [items[:LOAD], items[LOAD:]]
            self._maxes[b:b + 1] = [keys[LOAD - 1], keys[-1]]

    def key_for(self, index: int) -> float | None:
        """A key for an item to insert at position `index` (0 <= index <= len): between its
        neighbours' keys; None when they leave no room (renumber, then ask again)."""
        n = self._len
        if not n:
            return 0.0
        lo = self.key_at(index - 1) if index > 0 else self.key_at(0) - 2.0
        hi = self.key_at(index) if index < n else self.key_at(n - 1) + 2.0
        key = (lo + hi) / 2
        return key if lo < key < hi else None

    def _locate(self, key: float) -> tuple[int, int]:
        b = bisect_left(self._maxes, key)
        if b == len(self._maxes):
            raise KeyError(key)
        i = bisect_left(self._keys[b], key)
        if self._keys[b][i] != key:
            raise KeyError(key)
        return b, i

    def _block_of(self, index: int) -> tuple[int, int]:
        if not 0 <= index < self._len:
            raise IndexError(index)
        for b, keys in enumerate(self._keys):
            if index < len(keys):
                return b, index
            index -= len(keys)
        raise IndexError(index)  # not reached: the lengths add up to _len
