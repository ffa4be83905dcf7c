"""Reading and writing Python source: free names, lambdas inlined, lines laid out.

`free_names` finds what a copied class or function needs from its module; `lambda_node`
finds a lambda's own source; `Substitute` and `simplify` turn ``lambda v: fn(v / t, dim)``
with its closure values into the expression a person would write; `call_lines` and
`reflow` keep generated lines within the project's length.
"""

from __future__ import annotations

import ast
import keyword
import linecache
import textwrap
import types
from collections.abc import Iterator, Sequence

from nodegraph.model.errors import Unexportable

LINE = 99  # the longest line written (the project's ruff limit is 100)


def expr(text: str) -> ast.expr:
    return ast.parse(text, mode="eval").body


def copy(node: ast.AST) -> ast.expr:
    return ast.parse(ast.unparse(node), mode="eval").body


def free_names(tree: ast.AST) -> set[str]:
    """Names `tree` reads that it does not bind itself (approximately Python's scoping:
    parameters and assignments make a name local to its function, lambda or
    comprehension)."""
    found: set[str] = set()

    def bound_in(body: Sequence[ast.AST]) -> set[str]:
        out: set[str] = set()
        for stmt in body:
            for node in _walk_scope(stmt):
                if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store | ast.Del):
                    out.add(node.id)
                elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                    out.add(node.name)
                elif isinstance(node, ast.Import | ast.ImportFrom):
                    out.update((a.asname or a.name).split(".")[0] for a in node.names)
                elif isinstance(node, ast.ExceptHandler) and node.name:
                    out.add(node.name)
        return out

    def params(args: ast.arguments) -> set[str]:
        names = {a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)}
        names |= {a.arg for a in (args.vararg, args.kwarg) if a is not None}
        return names

    def visit(node: ast.AST, bound: frozenset[str]) -> None:
        if isinstance(node, ast.Name):
            if isinstance(node.ctx, ast.Load) and node.id not in bound:
                found.add(node.id)
            return
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            for outer in (*node.decorator_list, *node.args.defaults, *node.args.kw_defaults,
                          node.returns, *(a.annotation for a in all_args(node.args))):
                if outer is not None:
                    visit(outer, bound)
            inner = bound | params(node.args) | bound_in(node.body)
            for stmt in node.body:
                visit(stmt, frozenset(inner))
            return
        if isinstance(node, ast.Lambda):
            for d in (*node.args.defaults, *node.args.kw_defaults):
                if d is not None:
                    visit(d, bound)
            visit(node.body, bound | params(node.args))
            return
        if isinstance(node, ast.ClassDef):
            for part in (*node.decorator_list, *node.bases, *node.keywords):
                visit(part, bound)
            class_bound = bound | bound_in(node.body)
            for stmt in node.body:
                # methods do not see class-level names; other statements do
                is_def = isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef)
                visit(stmt, bound if is_def else frozenset(class_bound))
            return
        if isinstance(node, ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp):
            targets = {n.id for g in node.generators for n in ast.walk(g.target)
                       if isinstance(n, ast.Name)}
            for child in ast.iter_child_nodes(node):
                visit(child, bound | targets)
            return
        for child in ast.iter_child_nodes(node):
            visit(child, bound)

    # the top level of a copied snippet is the definition itself, whose name is not a
    # dependency (a self-reference is skipped by the caller)
    for stmt in tree.body if isinstance(tree, ast.Module) else [tree]:
        visit(stmt, frozenset())
    return found


def all_args(args: ast.arguments) -> list[ast.arg]:
    return [a for a in (*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg,
                        args.kwarg) if a is not None]


def _walk_scope(node: ast.AST) -> Iterator[ast.AST]:
    """`ast.walk`, not entering nested functions, lambdas, classes or comprehensions."""
    yield node
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda
                  | ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp):
        return
    for child in ast.iter_child_nodes(node):
        yield from _walk_scope(child)


_parsed: dict[str, ast.Module] = {}


def lambda_node(fn: types.FunctionType) -> ast.Lambda:
    """The `ast.Lambda` of `fn` in its module's source."""
    code = fn.__code__
    filename = code.co_filename
    if filename not in _parsed:
        lines = linecache.getlines(filename)
        if not lines:
            raise Unexportable("the source of one of its functions is not available")
        _parsed[filename] = ast.parse("".join(lines))
    names = list(code.co_varnames[:code.co_argcount])
    found = [n for n in ast.walk(_parsed[filename]) if isinstance(n, ast.Lambda)
             and n.lineno == code.co_firstlineno and [a.arg for a in n.args.args] == names]
    if len(found) > 1:
        found = [n for n in found if _compiles_to(n, code)]
    if len(found) != 1:
        raise Unexportable("the source of one of its lambdas cannot be told apart from "
                           "others on the same line")
    return found[0]


def _compiles_to(node: ast.Lambda, code: types.CodeType) -> bool:
    compiled = compile(ast.Expression(body=copy(node)), code.co_filename, "eval")
    inner = [c for c in compiled.co_consts if isinstance(c, types.CodeType)]
    return bool(inner) and inner[0].co_code == code.co_code \
        and inner[0].co_names == code.co_names


