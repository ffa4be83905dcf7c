"""Graph files that try to run code: every escape is refused by name, through every door.

Each hostile file wires `data.XOR` into an opaque block whose params name Python a graph
file may not call. Validating, inspecting, running or exporting it must leave no canary
behind and name the node and param; a module of the user's own is imported only with
--trust. The editor's open-and-validate path is tested in tests/gui/test_trust.py.
"""

from __future__ import annotations

import json
import sys

import pytest
import torch

import nodegraph
from nodegraph.cli.main import main
from nodegraph.model import allowlist

# (block, params) pairs; "CANARY" in a param is replaced by the canary file's path.
FUNCTION_ESCAPES = {
    "torch_os_system": {"function": "torch:os.system", "args": ["touch CANARY"]},
    "torch_load": {"function": "torch:load", "args": ["CANARY"]},
    "torch_save": {"function": "torch:save", "args": [{"input": 0}, "CANARY"]},
    "torch_from_file": {"function": "torch:from_file", "args": ["CANARY"],
                        "kwargs": {"shared": True, "size": 4}},
    "methodcaller": {"function": "operator:methodcaller", "args": ["system", "touch CANARY"]},
    "attrgetter": {"function": "operator:attrgetter", "args": ["os"]},
    "builtins_eval": {"function": "builtins:eval", "args": ["open('CANARY', 'w')"]},
    "builtins_exec": {"function": "builtins:exec", "args": ["open('CANARY', 'w')"]},
    "builtins_compile": {"function": "builtins:compile", "args": ["1", "f", "eval"]},
    "builtins_getattr": {"function": "builtins:getattr", "args": [{"input": 0}, "numpy"]},
    "dunder_import": {"function": "builtins:__import__", "args": ["os"]},
    "importlib": {"function": "importlib:import_module", "args": ["os"]},
    "subprocess": {"function": "subprocess:getoutput", "args": ["touch CANARY"]},
    "os_system": {"function": "os:system", "args": ["touch CANARY"]},
    "ctypes": {"function": "ctypes:CDLL", "args": ["libc.so.6"]},
    "sys_modules": {"function": "sys:modules.get", "args": ["os"]},
    "class_chain": {"function": "torch:Tensor.__class__.__subclasses__", "args": []},
    "globals_chain": {"function": "torch:nn.functional.relu.__globals__.get",
                      "args": ["torch"]},
    "tensor_dunder": {"function": "torch:Tensor.__reduce_ex__", "args": [{"input": 0}, 2]},
    "tensor_hook": {"function": "torch:Tensor.register_hook", "args": [{"input": 0}, 1]},
    "function_argument": {"function": "torch.nn.functional:relu",
                          "args": [{"function": "os:system"}]},
    "nested_function_argument": {"function": "torch:Tensor.mean",
                                 "kwargs": {"dim": {"tuple": [{"function": "subprocess:run"}]}}},
    "own_module_unflagged": {"function": "canary_module:touch", "args": ["CANARY"]},
}
MODULE_ESCAPES = {
    "popen": {"target": "subprocess:Popen", "kwargs": {"args": ["touch", "CANARY"]}},
    "eval_as_module": {"target": "builtins:eval", "kwargs": {}},
    "nn_chain": {"target": "torch.nn:Linear.__init__.__globals__", "kwargs": {}},
    "nn_module_base": {"target": "torch.nn:modules.module.sys", "kwargs": {}},
    "function_in_kwargs": {"target": "torch.nn:TransformerEncoderLayer",
                           "kwargs": {"d_model": 2, "nhead": 1,
                                      "activation": {"function": "os:system"}}},
    "own_module": {"target": "canary_module:Touch", "kwargs": {"path": "CANARY"}},
}
ESCAPES = [("opaque.Function", k, v) for k, v in FUNCTION_ESCAPES.items()] + \
          [("opaque.Module", k, v) for k, v in MODULE_ESCAPES.items()]

# A module of the user's own: importing it, or calling it, leaves the canary.
CANARY_MODULE = '''
import pathlib
import torch

pathlib.Path(__file__).with_name("IMPORTED").touch()


def touch(path):
    pathlib.Path(path).touch()
    return torch.zeros(1)


class Touch(torch.nn.Module):
    def __init__(self, path):
        super().__init__()
        pathlib.Path(path).touch()

    def forward(self, x):
        return x
'''


