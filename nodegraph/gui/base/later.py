"""Modules the editor imports on first use rather than at start: `later("a.b")` stands for
the module `a.b` and imports it when one of its names is first read.

The editor's window is drawn before torch is imported (importing it takes seconds on a busy
machine), so a GUI module that computes with torch (compiling, previews, node views,
training) names it through `later` instead of a top-level import; the import then happens
on the first use, long after the first paint (or in the background warm-up).
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any


class later:  # noqa: N801 — reads as a module name where it is used
    """A module imported the first time one of its attributes is read."""

    def __init__(self, name: str):
        self._name = name
        self._module: ModuleType | None = None

    def __getattr__(self, attr: str) -> Any:
        if self._module is None:
            self._module = importlib.import_module(self._name)
        return getattr(self._module, attr)

    def __repr__(self) -> str:
        return f"<module {self._name} (imported on first use)>"
