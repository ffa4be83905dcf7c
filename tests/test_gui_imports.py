"""The editor's import graph: no circles among its modules, and its parts import downwards.

`nodegraph/gui/` is in parts (`shell` > `panels` | `training` > `canvas` > `document` >
`base`); pyproject's import-linter contract says the same for `make lint`. This test reads
the graph with grimp (what import-linter builds on), type-checking imports included, so a
circle hidden behind `if TYPE_CHECKING:` or inside a function counts too.
"""

from __future__ import annotations

import grimp
import networkx as nx
import pytest

GUI = "nodegraph.gui"
# lower number = lower layer; parts on one level must not import each other
LEVELS = {"base": 0, "document": 1, "canvas": 2, "panels": 3, "training": 3, "shell": 4}


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return grimp.build_graph("nodegraph", include_external_packages=False,
                             exclude_type_checking_imports=False, cache_dir=None)


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
