"""Declared shape rules: an op block's outputs, weights and bytes from its params alone.

Without a rule, validation builds each op block on meta tensors and runs it
(`footprint.run_counted`): about a millisecond per node in torch's Python meta kernels, and
the first Linear imports torch._dynamo and sympy (seconds of start-up). A block that
declares ``shape=rule`` on its `BlockSpec` is inferred by ``rule(p, x)`` in plain Python
instead. `x` maps each connected input port to a `TensorMeta` (a shape and a dtype, read
like a meta tensor, so the block's own checks run on it unchanged and raise the same
`PortError`s); the rule returns an `Inferred` with what the meta path would give — output
shapes and dtypes, trainable-parameter count, parameter and buffer bytes
(`footprint.module_bytes`) and the bytes of the tensors one forward makes — or None for a
case it does not cover (hand-set weights, mixed dtypes), and validation runs the meta path.
`tests/test_shape_rules.py` holds every rule to the meta path, shape by shape.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import torch

Shape = tuple[int, ...]


@dataclass(frozen=True)
class TensorMeta:
    """The shape and dtype of a tensor on a wire, with the tensor attributes checks read."""

    shape: Shape
    dtype: torch.dtype

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def dim(self) -> int:
        return len(self.shape)

    def numel(self) -> int:
        return math.prod(self.shape)

    def element_size(self) -> int:
        return self.dtype.itemsize

    @property
    def nbytes(self) -> int:
        return self.numel() * self.dtype.itemsize


@dataclass(frozen=True)
class Inferred:
    """What a rule gives: the meta path's outcome without running anything."""

    outputs: tuple[tuple[Shape, torch.dtype], ...]
    count: int = 0  # trainable parameters
    param_bytes: int = 0
    buffer_bytes: int = 0
    work: int = 0  # bytes of the tensors one forward makes (outputs included)

    @property
    def nbytes(self) -> tuple[int, int, int]:
        return self.param_bytes, self.buffer_bytes, self.work


Rule = Callable[[Any, dict[str, TensorMeta]], Inferred | None]


def nbytes(shape: Shape, dtype: torch.dtype) -> int:
    return math.prod(shape) * dtype.itemsize


def of(inputs: Mapping[str, Any]) -> dict[str, TensorMeta]:
    """The `TensorMeta` of each connected input (meta tensors or TensorMetas)."""
    return {k: v if type(v) is TensorMeta else TensorMeta(tuple(v.shape), v.dtype)
            for k, v in inputs.items() if v is not None}


def infer(rule: Rule, params: Any, inputs: Mapping[str, Any]) -> Inferred | None:
    """`rule` on `inputs` given as meta tensors, as validation holds them."""
    return rule(params, of(inputs))


# -- pieces rules are made of ------------------------------------------------------------


def like(t: TensorMeta, work: int = 1) -> Inferred:
    """One output shaped and typed like `t`; the forward makes `work` tensors of its size
    (an activation makes one, a view none)."""
    return Inferred(((t.shape, t.dtype),), work=work * t.nbytes)


def weighted(outputs: list[tuple[Shape, torch.dtype]], weights: int, dtype: torch.dtype,
             trainable: bool = True, buffers: int = 0, work: int | None = None) -> Inferred:
    """Outputs of a layer holding `weights` parameters and `buffers` buffer values of
    `dtype`; `work` defaults to the outputs' bytes (the forward makes its outputs)."""
    made = sum(nbytes(s, d) for s, d in outputs) if work is None else work
    return Inferred(tuple(outputs), weights if trainable else 0, weights * dtype.itemsize,
                    buffers * dtype.itemsize, made)


def same_dtype(x: dict[str, TensorMeta]) -> torch.dtype | None:
    """The one dtype of all inputs, or None when they differ (torch would promote or
    refuse: the meta path tells)."""
    dtypes = {t.dtype for t in x.values()}
    return dtypes.pop() if len(dtypes) == 1 else None


FLOAT_DTYPES = {"float32": torch.float32, "float64": torch.float64,
                "bfloat16": torch.bfloat16}


def layer_dtype(p: Mapping[str, Any]) -> torch.dtype:
    """The dtype a layer's weights are built in: its `dtype` param where it has one set,
    else torch's default (what `nn.Linear(...)` makes)."""
    dtype = FLOAT_DTYPES.get(p.get("dtype") or "")  # torch's default only when unset (a
    return dtype if dtype is not None else torch.get_default_dtype()  # call per node)