def _substitute(value, canary: str):
    if isinstance(value, str):
        return value.replace("CANARY", canary)
    if isinstance(value, list):
        return [_substitute(v, canary) for v in value]
    if isinstance(value, dict):
        return {k: _substitute(v, canary) for k, v in value.items()}
    return value


@pytest.fixture
def folder(tmp_path, monkeypatch):
    """A folder holding the user's own module, importable (as if run from there)."""
    (tmp_path / "canary_module.py").write_text(CANARY_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    yield tmp_path
    sys.modules.pop("canary_module", None)


def hostile_file(folder, block: str, params: dict):
    canary = folder / "CANARY"
    doc = {"format": "nodegraph", "version": 1, "name": "hostile",
           "nodes": {"data": {"type": "data.XOR", "params": {}},
                     "evil": {"type": block, "params": _substitute(params, str(canary))},
                     "loss": {"type": "losses.MSE", "params": {}},
                     "opt": {"type": "optimizers.SGD", "params": {"lr": 0.1}}},
           "edges": [{"from": ["data", "x"], "to": ["evil", "input"]},
                     {"from": ["evil", "output"], "to": ["loss", "input"]},
                     {"from": ["data", "y"], "to": ["loss", "target"]},
                     {"from": ["loss", "loss"], "to": ["opt", "loss"]}],
           "training": {"epochs": 1}}
    path = folder / "hostile.json"
    path.write_text(json.dumps(doc))
    return path


def assert_untouched(folder):
    assert not (folder / "CANARY").exists(), "the file ran code"
    assert not (folder / "IMPORTED").exists(), "the file imported a module of its own"
    assert "canary_module" not in sys.modules


@pytest.mark.parametrize("block,name,params", ESCAPES, ids=[e[1] for e in ESCAPES])
def test_validate_refuses_the_escape_by_node_and_param(folder, block, name, params):
    path = hostile_file(folder, block, params)
    report = nodegraph.validate(nodegraph.load(path))
    assert_untouched(folder)
    kinds = {(p.node, p.port, p.kind) for p in report.errors}
    param = "function" if block == "opaque.Function" else "target"
    nested = name in ("function_argument", "nested_function_argument", "function_in_kwargs")
    where = ("args" if name == "function_argument" else "kwargs") if nested else param
    assert ("evil", where, "untrusted_code") in kinds, report.errors
    [problem] = [p for p in report.errors if p.node == "evil"]
    assert "may name" in problem.message and problem.hint


@pytest.mark.parametrize("command", [["validate"], ["info"], ["run", "--epochs", "1"],
                                     ["export", "--to", "python", "-o", "out.py"],
                                     ["export", "--to", "onnx", "-o", "out.onnx"]],
                         ids=lambda c: c[0] + (c[2] if c[0] == "export" else ""))
@pytest.mark.parametrize("block,name,params",
                         [e for e in ESCAPES if e[1] in ("torch_os_system", "builtins_exec",
                                                         "methodcaller", "popen", "own_module",
                                                         "function_argument")],
                         ids=lambda v: v if isinstance(v, str) and ":" not in v else "")
def test_no_command_runs_the_escape(folder, capsys, command, block, name, params):
    path = hostile_file(folder, block, params)
    code = main([command[0], str(path), *command[1:]])
    assert_untouched(folder)
    out = capsys.readouterr()
    text = out.out + out.err
    if command[0] == "info":  # info lists the problem beside the nodes
        assert "evil" in text and "untrusted_code" in text or "may name" in text
    else:
        assert code != 0 and "evil" in text and "may name" in text, text
    assert "internal error" not in text
    assert not (folder / "out.py").exists() and not (folder / "out.onnx").exists()


def test_trust_imports_the_users_module_and_only_with_the_flag(folder, capsys):
    path = hostile_file(folder, "opaque.Module", MODULE_ESCAPES["own_module"])
    assert nodegraph.model.allowlist.modules_needed(nodegraph.load(path)) == ["canary_module"]
    assert main(["validate", str(path)]) != 0
    assert_untouched(folder)
    capsys.readouterr()
    main(["validate", "--trust", str(path)])  # (its loss compares 2 outputs with 1 target)
    assert (folder / "IMPORTED").exists() and (folder / "CANARY").exists()
    err = capsys.readouterr().err
    assert "trusting code from module(s) canary_module" in err and "untrusted" not in err


@pytest.mark.parametrize("name", ["torch_os_system", "builtins_exec", "subprocess",
                                  "globals_chain"])
def test_trust_never_opens_torch_or_the_standard_library(folder, name):
    path = hostile_file(folder, "opaque.Function", FUNCTION_ESCAPES[name])
    graph = nodegraph.load(path)
    assert allowlist.trust(graph) == []  # nothing of the user's to trust
    with allowlist.trusting({"torch", "builtins", "subprocess", "os"}):
        report = nodegraph.validate(graph)
    assert_untouched(folder)
    assert [(p.node, p.kind) for p in report.errors] == [("evil", "untrusted_code")]


def test_a_dtype_argument_names_only_dtypes(folder):
    path = hostile_file(folder, "opaque.Function",
                        {"function": "torch:Tensor.to", "args": [{"input": 0},
                                                                  {"dtype": "load"}]})
    [problem] = nodegraph.validate(nodegraph.load(path)).errors
    assert problem.node == "evil" and "not a torch dtype" in problem.message


def test_the_allowlist_keeps_what_imported_graphs_use():
    x = torch.randn(3, 4)
    assert allowlist.resolve("torch:log", "function") is torch.log
    assert allowlist.resolve("torch:Tensor.mean", "function") is torch.Tensor.mean
    assert allowlist.resolve("torch.nn.functional:gelu", "function") is torch.nn.functional.gelu
    assert allowlist.resolve("torch.nn:Hardswish", "t", allowlist.MODULES) is torch.nn.Hardswish
    assert allowlist.resolve("operator:add", "function")(x, x).equal(x + x)
    assert allowlist.resolve("math:sqrt", "function")(4.0) == 2.0
    for refused in ("torch:load", "torch:save", "torch:from_file", "torch:os",
                    "torch:manual_seed", "torch:set_num_threads", "operator:methodcaller",
                    "torch:Tensor.apply_", "torch:Tensor.storage"):
        assert not allowlist.allowed(refused), refused
    assert not allowlist.allowed("torch.nn:Linear")  # a class is not a function
    assert not allowlist.allowed("torch:log", allowlist.MODULES)


@pytest.mark.parametrize("name", ['x"""\nopen("CANARY", "w")\n"""', 'x")\nopen("CANARY", "w")#',
                                  "x\\", 'q"', "nul\x00byte"])
def test_a_graph_name_cannot_write_code_into_the_exported_script(folder, name):
    """Export writes the graph's name into docstrings and strings, and runs the script to
    check it: a name that closes them must stay text."""
    graph = nodegraph.load(_example("xor.json"))
    graph.name = name.replace("CANARY", str(folder / "CANARY"))
    path = folder / "xor.json"
    nodegraph.save(graph, path)
    assert main(["export", str(path), "--to", "python", "-o", str(folder / "out.py")]) == 0
    assert_untouched(folder)
    text = (folder / "out.py").read_text()
    compile(text, "out.py", "exec")  # still Python


def _example(name: str):
    from pathlib import Path

    return Path(__file__).resolve().parent.parent / "examples" / name


@pytest.mark.parametrize("kwargs", [{}, {"device": "cpu"}])
def test_a_tensor_of_a_size_from_the_file_is_made_on_meta_during_validation(folder, kwargs):
    """torch:ones with a size the file gives (14 GB here) took validation to 14 GB of memory;
    it is made on meta, whatever device the file asks for, and counted in the estimate."""
    import resource

    from nodegraph.kinds import footprint

    path = hostile_file(folder, "opaque.Function", {"function": "torch:ones",
                                                    "args": [[60000, 60000]], "kwargs": kwargs})
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KB
    with footprint.memory_limit(2**30):
        problems = {(p.node, p.kind) for p in nodegraph.validate(nodegraph.load(path)).errors}
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 2**20  # < 1 GB
    assert ("evil", "too_large") in problems
