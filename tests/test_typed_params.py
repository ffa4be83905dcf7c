"""Block params are read through typed views, and every view says what the block declares.

A build (or shape rule, meta, recipe, export) takes ``p`` as its block's view, a `Params`
subclass with one annotation per param (`nodegraph.model.spec.Params`), so mypy checks how
it uses them. Two holes a type checker cannot close are closed here: a view whose
annotations disagree with the params the block declares (a name that is not a param, an
`int` for a float param), and a function of `nodes/` that reads ``p.<name>`` with `p` left
unannotated (typed Any, so unchecked).
"""

from __future__ import annotations

import ast
import inspect
import types
import typing
from pathlib import Path
from typing import Any, Literal, Union

import pytest

from nodegraph.model.settings import TRAINING_PARAMS, TrainingSettings
from nodegraph.model.spec import Param, Params, Registry, default_registry

NODES = Path(__file__).resolve().parent.parent / "nodes"
PLAIN = {"int": int, "float": float, "bool": bool, "str": str, "ints": list[int],
         "floats": list[float], "strs": list[str], "json": Any, "node": str,
         "nodes": list[str], "stage": str}
# what a view may read besides params: the dict's own methods and the typed accessors
DICT_READS = {"get", "items", "keys", "typed", "maybe"}


def allowed_types(param: Param) -> list[Any]:
    """The annotations a view may give `param`: its kind's Python type (a choice: the type
    of its choices, or a Literal of exactly them), with None where it may be empty."""
    if param.kind == "choice":
        kinds = {type(c) for c in param.choices}
        types_ = [Literal[tuple(param.choices)], Union[tuple(kinds)]]  # noqa: UP007
    else:
        types_ = [PLAIN[param.kind]]
    if (param.nullable or param.default is None) and types_[0] is not Any:
        types_ = [Union[t, None] for t in types_]  # noqa: UP007
    return types_


def same(a: Any, b: Any) -> bool:
    def norm(t: Any) -> Any:
        if isinstance(t, types.UnionType) or typing.get_origin(t) is Union:
            return frozenset(norm(x) for x in typing.get_args(t))
        if typing.get_origin(t) is Literal:
            return ("literal", frozenset(typing.get_args(t)))
        return t
    return norm(a) == norm(b)


def view_fields(view: type) -> dict[str, Any]:
    """The annotations of a view (a `Params` subclass or a Protocol), inherited ones too,
    without those of Params itself."""
    hints = typing.get_type_hints(view)
    return {k: v for k, v in hints.items() if k not in typing.get_type_hints(Params)}


def mismatches(view: type, params: tuple[Param, ...]) -> list[str]:
    declared = {p.name: p for p in params}
    out = []
    for name, hint in view_fields(view).items():
        param = declared.get(name)
        if param is None:
            out.append(f"{view.__name__}.{name} is not a declared param")
        elif not any(same(hint, t) for t in allowed_types(param)):
            out.append(f"{view.__name__}.{name}: {hint} but the param is {param.kind}"
                       f"{' (nullable)' if param.nullable else ''}")
    return out


def functions(fn: Any, depth: int = 3) -> list[types.FunctionType]:
    """`fn` and the functions it closes over (a family's wrapper calls the block's own build
    from its closure), a few levels deep; a class (a procedure built straight from its
    params) gives its `__init__`."""
    if isinstance(fn, type):
        init = fn.__init__
        return [init] if isinstance(init, types.FunctionType) else []
    if not isinstance(fn, types.FunctionType):
        return []
    found = [fn]
    if depth:
        for cell in fn.__closure__ or ():
            try:
                found += functions(cell.cell_contents, depth - 1)
            except ValueError:  # an empty cell
                pass
    return found


