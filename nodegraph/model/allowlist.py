"""What Python a graph file may name, and the user's trust for what it may not.

A graph file is data (README, "Files from anyone: what opening one can do"). Where a block
takes the name of Python to call — `opaque.Function`'s ``torch:Tensor.mean``,
`opaque.Module`'s ``torch.nn:TransformerEncoderLayer``, a ``{"function": ...}`` argument —
the name is looked up in a table of objects built here from what ships with torch: the
public native tensor functions, `torch.nn.functional`, `torch.special`/`linalg`/`fft`,
tensor methods, the arithmetic of `operator`, `math`, and the `nn.Module` classes of
`torch.nn`. A name is a key of that table or nothing: no attribute is walked, no module
imported, so ``torch:os.system``, ``torch:load`` or ``operator:methodcaller`` name nothing
at all.

Code outside the table (a user's own module brought in by `nodegraph import`) runs only
when the user trusts the graph: `Graph.trusted` holds the modules trusted for it, each by
its full dotted name as the file writes it before the colon (CLI ``--trust``, the editor's
prompt), and validation and compilation build blocks inside `trusting(graph.trusted)`.
Without it validation reports each such node, and nothing is imported. Trust is scoped to
what the user was shown: a trusted module grants its own callables and classes (objects
whose ``__module__`` lies in its package), never a module it imported (``numpy:f2py.os``)
nor an object it took from another package; a submodule is granted only when named.
A callable that does more than compute (`nodegraph.model.dangerous`: ``numpy:load``
unpickles, ``numpy:save`` writes files) is granted only by its full name
(``--grant numpy:load``, the editor's prompt, which names what it can do), never with its
module: `Graph.trusted` then holds that ``module:qualname`` too, and a full name alone
grants that one name.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib
import importlib.machinery
import math
import operator
import os
import sys
import types
from collections.abc import Iterator
from contextvars import ContextVar
from pathlib import Path
from typing import Any

import torch
from torch import nn

from nodegraph.model import bounded, dangerous
from nodegraph.model.errors import ParamError

FUNCTIONS = "function"
MODULES = "module"

# Tensor methods that reach memory, storage, hooks or callables rather than computing.
_TENSOR_REFUSED = {"apply_", "map_", "map2_", "storage", "untyped_storage", "share_memory_",
                   "set_", "data_ptr", "record_stream", "register_hook",
                   "register_post_accumulate_grad_hook", "pin_memory", "module_load",
                   "backward", "numpy", "tolist", "from_file"}
_TORCH_REFUSED = {"from_file"}  # reads any file on disk into a tensor
_OPERATOR = ("abs add and_ concat contains eq floordiv ge getitem gt iadd iand ifloordiv "
             "imatmul imod imul index inv invert ior ipow isub itruediv ixor le lshift lt "
             "matmul mod mul ne neg not_ or_ pos pow rshift sub truediv truth xor").split()
_NN_REFUSED = {"Module", "DataParallel"}  # an empty base class; a wrapper that moves devices

_trusted: ContextVar[frozenset[str]] = ContextVar("nodegraph_trusted", default=frozenset())


class UntrustedCodeError(ParamError):
    """A graph names Python outside the allowlist from a module the user has not trusted."""

    def __init__(self, path: str, what: str):
        self.path, self.module = path, top_module(path)
        self.hint = HINT_NEVER if never_trusted(self.module) else HINT
        because = (f", and no trust opens more of '{self.module}'" if never_trusted(self.module)
                   else f"; it runs code from module '{self.module}', which this graph is not "
                   "trusted to run")
        super().__init__(f"{what} {path!r} is not one of the pure tensor functions and torch.nn "
                         f"modules a graph file may name{because}")


HINT = ("nothing was imported; if you trust this file, run it with --trust (command line) or "
        "answer yes when the editor asks")


class UngrantedPowerError(ParamError):
    """A trusted module's callable that does more than compute, not granted by name."""

    def __init__(self, path: str, what: str, powers: tuple[str, ...]):
        self.path, self.module, self.powers = path, top_module(path), powers
        self.hint = grant_hint(path)
        super().__init__(f"{what} {path!r} {dangerous.describe(powers)}: trusting "
                         f"{module_of(path)} does not grant it; grant it by its full name "
                         f"({path})")


