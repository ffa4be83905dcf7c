"""Names for what a trace holds: the user's line, a function's import path, JSON values.

Messages name the user's line that made a node (`_line`, `_where`); opaque blocks name
their function or class by the path they are imported by again (`callable_path`).
"""

from __future__ import annotations

import linecache
import math
import traceback
from pathlib import Path
from typing import Any

import torch

from nodegraph.interop.export.source import torch_path
from nodegraph.model.errors import NodegraphError

_PACKAGE = str(Path(__file__).resolve().parent)  # the importer's own frames, never the user's


ALIASES = {"F": "torch.nn.functional", "nn": "torch.nn", "nn.init": "torch.nn.init"}


def callable_path(fn: Any) -> str | None:
    """``module:qualname`` of a torch, operator or math function (torch's public name)."""
    path = torch_path(fn)
    if path is not None:
        head, _, name = path.rpartition(".")
        if head == "torch.Tensor":
            return f"torch:Tensor.{name}"
        return f"{ALIASES.get(head, head)}:{name}"
    module = getattr(fn, "__module__", None) or ""
    if module in ("_operator", "operator", "math"):
        return f"{module.lstrip('_')}:{fn.__name__}"
    return None


def _function_path(node) -> str:
    if node.op == "call_method":
        return f"torch:Tensor.{node.target}"
    path = callable_path(node.target)
    if path is not None:
        return path
    fn, module = node.target, getattr(node.target, "__module__", "")
    raise NodegraphError(f"'{node.name}' calls {module}.{getattr(fn, '__qualname__', fn)}, "
                         "which is not part of torch: trace a module whose forward calls "
                         "torch only, or wrap that call in a submodule")


def _import_path(cls: type) -> str | None:
    """``module:QualName`` by which `cls` can be imported again (torch's public path)."""
    path = callable_path(cls)
    if path is not None:
        return path
    if "<locals>" in cls.__qualname__ or cls.__module__ == "__main__":
        return None
    return f"{cls.__module__}:{cls.__qualname__}"


def _json(value: Any) -> Any:
    """`value` as JSON, or an error naming what JSON cannot hold."""
    if isinstance(value, tuple | list):
        return [_json(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _json(v) for k, v in value.items()}
    if isinstance(value, float) and not math.isfinite(value):  # masked_fill(m, -inf)
        return {"float": str(value)}
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, torch.dtype):
        return {"dtype": str(value).removeprefix("torch.")}
    if callable(value) and callable_path(value) is not None:
        return {"function": callable_path(value)}
    raise NodegraphError(f"a {type(value).__name__} argument cannot be written to a graph "
                         "file")


def _line(node) -> str:
    """' at file:line (`code`)': the user's line that made an fx node, where recorded."""
    lines = (node.meta.get("stack_trace") or "").splitlines()
    for i, text in enumerate(lines):
        text = text.strip()
        if text.startswith("File ") and "/torch/" not in text.replace("\\", "/") and \
                "nodegraph/interop" not in text:
            parts = text.split('"')
            where = Path(parts[1]).name if len(parts) > 2 else "?"
            number = text.split("line ")[-1].split(",")[0]
            code = lines[i + 1].strip() if i + 1 < len(lines) else ""
            return f" at {where}:{number} (`{code}`)"
    return ""


def _describe(node) -> str:
    return f"{node.target}" if node.op == "call_method" else getattr(
        node.target, "__name__", str(node.target))


def _owner(node) -> str:
    """The innermost submodule whose forward made the fx node ('' for the root's)."""
    stack = node.meta.get("nn_module_stack") or {}
    return next(reversed(stack), "") if stack else ""


def _where(error: BaseException) -> str:
    """' at file:line (`the code`)': the last frame of the traced code outside torch."""
    frames = [f for f, _ in traceback.walk_tb(error.__traceback__)
              if "/torch/" not in f.f_code.co_filename.replace("\\", "/")
              and not f.f_code.co_filename.startswith(_PACKAGE)
              and not f.f_code.co_filename.startswith("<")]  # (generated code: no line)
    if not frames:
        return ""
    own = [f for f in frames if not any(part in f.f_code.co_filename.replace("\\", "/")
                                        for part in ("/site-packages/", "/dist-packages/"))]
    frame = (own or frames)[-1]  # the user's line, not the library's (einops) it called
    line = linecache.getline(frame.f_code.co_filename, frame.f_lineno).strip()
    return f" at {Path(frame.f_code.co_filename).name}:{frame.f_lineno} (`{line}`)"
