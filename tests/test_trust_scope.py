"""Trust grants what the user was shown and nothing more (issue #24, item 1).

Trusting a module opens that module's own functions and classes: never a module it
imported (``numpy:f2py.os.system``), an object it took from another package
(``numpy.testing:TestCase`` is unittest's), nor a submodule the user was not shown. The
CLI says name by name what --trust grants, and the editor's trust record holds a digest of
each module's source, so a changed module beside an unchanged graph is asked about again.
"""

from __future__ import annotations

import sys

import numpy as np
import pytest

import nodegraph
from nodegraph.cli.main import main
from nodegraph.model import allowlist
from nodegraph.model.errors import ParamError
from tests.test_hostile_code import assert_untouched, hostile_file
from tests.test_hostile_code import folder as folder  # noqa: F401 (the fixture)

USER_MODULE = '''
import subprocess
from subprocess import run
from torch import zeros


def helper(x):
    return x


class Net:
    def forward(self, x):
        return x
'''


def test_a_trusted_numpy_grants_its_own_functions_only():
    with allowlist.trusting({"numpy"}):
        assert allowlist.resolve("numpy:mean", "function") is np.mean
        assert allowlist.resolve("numpy:ndarray.sum", "function") is np.ndarray.sum
        for path in ("numpy:f2py.os.system", "numpy:testing.assert_equal", "numpy:__loader__",
                     "numpy:f2py", "numpy:mean.__globals__"):
            with pytest.raises(ParamError):
                allowlist.resolve(path, "function")
        with pytest.raises(ParamError, match="not one of"):  # a submodule only by its name
            allowlist.resolve("numpy.linalg:norm", "function")
    with allowlist.trusting({"numpy.testing"}):
        assert allowlist.resolve("numpy.testing:assert_equal", "f") is np.testing.assert_equal
        with pytest.raises(ParamError, match="own"):  # unittest's class, imported by numpy
            allowlist.resolve("numpy.testing:TestCase", "function")


def test_a_trusted_scikit_learn_grants_its_public_classes_not_its_modules():
    from sklearn.preprocessing import StandardScaler

    with allowlist.trusting({"sklearn.preprocessing", "sklearn.utils"}):
        assert allowlist.resolve("sklearn.preprocessing:StandardScaler", "t") is StandardScaler
        with pytest.raises(ParamError, match="a module"):
            allowlist.resolve("sklearn.utils:validation.np", "target")


def test_a_trusted_user_module_grants_what_it_defines(tmp_path, monkeypatch):
    (tmp_path / "mine.py").write_text(USER_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        with allowlist.trusting({"mine"}):
            assert allowlist.resolve("mine:helper", "function")(3) == 3
            assert allowlist.resolve("mine:Net.forward", "function")
            for path in ("mine:subprocess.run", "mine:run", "mine:zeros", "mine:helper.x"):
                with pytest.raises(ParamError):
                    allowlist.resolve(path, "function")
    finally:
        sys.modules.pop("mine", None)


def test_validate_trust_on_numpy_f2py_runs_no_shell(folder, capsys):
    path = hostile_file(folder, "opaque.Function", {"function": "numpy:f2py.os.system",
                                                    "args": [f"touch {folder / 'CANARY'}"]})
    assert allowlist.granted(nodegraph.load(path)) == {"numpy": ["f2py.os.system"]}
    assert main(["validate", "--trust", str(path)]) != 0
    assert_untouched(folder)
    err = capsys.readouterr().err
    assert "trusting code from module(s) numpy (f2py.os.system)" in err
    assert "evil" in err and "not a callable or class of numpy's own" in err
    assert "internal error" not in err


def test_the_grant_names_each_module_and_name(folder):
    path = hostile_file(folder, "opaque.Module", {"target": "canary_module:Touch",
                                                  "kwargs": {"path": "x"}})
    graph = nodegraph.load(path)
    assert allowlist.granted(graph) == {"canary_module": ["Touch"]}
    assert allowlist.describe_grant(allowlist.granted(graph)) == "canary_module (Touch)"


def test_a_source_digest_changes_with_the_module_and_imports_nothing(tmp_path, monkeypatch):
    pkg = tmp_path / "pkgx"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("raise SystemExit('imported')\n")
    (pkg / "sub.py").write_text("A = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    first = allowlist.source_digest("pkgx.sub")
    assert len(first) == 64 and "pkgx" not in sys.modules  # found, not imported
    (pkg / "sub.py").write_text("A = 2\n")
    assert allowlist.source_digest("pkgx.sub") not in ("", first)
    assert allowlist.source_digest("no_such_module_here") == ""