def grant_hint(path: str) -> str:
    return (f"if you trust this file to do that, add --grant {path} (command line), "
            f"nodegraph.trust(graph, grant=[{path!r}]) in Python, or answer yes when the "
            "editor asks, naming it")
HINT_NEVER = ("use a block of the library or a torch tensor function; only a module of your "
              "own (nodegraph import) can be trusted to run")
# Modules whose names resolve through the table alone: trusting a file never opens them
# (trusting "torch" would reach torch.os.system, trusting "builtins" would reach eval).
_SEALED = {"torch", "nodegraph", "nodes", "torchgen", "functorch"}


def never_trusted(module: str) -> bool:
    """True for torch and the standard library: trust cannot widen what a file reaches there."""
    return module in _SEALED or module in sys.stdlib_module_names or not module.isidentifier()


def module_of(path: str) -> str:
    """The module a ``module:qualname`` path imports, as trust names it (``mypkg.a`` of
    ``mypkg.a:B``): a submodule is trusted only when named, never through its package."""
    return path.partition(":")[0]


def top_module(path: str) -> str:
    """The top-level module a ``module:qualname`` path imports (``mypkg`` of ``mypkg.a:B``)."""
    return path.partition(":")[0].split(".")[0]


@functools.cache
def functions() -> dict[str, Any]:
    """The functions a file may call, by every ``module:qualname`` spelling nodegraph writes."""
    table: dict[str, Any] = {}
    native = torch._C._VariableFunctions
    for name in dir(torch):
        obj = getattr(torch, name)
        if not name.startswith("_") and name not in _TORCH_REFUSED and callable(obj) and (
                obj is getattr(native, name, None)
                or getattr(obj, "__module__", "") == "torch.functional"):
            table[f"torch:{name}"] = obj
    for module, prefix in ((torch.nn.functional, "torch.nn.functional"),
                           (torch.special, "torch.special"), (torch.linalg, "torch.linalg"),
                           (torch.fft, "torch.fft"), (torch.nn.init, "torch.nn.init")):
        for name in getattr(module, "__all__", None) or dir(module):
            obj = getattr(module, name, None)
            if _is_function(obj, name) and "torch_function" not in name:
                table[f"{prefix}:{name}"] = obj
    for name in dir(torch.Tensor):
        obj = getattr(torch.Tensor, name)
        if not name.startswith("_") and name not in _TENSOR_REFUSED and callable(obj) and \
                not isinstance(obj, type):
            table[f"torch:Tensor.{name}"] = obj
    # pure-Python arithmetic, each call bounded by the size of what it would make
    table.update({f"operator:{name}": bounded.guard(f"operator:{name}", getattr(operator, name))
                  for name in _OPERATOR})
    table.update({f"math:{name}": bounded.guard(f"math:{name}", getattr(math, name))
                  for name in dir(math) if _is_function(getattr(math, name), name)})
    return table


@functools.cache
def module_classes() -> dict[str, type]:
    """The `nn.Module` classes a file may build: the public ones of `torch.nn`."""
    return {f"torch.nn:{name}": obj for name in dir(nn)
            if not name.startswith("_") and name not in _NN_REFUSED
            and isinstance(obj := getattr(nn, name), type) and issubclass(obj, nn.Module)}


def _is_function(obj: Any, name: str) -> bool:
    """A public function of the module itself, not a helper it imported (typing's, or the
    JIT's boolean_dispatch, which builds new functions)."""
    return (not name.startswith("_") and callable(obj) and not isinstance(obj, type)
            and getattr(obj, "__module__", "") not in ("typing", "torch._jit_internal"))


