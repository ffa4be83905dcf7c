"""Pure-Python arithmetic a file names, bounded before it computes (issue #24, item 2).

`math` and `operator` calls at validation run on Python values from the file; each is
refused as `too_large`, naming its node, when what it would make is decided to be too big
from its operands' sizes, before any of it is computed; small calls still compute.
"""

from __future__ import annotations

import math
import operator
import threading

import pytest
import torch

import nodegraph
from nodegraph.model import allowlist, bounded
from tests.test_hostile_code import folder as folder  # noqa: F401 (the fixture)
from tests.test_hostile_code import hostile_file
from tests.test_hostile_paths import assert_clean, run_cli

STALLS = {
    "factorial": ("math:factorial", [10**8]),
    "comb": ("math:comb", [10**7, 5 * 10**6]),
    "perm": ("math:perm", [10**6, 10**5]),
    "pow": ("operator:pow", [10, 10**9]),
    "ipow": ("operator:ipow", [7, 10**8]),
    "lshift": ("operator:lshift", [1, 10**10]),
    "mul_str": ("operator:mul", ["ab", 10**9]),
    "mul_list": ("operator:mul", [[0], 10**9]),
    "mul_str_first": ("operator:mul", [10**9, "x"]),
    "format": ("operator:mod", ["%01000000000d", 1]),
    "comb_small_k_huge_n": ("math:comb", [10**99, 10**6]),
}


def within(seconds: float, fn):
    done: list = []
    worker = threading.Thread(target=lambda: done.append(fn()), daemon=True)
    worker.start()
    worker.join(seconds)
    assert done, f"still computing after {seconds} s"
    return done[0]


@pytest.mark.parametrize("name", list(STALLS))
def test_a_stalling_call_is_refused_as_too_large_on_its_node(folder, name):
    function, args = STALLS[name]
    path = hostile_file(folder, "opaque.Function", {"function": function, "args": args})
    report = within(10, lambda: nodegraph.validate(nodegraph.load(path)))
    assert [(p.node, p.kind) for p in report.errors] == [("evil", "too_large")], report.errors
    assert function in report.errors[0].message


@pytest.mark.parametrize("command", ["validate", "info", "run", "export"])
def test_every_command_refuses_it_quickly_and_cleanly(folder, capsys, command):
    path = str(hostile_file(folder, "opaque.Function",
                            {"function": "math:factorial", "args": [10**8]}))
    extra = ["--to", "python", "-o", str(folder / "o.py")] if command == "export" else []
    code, text = within(10, lambda: run_cli(capsys, command, path, *extra))
    assert code != 0 and "evil" in text and "too_large" in text or "would make" in text, text
    assert_clean(text)


def test_small_values_compute_as_before_and_tensors_pass_through():
    table = allowlist.functions()
    assert table["math:factorial"](20) == math.factorial(20)
    assert table["math:comb"](10**6, 3) == math.comb(10**6, 3)
    assert table["operator:pow"](2, 100) == 2**100
    assert table["operator:mul"]("ab", 3) == "ababab"
    assert table["operator:lshift"](1, 1000) == 1 << 1000
    x = torch.randn(3)
    assert table["operator:mul"](x, 2).equal(x * 2)
    assert table["operator:add"].__wrapped_allowlisted__ is operator.add


def test_operands_a_chain_of_calls_made_are_bounded_too():
    table = allowlist.functions()  # a file's literals stop at 100 digits; a chain does not
    for name, args in (("operator:mul", (2**9000, 2**9000)), ("math:prod", ([2**9000] * 2,)),
                       ("operator:add", (2**20000, 1)), ("math:isqrt", (2**20000,)),
                       ("operator:add", ("x" * 40000, "y" * 40000))):
        with pytest.raises(bounded.TooLargeValue, match="would make"):
            table[name](*args)


def test_python_values_count_in_the_estimate():
    assert bounded.python_bytes("x" * 1000) > 1000
    assert bounded.python_bytes([2**800] * 10) > 10 * 100
    assert bounded.python_bytes(torch.zeros(10)) == 0  # tensors count elsewhere
