"""Read-only dicts: how a graph hands out the state only its methods may change.

`Graph` shows its training settings, UI data and group definitions, and each `Node` its
params, as a `ReadOnlyDict`: a real `dict` to every reader (json, `isinstance(x, dict)`,
`**`, `dict(x)`, look-ups at C speed), whose mutating methods raise TypeError. A write that
goes around the graph's methods, and so around their checks and their `GraphChanged`
events, fails where it is made instead of going unseen by the editor's canvas and undo
stack. The owner (`nodegraph.model.graph`) writes through `dict` itself
(`dict.__setitem__(d, k, v)`). Only the top level is guarded: a list or dict stored as a
value is handed out as it is, so writers replace a value (`Graph.set_ui`) rather than edit
it in place.
"""

from __future__ import annotations

import copy
from typing import Any, NoReturn

WHY = ("is read-only: change the graph through its methods (Graph.set_param, set_training, "
       "set_ui, set_positions, define_group, add_tie, ...)")


class ReadOnlyDict(dict):
    """A dict whose own methods cannot change it; copies keep the guard."""

    __slots__ = ()

    def _refuse(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise TypeError(f"this mapping {WHY}")

    __setitem__ = _refuse  # type: ignore[assignment]
    __delitem__ = _refuse  # type: ignore[assignment]
    __ior__ = _refuse  # type: ignore[assignment]
    update = _refuse  # type: ignore[assignment]
    pop = _refuse  # type: ignore[assignment]
    popitem = _refuse  # type: ignore[assignment]
    setdefault = _refuse  # type: ignore[assignment]
    clear = _refuse  # type: ignore[assignment]

    def __copy__(self) -> ReadOnlyDict:
        return type(self)(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> ReadOnlyDict:
        return type(self)(copy.deepcopy(dict(self), memo))

    def __reduce__(self) -> tuple[Any, ...]:  # pickling (worker processes) rebuilds it whole
        return (type(self), (dict(self),))