def allowed(path: str, kind: str = FUNCTIONS) -> bool:
    """True when `path` names an object of the allowlist (no import, no attribute walk)."""
    table = functions() if kind == FUNCTIONS else module_classes()
    return isinstance(path, str) and path in table


def resolve(path: Any, what: str, kind: str = FUNCTIONS) -> Any:
    """The object `path` (``module:qualname``) names: from the allowlist, else imported from a
    module the current context trusts (see `trusting`), else UntrustedCodeError."""
    if not isinstance(path, str):
        raise ParamError(f"{what} must be a string like module:qualname, got {path!r}")
    module_name, sep, qualname = path.partition(":")
    if not sep or not module_name or not qualname:
        raise ParamError(f"{what} must look like module:qualname, e.g. torch.nn:Linear; got "
                         f"{path!r}")
    table = functions() if kind == FUNCTIONS else module_classes()
    if path in table:
        return table[path]
    trusted = _trusted.get()
    if never_trusted(top_module(path)) or (module_of(path) not in trusted
                                           and path not in trusted):
        raise UntrustedCodeError(path, what)
    if path not in trusted and dangerous.powers(path):  # known by name: nothing imported
        raise UngrantedPowerError(path, what, dangerous.powers(path))
    obj = import_path(path, what)
    powers = dangerous.powers_of(obj, path)  # an alias of a listed callable
    if path not in trusted and powers:
        raise UngrantedPowerError(path, what, powers)
    return obj


def import_path(path: str, what: str) -> Any:
    """Import a trusted path: the module, then its own attributes only (`scoped_attribute`)."""
    module_name, sep, qualname = path.partition(":")
    if not sep or not module_name or not qualname:
        raise ParamError(f"{what} must look like module:qualname, e.g. torch.nn:Linear; got "
                         f"{path!r}")
    try:
        obj: Any = importlib.import_module(module_name)
    except ImportError as e:
        raise ParamError(f"{what} {path!r}: cannot import {module_name} ({e})") from None
    for part in qualname.split("."):
        obj = scoped_attribute(obj, part, path, what)
    return obj


def _owner(obj: Any) -> str:
    """The module an object was defined in (a method descriptor's: its class's)."""
    owner = getattr(obj, "__module__", None) or getattr(
        getattr(obj, "__objclass__", None), "__module__", None)
    return owner if isinstance(owner, str) else ""


def scoped_attribute(obj: Any, part: str, path: str, what: str) -> Any:
    """`obj.part` when it is the trusted package's own callable or class: never a module
    (a submodule is trusted by its own name), a dunder, or an object of another package
    that the module merely imported (``numpy:f2py.os.system``, ``mypkg:subprocess.run``)."""
    package = top_module(path)
    if part.startswith("__") or not part.isidentifier():
        raise ParamError(f"{what} {path!r}: {part!r} is not a name trust grants")
    if isinstance(obj, types.ModuleType):  # no module __getattr__: nothing lazy is imported
        value = vars(obj).get(part, _MISSING)
    else:
        value = getattr(obj, part, _MISSING)
    if value is _MISSING:
        raise ParamError(f"{what} {path!r}: {module_of(path)} has no {path.partition(':')[2]}")
    owner = _owner(value)
    if isinstance(value, types.ModuleType) or not callable(value) or not (
            owner == package or owner.startswith(package + ".")):
        raise ParamError(
            f"{what} {path!r}: {part!r} is not a callable or class of {package}'s own "
            f"(it is {'a module' if isinstance(value, types.ModuleType) else owner or 'data'})"
            f"; trusting {module_of(path)} grants only its own functions and classes")
    return value


_MISSING = object()


@contextlib.contextmanager
def trusting(modules: frozenset[str] | set[str]) -> Iterator[None]:
    """Within this block, paths from these top-level modules may be imported."""
    token = _trusted.set(frozenset(modules))
    try:
        yield
    finally:
        _trusted.reset(token)


