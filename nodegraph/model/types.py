"""Port types: what a wire carries, and which outputs may feed which inputs.

A port type is a small named value with an optional parent. An output may feed an input
when the two types are equal or the output's type descends from the input's: a `loss` is
a scalar `tensor`, so a loss may feed a block that takes any tensor, but an arbitrary tensor
may not feed an optimizer. The editor colours ports by type; the validator refuses wires
whose types do not fit, with the reason.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PortType:
    """A kind of value that travels along a wire."""

    name: str
    doc: str
    color: str  # hex colour the editor paints ports and wires of this type with
    parent: PortType | None = None

    def accepts(self, source: PortType) -> bool:
        """True when a wire from an output of type `source` may end at an input of this type."""
        t: PortType | None = source
        while t is not None:
            if t == self:
                return True
            t = t.parent
        return False

    def __str__(self) -> str:
        return self.name


TENSOR = PortType("tensor", "a batch of values (any shape)", "#4f9dde")
LOSS = PortType("loss", "a scalar to minimise", "#e0564c", parent=TENSOR)
SCHEDULE = PortType("schedule", "a learning-rate schedule for an optimizer", "#b07cd8")
TRANSFORM = PortType("transform", "per-sample augmentation for a data block, chained",
                     "#c9b458")
MODULE = PortType("module", "a sub-model handed to a procedure", "#d8a03c")
BOXES = PortType("boxes", "boxes (N, K, 4) as x0, y0, x1, y1 in pixels", "#3cb89a",
                 parent=TENSOR)

ALL_TYPES: dict[str, PortType] = {t.name: t for t in (TENSOR, LOSS, SCHEDULE, MODULE, BOXES,
                                                           TRANSFORM)}


def why_incompatible(source: PortType, target: PortType) -> str | None:
    """The reason a wire from `source` to `target` is refused, or None when it fits."""
    if target.accepts(source):
        return None
    return f"a {source.name} output ({source.doc}) cannot feed a {target.name} input ({target.doc})"
