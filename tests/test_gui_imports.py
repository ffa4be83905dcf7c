"""The import graph: no circle anywhere in `nodegraph`, nothing below the front door imports
`nodegraph` itself, and the editor's parts import downwards.

`nodegraph/gui/` is in parts (`shell` > `panels` | `training` > `canvas` > `document` >
`base`); pyproject's import-linter contract says the same for `make lint`. This test reads
the graph with grimp (what import-linter builds on), type-checking imports included, so a
circle hidden behind `if TYPE_CHECKING:` or inside a function counts too: a lazy import
only moves when the other module loads, the two still need each other to work.
"""

from __future__ import annotations

import grimp
import networkx as nx
import pytest

GUI = "nodegraph.gui"
# lower number = lower layer; parts on one level must not import each other
LEVELS = {"base": 0, "document": 1, "canvas": 2, "panels": 3, "training": 3, "shell": 4}


def build(package: str) -> grimp.ImportGraph:
    return grimp.build_graph(package, include_external_packages=False,
                             exclude_type_checking_imports=False, cache_dir=None)


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return build("nodegraph")


def all_imports(graph: grimp.ImportGraph) -> set[tuple[str, str]]:
    """Every (importer, imported) pair of modules in the graph."""
    return {(m, i) for m in graph.modules for i in graph.find_modules_directly_imported_by(m)}


@pytest.fixture(scope="module")
def gui_imports(graph) -> set[tuple[str, str]]:
    """Every (importer, imported) pair of modules inside nodegraph.gui."""
    return {(m, i) for m in graph.modules if m.startswith(GUI + ".")
            for i in graph.find_modules_directly_imported_by(m) if i.startswith(GUI + ".")}


def circles(imports: set[tuple[str, str]]) -> list[list[str]]:
    """The groups of modules that import one another, round and round."""
    graph = nx.DiGraph(list(imports))
    return sorted(sorted(c) for c in nx.strongly_connected_components(graph) if len(c) > 1)


def part(module: str) -> str:
    return module.split(".")[2]


def upward(imports: set[tuple[str, str]]) -> list[str]:
    """Imports from one part into another that is not below it."""
    return sorted(f"{a} -> {b}" for a, b in imports if part(a) != part(b)
                  and LEVELS[part(a)] <= LEVELS[part(b)])


def test_the_checks_see_a_circle_and_an_upward_import():
    a, b, c = (f"{GUI}.canvas.a", f"{GUI}.canvas.b", f"{GUI}.shell.c")
    assert circles({(a, b), (b, a), (b, c)}) == [[a, b]]
    assert upward({(a, c), (c, a)}) == [f"{a} -> {c}"]
    assert upward({(f"{GUI}.panels.p", f"{GUI}.training.t")}) != []  # side by side


def test_no_circle_among_the_editors_modules(gui_imports):
    assert circles(gui_imports) == []


def test_every_module_sits_in_a_part(graph):
    modules = {m for m in graph.modules if m.startswith(GUI + ".")}
    assert len(modules) > 60
    assert {m for m in modules if m.count(".") == 2} == {f"{GUI}.{p}" for p in LEVELS}


def test_parts_import_only_the_parts_below_them(gui_imports):
    assert upward(gui_imports) == []


def test_a_circle_through_a_function_or_a_type_check_import_is_seen(tmp_path, monkeypatch):
    pkg = tmp_path / "circ"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("def f():\n    from circ.b import g\n    return g\n")
    (pkg / "b.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                              "    from circ.a import f\ndef g(): pass\n")
    (pkg / "c.py").write_text("import circ.a\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert circles(all_imports(build("circ"))) == [["circ.a", "circ.b"]]


def test_no_circle_anywhere_in_the_package(graph):
    assert circles(all_imports(graph)) == []


# the front door and what stands in front of it (the command line) may import the package
FRONT = {"nodegraph", "nodegraph.__main__", "nodegraph.cli"}


def test_nothing_below_the_front_door_imports_nodegraph_itself(graph):
    """`import nodegraph` / `from nodegraph import train` below the front door runs the
    package's lazy API from inside it: the front door importing its own rooms."""
    importers = graph.find_modules_that_directly_import("nodegraph")
    below = {m for m in importers if m not in FRONT and not m.startswith("nodegraph.cli.")}
    assert sorted(below) == []
