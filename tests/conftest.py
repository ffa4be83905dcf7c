"""Shared fixtures: the default registry and small graph builders."""

from __future__ import annotations

import os

import pytest
import torch

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
# Tests run two workers on two cores; a second torch thread per worker only adds contention
# (spinning OpenMP threads made small models ten times slower under load).
torch.set_num_threads(1)
try:  # scikit-learn's BLAS and OpenMP pools too (threadpoolctl comes with scikit-learn)
    from threadpoolctl import threadpool_limits

    threadpool_limits(1)
except ImportError:
    pass


@pytest.fixture(scope="session")
def registry():
    from nodegraph.model.spec import default_registry

    return default_registry()
