"""Shape checks shared by blocks, raising PortError so the validator names the port."""

from __future__ import annotations

import torch

from nodegraph.errors import PortError


def fmt(shape: torch.Size | tuple) -> str:
    """A shape the way messages show it: the batch dimension as N."""
    dims = ["N", *map(str, tuple(shape)[1:])] if len(shape) else []
    return "(" + ", ".join(dims) + ("," if len(dims) == 1 else "") + ")"


def need_same_shape(x: dict, a: str = "input", b: str = "target") -> None:
    if a in x and b in x and x[a].shape != x[b].shape:
        raise PortError(b, f"'{a}' is {fmt(x[a].shape)} but '{b}' is {fmt(x[b].shape)}; "
                        "they must match element for element",
                        "reshape one of them, or check the output width of the layer before")


def need_float(x: dict, port: str) -> None:
    if port in x and not x[port].dtype.is_floating_point:
        raise PortError(port, f"'{port}' must hold real numbers, not {x[port].dtype}",
                        "for class indices use a cross-entropy loss", kind="dtype_mismatch")
