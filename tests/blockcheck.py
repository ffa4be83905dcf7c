"""Helpers for block tests: build a block the way compile does, and run it."""

from __future__ import annotations

import torch

from nodegraph.model.spec import default_registry


def build(block_id: str, inputs: dict[str, torch.Tensor] | None = None, /, **params):
    """Build block `block_id` with `params` for real `inputs` (as compile would); returns
    (spec, resolved params, built object). Raises ParamError-like messages on bad params."""
    spec = default_registry().get(block_id)
    values, problems = spec.resolve_params(params)
    if problems:
        raise ValueError(problems)
    inputs = inputs or {}
    meta = {k: torch.empty(v.shape, dtype=v.dtype, device="meta") for k, v in inputs.items()}
    if spec.kind == "data":
        return spec, values, spec.build(values)
    return spec, values, spec.build(values, meta)


def run_op(block_id: str, inputs: dict[str, torch.Tensor], /, **params):
    """Build an op block and call it on `inputs` (ports by name); returns its output(s)."""
    spec, _, module = build(block_id, inputs, **params)
    args = [inputs.get(p.name) for p in spec.inputs]
    return module(*args)
