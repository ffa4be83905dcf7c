"""The `dtype` param on blocks with weights (see `nodegraph.kinds.dtypes` for the rule)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from nodegraph.kinds.dtypes import DTYPE_PARAM
from nodegraph.model.spec import BlockSpec


def with_dtype(blocks: Iterable[BlockSpec], names: Iterable[str]) -> list[BlockSpec]:
    """`blocks` with the `dtype` param appended to those named (ids without the family:
    "Linear"); a name that matches no block is a mistake in the declaration."""
    wanted = set(names)
    out = [replace(b, params=(*b.params, DTYPE_PARAM)) if b.id.split(".", 1)[1] in wanted
           else b for b in blocks]
    missing = wanted - {b.id.split(".", 1)[1] for b in out}
    if missing:
        raise ValueError(f"with_dtype: no blocks {sorted(missing)}")
    return out
