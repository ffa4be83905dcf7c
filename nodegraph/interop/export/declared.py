"""The constructor call of a block's module, read from the block's torch declaration.

A block that declares its PyTorch equivalent (`BlockSpec.torch`: ``layers.Linear`` is
``nn.Linear``) and builds exactly that class is written by the Python export as that
class's constructor, its arguments read back from the module's own attributes
(``in_features``, ``out_features``, ``bias`` -> whether it has one), the same declaration
`nodegraph import` reads in the other direction. The call is checked before it is used:
rebuilt from it, the module must be of the same class, print the same (`extra_repr`),
hold weights of the same shapes and map to the same block params. Anything else (a
subclass of the declared class, an argument without a same-named attribute) returns None,
and the export falls back to the constructor call it recorded.
"""

from __future__ import annotations

import inspect
from typing import Any

import torch
from torch import nn

from nodegraph.interop.export.record import Call

SKIPPED = ("device", "dtype")  # where the weights live, not what the module computes


def torch_call(spec: Any, module: nn.Module) -> Call | None:
    """``cls(**kwargs)`` that builds `module` again, by `spec`'s torch declaration."""
    torch_spec = getattr(spec, "torch", None)
    cls = type(module)
    if torch_spec is None or cls not in torch_spec.modules:
        return None
    kwargs = _arguments(cls, module)
    if kwargs is None:
        return None
    try:  # on the meta device: no weights drawn or allocated (vgg's 100M-weight Linear)
        meta = {"device": "meta"} if "device" in inspect.signature(cls).parameters else {}
        with torch.random.fork_rng(devices=[]):
            rebuilt = cls(**kwargs, **meta)
    except Exception:
        return None
    if not _same(rebuilt, module, torch_spec):
        return None
    return Call(module, cls, kwargs)


def _arguments(cls: type, module: nn.Module) -> dict[str, Any] | None:
    """Each constructor argument from the same-named attribute (a weight that may be
    absent, `bias`, as whether it is there), else its default; None when one is missing."""
    try:
        signature = inspect.signature(cls)
    except (TypeError, ValueError):
        return None
    out: dict[str, Any] = {}
    for name, param in signature.parameters.items():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD) or name in SKIPPED:
            continue
        if name.startswith("_"):  # nn.Embedding's _weight, _freeze: not the module's shape
            continue
        if hasattr(module, name):
            value = getattr(module, name)
            if isinstance(param.default, bool) and (value is None or isinstance(
                    value, torch.Tensor)):
                value = value is not None  # bias=True: the module has a bias tensor
            elif isinstance(value, torch.Tensor | nn.Module):
                return None
            out[name] = value
        elif param.default is param.empty:
            return None
    return out


def _same(rebuilt: nn.Module, module: nn.Module, torch_spec: Any) -> bool:
    if type(rebuilt) is not type(module) or rebuilt.extra_repr() != module.extra_repr():
        return False
    shapes = {k: tuple(v.shape) for k, v in module.state_dict().items()}
    if shapes != {k: tuple(v.shape) for k, v in rebuilt.state_dict().items()}:
        return False
    params = torch_spec.params
    return params is None or params(rebuilt) == params(module)
