"""Python source for live objects: how an export writes what a block built as plain code.

`Source` writes a recorded constructor call (see `export.record`) back as an expression,
`nn.Linear(2, 4)`: required arguments by position, the rest by keyword, and only those
that differ from their defaults, the way a person writes the call.

What an expression needs is collected as it is written: torch and the standard library are
imported; a class or function of this project (a block's own module, a schedule's formula)
is copied with `inspect.getsource`, together with whatever it uses in turn, as long as that
is again torch, the standard library or project code. A weightless block that wraps a
function — most often a lambda over its params — is *inlined*: the lambda's parameters
become the argument expressions and its closure values become literals, so
``Fn(lambda v: v.reshape(v.shape[0], *shape))`` turns into ``x.reshape(x.shape[0], 1, 28,
28)``. Anything without faithful source raises `Unexportable`, whose message the exporter
shows on the node.
"""

from __future__ import annotations

import ast
import builtins
import inspect
import json
import sys
import textwrap
import types
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from nodegraph.interop.export.record import Call
from nodegraph.interop.export.syntax import (
    LINE,
    Substitute,
    Unexportable,
    copy,
    expr,
    free_names,
    lambda_node,
    simplify,
    unparse,
)

MAX_TENSOR_LITERAL = 1024  # larger tensors are weights, not constructor arguments


# -- where torch keeps things --------------------------------------------------------------

# (module, how generated code reaches it), searched in order for a public name
NAMESPACES = (("torch.nn.functional", "F"), ("torch.nn", "nn"), ("torch.nn.init", "nn.init"),
              ("torch", "torch"), ("torch.optim", "torch.optim"),
              ("torch.optim.lr_scheduler", "torch.optim.lr_scheduler"),
              ("torch.linalg", "torch.linalg"), ("torch.special", "torch.special"),
              ("torch.distributions", "torch.distributions"))
ALIAS_IMPORTS = {"F": ("torch.nn", "functional", "F"), "nn": ("torch", "nn", "")}
# torch functions with an operator a person would write instead
OPERATORS = {"add": "+", "sub": "-", "mul": "*", "div": "/", "matmul": "@"}


def torch_path(obj: Any) -> str | None:
    """The public dotted name of a torch class or function (``nn.Linear``, ``F.relu``,
    ``torch.Tensor.detach``), or None when it has none."""
    name = getattr(obj, "__name__", None)
    if not isinstance(name, str):
        return None
    module = getattr(obj, "__module__", None)
    if module is not None and not _is_torch(module):
        return None  # torch modules import typing.Any and the like: not torch's to name
    objclass = getattr(obj, "__objclass__", None)
    if isinstance(objclass, type) and issubclass(torch.Tensor, objclass):
        return f"torch.Tensor.{name}" if getattr(torch.Tensor, name, None) is obj else None
    for module, alias in NAMESPACES:
        if getattr(sys.modules.get(module), name, None) is obj:
            return f"{alias}.{name}"
    return None


def _is_stdlib(module_name: str) -> bool:
    return module_name.split(".")[0] in sys.stdlib_module_names


def _is_torch(module_name: str) -> bool:
    return module_name.split(".")[0] == "torch"


# -- the source being written --------------------------------------------------------------


