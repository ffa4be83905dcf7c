"""The built-in block library: one module per family, each exposing `BLOCKS`.

Modules are found by walking this package, so a new family is a new file here and
nothing else. Modules whose names start with an underscore hold shared helpers.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterator

from nodegraph.spec import BlockSpec


def all_blocks() -> Iterator[BlockSpec]:
    """Every block declared in this package, family by family."""
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        yield from getattr(module, "BLOCKS", ())
