"""What a module or function maps to: the library's blocks, or how an opaque block rebuilds it.

The blocks declare the torch modules and functions they compute (`BlockSpec.torch`);
a submodule without one becomes `opaque.Module`, built from its recorded or read-back
constructor arguments (checked by building it again, `_rebuilds`).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from nodegraph.interop.export.source import MAX_TENSOR_LITERAL
from nodegraph.interop.importing.naming import _json
from nodegraph.interop.importing.values import _hashable
from nodegraph.model import allowlist
from nodegraph.model.errors import NodegraphError
from nodegraph.model.spec import default_registry, torch_functions, torch_modules

MAX_INPUTS = 8  # tensor inputs of an opaque block (nodes.opaque.INPUTS)


# values of a buffer written into the graph as a layers.Constant (and into the Python export
# as a literal); a module reading a larger one directly is kept whole
MAX_CONSTANT = MAX_TENSOR_LITERAL


# -- what a module maps to: the blocks' own torch declarations (`BlockSpec.torch`) ----------


@functools.cache
def _equivalents() -> tuple[dict[type, Any], dict[Any, list[Any]]]:
    """Module classes and functions to the blocks that declare them (default registry)."""
    registry = default_registry()
    return torch_modules(registry), torch_functions(registry)


def module_block(module: nn.Module) -> tuple[str, dict] | None:
    """The block (id, params) computing `module` exactly, if the library has one."""
    spec = _equivalents()[0].get(type(module))
    if spec is None:
        return None
    params = spec.torch.params(module)
    return None if params is None else (spec.id, params)


def function_blocks(fn: Any) -> list[Any]:
    """The blocks declaring `fn` (a function, or a Tensor method's name)."""
    return _equivalents()[1].get(fn, []) if _hashable(fn) else []


def _kwargs(cls: Callable[..., Any], args: dict, varkw: dict) -> dict | None:
    """Recorded constructor arguments as JSON, those equal to their default left out."""
    try:
        signature = inspect.signature(cls)
    except (TypeError, ValueError):
        return None
    out = {}
    for name, value in {**args, **varkw}.items():
        param = signature.parameters.get(name)
        if param is not None and param.default is not param.empty:
            try:
                if value is param.default or bool(value == param.default):
                    continue
            except Exception:
                pass
        try:
            out[name] = _json(value)
        except NodegraphError:
            return None
    return out


def _kwargs_from_attributes(module: nn.Module) -> dict | None:
    """Constructor arguments read back from same-named attributes (checked afterwards)."""
    try:
        signature = inspect.signature(type(module))
    except (TypeError, ValueError):
        return None
    out = {}
    for name, param in signature.parameters.items():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD) or name in ("device",
                                                                                "dtype"):
            continue
        attribute = getattr(module, name, None)
        if hasattr(module, name) and not isinstance(attribute, nn.Module | torch.Tensor):
            try:
                out[name] = _json(getattr(module, name))
            except NodegraphError:
                return None
        elif param.default is param.empty:
            return None
    return out


def _rebuilds(target: str, kwargs: dict, path: str, module: nn.Module) -> bool:
    """True when the opaque block's recipe builds a module that takes `module`'s weights
    and has its submodules (built through the block's declaration, as a graph would build
    it)."""
    spec = default_registry().get("opaque.Module")
    try:  # the class is the live module's own, already imported by the user: trusted
        params, problems = spec.resolve_params({"target": target, "kwargs": kwargs,
                                                "path": path})
        if problems:
            return False
        with allowlist.trusting(allowlist.trusted_now() | {allowlist.module_of(target)}):
            built = spec.build(params, {}).module
        built.load_state_dict(module.state_dict())
        # the same submodules too: an activation has no weights to tell timm's
        # BatchNormAct2d(act_layer=GELU) from the ReLU its attributes rebuild
        return type(built) is type(module) and repr(built) == repr(module)
    except Exception:
        return False