class Source:
    """The imports and copied definitions of one generated file, and expressions for values.

    Definitions go to the current `section` (the model's helpers, then the training's), so a
    file can print them next to the code that uses them.
    """

    def __init__(self) -> None:
        self.imports: set[tuple[str, str, str]] = set()  # (module, name or "", alias)
        self.bound: dict[str, Any] = {}  # every top-level name of the file -> what it is
        self.sections: dict[str, list[str]] = {}
        self.section = "model"
        self._defining: set[int] = set()

    # -- names ---------------------------------------------------------------------------

    def reserve(self, name: str, what: Any = None) -> None:
        """Claim a top-level name for the file's own code (the model class, `train`...)."""
        self._claim(name, what if what is not None else ("reserved", name))

    def _claim(self, name: str, obj: Any) -> bool:
        """Bind `name` to `obj`; False when it is bound to it already."""
        if name in self.bound:
            if self.bound[name] is obj or _same_constant(self.bound[name], obj):
                return False
            raise Unexportable(f"two different things would be called '{name}' in the "
                               "exported file")
        self.bound[name] = obj
        return True

    def add_import(self, module: str, name: str = "", alias: str = "") -> None:
        """``import module [as alias]`` (no name) or ``from module import name [as alias]``."""
        local = alias or name or module.split(".")[0]
        target = ("module", module) if not name else ("from", module, name)
        if self._claim(local, target):
            self.imports.add((module, name, alias))

    def ref(self, obj: Any) -> str:
        """An expression reaching class, function or module `obj` in the generated file."""
        if isinstance(obj, types.ModuleType):
            return self._module(obj)
        path = torch_path(obj)
        if path is not None:
            head = path.split(".")[0]
            if head in ALIAS_IMPORTS:
                self.add_import(*ALIAS_IMPORTS[head])
            else:
                self.add_import("torch")
            return path
        module = getattr(obj, "__module__", None) or ""
        name = getattr(obj, "__name__", "")
        if _is_stdlib(module) and getattr(sys.modules.get(module), name, None) is obj:
            self.add_import(module, name)
            return name
        if _is_torch(module):
            raise Unexportable(f"{module}.{name} is not part of torch's public API")
        self.define(obj, name)
        return name

    def _module(self, module: types.ModuleType) -> str:
        name = module.__name__
        if name == "torch.nn.functional":
            self.add_import(*ALIAS_IMPORTS["F"])
            return "F"
        if name == "torch.nn":
            self.add_import(*ALIAS_IMPORTS["nn"])
            return "nn"
        if _is_torch(name):
            self.add_import("torch")
            return name
        if _is_stdlib(name):
            self.add_import(name)
            return name
        raise Unexportable(f"it uses the module {name}, which is neither torch nor the "
                           "standard library")

    def bind(self, name: str, obj: Any) -> None:
        """Make `name` mean `obj` at the top level of the file (what copied code expects)."""
        if isinstance(obj, types.ModuleType):
            module = obj.__name__
            if module == name:
                self.add_import(module)
            elif module.rsplit(".", 1)[-1] == name and "." in module:
                self.add_import(module.rsplit(".", 1)[0], name)
            elif "." in module:
                parent, last = module.rsplit(".", 1)
                self.add_import(parent, last, name)
            else:
                self.add_import(module, "", name)
            self._module(obj)  # refuses modules outside torch and the standard library
            return
        if inspect.isclass(obj) or inspect.isroutine(obj):
            module = getattr(obj, "__module__", None) or ""
            path = torch_path(obj)
            if path or _is_torch(module) or _is_stdlib(module):
                if path and path.startswith("torch.Tensor."):
                    raise Unexportable(f"'{name}' is a tensor method under another name")
                attr = obj.__name__
                self.add_import(_public_module(obj, path), attr, "" if attr == name else name)
            elif obj.__name__ == "<lambda>":
                self._constant(name, obj)
            else:
                self.define(obj, name)
            return
        self._constant(name, obj)

    def _constant(self, name: str, value: Any) -> None:
        if not self._claim(name, value):
            return
        text = f"{name} = {self.value(value)}"
        if len(text) > LINE and isinstance(value, dict | list | tuple) and value:
            open_, close = {dict: ("{", "}"), list: ("[", "]"), tuple: ("(", ")")}[type(value)]
            items = ([f"{self.value(k)}: {self.value(v)}" for k, v in value.items()]
                     if isinstance(value, dict) else [self.value(v) for v in value])
            text = f"{name} = {open_}\n" + "".join(f"    {i},\n" for i in items) + close
        self.sections.setdefault(self.section, []).append(text)

    # -- copied definitions --------------------------------------------------------------

    def define(self, obj: Any, name: str) -> None:
        """Copy the source of class or function `obj` (and what it uses) into the file."""
        if id(obj) in self._defining or self.bound.get(name) is obj:
            return
        qualname = getattr(obj, "__qualname__", name)
        if "<locals>" in qualname:
            raise Unexportable(f"{qualname} is defined inside a function, so it cannot be "
                               "copied")
        if name != getattr(obj, "__name__", name):
            raise Unexportable(f"{qualname} is used under another name ({name})")
        try:
            text = textwrap.dedent(inspect.getsource(obj))
        except (OSError, TypeError):
            raise Unexportable(f"the source of {qualname} is not available") from None
        self._claim(name, obj)
        self._defining.add(id(obj))
        module = sys.modules.get(obj.__module__)
        scope = vars(module) if module else {}
        for dep in sorted(free_names(ast.parse(text))):
            if dep in scope and dep != name:
                try:
                    self.bind(dep, scope[dep])
                except Unexportable as e:
                    raise Unexportable(f"{qualname} uses {dep}: {e}") from None
        self.sections.setdefault(self.section, []).append(text.rstrip())

    # -- values --------------------------------------------------------------------------

    def value(self, v: Any) -> str:
        """A literal expression equal to `v`."""
        if isinstance(v, str):
            return json.dumps(v, ensure_ascii=False)  # double quotes, as the project writes
        if v is None or isinstance(v, bool | int):
            return repr(v)
        if isinstance(v, float):
            return repr(v) if np.isfinite(v) else f'float("{v}")'
        if isinstance(v, torch.dtype):
            self.add_import("torch")
            return str(v)
        if isinstance(v, torch.device):
            self.add_import("torch")
            return f"torch.device({str(v)!r})"
        if isinstance(v, torch.Tensor):
            return self._tensor(v)
        if type(v) in (list, tuple):
            items = [self.value(x) for x in v]
            if isinstance(v, tuple):
                return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"
            return "[" + ", ".join(items) + "]"
        if isinstance(v, dict):
            body = "{" + ", ".join(f"{self.value(k)}: {self.value(x)}" for k, x in v.items()) \
                + "}"
            return body if type(v) is dict else f"{self.ref(type(v))}({body})"
        if getattr(v, "__name__", None) == "<lambda>":
            return unparse(self.lambda_expr(v))
        if inspect.isfunction(v) and "<locals>" in v.__qualname__:
            return self._made_by(v)
        if inspect.isclass(v) or inspect.isroutine(v) or isinstance(v, types.ModuleType):
            return self.ref(v)
        raise Unexportable(f"a {type(v).__name__} value cannot be written as code")

    def _made_by(self, fn: types.FunctionType) -> str:
        """A function defined inside another (``_gaussian(mean, std)`` returning `draw`) as a
        call of that factory with the values the function closed over."""
        outer_name, _, rest = fn.__qualname__.partition(".<locals>.")
        outer = vars(sys.modules.get(fn.__module__, types.ModuleType("?"))).get(outer_name)
        closure = dict(zip(fn.__code__.co_freevars,
                           (c.cell_contents for c in fn.__closure__ or ()), strict=True))
        try:
            params = list(inspect.signature(outer).parameters) if outer else []
        except (TypeError, ValueError):
            params = []
        if "." in rest or not params or set(params) != set(closure):
            raise Unexportable(f"{fn.__qualname__} is defined inside a function, so it cannot "
                               "be copied")
        args = ", ".join(self.value(closure[name]) for name in params)
        return f"{self.ref(outer)}({args})"

    def _tensor(self, t: torch.Tensor) -> str:
        if t.numel() > MAX_TENSOR_LITERAL:
            raise Unexportable(f"a tensor of {t.numel()} values is passed to a constructor")
        self.add_import("torch")
        t = t.detach().cpu()
        values = _float32_literal(t) if t.dtype == torch.float32 else repr(t.tolist())
        inferred = t.numel() and t.dtype in (torch.float32, torch.int64, torch.bool)
        return f"torch.tensor({values}{'' if inferred else f', dtype={t.dtype}'})"

    # -- functions as expressions --------------------------------------------------------

    def lambda_expr(self, fn: types.FunctionType) -> ast.Lambda:
        """The lambda `fn` with its closure values and module names made explicit."""
        node = lambda_node(fn)
        code = fn.__code__
        mapping: dict[str, ast.expr] = {}
        closure = dict(zip(code.co_freevars, fn.__closure__ or (), strict=True))
        params = {a.arg for a in (*node.args.posonlyargs, *node.args.args,
                                  *node.args.kwonlyargs)}
        for name in free_names(node.body) - params:
            if name in closure:
                mapping[name] = expr(self.value(closure[name].cell_contents))
            elif name in fn.__globals__:
                self.bind(name, fn.__globals__[name])
            elif not hasattr(builtins, name):
                raise Unexportable(f"a lambda uses '{name}', which it cannot see")
        body = simplify(Substitute(mapping).visit(copy(node.body)))
        return ast.Lambda(args=node.args, body=body)

    def inline(self, fn: Callable, args: list[str]) -> str:
        """An expression applying `fn` to the argument expressions `args` (a tuple is
        written without its parentheses, for unpacking)."""
        if isinstance(fn, types.FunctionType) and fn.__name__ == "<lambda>":
            lam = self.lambda_expr(fn)
            names = [a.arg for a in lam.args.args]
            if lam.args.vararg or lam.args.kwonlyargs or len(names) != len(args):
                raise Unexportable("its function takes other arguments than the block's inputs")
            body = simplify(Substitute({n: expr(a) for n, a in zip(names, args,
                                                                      strict=True)}).visit(
                copy(lam.body)))
            if isinstance(body, ast.Tuple):
                return ", ".join(unparse(e) for e in body.elts)
            return unparse(body)
        path = torch_path(fn)
        if path and path.startswith("torch.Tensor."):
            return f"{_atom(args[0])}.{fn.__name__}({', '.join(args[1:])})"
        if path and path.startswith("torch.") and fn.__name__ in OPERATORS and len(args) == 2:
            return f"{_atom(args[0])} {OPERATORS[fn.__name__]} {_atom(args[1])}"
        return f"{self.ref(fn)}({', '.join(args)})"

    def call(self, call: Call, overrides: dict[str, str] | None = None
             ) -> tuple[str, list[str]]:
        """The callee and argument texts that repeat `call`: required arguments by
        position, the rest by keyword, and only those that differ from the default.
        `overrides` gives the text of some arguments (an optimizer's parameters)."""
        overrides = overrides or {}
        try:
            signature = inspect.signature(call.cls)
        except (TypeError, ValueError):
            raise Unexportable(f"the signature of {call.cls.__qualname__} cannot be read") \
                from None
        parts, by_keyword = [], False
        tidy = _is_torch(call.cls.__module__)
        for name, param in signature.parameters.items():
            if param.kind is param.VAR_POSITIONAL:
                parts += [self.value(v) for v in call.varargs]
                continue
            if param.kind is param.VAR_KEYWORD:
                parts += [f"{k}={self.value(v)}" for k, v in call.varkw.items()]
                continue
            if name not in call.args:
                continue
            value = call.args[name]
            if name in overrides:
                text = overrides[name]
                parts.append(text if not by_keyword and param.kind is not param.KEYWORD_ONLY
                             else f"{name}={text}")
                continue
            if tidy and name in UNIFORM_TUPLES:
                value = _uniform(value)
            if param.default is not param.empty and _same_constant(value, param.default):
                by_keyword = True
                continue
            if param.default is param.empty and not by_keyword \
                    and param.kind is not param.KEYWORD_ONLY:
                parts.append(self.value(value))
            else:
                parts.append(f"{name}={self.value(value)}")
                by_keyword = True
        return self.ref(call.cls), parts

    # -- the file ------------------------------------------------------------------------

    def import_lines(self) -> str:
        """The import block, grouped and sorted as isort (and ruff) want it."""
        groups: dict[bool, list[str]] = {True: [], False: []}
        straight = sorted((m, a) for m, n, a in self.imports if not n)
        froms: dict[str, list[tuple[str, str]]] = {}
        for m, n, a in self.imports:
            if n:
                froms.setdefault(m, []).append((n, a))
        for m, a in straight:
            groups[_is_stdlib(m)].append(f"import {m}" + (f" as {a}" if a else ""))
        for m in sorted(froms):
            names = sorted(froms[m], key=lambda na: _isort_key(na[0]))
            text = ", ".join(n + (f" as {a}" if a else "") for n, a in names)
            groups[_is_stdlib(m)].append(f"from {m} import {text}")
        head = "from __future__ import annotations\n\n"
        return head + "\n\n".join("\n".join(g) for g in (groups[True], groups[False]) if g)

    def definitions(self, section: str) -> list[str]:
        return self.sections.get(section, [])


