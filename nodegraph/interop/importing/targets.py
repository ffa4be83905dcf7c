"""What `nodegraph import TARGET` builds: a class, a factory, a file's class, a timm name.

A target is ``module:attr`` (``mymodels:MLP``, ``torchvision.models:resnet18``) or
``path/to/file.py:attr``; `attr` may be an nn.Module class or any callable that returns an
nn.Module (torchvision and timm expose their models as factories). ``timm:NAME`` is
short for ``timm:create_model`` with that model name. The module is built here with the
user's keyword arguments while its constructor calls are recorded (see `export.record`),
and a missing constructor argument is named instead of surfacing as a TypeError.
"""

from __future__ import annotations

import importlib
import inspect
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from torch import nn

from nodegraph.interop.export.record import Recorder, recording
from nodegraph.interop.importing.naming import _where
from nodegraph.model import allowlist
from nodegraph.model.errors import NodegraphError
from nodegraph.model.packages import load_torchvision


@dataclass
class Built:
    """The module to trace and how it can be rebuilt by an opaque block."""

    module: nn.Module
    recorder: Recorder | None
    target: str | None  # module:qualname of the class (or factory) that builds it again
    kwargs: dict



def import_module(name: str) -> Any:
    """`importlib.import_module`, with torchvision made importable first when needed."""
    if name.split(".")[0] in ("torchvision", "timm"):
        load_torchvision()
    return _shimmed(lambda: importlib.import_module(name))


def _shimmed(load: Callable[[], Any]) -> Any:
    """`load()`; where it fails because torchvision's compiled ops do not load beside this
    torch (`operator torchvision::nms does not exist`, as transformers and diffusers hit
    when they import torchvision, even through a user's module), once more after
    `load_torchvision` made torchvision importable."""
    try:
        return load()
    except Exception as e:
        if not _torchvision_ops(e):
            raise
    load_torchvision()
    return load()


def _torchvision_ops(error: BaseException | None) -> bool:
    """Whether `error` or an error it was raised from is torchvision's missing ops."""
    seen = 0
    while error is not None and seen < 20:
        if "torchvision::" in str(error):
            return True
        error, seen = error.__cause__ or error.__context__, seen + 1
    return False


def resolve(target: str) -> tuple[Any, str, str | None]:
    """The object TARGET names, the module:qualname path an opaque block can import it by,
    and the model name when TARGET is ``timm:NAME``."""
    head, sep, attr = target.rpartition(":")
    if not sep or not head or not attr:
        raise NodegraphError(f"{target!r}: name the model as module:Class (mymodels:MLP), "
                             "module:factory (torchvision.models:resnet18), "
                             "path/to/file.py:Class, or timm:MODEL_NAME")
    if head.endswith(".py") or "/" in head or "\\" in head:
        module_name = _from_file(Path(head))
    else:
        module_name = head
    try:
        module = import_module(module_name)
    except ModuleNotFoundError as e:
        raise NodegraphError(
            f"cannot import {module_name!r} ({e}): run nodegraph from the folder that holds "
            f"{module_name.split('.')[0]}, name the file itself (path/to/{module_name}.py:"
            f"{attr}), add its folder to PYTHONPATH, or pip install -e your package") from None
    except NodegraphError:
        raise
    except Exception as e:  # the user's module fails as it is imported: their line
        raise NodegraphError(f"{module_name} fails as it is imported{_line_of(e)}: "
                             f"{_said(e)}") from None
    if module_name == "timm" and not hasattr(module, attr):
        return module.create_model, "timm:create_model", attr
    obj: Any = _shimmed(lambda: _attribute(module, module_name, attr))
    return obj, f"{module_name}:{attr}", None


def _attribute(module: Any, module_name: str, attr: str) -> Any:
    """`module.attr` (dotted); a lazy package (transformers) imports it here."""
    obj: Any = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise NodegraphError(f"{module_name} has no {attr}")
        obj = getattr(obj, part)
    return obj


def _from_file(path: Path) -> str:
    """The module name of a .py file, its folder put on sys.path (a file inside a package,
    one with __init__.py beside it, is imported as part of that package)."""
    if not path.is_file():
        raise NodegraphError(f"{path}: no such file")
    path = path.resolve()
    parts = [path.stem]
    folder = path.parent
    while (folder / "__init__.py").is_file():
        parts.insert(0, folder.name)
        folder = folder.parent
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))
    return ".".join(parts)


