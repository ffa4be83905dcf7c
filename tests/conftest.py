"""Shared fixtures: the default registry and small graph builders."""

from __future__ import annotations

import gc
import importlib.util
import os
from pathlib import Path

import pytest
import torch

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
# The image-folder index cache (nodegraph/kinds/folder_index.py) of this test process: a
# fresh folder, so tests neither read a stale index nor write into the user's ~/.cache.
if "NODEGRAPH_CACHE" not in os.environ:
    import atexit
    import shutil
    import tempfile

    os.environ["NODEGRAPH_CACHE"] = tempfile.mkdtemp(prefix="nodegraph-test-cache-")
    atexit.register(shutil.rmtree, os.environ["NODEGRAPH_CACHE"], ignore_errors=True)
# Tests run two workers on two cores; a second torch thread per worker only adds contention
# (spinning OpenMP threads made small models ten times slower under load).
torch.set_num_threads(1)
try:  # scikit-learn's BLAS and OpenMP pools too (threadpoolctl comes with scikit-learn)
    from threadpoolctl import threadpool_limits

    threadpool_limits(1)
except ImportError:
    pass


@pytest.fixture(scope="session", autouse=True)
def _collector_skips_the_imported_modules():
    """Once the test modules are imported (torch, Qt, the block library: ~330,000 objects),
    park what is alive in the collector's permanent generation, as the CLI and the editor do
    for themselves (nodegraph.model.gcpause): every full collection after it (each editor
    test's teardown runs one, the interpreter more) walked that heap again, half a second on
    a loaded machine. Those objects are still freed by reference counting."""
    gc.collect()
    gc.freeze()


@pytest.fixture(scope="session")
def registry():
    from nodegraph.model.spec import default_registry

    return default_registry()


@pytest.fixture(scope="session", autouse=True)
def example_data():
    """The data files the file-format examples name (examples/data/, written by
    examples/make_data.py and not kept in git), made once when missing, so the tests that
    load, validate or export every example find them."""
    path = Path(__file__).resolve().parents[1] / "examples" / "make_data.py"
    spec = importlib.util.spec_from_file_location("make_data", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.ensure()
