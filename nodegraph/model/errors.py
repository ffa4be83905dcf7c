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


# In IPython and Jupyter a NodegraphError shows its message, where in the graph, and the
# line of the cell that raised it, not the frames inside nodegraph: the message says all a
# user can act on. False shows the whole traceback again.
SHORT_TRACEBACKS = True


class NodegraphError(Exception):
    """Base of every error a user can cause; its message is meant to be shown as it is."""

    def _render_traceback_(self) -> list[str]:
        """IPython's hook for an exception's display: the message, the node and port it
        names, the user's own line (the whole traceback when SHORT_TRACEBACKS is off)."""
        if not SHORT_TRACEBACKS:
            return _full_traceback(self)
        red, plain = "\x1b[0;31m", "\x1b[0m"
        lines = str(self).splitlines() or [""]
        out = [f"{red}{type(self).__name__}{plain}: {lines[0]}", *lines[1:]]
        where = [f"{k} '{v}'" for k, v in (("node", getattr(self, "node", None)),
                                           ("port", getattr(self, "port", None)))
                 if isinstance(v, str) and f"'{v}'" not in str(self)]
        if where:
            out.append("at " + ", ".join(where))
        frame = _callers_line(self.__traceback__)
        if frame:
            out.append(frame)
        out.append("(nodegraph.model.errors.SHORT_TRACEBACKS = False shows the whole "
                   "traceback)")
        return out


def _full_traceback(e: BaseException) -> list[str]:
    """IPython's own traceback of `e`, or Python's where IPython is not running it."""
    import sys
    import traceback

    shell = getattr(sys.modules.get("IPython"), "get_ipython", lambda: None)()
    if shell is not None:
        return shell.InteractiveTB.structured_traceback(type(e), e, e.__traceback__)
    return traceback.format_exception(type(e), e, e.__traceback__)


def _callers_line(tb) -> str:
    """'raised by: <file>:<line>: <code>' for the last frame outside nodegraph, nodes and
    the standard library (the notebook cell's line), or ''."""
    import linecache
    import os

    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ours = (package + os.sep, os.path.join(os.path.dirname(package), "nodes") + os.sep)
    found = ""
    while tb is not None:
        code = tb.tb_frame.f_code
        path = os.path.abspath(code.co_filename)
        if not path.startswith(ours):
            text = linecache.getline(code.co_filename, tb.tb_lineno,
                                     tb.tb_frame.f_globals).strip()
            if text and "site-packages" not in path and "/lib/python" not in path:
                found = f"raised by: {code.co_filename}:{tb.tb_lineno}: {text}"
        tb = tb.tb_next
    return found


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


def shown(value: object) -> str:
    """`str 'x.json'`, `int 3`, `list`: a value's type and, when short and plain, the value,
    for an error that says what a function got."""
    kind = type(value).__name__
    if isinstance(value, str | int | float) and not isinstance(value, bool):
        return f"{kind} {repr(value)[:60]}"
    if type(value).__module__.startswith("pathlib"):
        return f"{kind} {str(value)[:60]!r}"
    return kind


def not_a_graph(function: str, value: object) -> NodegraphError:
    """The error of a public function given something other than a Graph, saying how to
    get one from what was given."""
    hint = ""
    if isinstance(value, str) or type(value).__module__.startswith("pathlib"):
        hint = ": load it with nodegraph.load"
        if str(value).endswith(".ngz"):
            hint = ": a saved model loads with nodegraph.load_model"
    elif type(value).__name__ == "Model":
        hint = ": a Model's graph is model.graph"
    return NodegraphError(f"{function}() needs a Graph (got {shown(value)}{hint})")
