"""Build and step torch optimizers without importing torch._dynamo when nothing compiles.

`torch.optim.Optimizer`'s `add_param_group`, `zero_grad`, `state_dict` and
`load_state_dict` are wrapped by `torch._disable_dynamo`, which imports torch._dynamo (and
sympy with it: 2 s or more of start-up) on its first call, only to mark the method as not
to be traced. Validation builds each optimizer once on a stand-in parameter; a run without
`training.compile` builds and steps them and traces nothing. Within `untraced()` each
wrapper finds its cached answer already set to the plain method; after it the wrappers are
as before (an optimizer used by compiled code later imports torch._dynamo as usual). Once
torch._dynamo is loaded this does nothing.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import torch
import torch.optim.optimizer as torch_optimizer

_CACHE = "__dynamo_disable"  # the attribute torch._compile._disable_dynamo caches on
_METHODS = ("add_param_group", "zero_grad", "state_dict", "load_state_dict")


def _plain_methods() -> list:
    """The plain functions under Optimizer's torch._disable_dynamo wrappers."""
    found = (getattr(getattr(torch.optim.Optimizer, name, None), "__wrapped__", None)
             for name in _METHODS)
    return [m for m in found if m is not None]


@contextmanager
def untraced() -> Iterator[None]:
    if "torch._dynamo" in sys.modules:
        yield
        return
    mine = [m for m in _plain_methods() if not hasattr(m, _CACHE)]  # an outer call's stay
    for method in mine:
        setattr(method, _CACHE, method)
    try:
        yield
    finally:
        for method in mine:
            if getattr(method, _CACHE, None) is method:
                delattr(method, _CACHE)


def _code_name(function: Any) -> str | None:
    code = getattr(function, "__code__", None)
    return None if code is None else code.co_name


def stepper(optimizer: torch.optim.Optimizer) -> Callable[..., Any]:
    """`optimizer.step`, minus the `import torch._dynamo` torch's step makes on every call.

    torch wraps every built-in optimizer's step twice: `_use_grad_for_differentiable`
    (grad mode off unless `differentiable`, and a `torch._dynamo.graph_break()` around the
    update, which imports torch._dynamo) inside `profile_hook_step` (a profiler range and
    the step hooks). Where the step is that chain, the function returned runs the same
    update with grad mode set the same way, and marks the step as a learning-rate
    scheduler's wrapper would; it hands the call to the real `step` whenever what it leaves
    out could matter: a step hook registered, the profiler on, torch._dynamo loaded or a
    compile under way. Any other step (a custom optimizer) is returned unchanged."""
    outer = type(optimizer).step
    inner = getattr(outer, "__wrapped__", None)
    raw = getattr(inner, "__wrapped__", None)
    if raw is None or _code_name(outer) != "wrapper" or _code_name(inner) != "_use_grad":
        return optimizer.step
    real = optimizer.step
    differentiable = bool(optimizer.defaults.get("differentiable", False))
    pre_hooks = torch_optimizer._global_optimizer_pre_hooks
    post_hooks = torch_optimizer._global_optimizer_post_hooks

    def step(closure: Callable[[], Any] | None = None) -> Any:
        if (pre_hooks or post_hooks or optimizer._optimizer_step_pre_hooks
                or optimizer._optimizer_step_post_hooks or "torch._dynamo" in sys.modules
                or torch.autograd._profiler_enabled()):
            return real() if closure is None else real(closure)
        optimizer._opt_called = True  # type: ignore[attr-defined]  # as the scheduler's wrapper
        with torch.set_grad_enabled(differentiable):
            out = raw(optimizer) if closure is None else raw(optimizer, closure)
        optimizer._optimizer_step_code()
        return out

    return step