def trusted_now() -> frozenset[str]:
    """The modules trusted in the current context (part of what a cached build depends on)."""
    return _trusted.get()


# -- graphs --------------------------------------------------------------------------------

def _named(graph) -> Iterator[tuple[str, str, Any, str]]:
    """(node, param, path, kind) for each name of Python in the nodes of `graph` (a Graph)."""
    registry = graph.registry
    for node in graph:
        spec = registry.get(node.type) if node.type in registry else None
        if spec is not None and spec.code is not None and isinstance(node.params, dict):
            for param, path, kind in spec.code(node.params):
                yield node.id, param, path, kind


def _trustable(path: Any, kind: str) -> bool:
    """A name outside the allowlist that trust can open: a string of a module of the user's."""
    return isinstance(path, str) and not allowed(path, kind) and not never_trusted(
        top_module(path))


def refusals(graph, trusted: frozenset[str]) -> list[tuple[str, str, str, str]]:
    """(node, param, message, hint) for each name in `graph` neither allowed nor trusted,
    or trusted by its module but listed in `dangerous` and not granted by its full name."""
    out = []
    for node, param, path, kind in _named(graph):
        if not isinstance(path, str):
            out.append((node, param, f"'{param}' must name Python as a string like "
                                     f"module:qualname, got {path!r}", ""))
        elif allowed(path, kind):
            continue
        elif not (_trustable(path, kind) and (module_of(path) in trusted or path in trusted)):
            error: UntrustedCodeError | UngrantedPowerError = UntrustedCodeError(path, param)
            out.append((node, param, str(error), error.hint))
        elif path not in trusted and dangerous.powers(path):
            error = UngrantedPowerError(path, param, dangerous.powers(path))
            out.append((node, param, str(error), error.hint))
    return out


def granted(graph) -> dict[str, list[str]]:
    """What trusting `graph` grants, shown before the user says yes: for each module of the
    user's that it (or a group) names outside the allowlist, the names it calls there."""
    graphs = [graph, *(defn.body for defn in graph.groups.values())]
    out: dict[str, set[str]] = {}
    for g in graphs:
        for _, _, path, kind in _named(g):
            if _trustable(path, kind):
                out.setdefault(module_of(path), set()).add(path.partition(":")[2])
    return {module: sorted(names) for module, names in sorted(out.items())}


def described(module: str, names: list[str]) -> str:
    """``numpy (mean, load [reads files, unpickles (runs code stored in the file)])``: a
    module and the names a file calls there, each with what it can do beyond computing."""
    shown = [f"{name} [{dangerous.describe(p)}]" if (p := dangerous.powers(
        f"{module}:{name}")) else name for name in names]
    return f"{module} ({', '.join(shown)})"


def describe_grant(grant: dict[str, list[str]]) -> str:
    """``numpy (mean, std); mypkg.models (Net)``: the grant in one line, for prompts, with
    what each name can do beyond computing (`described`)."""
    return "; ".join(described(module, names) for module, names in grant.items())


def powerful(grant: dict[str, list[str]]) -> dict[str, tuple[str, ...]]:
    """The full names in `grant` that do more than compute, with what each can do: what
    trusting the modules does not grant, and a grant by name does."""
    return {f"{module}:{name}": p for module, names in grant.items() for name in names
            if (p := dangerous.powers(f"{module}:{name}"))}


def modules_needed(graph) -> list[str]:
    """The modules of the user's that `graph` (and its groups) name outside the allowlist:
    what trusting it means, shown to the user before they do."""
    return list(granted(graph))


