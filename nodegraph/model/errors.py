"""Errors a user can cause, as data and as exceptions.

A `Problem` is one thing wrong with a graph, keyed by node and port so the editor can paint
it and the CLI can print it. Exceptions carry problems or a node id; they are caught at the
edges (CLI, editor) and shown, never swallowed.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from enum import StrEnum


class ProblemKind(StrEnum):
    """What kind of thing is wrong. A member is its text ("bad_param"), so files, JSON
    output and comparisons with plain strings are unchanged."""

    # structure
    UNKNOWN_BLOCK = "unknown_block"
    RENAMED_BLOCK = "renamed_block"
    UNKNOWN_PARAM = "unknown_param"
    MISSING_PARAM = "missing_param"
    BAD_PARAM = "bad_param"
    UNKNOWN_PORT = "unknown_port"
    TYPE_MISMATCH = "type_mismatch"
    MULTIPLE_INPUTS = "multiple_inputs"
    MISSING_INPUT = "missing_input"
    DANGLING_EDGE = "dangling_edge"
    CYCLE = "cycle"
    BAD_GROUP = "bad_group"
    BAD_TIE = "bad_tie"
    UNTRUSTED_CODE = "untrusted_code"
    # files
    BAD_ENTRY = "bad_entry"
    DUPLICATE_KEY = "duplicate_key"
    # shapes and sizes
    SHAPE_MISMATCH = "shape_mismatch"
    DTYPE_MISMATCH = "dtype_mismatch"
    SHAPE_ERROR = "shape_error"
    TOO_LARGE = "too_large"
    DATA_ERROR = "data_error"
    DATA_MISMATCH = "data_mismatch"
    BAD_CONFIG = "bad_config"
    # training
    NO_DATA = "no_data"
    NO_OPTIMIZER = "no_optimizer"
    NOTHING_TO_TRAIN = "nothing_to_train"
    RUNTIME_ERROR = "runtime_error"
    UNEXPORTABLE = "unexportable"
    INTERNAL_ERROR = "internal_error"


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a graph: where, what kind, what it says, what to do."""

    node: str | None
    port: str | None
    kind: ProblemKind | str  # a plain string is made a ProblemKind when it names one
    message: str
    hint: str = ""
    severity: str = "error"  # "error" stops a run; "warning" is shown and allowed

    def __post_init__(self) -> None:
        if not isinstance(self.kind, ProblemKind) and self.kind in _KINDS:
            object.__setattr__(self, "kind", ProblemKind(self.kind))

    def location(self) -> str:
        if self.node is None:  # the graph's own settings: training.seed
            return self.port or "graph"
        return f"{self.node}.{self.port}" if self.port else self.node

    def __str__(self) -> str:
        text = f"{self.location()}: {self.message}"
        return f"{text} (hint: {self.hint})" if self.hint else text

    def to_dict(self) -> dict:
        d = asdict(self)
        d["kind"] = str(self.kind)
        return d


_KINDS = frozenset(k.value for k in ProblemKind)


def first_line(e: BaseException) -> str:
    """The first non-empty line of an exception's message (its type name when it has none):
    torch and numpy errors run over many lines, a problem or a status line shows one."""
    return (str(e).strip().splitlines() or [type(e).__name__])[0]


class NodegraphError(Exception):
    """Base of every error a user can cause; its message is meant to be shown as it is."""


class Unexportable(NodegraphError):
    """Something that has no faithful Python source; the message says why. Raised by the
    export, and by a block's `export` hook when a plain PyTorch script cannot do its job."""


class GraphError(NodegraphError):
    """An edit the graph refuses (unknown id, bad port, duplicate wire, ...)."""


class PortError(NodegraphError):
    """Raised by a block's build when an input's shape or dtype does not fit; names the port."""

    def __init__(self, port: str | None, message: str, hint: str = "",
                 kind: ProblemKind | str = ProblemKind.SHAPE_MISMATCH):
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