UNIFORM_TUPLES = {"kernel_size", "stride", "padding", "dilation", "output_padding"}


def _uniform(value: Any) -> Any:
    """(3, 3) as 3: torch's conv and pool layers take either."""
    if type(value) is tuple and value and all(type(v) is int and v == value[0] for v in value):
        return value[0]
    return value


def _same_constant(a: Any, b: Any) -> bool:
    if type(a) is not type(b) and not (isinstance(a, int | float) and isinstance(b, int | float)
                                       and not isinstance(a, bool) and not isinstance(b, bool)):
        return False
    try:
        return bool(a == b)
    except Exception:
        return False


def _public_module(obj: Any, path: str | None) -> str:
    """The module a person imports `obj` from (``torch.optim.lr_scheduler``, not its
    private file)."""
    if path:
        head = path.rsplit(".", 1)[0]
        for module, alias in NAMESPACES:
            if alias == head:
                return module
    module = obj.__module__
    parts = module.split(".")
    for i in range(1, len(parts) + 1):
        candidate = ".".join(parts[:i])
        if getattr(sys.modules.get(candidate), obj.__name__, None) is obj:
            return candidate
    return module


def _isort_key(name: str) -> tuple[int, str]:
    """isort's order-by-type: CONSTANTS, then Classes, then functions and variables."""
    if name.isupper() and len(name) > 1:
        return (0, name)
    return (1, name) if name[:1].isupper() else (2, name.lower())


def _float32_literal(t: torch.Tensor) -> str:
    """Float32 values with the shortest decimals that read back to the same floats."""
    def fmt(x):
        if isinstance(x, list):
            return "[" + ", ".join(fmt(v) for v in x) + "]"
        return repr(float(str(np.float32(x)))) if np.isfinite(x) else f'float("{x}")'
    return fmt(t.tolist())


def _atom(text: str) -> str:
    """`text` parenthesised when it is not a simple name, call or attribute."""
    node = expr(text)
    simple = isinstance(node, ast.Name | ast.Attribute | ast.Call | ast.Subscript | ast.Constant)
    return text if simple else f"({text})"




