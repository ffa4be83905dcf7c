"""Shape checks shared by blocks, raising PortError so the validator names the port.

Messages are read after the block's id and node id ("layers.Conv2d 'conv1' needs ..."), so
they start with a verb, show shapes with N for the batch (`fmt`) and say what to do.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import torch

from nodegraph.model.errors import PortError


def fmt(shape: torch.Size | tuple | list) -> str:
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


def need_ndim(x: dict, port: str, ndims: Iterable[int], layout: str,
              hint: str = "") -> torch.Tensor:
    """The tensor at `port`, after checking its number of dims; `layout` names the wanted
    shape for the message, e.g. ``(N, C, H, W)``."""
    t = x[port]
    if t.ndim not in tuple(ndims):
        raise PortError(port, f"needs {layout} but receives {fmt(t.shape)}",
                        hint or reshape_hint(t.shape, layout))
    return t


def reshape_hint(shape: torch.Size | tuple, layout: str) -> str:
    """What to insert before a block that wants `layout`: flat square images get a concrete
    Reshape suggestion, e.g. (N, 784) -> Reshape to [1, 28, 28]."""
    if len(shape) == 2 and layout == "(N, C, H, W)":
        side = math.isqrt(shape[1])
        if side * side == shape[1]:
            return (f"insert layers.Reshape with shape [1, {side}, {side}] before it "
                    "(one channel of a square image)")
        return "insert layers.Reshape with shape [C, H, W] before it"
    if len(shape) > 2 and layout.count(",") == 1:
        return "insert layers.Flatten (or a global pool) before it"
    return f"insert layers.Reshape before it to give {layout}"


def need_broadcast(x: dict, verb: str, a: str = "a", b: str = "b") -> torch.Size:
    """The shape `a` and `b` broadcast to; otherwise an error naming both shapes."""
    try:
        return torch.broadcast_shapes(x[a].shape, x[b].shape)
    except RuntimeError:
        raise PortError(b, f"cannot {verb} '{a}' {fmt(x[a].shape)} and '{b}' "
                        f"{fmt(x[b].shape)}: the shapes differ and do not broadcast",
                        "make them equal, or give one of them size 1 in the differing "
                        "dims") from None


def need_index(x: dict, port: str, what: str) -> None:
    """`port` must hold integer indices (class or token ids), not real numbers."""
    if port in x and (x[port].dtype.is_floating_point or x[port].dtype == torch.bool):
        raise PortError(port, f"'{port}' must hold integer indices for {what}, not "
                        f"{x[port].dtype}", "integer class or token columns come from the "
                        "data block with integer targets", kind="dtype_mismatch")


def dim_index(dim: int, ndim: int, port: str, shape: torch.Size | tuple) -> int:
    """`dim` as a non-negative index into a tensor of `ndim` dims, or a PortError."""
    if not -ndim <= dim < ndim:
        raise PortError(port, f"has no dim {dim}: it is {fmt(shape)} ({ndim} dims, "
                        f"numbered 0..{ndim - 1} or -{ndim}..-1)",
                        "choose a dim that exists; dim 0 is the batch")
    return dim % ndim
