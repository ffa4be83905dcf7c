"""Imported by the fork server of DataLoader workers (`nodegraph.kinds.loading.start_method`)
before it forks any worker: what a worker needs in place before it unpickles its dataset.

A worker unpickles the augmentation chain, whose transforms are torchvision's classes, and
so imports torchvision; where the installed torchvision's compiled ops do not load beside
torch, a bare ``import torchvision`` fails, and only `load_torchvision` gets it imported.
Done once here, in the server, every worker forked from it has it."""

from __future__ import annotations

from importlib.util import find_spec

from nodegraph.model.packages import load_torchvision

if find_spec("torchvision") is not None:
    try:
        load_torchvision()
    except (ImportError, RuntimeError):  # a worker that needs it then says why
        pass
