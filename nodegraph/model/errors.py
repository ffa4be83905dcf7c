"""Errors a user can cause, as data and as exceptions.

A `Problem` is one thing wrong with a graph, keyed by node and port so the editor can paint
it and the CLI can print it. Exceptions carry problems or a node id; they are caught at the
edges (CLI, editor) and shown, never swallowed.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a graph: where, what kind, what it says, what to do."""

    node: str | None
    port: str | None
    kind: str
    message: str
    hint: str = ""
    severity: str = "error"  # "error" stops a run; "warning" is shown and allowed

    def location(self) -> str:
        if self.node is None:
            return "graph"
        return f"{self.node}.{self.port}" if self.port else self.node

    def __str__(self) -> str:
        text = f"{self.location()}: {self.message}"
        return f"{text} (hint: {self.hint})" if self.hint else text

    def to_dict(self) -> dict:
        return asdict(self)


class NodegraphError(Exception):
    """Base of every error a user can cause; its message is meant to be shown as it is."""


class GraphError(NodegraphError):
    """An edit the graph refuses (unknown id, bad port, duplicate wire, ...)."""


class PortError(NodegraphError):
    """Raised by a block's build when an input's shape or dtype does not fit; names the port."""

    def __init__(self, port: str, message: str, hint: str = "", kind: str = "shape_mismatch"):
        self.port, self.hint, self.kind = port, hint, kind
        super().__init__(message)


class ParamError(NodegraphError):
    """A parameter value that does not fit its declaration."""


class GraphFileError(NodegraphError):
    """A graph file that cannot be read at all (missing, malformed JSON, wrong format)."""


class ValidationError(NodegraphError):
    """A graph that cannot run; carries every problem found."""

    def __init__(self, problems: list[Problem]):
        self.problems = [p for p in problems if p.severity == "error"]
        lines = "\n".join(f"  {p}" for p in self.problems)
        super().__init__(f"the graph has {len(self.problems)} problem(s):\n{lines}")


class NodeRuntimeError(NodegraphError):
    """A failure while running, named by the node where it happened."""

    def __init__(self, node: str | None, message: str, hint: str = ""):
        self.node = node
        self.hint = hint
        where = f"node '{node}': " if node else ""
        super().__init__(f"{where}{message}" + (f" (hint: {hint})" if hint else ""))
