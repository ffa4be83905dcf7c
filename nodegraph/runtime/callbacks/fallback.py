"""torch.compile with a way back: the training forward through `torch.compile(backend)`;
when compiling is unavailable or fails on the first call, a warning and eager from then on.
A graph error (`NodegraphError`, a node's own failure) is not a compiler failure and passes
through."""

from __future__ import annotations

from collections.abc import Callable

import torch

from nodegraph.model.errors import NodegraphError, first_line
from nodegraph.model.events import Emitter, Message


def compiled_or_eager(run: Callable, backend: str, events: Emitter) -> Callable:
    """`run(plan, values)` through torch.compile, falling back to `run` itself."""
    try:
        fast = torch.compile(run, backend=backend)
    except Exception as e:  # torch.compile unavailable on this platform
        events.emit(Message(f"torch.compile unavailable ({first_line(e)}); running eager",
                            "warning"))
        return run
    state = {"run": fast}

    def call(plan, values):
        try:
            return state["run"](plan, values)
        except NodegraphError:
            raise
        except Exception as e:
            if state["run"] is run:
                raise
            state["run"] = run
            events.emit(Message(f"torch.compile failed ({first_line(e)}); running eager",
                                "warning"))
            return run(plan, values)

    return call
