"""Where the wires' shape labels are: a grid of their rectangles, so a new label keeps off
the others.

Each wire places its label on its own, when it is routed; asking every other wire would
cost a thousand checks per wire on a big graph, so placed labels are kept by grid cell and
a wire asks only the cells its label could land in.
"""

from __future__ import annotations

CELL = 200.0  # scene units per grid cell


class LabelIndex:
    """Label rectangles (left, top, right, bottom) by owner, found by region."""

    def __init__(self):
        self._cells: dict[tuple[int, int], dict] = {}
        self._where: dict = {}  # owner -> (rect, its cells)

    def put(self, owner, rect: tuple[float, float, float, float] | None) -> None:
        """Record `owner`'s label at `rect` (None: it shows none)."""
        old = self._where.pop(owner, None)
        if old is not None:
            for cell in old[1]:
                self._cells[cell].pop(owner, None)
        if rect is None:
            return
        cells = _cells(*rect)
        for cell in cells:
            self._cells.setdefault(cell, {})[owner] = rect
        self._where[owner] = (rect, cells)

    def near(self, left: float, top: float, right: float, bottom: float,
             but=None) -> list[tuple[float, float, float, float]]:
        """The labels overlapping the region, except `but`'s own."""
        found = {}
        for cell in _cells(left, top, right, bottom):
            for owner, rect in self._cells.get(cell, {}).items():
                if owner is not but and rect[0] < right and rect[2] > left \
                        and rect[1] < bottom and rect[3] > top:
                    found[id(owner)] = rect
        return list(found.values())


def _cells(left: float, top: float, right: float, bottom: float) -> list[tuple[int, int]]:
    return [(cx, cy) for cx in range(int(left // CELL), int(right // CELL) + 1)
            for cy in range(int(top // CELL), int(bottom // CELL) + 1)]
