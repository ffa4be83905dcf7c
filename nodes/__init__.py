"""The built-in block library: a block's id names its file.

`layers.Linear` lives in `nodes/layers/dense.py`, or in a module of the package `nodes/layers/`
when the family is large (`nodes/layers/conv.py`). Each module exposes `BLOCKS`. Modules are
found by walking this package and its subpackages, so a new family is a new file here and
nothing else. Modules whose names start with an underscore hold shared helpers.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterator

from nodegraph.model.spec import BlockSpec


def all_blocks() -> Iterator[BlockSpec]:
    """Every block declared in this package, family by family."""
    found = pkgutil.walk_packages(__path__, prefix=f"{__name__}.")
    for info in sorted(found, key=lambda m: m.name):
        if info.name.rpartition(".")[2].startswith("_"):
            continue
        module = importlib.import_module(info.name)
        yield from getattr(module, "BLOCKS", ())
