"""Front-door checks of the public functions' arguments: a wrong type or an unknown keyword
is told in the caller's terms (what was given, what is wanted, the close match), not as
an AttributeError nine frames down."""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from typing import Any

from nodegraph.model.errors import NodegraphError, not_a_graph, shown
from nodegraph.model.graph import Graph


def need_graph(function: str, graph: Any) -> Graph:
    """`graph` if it is a Graph, else an error saying how to get one."""
    if isinstance(graph, Graph):
        return graph
    raise not_a_graph(function, graph)


def known_keywords(function: str, given: Iterable[str], valid: Iterable[str],
                   hints: dict[str, str] | None = None) -> None:
    """Refuse keywords not in `valid`, listing the valid ones and the closest match."""
    valid = sorted(valid)
    for name in given:
        if name in valid:
            continue
        close = difflib.get_close_matches(name, valid, n=1)
        extra = (hints or {}).get(name) or (f"did you mean {close[0]}?" if close else "")
        raise NodegraphError(f"{function}() got an unknown keyword '{name}'"
                             + (f" ({extra})" if extra else "")
                             + f"; it takes: {', '.join(valid)}")


def need_callbacks(function: str, callbacks: Any) -> list[Any]:
    """The callbacks as a list, each a nodegraph.Callback."""
    from nodegraph.runtime.callbacks.base import Callback

    if isinstance(callbacks, Callback):
        return [callbacks]
    if isinstance(callbacks, str | bytes) or not isinstance(callbacks, Iterable):
        raise NodegraphError(f"{function}(callbacks=...) takes a list of nodegraph.Callback "
                             f"(got {shown(callbacks)})")
    out = list(callbacks)
    for i, cb in enumerate(out):
        if not isinstance(cb, Callback):
            what = getattr(cb, "__name__", None) or type(cb).__name__
            raise NodegraphError(
                f"{function}(callbacks=...): callbacks[{i}] is {what}, not a "
                "nodegraph.Callback; subclass nodegraph.Callback and override its hooks "
                "(on_epoch_end(self, trainer), on_step_end, ...), or wrap a function in one")
    return out


def need_int(function: str, name: str, value: Any, least: int = 0) -> int | None:
    """None, or a whole number >= `least`."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise NodegraphError(f"{function}({name}=...) takes a whole number >= {least} "
                             f"(got {shown(value)})")
    return value