class Substitute(ast.NodeTransformer):
    """Replace free occurrences of names by expressions (lambdas may shadow them)."""

    def __init__(self, mapping: dict[str, ast.expr]):
        self.mapping = mapping

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if isinstance(node.ctx, ast.Load) and node.id in self.mapping:
            return copy(self.mapping[node.id])
        return node

    def visit_Lambda(self, node: ast.Lambda) -> ast.AST:
        shadowed = {a.arg for a in all_args(node.args)}
        inner = Substitute({k: v for k, v in self.mapping.items() if k not in shadowed})
        node.body = inner.visit(node.body)
        return node


class _Simplify(ast.NodeTransformer):
    """What a person would write instead: calls of literal lambdas applied, ``*[a, b]``
    spread, and multiplications or divisions by 1.0 dropped (exact in floating point)."""

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        args: list[ast.expr] = []
        for a in node.args:
            if isinstance(a, ast.Starred) and isinstance(a.value, ast.List | ast.Tuple):
                args.extend(a.value.elts)
            else:
                args.append(a)
        node.args = args
        lam = node.func
        if isinstance(lam, ast.Lambda) and not node.keywords and not lam.args.vararg \
                and len(lam.args.args) == len(args) and not lam.args.kwonlyargs:
            mapping = {a.arg: v for a, v in zip(lam.args.args, args, strict=True)}
            return self.visit(Substitute(mapping).visit(copy(lam.body)))
        return node

    def visit_BinOp(self, node: ast.BinOp) -> ast.AST:
        self.generic_visit(node)
        if isinstance(node.op, ast.Mult | ast.Div) and _is_one(node.right):
            return node.left
        if isinstance(node.op, ast.Mult) and _is_one(node.left):
            return node.right
        return node


