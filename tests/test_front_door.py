"""The lazy front door (`nodegraph.__getattr__`): every public name resolves, and
`nodegraph.compile` is served without a module-level `compile` that shadows the builtin."""

from __future__ import annotations

import builtins
from pathlib import Path

import nodegraph
from nodegraph.runtime import compile as compile_module

XOR = Path(__file__).resolve().parents[1] / "examples" / "xor.json"


def test_every_public_name_resolves():
    for name in nodegraph._API:
        assert getattr(nodegraph, name) is not None, name
    assert set(nodegraph.__all__) <= set(nodegraph._API)


def test_compile_is_the_runtime_compile_graph_and_shadows_nothing():
    assert nodegraph.compile is compile_module.compile_graph
    assert not hasattr(compile_module, "compile")  # the builtin stays visible in that module
    compiled = nodegraph.compile(nodegraph.load(XOR), device="cpu")
    assert compiled.parameter_count() == 2 * 4 + 4 + 4 * 1 + 1  # Linear(2, 4), Linear(4, 1)
    namespace: dict = {}
    exec("from nodegraph import *", namespace)
    assert "compile" not in namespace and "train" in namespace
    assert namespace["__builtins__"]["compile"] is builtins.compile
