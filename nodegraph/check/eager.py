"""Build torch optimizers during validation without importing torch._dynamo.

`torch.optim.Optimizer.add_param_group` is wrapped by `torch._disable_dynamo`, which imports
torch._dynamo (and sympy with it: about 1.5 s of start-up) on its first call, only to mark
the method as not to be traced. Validation builds each optimizer once on a stand-in
parameter to check its settings, and traces nothing; within `untraced()` the wrapper finds
its cached answer already set to the plain method, and after it the wrapper is as before
(the first optimizer a run builds imports torch._dynamo as usual). Once torch._dynamo is
loaded this does nothing.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager

import torch

_CACHE = "__dynamo_disable"  # the attribute torch._compile._disable_dynamo caches on


@contextmanager
def untraced() -> Iterator[None]:
    method = getattr(torch.optim.Optimizer.add_param_group, "__wrapped__", None)
    if method is None or "torch._dynamo" in sys.modules or hasattr(method, _CACHE):
        yield
        return
    setattr(method, _CACHE, method)
    try:
        yield
    finally:
        if getattr(method, _CACHE, None) is method:
            delattr(method, _CACHE)
