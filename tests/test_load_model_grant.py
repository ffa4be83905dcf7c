"""`load_model` grants dangerous callables as the CLI's ``--grant`` does (issue #33).

``trust=True`` opens the modules a saved model's graph names, but never a callable that
does more than compute (`nodegraph.model.dangerous`): ``grant=["numpy:load"]`` does, by its
full name. Without the grant the refusal names each such callable, what it can do, and the
``grant=`` that would let it run; nothing runs.
"""

from __future__ import annotations

import json
import zipfile

import numpy as np
import pytest

import nodegraph
from nodegraph.interop import modelfile
from nodegraph.model.errors import NodegraphError


class _Payload:
    """Unpickled, it opens MARKER for writing: a harmless stand-in for a shell command."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return open, (self.marker, "w")


@pytest.fixture
def loads_npy(tmp_path):
    """A saved model whose graph.json gained a node calling numpy:load on a pickled .npy."""
    np.save(tmp_path / "payload.npy", np.array([_Payload(tmp_path / "MARKER"), 1],
                                               dtype=object), allow_pickle=True)
    graph = {"format": "nodegraph", "version": 1, "name": "g",
             "nodes": {"data": {"type": "data.XOR", "params": {}},
                       "out": {"type": "layers.Linear", "params": {"out_features": 1}},
                       "loss": {"type": "losses.MSE", "params": {}},
                       "opt": {"type": "optimizers.SGD", "params": {"lr": 0.1}}},
             "edges": [{"from": ["data", "x"], "to": ["out", "input"]},
                       {"from": ["out", "output"], "to": ["loss", "input"]},
                       {"from": ["data", "y"], "to": ["loss", "target"]},
                       {"from": ["loss", "loss"], "to": ["opt", "loss"]}],
             "training": {"epochs": 1}}
    (tmp_path / "g.json").write_text(json.dumps(graph))
    nodegraph.fit(nodegraph.load(tmp_path / "g.json")).save(tmp_path / "good.ngz")
    with zipfile.ZipFile(tmp_path / "good.ngz") as zf:
        members = {name: zf.read(name) for name in modelfile.MEMBERS}
    doc = json.loads(members["graph.json"])
    doc["nodes"]["evil"] = {"type": "opaque.Function", "params": {
        "function": "numpy:load", "args": [str(tmp_path / "payload.npy")],
        "kwargs": {"allow_pickle": True}}}
    doc["edges"].append({"from": ["data", "x"], "to": ["evil", "input"]})
    members["graph.json"] = json.dumps(doc).encode()
    path = tmp_path / "evil.ngz"
    with zipfile.ZipFile(path, "w") as zf:
        for name in modelfile.MEMBERS:
            zf.writestr(name, members[name])
    return path


def test_trust_alone_refuses_numpy_load_naming_the_grant(loads_npy):
    with pytest.raises(NodegraphError) as e:
        nodegraph.load_model(loads_npy, trust=True)
    message = str(e.value)
    assert str(loads_npy) in message
    assert "numpy:load (it reads files, unpickles" in message
    assert "grant=['numpy:load']" in message
    assert not (loads_npy.parent / "MARKER").exists(), "numpy:load ran without a grant"


def test_a_grant_lets_numpy_load_run(loads_npy):
    """The grant is real: granted, numpy:load unpickles the payload (which then fails the
    graph's shapes; what matters is that it ran)."""
    with pytest.raises(NodegraphError, match="evil"):
        nodegraph.load_model(loads_npy, trust=True, grant=["numpy:load"])
    assert (loads_npy.parent / "MARKER").exists()


def test_a_grant_without_trust_opens_that_name_only(loads_npy):
    with pytest.raises(NodegraphError, match="evil"):
        nodegraph.load_model(loads_npy, grant=["numpy:load"])
    assert (loads_npy.parent / "MARKER").exists()


def test_a_grant_must_be_a_full_name(loads_npy):
    with pytest.raises(NodegraphError, match="module:qualname"):
        nodegraph.load_model(loads_npy, trust=True, grant=["numpy"])
    assert not (loads_npy.parent / "MARKER").exists()
