"""Shared fixtures: the default registry and small graph builders."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")


@pytest.fixture(scope="session")
def registry():
    from nodegraph.spec import default_registry

    return default_registry()
