"""The trace run on the example inputs, and again at other sizes (the probes).

Each node's value on the examples feeds the planner; the probes (input dims doubled)
tell which sizes follow the input and which stay constant.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.fx
from torch import nn

from nodegraph.interop.importing.values import TOLERANCE, Probe, _leaves
from nodegraph.model.errors import NodegraphError


def _run(traced: torch.fx.GraphModule, inputs: tuple) -> dict:
    """Every fx node's value on the example inputs."""
    values: dict = {}

    class Recording(torch.fx.Interpreter):
        def run_node(self, n):
            values[n] = super().run_node(n)
            return values[n]

    try:
        with torch.no_grad():
            Recording(traced).run(*inputs)
    except Exception as e:
        text = " ".join(str(e).split("While executing")[0].split())[:300]
        raise NodegraphError(f"the traced module fails on the example inputs "
                             f"{[tuple(x.shape) for x in inputs]}: {type(e).__name__}: "
                             f"{text}") from None
    return values


def probe(root: nn.Module, traced: torch.fx.GraphModule, inputs: tuple,
          fixed: dict[int, dict[int, int]]) -> list[Probe]:
    """The trace run again with input dims doubled (the example tiled along them, so token
    ids and masks stay valid), one group of equal-sized dims at a time (a mask follows its
    ids); where the module refuses the whole group (an image's height and width beside a
    context's features of the same size), each input's members of it together, then each
    member alone, until every member is in some probe. A size that no probe changes is a
    constant of the graph; one that changes stays an expression. A dim whose doubling the
    module refuses, or where the trace stops giving the module's numbers, is recorded in
    `fixed`: the import is valid for its example size only."""
    groups: dict[int, list[tuple[int, int]]] = {}
    for i, x in enumerate(inputs):
        for dim in range(x.ndim):
            groups.setdefault(int(x.shape[dim]), []).append((i, dim))
    sizes = [tuple(x.shape) for x in inputs]
    probes: list[Probe] = []
    for members in groups.values():
        covered: set[tuple[int, int]] = set()
        differs: list[tuple[int, int]] = []
        for dims in _tries(members):
            if set(dims) <= covered:
                continue  # (one probe per member is enough: a later one would only repeat)
            values = _probe_run(root, traced, inputs, dims)
            if values == "refused" and all(sizes[i][d] >= 4 for i, d in dims):
                # doubled, the module refuses it (nanoGPT's `t <= block_size`): shortened
                values = _probe_run(root, traced, inputs, dims, shrink=True)
            if isinstance(values, dict):
                probes.append(Probe(dims, sizes, values))
                covered.update(dims)
                if covered >= set(members):
                    break
            elif values == "differs" and len(dims) == 1:
                differs += dims
        # a member alone where the trace is not the module: its size stays the example's
        # (a size the module itself refuses, channels most often, is no guard's job)
        for i, dim in differs:
            fixed.setdefault(i, {})[dim] = sizes[i][dim]
    return probes


def _tries(members: list[tuple[int, int]]) -> list[list[tuple[int, int]]]:
    """The dims of one size to double together, in the order tried: all of them, then
    each input's (height and width of one image), then each alone.

    Stopping at the first that runs would leave the others unprobed, so constants of
    the graph though they follow the input (a UNet's width beside a context of 16
    features: the height alone ran, and `reshape(b, h, w, c)` kept w = 16)."""
    tries = [members]
    if len(members) > 1:
        by_input: dict[int, list[tuple[int, int]]] = {}
        for i, dim in members:
            by_input.setdefault(i, []).append((i, dim))
        tries += [part for part in by_input.values() if 1 < len(part) < len(members)]
        tries += [[m] for m in members]
    return tries


def _probe_run(root: nn.Module, traced: torch.fx.GraphModule, inputs: tuple,
               dims: list[tuple[int, int]], shrink: bool = False) -> dict | str:
    """Every fx node's value on the inputs doubled along `dims` (with `shrink`, cut to
    three quarters of their size); "refused" where the module fails there, "differs"
    where the trace fails or its outputs are not the module's."""
    tiled = list(inputs)
    for i, dim in dims:
        tiled[i] = tiled[i].narrow(dim, 0, tiled[i].shape[dim] * 3 // 4) if shrink else \
            torch.cat([tiled[i], tiled[i]], dim=dim)
    try:
        with torch.no_grad():
            want = _leaves(root(*tiled), torch.Tensor)
    except Exception:
        return "refused"
    try:
        values = _run(traced, tuple(tiled))
    except (NodegraphError, Exception):
        return "differs"
    [output] = [n for n in traced.graph.nodes if n.op == "output"]
    have = _leaves(values.get(output), torch.Tensor)
    if len(have) < len(want) or any(
            h.shape != w.shape or h.dtype != w.dtype or w.numel() and float(
                (h.double() - w.double()).abs().max()) > TOLERANCE * max(
                1.0, float(w.double().abs().max())) for h, w in zip(have, want, strict=False)):
        return "differs"
    # only shapes and sizes are read from a probe: its tensors are kept as meta tensors, so
    # a big model's probes hold no activations
    return {n: _as_meta(v) for n, v in values.items()}


def _as_meta(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return torch.empty(value.shape, dtype=value.dtype, device="meta")
    if isinstance(value, tuple | list) and any(isinstance(v, torch.Tensor) for v in value):
        return type(value)(_as_meta(v) for v in value) if not hasattr(value, "_fields") \
            else value
    return value