def trust(graph, grant: Any = (), modules: bool = True) -> list[str]:
    """Let `graph` import what it names (the user said so: --trust, the editor's prompt),
    except the callables that do more than compute, which only `grant` (full names,
    ``numpy:load``, that the user was shown) lets through; with `modules` false, only the
    names in `grant` (--grant without --trust). Returns the modules trusted."""
    names = [grant] if isinstance(grant, str) else list(grant)
    bad = [n for n in names if not isinstance(n, str) or not _full_name(n)]
    if bad:
        raise ParamError(f"grant {bad[0]!r}: name a callable as module:qualname, e.g. "
                         "numpy:load; trust opens whole modules without it")
    trusted = modules_needed(graph) if modules else []
    graph.trusted = frozenset(trusted) | frozenset(names)
    return trusted


def _full_name(name: str) -> bool:
    module, sep, qualname = name.partition(":")
    return bool(sep) and all(p.isidentifier() for p in module.split(".")) and all(
        p.isidentifier() for p in qualname.split("."))


def source_digest(module: str) -> str:
    """SHA-256 of all the code `module` would run from its package, found without importing
    anything (a package's ``__init__`` is not run to find its submodule), or "" when it has
    no source: part of a trust record, so a change to any file of the package asks again
    (``mypkg:Net`` re-exported by ``mypkg/__init__.py`` from ``mypkg/models.py``). An
    installed distribution is known by its RECORD (the hash of each of its files); a folder
    on the path (your own package, an editable install) by every file in it."""
    parts = module.split(".")
    spec = top = None
    locations: list[str] | None = list(sys.path)
    for i in range(len(parts)):
        if locations is None:
            return ""
        try:
            spec = importlib.machinery.PathFinder.find_spec(".".join(parts[:i + 1]), locations)
        except (ImportError, ValueError):
            return ""
        if spec is None:
            return ""
        top = top or spec
        locations = list(spec.submodule_search_locations or []) or None
    if top is None or not top.has_location or not isinstance(top.origin, str):
        return ""
    from nodegraph.model.safe_read import read_regular  # (a module, not a FIFO, is hashed)

    try:
        record = _record_of(top.origin, bool(top.submodule_search_locations))
        if record is not None:
            return hashlib.sha256(b"RECORD\0" + read_regular(record, 64 << 20, "record")
                                  ).hexdigest()
        files = ([Path(top.origin)] if not top.submodule_search_locations else
                 _package_files([Path(p) for p in top.submodule_search_locations]))
        digest = hashlib.sha256()
        for path in files:
            digest.update(str(path).encode("utf-8", "surrogateescape") + b"\0")
            digest.update(hashlib.sha256(read_regular(path, 64 << 20, "module")).digest())
        return digest.hexdigest()
    except (OSError, ParamError):
        return ""


_MAX_FILES = 20_000  # a package folder with more is not one of the user's


def _package_files(folders: list[Path]) -> list[Path]:
    """Every file in a package's folders, subfolders included, but the bytecode caches
    (Python writes those itself; the sources they come from are hashed)."""
    out: list[Path] = []
    for folder in folders:
        for top, dirs, names in os.walk(folder):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            out += [Path(top) / n for n in sorted(names) if not n.endswith((".pyc", ".pyo"))]
            if len(out) > _MAX_FILES:
                raise OSError(f"{folder} holds more than {_MAX_FILES} files")
    return out


def _record_of(origin: str, is_package: bool) -> Path | None:
    """The RECORD of the installed distribution beside `origin` (the module's file, a
    package's ``__init__.py``) that lists it, or None: not installed that way (a folder on
    the path, an editable install)."""
    from nodegraph.model.safe_read import read_regular

    path = Path(origin).resolve()
    site = path.parent.parent if is_package else path.parent
    line = "\n" + path.relative_to(site).as_posix() + ","
    for info in sorted(site.glob("*.dist-info")):
        record = info / "RECORD"
        try:
            text = read_regular(record, 64 << 20, "record").decode("utf-8", "replace")
        except (OSError, ParamError):
            continue
        if line in "\n" + text:
            return record
    return None