def view_of(fn: types.FunctionType) -> type | None:
    """The class the params argument of `fn` is annotated with (None: not annotated): its
    first positional parameter, after `self` for an `__init__`."""
    positional = [p for p in inspect.signature(fn, eval_str=False).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if fn.__name__ == "__init__":
        positional = positional[1:]
    if not positional or positional[0].annotation is inspect.Parameter.empty:
        return None
    annotation = positional[0].annotation
    if isinstance(annotation, str):
        annotation = eval(annotation, fn.__globals__)  # noqa: S307 (our own source)
    return annotation if isinstance(annotation, type) else None


def views(spec: Any, role: str) -> list[tuple[str, type]]:
    """(where, view) for each typed params argument behind one role of a block; a class's
    own annotation of `self.p` (a subclass narrowing its parent's view) too."""
    obj = getattr(spec, role)
    found = [(fn.__qualname__, v) for fn in functions(obj)
             if (v := view_of(fn)) not in (None, Params)]
    if isinstance(obj, type):
        own = typing.get_type_hints(obj).get("p")
        if isinstance(own, type) and own is not Params:
            found.append((f"{obj.__qualname__}.p", own))
    return found


def test_every_view_matches_its_blocks_params():
    registry: Registry = default_registry()
    problems, typed = [], 0
    for spec in registry:
        for role in ("build", "shape", "meta", "recipe", "export"):
            for where, view in views(spec, role):
                typed += 1
                problems += [f"{spec.id} {role} ({where}): {m}"
                             for m in mismatches(view, spec.params)]
    assert not problems, "\n".join(problems)
    assert typed >= len(registry)  # most blocks have more than one typed function


def test_training_settings_view_matches_the_settings():
    assert set(view_fields(TrainingSettings)) == {p.name for p in TRAINING_PARAMS}
    assert not mismatches(TrainingSettings, TRAINING_PARAMS)


def test_a_wrong_view_is_reported():
    class Wrong(Params):
        out_features: float  # an int param
        bias: bool
        nonsense: int

    from nodegraph.model.spec import bool_param, int_param
    params = (int_param("out_features"), bool_param("bias", True))
    found = mismatches(Wrong, params)
    assert any("out_features" in m for m in found)
    assert any("nonsense" in m for m in found)
    assert len(found) == 2


def untyped_reads(source: str, path: str = "<src>") -> list[str]:
    """Each ``p.<name>`` (or ``params.<name>``) read in a function or lambda whose `p` has
    no annotation, or the annotation Any: a param read mypy cannot check."""
    found = []
    for fn in ast.walk(ast.parse(source)):
        if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            continue
        args = fn.args
        for arg in (*args.posonlyargs, *args.args, *args.kwonlyargs):
            if arg.arg not in ("p", "params"):
                continue
            note = arg.annotation
            if note is not None and not (isinstance(note, ast.Name) and note.id == "Any"):
                continue
            for node in ast.walk(fn):
                if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                        and node.value.id == arg.arg and node.attr not in DICT_READS:
                    found.append(f"{path}:{node.lineno}: {arg.arg}.{node.attr}")
                elif isinstance(node, ast.Assign) and _stores(node, arg.arg):
                    found.append(f"{path}:{node.lineno}: stores {arg.arg} untyped")
    return found


def _stores(node: ast.Assign, name: str) -> bool:
    """`self.x = p` (or a tuple of them): read later as ``self.x.<name>``, unchecked."""
    values = node.value.elts if isinstance(node.value, ast.Tuple) else [node.value]
    return any(isinstance(t, ast.Attribute | ast.Tuple) for t in node.targets) and \
        any(isinstance(v, ast.Name) and v.id == name for v in values)


def test_no_untyped_param_reads_in_nodes():
    found = [hit for path in sorted(NODES.rglob("*.py"))
             for hit in untyped_reads(path.read_text(), str(path.relative_to(NODES.parent)))]
    assert not found, ("params read without a typed view (annotate p with the block's "
                       "Params subclass, see docs/writing-blocks.md):\n" + "\n".join(found))


@pytest.mark.parametrize("source, hits", [
    ("def b(p, x):\n    return p.out_features\n", 1),
    ("b = lambda p, x: p.p\n", 1),
    ("def b(p: Any, x):\n    return p.k\n", 1),
    ("def b(p: LinearParams, x):\n    return p.out_features\n", 0),
    ("def b(p, x):\n    return p.get('dtype')\n", 0),
    ("class C:\n    def __init__(self, p):\n        self.p = p\n", 1),
    ("class C:\n    def __init__(self, p: CParams):\n        self.p = p\n", 0),
])
def test_the_scan_finds_untyped_reads(source, hits):
    assert len(untyped_reads(source)) == hits


def test_params_attribute_reads_follow_every_change_of_the_dict():
    """A view's attribute reads are instance-attribute reads (no Python __getattribute__):
    every way to change the dict keeps them equal to the items, a param wins over a dict
    method of the same name, and copies and pickles read the same."""
    import copy
    import gc
    import pickle

    from nodegraph.model.spec import Params

    shadowing = Params({"update": "hebbian", "values": [1.0]})
    assert (shadowing.update, shadowing.values, shadowing.get("update")) == (
        "hebbian", [1.0], "hebbian")
    p = Params({"a": 1})
    assert p.a == 1 and p.get("a") == 1
    p["b"] = 2
    dict.update(p, {})  # no change: nothing to mirror
    p.update(c=3)
    p |= {"d": 4}
    assert p.setdefault("e", 5) == 5 and p.setdefault("e", 6) == 5
    assert (p.b, p.c, p.d, p.e) == (2, 3, 4, 5)
    assert p.pop("b") == 2 and p.pop("b", None) is None
    del p["c"]
    assert p.popitem() == ("e", 5)
    for gone in ("b", "c", "e"):
        with pytest.raises(AttributeError):
            getattr(p, gone)
    for other in (copy.copy(p), copy.deepcopy(p), pickle.loads(pickle.dumps(p))):
        assert type(other) is Params and other == p
        other["z"] = 7
        assert other.z == 7 and other.a == 1 and "z" not in p
    assert not any(r is p for r in gc.get_referents(p.__dict__))  # no cycle to collect
    p.clear()
    with pytest.raises(AttributeError):
        p.a  # noqa: B018
