"""Trust says what it grants (issue #33, item 4).

Trusting a module opens its own callables, but a few of them do more than compute:
``numpy:load`` with ``allow_pickle`` unpickles (and so runs any code a crafted file holds),
``numpy:save`` writes anywhere. Those are granted only by their full name (``--grant
numpy:load``, or the editor's prompt, which names what each can do), never with their
module, and also when named through an alias. The editor's trust record holds a digest of
every file of the package a trusted name comes from, so editing ``mypkg/models.py`` behind
``mypkg/__init__.py`` asks again.
"""

from __future__ import annotations

import importlib
import sys

import numpy as np
import pytest

import nodegraph
from nodegraph.cli.main import main
from nodegraph.gui.document.trusted_files import TrustedFiles
from nodegraph.model import allowlist, dangerous
from nodegraph.model.errors import ParamError
from tests.test_hostile_code import folder as folder  # noqa: F401 (the fixture)
from tests.test_hostile_code import hostile_file


class _Payload:
    """Unpickled, it opens MARKER for writing: a harmless stand-in for a shell command."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return open, (self.marker, "w")


def _pickled_npy(folder):
    """payload.npy: an object array whose unpickling leaves folder/MARKER behind."""
    path = folder / "payload.npy"
    np.save(path, np.array([_Payload(folder / "MARKER"), 1], dtype=object), allow_pickle=True)
    return path


def _load_file(folder, function="numpy:load"):
    return hostile_file(folder, "opaque.Function", {
        "function": function, "args": [str(_pickled_npy(folder))],
        "kwargs": {"allow_pickle": True}})


def test_trusting_numpy_does_not_let_a_file_unpickle_with_numpy_load(folder, capsys):
    path = _load_file(folder)
    assert main(["validate", "--trust", str(path)]) != 0
    assert not (folder / "MARKER").exists(), "numpy:load unpickled the payload"
    err = capsys.readouterr().err
    assert "not granted numpy:load: it reads files, unpickles" in err  # the --trust line
    assert "evil" in err and "--grant numpy:load" in err  # the node's problem says how
    assert "internal error" not in err


def test_numpy_load_runs_when_granted_by_its_full_name(folder, capsys):
    """The grant is real: the same file, granted numpy:load, does unpickle."""
    path = _load_file(folder)
    main(["validate", "--trust", "--grant", "numpy:load", str(path)])
    assert (folder / "MARKER").exists()
    assert "granted numpy:load: it reads files, unpickles" in capsys.readouterr().err


def test_a_grant_alone_opens_only_the_name_granted(folder, capsys):
    path = _load_file(folder)
    main(["validate", "--grant", "numpy:load", str(path)])
    assert (folder / "MARKER").exists()
    graph = nodegraph.load(path)
    allowlist.trust(graph, ["numpy:load"], modules=False)
    assert graph.trusted == {"numpy:load"}
    with allowlist.trusting(graph.trusted), pytest.raises(ParamError, match="not one of"):
        allowlist.resolve("numpy:mean", "function")  # the module itself is not trusted


def test_numpy_save_cannot_write_outside_under_module_trust(folder, tmp_path_factory, capsys):
    outside = tmp_path_factory.mktemp("outside") / "written.npy"
    path = hostile_file(folder, "opaque.Function", {"function": "numpy:save",
                                                    "args": [str(outside), [1, 2]]})
    assert main(["validate", "--trust", str(path)]) != 0
    assert not outside.exists()
    assert "numpy:save" in capsys.readouterr().err


def test_an_alias_of_a_listed_callable_is_refused_by_identity(folder):
    impl = importlib.import_module("numpy.lib._npyio_impl")
    assert impl.load is np.load and not dangerous.powers("numpy.lib._npyio_impl:load")
    with allowlist.trusting({"numpy.lib._npyio_impl"}):
        with pytest.raises(allowlist.UngrantedPowerError, match="unpickles"):
            allowlist.resolve("numpy.lib._npyio_impl:load", "function")
        with pytest.raises(allowlist.UngrantedPowerError, match="reads files"):
            allowlist.resolve("numpy.lib._npyio_impl:loadtxt", "function")
    with allowlist.trusting({"numpy.lib._npyio_impl", "numpy.lib._npyio_impl:load"}):
        assert allowlist.resolve("numpy.lib._npyio_impl:load", "function") is np.load
    with allowlist.trusting({"numpy"}):  # what only computes still resolves
        assert allowlist.resolve("numpy:mean", "function") is np.mean


def test_the_prompt_and_the_trust_line_name_what_each_name_can_do(folder):
    grant = {"numpy": ["load", "mean", "save"], "mymodels": ["Net"]}
    line = allowlist.describe_grant(grant)
    assert line == ("numpy (load [reads files, unpickles (runs code stored in the file)], "
                    "mean, save [writes files]); mymodels (Net)")
    assert allowlist.powerful(grant) == {"numpy:load": (dangerous.READS, dangerous.UNPICKLES),
                                         "numpy:save": (dangerous.WRITES,)}
    path = _load_file(folder)
    assert allowlist.granted(nodegraph.load(path)) == {"numpy": ["load"]}


def test_validation_lists_an_ungranted_powerful_name_without_importing(folder):
    path = hostile_file(folder, "opaque.Function", {"function": "pandas:read_pickle",
                                                    "args": ["x.pkl"]})
    graph = nodegraph.load(path)
    allowlist.trust(graph)
    sys.modules.pop("pandas.io.pickle", None)
    report = nodegraph.validate(graph)
    problems = [p for p in report.errors if p.node == "evil"]
    assert problems and "--grant pandas:read_pickle" in problems[0].message + problems[0].hint
    assert "unpickles" in problems[0].message


def test_a_grant_must_be_a_full_name(folder):
    graph = nodegraph.load(_load_file(folder))
    for bad in ("numpy", "numpy:", ":load", "numpy:load; rm", 3):
        with pytest.raises(ParamError, match="module:qualname"):
            allowlist.trust(graph, [bad])
    assert main(["validate", "--grant", "numpy", str(folder / "hostile.json")]) != 0
    assert not (folder / "MARKER").exists()


# -- the table of callables that do more than compute --------------------------------------

def test_every_listed_callable_exists_in_the_installed_package():
    missing = []
    for path in dangerous.TABLE:
        top = path.partition(":")[0].split(".")[0]
        if importlib.util.find_spec(top) is None:
            continue  # not installed here: nothing to check
        try:
            obj = dangerous.resolve_listed(path)
        except (ImportError, AttributeError) as e:
            missing.append(f"{path}: {e}")
            continue
        if not callable(obj):
            missing.append(f"{path}: not callable")
    assert not missing, missing


def test_the_allowlist_opens_none_of_the_listed_torch_callables():
    table = allowlist.functions()
    opened = [p for p in dangerous.TABLE if p.startswith("torch") and p in table]
    assert not opened


def test_each_power_is_one_of_the_named_kinds():
    kinds = {dangerous.READS, dangerous.WRITES, dangerous.UNPICKLES, dangerous.PROCESSES,
             dangerous.NETWORK, dangerous.NATIVE}
    assert all(p and set(p) <= kinds for p in dangerous.TABLE.values())
    for name in ("numpy:load", "numpy:save", "torch:load", "pickle:loads", "joblib:load",
                 "pandas:read_pickle", "subprocess:run", "os:system", "shutil:rmtree",
                 "scipy.io:loadmat", "sklearn.datasets:fetch_openml"):
        assert dangerous.powers(name), name


# -- the digest covers the whole package ---------------------------------------------------

def _mypkg(root):
    pkg = root / "mypkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("from .models import Net\n")
    (pkg / "models.py").write_text("import torch\n\n\nclass Net(torch.nn.Linear):\n"
                                   "    pass\n")
    return pkg


def test_a_change_to_the_module_behind_the_package_changes_the_digest(tmp_path, monkeypatch):
    pkg = _mypkg(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    first = allowlist.source_digest("mypkg")
    assert len(first) == 64 and "mypkg" not in sys.modules  # nothing imported
    (pkg / "models.py").write_text((pkg / "models.py").read_text() + "# changed\n")
    assert allowlist.source_digest("mypkg") not in ("", first)
    (pkg / "data").mkdir()  # any file of the package, not only .py
    (pkg / "data" / "table.json").write_text("{}")
    second = allowlist.source_digest("mypkg")
    (pkg / "__pycache__").mkdir()  # what Python writes itself is not the package's code
    (pkg / "__pycache__" / "models.cpython-311.pyc").write_bytes(b"x")
    assert allowlist.source_digest("mypkg") == second


def test_the_editor_asks_again_when_the_code_behind_a_trusted_name_changes(tmp_path,
                                                                         monkeypatch):
    pkg = _mypkg(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    record = TrustedFiles(tmp_path / "state")
    data = b'{"a graph": "naming mypkg:Net"}'
    record.remember(data, ["mypkg"])
    assert record.knows(data, ["mypkg"])
    (pkg / "models.py").write_text((pkg / "models.py").read_text() + "import os\n")
    assert not record.knows(data, ["mypkg"]), "changed code behind mypkg:Net ran unasked"
    record.remember(data, ["mypkg"])
    assert record.knows(data, ["mypkg"])


def test_an_installed_package_is_known_by_its_record():
    digest = allowlist.source_digest("numpy")
    assert len(digest) == 64 and digest == allowlist.source_digest("numpy.linalg")
    origin = importlib.util.find_spec("numpy").origin
    record = allowlist._record_of(origin, True)
    assert record is not None and record.name == "RECORD"


def test_the_editor_record_holds_granted_full_names(tmp_path, monkeypatch):
    record = TrustedFiles(tmp_path / "state")
    data = b"graph"
    record.remember(data, ["numpy"])
    assert not record.knows(data, ["numpy", "numpy:load"])  # a grant it was not asked for
    record.remember(data, ["numpy", "numpy:load"])
    assert record.knows(data, ["numpy", "numpy:load"])
