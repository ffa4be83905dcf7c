"""Which cards lie in a region: a grid of the cards' rectangles, for routing wires.

Routing asks this for every wire it draws; Qt's own item index answers the same question
but rebuilds itself after each wire changes shape, which made opening a 500-node graph take
seconds. The grid is rebuilt only when a card was added, removed, moved or resized.
"""

from __future__ import annotations

CELL = 400.0  # scene units per grid cell


class CardIndex:
    """Cards by grid cell, built on the first question after a change."""

    def __init__(self):
        self._cells: dict[tuple[int, int], list] | None = None

    def invalidate(self) -> None:
        self._cells = None

    def _build(self, cards) -> dict:
        cells: dict[tuple[int, int], list] = {}
        for item in cards:
            r = item.mapRectToScene(item.rect)
            entry = (r.left(), r.top(), r.right(), r.bottom(), item)
            for cx in range(int(r.left() // CELL), int(r.right() // CELL) + 1):
                for cy in range(int(r.top() // CELL), int(r.bottom() // CELL) + 1):
                    cells.setdefault((cx, cy), []).append(entry)
        return cells

    def query(self, cards, left: float, top: float, right: float, bottom: float) -> list:
        """(left, top, right, bottom, item) of the cards overlapping the region; `cards`
        are all of them (read when the grid must be built)."""
        if self._cells is None:
            self._cells = self._build(cards)
        seen, out = set(), []
        for cx in range(int(left // CELL), int(right // CELL) + 1):
            for cy in range(int(top // CELL), int(bottom // CELL) + 1):
                for entry in self._cells.get((cx, cy), ()):
                    if id(entry[4]) in seen:
                        continue
                    if entry[0] < right and entry[2] > left and entry[1] < bottom \
                            and entry[3] > top:
                        seen.add(id(entry[4]))
                        out.append(entry)
        return out