def build(obj: Any, kwargs: dict, model_name: str | None = None,
          path: str | None = None) -> Built:
    """Build the module `obj` (a class, a factory, or an nn.Module) names, recording its
    constructor calls."""
    if isinstance(obj, nn.Module):
        return Built(obj, None, None, {})
    if model_name is not None:
        kwargs = {"model_name": model_name, **kwargs}
    if _pretrained_class(obj):  # a Hugging Face model class: from its config, or a folder
        return _build_pretrained(obj, kwargs, path)
    if not callable(obj):
        raise NodegraphError(f"{path or obj!r} is neither an nn.Module class nor a function "
                             "that returns one")
    missing = _missing(obj, kwargs)
    if missing:
        raise NodegraphError(
            f"{path or obj!r} needs the constructor argument{'s' if len(missing) > 1 else ''} "
            f"{', '.join(missing)}: give {'them' if len(missing) > 1 else 'it'} with --kwargs "
            + "'{" + ", ".join(f'"{m}": ...' for m in missing) + "}'")
    unknown = _unknown(obj, kwargs)
    if unknown:
        raise NodegraphError(f"{path or obj!r} takes no argument {', '.join(unknown)}")
    with allowlist.trusting(allowlist.trusted_now() | {allowlist.module_of(path or "x:y")}):
        with recording(nn.Module) as recorder:
            try:
                module = obj(**kwargs)
            except TypeError as e:
                raise NodegraphError(f"{path or obj!r} cannot be built with {kwargs}: "
                                     f"{e}") from None
            except NodegraphError:
                raise
            except Exception as e:  # the user's constructor fails: their line
                raise NodegraphError(f"{path or obj!r} cannot be built with {kwargs}"
                                     f"{_line_of(e)}: {_said(e)}") from None
    if not isinstance(module, nn.Module):
        raise NodegraphError(f"{path or obj!r} returned a {type(module).__name__}, not an "
                             "nn.Module")
    return Built(module, recorder, path, kwargs)


PRETRAINED = "from_pretrained"  # the kwargs key naming a save_pretrained folder


def _pretrained_class(obj: Any) -> bool:
    """A transformers model class: built from a config (`config_class`), not keywords."""
    return isinstance(obj, type) and issubclass(obj, nn.Module) and isinstance(
        getattr(obj, "config_class", None), type) and hasattr(obj, "from_pretrained")


def _build_pretrained(cls: type, kwargs: dict, path: str | None) -> Built:
    """`cls.from_pretrained(folder)` (a local folder only) or `cls(cls.config_class(**kwargs))`."""
    kwargs = dict(kwargs)
    folder = kwargs.pop(PRETRAINED, None)
    try:
        if folder is not None:
            if not Path(folder).is_dir():
                raise NodegraphError(f"--pretrained {folder}: no such folder (a folder "
                                     "save_pretrained wrote; nothing is downloaded)")
            module = cls.from_pretrained(folder, local_files_only=True,  # type: ignore[attr-defined]
                                         **kwargs)
        else:
            module = cls(cls.config_class(**kwargs))  # type: ignore[attr-defined]
    except NodegraphError:
        raise
    except Exception as e:
        text = " ".join(str(e).split())[:300]
        raise NodegraphError(f"{path or cls.__name__} cannot be built with {kwargs}: "
                             f"{type(e).__name__}: {text}") from None
    return Built(module, None, path, {**kwargs, **({PRETRAINED: folder} if folder else {})})


def _line_of(error: BaseException) -> str:
    """' at file:line (`code`)': the user's line that raised (a syntax error's own)."""
    if isinstance(error, SyntaxError) and error.filename:
        return f" at {Path(error.filename).name}:{error.lineno} (`{(error.text or '').strip()}`)"
    return _where(error)


def _said(error: BaseException) -> str:
    return f"{type(error).__name__}: {' '.join(str(error).split())[:300]}"


def _missing(fn: Any, kwargs: dict) -> list[str]:
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return []
    return [name for name, p in signature.parameters.items()
            if p.default is p.empty and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
            and name not in kwargs]


def _unknown(fn: Any, kwargs: dict) -> list[str]:
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return []
    if any(p.kind is p.VAR_KEYWORD for p in signature.parameters.values()):
        return []
    return [k for k in kwargs if k not in signature.parameters]