def _is_one(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and type(node.value) is float and node.value == 1.0


def simplify(node: ast.expr) -> ast.expr:
    return ast.fix_missing_locations(_Simplify().visit(node))


# -- laying out lines ----------------------------------------------------------------------


def call_lines(lhs: str, callee: str, parts: list[str], indent: int) -> list[str]:
    """``lhs = callee(parts)`` on one line, or wrapped with the arguments aligned under the
    opening parenthesis when it would be too long (long literals wrapped too)."""
    pad = " " * indent
    head = f"{pad}{lhs} = {callee}(" if lhs else f"{pad}{callee}("
    one = head + ", ".join(parts) + ")"
    if len(one) <= LINE or not parts:
        return [one]
    if len(head) > LINE // 2 and ", " in lhs:  # many targets: them in parentheses, wrapped
        tail = f") = {callee}({', '.join(parts)})"
        width = max(30, LINE - indent - 1 - len(tail))  # the last line keeps room for tail
        targets = textwrap.wrap(lhs, width, break_on_hyphens=False,
                                break_long_words=False)  # a name stays whole
        return _wrapped_targets(targets, callee, parts, pad)
    align = " " * len(head)
    laid = [reflow(p, len(head), 1) if len(head) + len(p) + 1 > LINE else p for p in parts]
    if not _fit(laid, len(head)):  # no room after the parenthesis: the arguments below
        return _hanging(head, parts, pad + "    ")
    parts = laid
    lines, current = [], head
    for i, part in enumerate(parts):
        piece = part + (", " if i < len(parts) - 1 else ")")
        if current != head and current != align and \
                len(current) + len(piece.rstrip().split("\n")[0]) > LINE:
            lines.append(current.rstrip())
            current = align
        current += piece
    lines.append(current.rstrip())
    return "\n".join(lines).split("\n")


def _fit(parts: list[str], column: int) -> bool:
    """Whether laid-out arguments starting at `column` keep within the line length."""
    for part in parts:
        first, *rest = part.split("\n")
        if column + len(first) + 1 > LINE or any(len(line) > LINE for line in rest):
            return False
    return True


def _hanging(head: str, parts: list[str], indent: str) -> list[str]:
    """``lhs = callee(`` alone, the arguments on the lines below, one level in."""
    parts = [reflow(p, len(indent), 1) if len(indent) + len(p) + 1 > LINE else p
             for p in parts]
    lines, current = [head], indent
    for i, part in enumerate(parts):
        piece = part + (", " if i < len(parts) - 1 else ")")
        if current != indent and len(current) + len(piece.rstrip()) > LINE:
            lines.append(current.rstrip())
            current = indent
        current += piece
    lines.append(current.rstrip())
    return "\n".join(lines).split("\n")


def _wrapped_targets(targets: list[str], callee: str, parts: list[str], pad: str) -> list[str]:
    """``(a, b,\n c) = callee(parts)``: unpacking targets too long for one line."""
    if len(targets) == 1:
        return [f"{pad}({targets[0]}) = {callee}({', '.join(parts)})"]
    lines = [f"{pad}({targets[0]}"] + [f"{pad} {t}" for t in targets[1:]]
    lines[-1] += f") = {callee}({', '.join(parts)})"
    return lines


def reflow(text: str, column: int, reserve: int = 0) -> str:
    """The expression `text` spread over lines that fit when it starts at `column`: the
    items of a call, list, tuple or dict aligned after its opening bracket, nested as far
    as needed (long literals of weights too); text that is not one expression as it is."""
    try:
        node = ast.parse(text, mode="eval").body
    except SyntaxError:
        return text
    return _layout(node, column, reserve)


def _layout(node: ast.AST, column: int, reserve: int = 0) -> str:
    """`node` as text starting at `column`, with `reserve` characters to follow it."""
    flat = unparse(node)
    if column + len(flat) + reserve <= LINE:
        return flat
    if isinstance(node, ast.Call):
        head = unparse(node.func) + "("
        return head + _items([*node.args, *node.keywords], column + len(head),
                             reserve + 1) + ")"
    brackets = {ast.List: "[]", ast.Tuple: "()", ast.Set: "{}", ast.Dict: "{}"}
    pair = brackets.get(type(node))
    if pair is None:
        return flat
    items: list = list(zip(node.keys, node.values, strict=True)) if isinstance(node, ast.Dict) \
        else node.elts if isinstance(node, ast.List | ast.Tuple | ast.Set) else []
    return pair[0] + _items(items, column + 1, reserve + 1) + pair[1]


def _items(items: list, column: int, reserve: int) -> str:
    """Items joined by ", ": as many to a line as fit, the next line at `column`; an item
    too long for a line of its own is laid out in turn. The last keeps `reserve` free."""
    lines, current = [], ""
    for i, item in enumerate(items):
        last = i == len(items) - 1
        comma, room = ("", reserve) if last else (",", 0)
        flat = _item(item, None, 0) + comma
        if current and column + len(current) + len(flat) + room > LINE:
            lines.append(current.rstrip())
            current = ""
        if column + len(current) + len(flat) + room <= LINE:
            current += flat + " "
        else:  # alone on its line and still too long: spread it
            current += _item(item, column + len(current), room + len(comma)) + comma + " "
    lines.append(current.rstrip())
    return ("\n" + " " * column).join(lines)


def _item(item, column: int | None, reserve: int) -> str:
    """One item of a call or display, flat (column None) or laid out at `column`."""
    if isinstance(item, tuple):  # a dict entry
        key = unparse(item[0]) + ": "
        value = item[1]
    elif isinstance(item, ast.keyword):
        key, value = (f"{item.arg}=" if item.arg else "**"), item.value
    else:
        key, value = "", item
    if column is None:
        return key + unparse(value)
    return key + _layout(value, column + len(key), reserve)


class _Unparser(ast._Unparser):  # type: ignore[name-defined]  # private: not in typeshed
    """ast.unparse writing strings in double quotes, as the project does."""

    def _write_constant(self, value):
        text = repr(value)
        if isinstance(value, str) and text.startswith("'") and '"' not in value:
            text = '"' + text[1:-1].replace("\\'", "'") + '"'
            self.write(text)
        else:
            super()._write_constant(value)


def unparse(node: ast.AST) -> str:
    return _Unparser().visit(node)


def docstring(text: str, indent: int) -> list[str]:
    """A docstring of `text`, wrapped to the line length."""
    pad = " " * indent
    text = in_docstring(text)
    one = f'{pad}"""{text}"""'
    if len(one) <= LINE:
        return [one]
    lines = textwrap.wrap(text, LINE - indent - 3)
    return [f'{pad}"""{lines[0]}', *(pad + line for line in lines[1:]), f'{pad}"""']


def in_docstring(text: str) -> str:
    """`text` (a graph's name, a file's path: anything a file chose) as docstring content that
    cannot end the docstring: quotes and backslashes escaped, control characters blanked."""
    text = "".join(c if c.isprintable() else " " for c in text)
    return text.replace("\\", "\\\\").replace('"', '\\"')


def attribute_path(root: str, path: str) -> str:
    """``root.a.b[0].weight`` for the dotted state path ``a.b.0.weight``."""
    out = root
    for part in path.split("."):
        if part.isdigit():
            out += f"[{part}]"
        elif part.isidentifier() and not keyword.iskeyword(part):
            out += f".{part}"
        else:
            return f'{root}.get_parameter("{path}")'
    return out


def identifier(text: str) -> str:
    """`text` as a valid Python name (keywords get a trailing underscore)."""
    out = "".join(c if c.isalnum() or c == "_" else "_" for c in text) or "_"
    if out[0].isdigit():
        out = "_" + out
    return out + "_" if keyword.iskeyword(out) else out


def class_name(text: str) -> str:
    """A CamelCase class name from a graph name: 'xor-mlp' -> 'XorMlp'."""
    words = [w for w in "".join(c if c.isalnum() else " " for c in text).split() if w]
    name = "".join(w[:1].upper() + w[1:] for w in words)
    return name if name and name[0].isalpha() else "Model" + name
