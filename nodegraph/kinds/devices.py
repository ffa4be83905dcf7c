"""Device names from a file, checked as torch will take them: before anything runs.

`torch.device` wraps an index into a byte (``cuda:999`` becomes ``cuda:-25``) and accepts
devices this machine lacks, so a file could validate and then fail at run. `parse` takes
``type`` or ``type:N`` with N within torch's device index range; `check_here` adds what
`run` would find: CUDA present, and the GPU index on this machine. Validation checks the
training device's spelling (the run may be on a bigger machine) and a device an opaque
call names (``device="cuda:999"``, pinned in the file) against this machine, as the run
will.
"""

from __future__ import annotations

import re

import torch

from nodegraph.model.errors import NodegraphError
from nodegraph.model.sanitize import clean

MAX_INDEX = 127  # torch's DeviceIndex is a signed byte
_NAME = re.compile(r"[a-z_]{1,32}(:[0-9]{1,4})?")
HINT = "use cpu, cuda, cuda:N or auto"


def parse(name: object, what: str = "device") -> torch.device:
    """The torch device `name` spells, or NodegraphError naming `what`."""
    if isinstance(name, torch.device):
        return name
    text = name if isinstance(name, str) else None
    if text is None or not _NAME.fullmatch(text) or (
            ":" in text and int(text.partition(":")[2]) > MAX_INDEX):
        raise NodegraphError(f"{what}: unknown device {clean(repr(name))} ({HINT})")
    try:
        return torch.device(text)
    except (RuntimeError, ValueError):
        raise NodegraphError(f"{what}: unknown device {clean(repr(name))} ({HINT})") from None


def check_here(name: object, what: str = "device") -> torch.device:
    """`parse`, and present on this machine (what `run` needs)."""
    device = parse(name, what)
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise NodegraphError(f"{what}: device '{device}' asked for, but no CUDA GPU is "
                                 f"available ({HINT})")
        if device.index is not None and device.index >= torch.cuda.device_count():
            raise NodegraphError(f"{what}: device '{device}' does not exist: this machine "
                                 f"has {torch.cuda.device_count()} GPU(s)")
    elif device.type not in ("cpu", "meta") and not _available(device.type):
        raise NodegraphError(f"{what}: device '{device}' is not available here ({HINT})")
    return device


def _available(kind: str) -> bool:
    module = getattr(torch, kind, None)
    is_available = getattr(module, "is_available", None)
    try:
        return bool(is_available()) if callable(is_available) else False
    except Exception:  # a backend that cannot even say: not available
        return False
