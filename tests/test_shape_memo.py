"""The editor's memo of wire labels by graph content (`gui/document/shape_memo.py`): what
changes the key and what does not, and that a damaged, oversized or linked entry is
ignored rather than trusted."""

from __future__ import annotations

import os

import pytest

import nodegraph
from nodegraph.gui.document import shape_memo
from nodegraph.gui.document.shape_memo import ShapeMemo, content_key


def _xor():
    return nodegraph.load("examples/xor.json")


@pytest.fixture(autouse=True)
def nothing_shipped(tmp_path, monkeypatch):
    """No shipped example labels (xor.json is one): only what these tests remember."""
    monkeypatch.setattr(shape_memo, "SHIPPED", tmp_path / "none.json")
    shape_memo.shipped.cache_clear()
    yield
    shape_memo.shipped.cache_clear()


def test_the_key_follows_what_decides_shapes_and_not_the_layout():
    g = _xor()
    key = content_key(g)
    g.set_ui("positions", {"hidden": [1, 2]})
    assert content_key(g) == key  # moving a card keeps the labels
    g.set_param("hidden", "out_features", 5)
    changed = content_key(g)
    assert changed != key
    g.set_training("batch_size", 2)
    assert content_key(g) != changed


def test_labels_come_back_as_remembered_and_bad_entries_are_ignored(tmp_path):
    g = _xor()
    report = nodegraph.validate(g)
    labels = shape_memo.labels_of(report, g)
    assert labels[("hidden", "output")] == "(N, 4)" and labels[("loss", "loss")] == "scalar"
    memo, key = ShapeMemo(tmp_path), content_key(g)
    assert memo.recall(key) is None
    memo.remember(key, labels)
    assert memo.recall(key) == labels
    entry = tmp_path / "shapes" / f"{key}.json"
    entry.write_text('{"labels": [["a", "b", "' + "x" * 100 + '"], ["c", 1, "(N,)"]]}')
    assert memo.recall(key) == {}  # too long a label, a number for a port: left out
    entry.write_text("{not json")
    assert memo.recall(key) is None
    entry.write_bytes(b" " * (shape_memo.MAX_BYTES + 1))
    assert memo.recall(key) is None  # not read at all
    entry.unlink()
    secret = tmp_path / "secret.json"
    secret.write_text('{"labels": [["hidden", "output", "(N, 9)"]]}')
    os.symlink(secret, entry)
    assert memo.recall(key) is None  # a link planted in the state folder is not followed


def test_the_memo_keeps_only_the_newest_entries(tmp_path, monkeypatch):
    monkeypatch.setattr(shape_memo, "KEEP", 3)
    memo = ShapeMemo(tmp_path)
    for i in range(5):
        memo.remember(f"{i:064x}", {("a", "b"): "(N, 1)"})
        os.utime(tmp_path / "shapes" / f"{i:064x}.json", (i, i))
    memo.remember("f" * 64, {("a", "b"): "(N, 1)"})
    assert len(list((tmp_path / "shapes").glob("*.json"))) == 3
    assert memo.recall("f" * 64) is not None and memo.recall(f"{0:064x}") is None
