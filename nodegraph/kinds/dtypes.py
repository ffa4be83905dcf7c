"""Floating-point element types of data and weights: one graph-wide default, node overrides.

A graph computes in `training.dtype` (float32 unless set), so a whole graph turns float64
with one setting. A data block or a layer with weights may override it with its own
`dtype` param ("default" follows the graph). The rule a block's output dtype follows:

- a data block's floating outputs are in its dtype (integer labels stay int64);
- a block with floating weights or buffers holds them in its dtype, and its floating
  inputs must already be in it (validation reports a mismatch on the receiving port);
- a block without weights computes in the dtype of what it receives (torch's rules).

Old graph files name no dtype, so they build exactly the float32 modules they always did:
nothing is cast when the dtype is float32.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any

import torch

from nodegraph.model.spec import Param, choice_param

NAMES: dict[str, torch.dtype] = {"float32": torch.float32, "float64": torch.float64,
                                 "bfloat16": torch.bfloat16}
DTYPE_PARAM: Param = choice_param(
    "dtype", ("default", *NAMES), "default",
    "element type of this block's floating values: default follows the graph's "
    "training.dtype (float32 unless set); float64 for exact numerics, bfloat16 where the "
    "device supports it")


def graph_dtype(training: Mapping[str, Any]) -> torch.dtype:
    """The graph-wide dtype `training.dtype` names, from the resolved training settings
    (`nodegraph.model.settings.resolve`: its default filled in, a bad name reported there
    and replaced by the default)."""
    return NAMES[training["dtype"]]


def follows_graph(spec: Any) -> bool:
    """Whether a block's `dtype` param is the one declared here (a layers.Constant has a
    `dtype` of its own: the element type of its value, honoured as it is)."""
    return spec is not None and spec.follows_graph_dtype


def node_dtype(spec: Any, params: Mapping[str, Any], training: Mapping[str, Any]) -> torch.dtype:
    """The dtype a data block or layer computes in: its own `dtype` param, else the graph's."""
    if follows_graph(spec):
        name = params.get("dtype", "default")
        if name != "default":
            return NAMES[name]
    return graph_dtype(training)


def node_dtypes(report: Any, training: Mapping[str, Any]) -> dict[str, torch.dtype]:
    """Every node's dtype, by node id, for a validation report (`nodegraph.check`)."""
    return {nid: node_dtype(spec, report.params.get(nid, {}), training)
            for nid, spec in report.specs.items()}


def name_of(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def building(dtype: torch.dtype) -> AbstractContextManager[None]:
    """Modules built inside take `dtype` as torch's default, so their weights are made in
    it (float64 weights start from the same draws a hand-written float64 model makes);
    float32 changes nothing (and costs nothing: compile enters this once per node)."""
    return nullcontext() if dtype == torch.float32 else _default_dtype(dtype)


@contextmanager
def _default_dtype(dtype: torch.dtype) -> Iterator[None]:
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        yield
    finally:
        torch.set_default_dtype(previous)


def cast_module(module: Any, dtype: torch.dtype) -> Any:
    """`module` with its floating weights and buffers in `dtype` (a module that fixes its
    own, like a Hopfield design, is cast too); float32 leaves the module untouched, unless
    another thread's `building` changed torch's default dtype while it was built (the
    default is global, not per thread)."""
    if isinstance(module, torch.nn.Module) and (
            dtype != torch.float32 or torch.get_default_dtype() != torch.float32):
        module.to(dtype)
    return module


def cast_tensor(tensor: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """A floating tensor in `dtype`; integer and boolean tensors as they are."""
    if tensor.is_floating_point() and tensor.dtype != dtype:
        return tensor.to(dtype)
    return tensor


def has_float_state(module: Any) -> bool:
    """Whether a module holds floating weights or buffers (whose dtype its inputs must
    match)."""
    if not isinstance(module, torch.nn.Module):
        return False
    return any(t.is_floating_point() for t in (*module.parameters(), *module.buffers()))


def mismatch(port: str, got: torch.dtype, want: torch.dtype) -> tuple[str, str]:
    """The message (after the block and node) and hint of a wire whose dtype differs from
    what the receiving block holds its weights in."""
    return (f"receives {name_of(got)} on input '{port}' but holds its weights in "
            f"{name_of(want)}",
            f"set the same dtype on both ends: this node's dtype param to {name_of(got)}, "
            f"or the dtype of the block feeding '{port}' to {name_of(want)} (training.dtype "
            "sets one dtype for the whole graph)")


def check_device(dtype: torch.dtype, device: torch.device) -> str | None:
    """Why `device` cannot compute in `dtype`, or None when it can."""
    if dtype == torch.bfloat16 and device.type == "cuda" and \
            not torch.cuda.is_bf16_supported():
        return (f"the GPU {device} does not support bfloat16; use float32, or run on the CPU "
                "(--device cpu)")
    return None
