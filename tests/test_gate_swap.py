"""A file swapped after the gate checked it is never read (issue #33, item 1's race).

Readers that open a path themselves (`datasets.load_from_disk`, `pyarrow.dataset`) used
to get the path the gate checked and open it again later: a file replaced in between by a
symlink to a file outside (or by another file) was read. Here the swap is made right after
the gate's check of the file returns, the worst moment; the outcome must be a refusal
naming the file, or the original data, never the data from outside.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from nodegraph.kinds import gate
from nodegraph.kinds.dataset import files_relative_to
from nodegraph.model.errors import NodegraphError

OUTSIDE_VALUE = 99.0


def _swap_after_check(monkeypatch, target: Path, replacement: Path, how: str,
                      at: int = 1) -> list[Path]:
    """Make `gate.checked` replace `target` (by a symlink to `replacement`, or a copy of
    it) right after it has checked it for the `at`-th time; returns the list the swap is
    recorded in."""
    real, done, seen = gate.checked, [], []

    def checking(path, what, **kw):
        out = real(path, what, **kw)
        if Path(path).name == target.name:
            seen.append(path)
            if len(seen) == at:
                target.rename(target.with_name(target.name + ".orig"))
                if how == "symlink":
                    target.symlink_to(replacement)
                else:
                    shutil.copyfile(replacement, target)
                done.append(target)
        return out

    monkeypatch.setattr(gate, "checked", checking)
    return done


def _hf_folder(path: Path, value: float) -> Path:
    import datasets

    datasets.Dataset.from_dict({"x": [value] * 4, "y": [0, 1, 0, 1]}).save_to_disk(str(path))
    return path


@pytest.mark.parametrize("at", [1, 2])
def test_an_hf_arrow_file_swapped_after_the_check_is_not_read(tmp_path, monkeypatch, at):
    """The Arrow file is checked when the folder's state.json is read, and again as it is
    opened: a symlink to outside swapped in after either is refused."""
    from nodes.data import hf

    (tmp_path / "graph").mkdir()
    mine = _hf_folder(tmp_path / "graph" / "mine", 1.0)
    outside = _hf_folder(tmp_path / "outside", OUTSIDE_VALUE)
    arrow = next(mine.glob("*.arrow"))
    done = _swap_after_check(monkeypatch, arrow, outside / arrow.name, "symlink", at)
    with files_relative_to(tmp_path / "graph"), pytest.raises(NodegraphError) as e:
        loaded = hf.open_disk("mine")
        values = np.asarray(loaded.with_format("numpy")["x"])
        assert OUTSIDE_VALUE not in values, "the file swapped in was read"
    assert done, "the swap never happened: the arrow file was not checked that often"
    assert arrow.name in str(e.value)


def _parquet(path: Path, value: float) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"x": [value] * 4, "y": [0, 1, 0, 1]}), path)
    return path


@pytest.mark.parametrize("how", ["symlink", "copy"])
def test_a_parquet_file_swapped_after_the_check_is_refused(tmp_path, monkeypatch, how):
    from nodes.data import tables

    (tmp_path / "t").mkdir()
    mine = _parquet(tmp_path / "t" / "a.parquet", 1.0)
    outside = _parquet(tmp_path / "outside.parquet", OUTSIDE_VALUE)
    done = _swap_after_check(monkeypatch, mine, outside, how)
    with pytest.raises(NodegraphError, match="a.parquet"):
        table = tables.open_table(str(tmp_path / "t"))
        values = table.to_table()["x"].to_pylist()
        assert OUTSIDE_VALUE not in values, "the file swapped in was read"
    assert done


def test_the_gated_filesystem_reads_what_was_checked(tmp_path):
    from nodes.data import tables

    (tmp_path / "t").mkdir()
    _parquet(tmp_path / "t" / "a.parquet", 1.0)
    _parquet(tmp_path / "t" / "b.parquet", 2.0)
    table = tables.open_table(str(tmp_path / "t"))
    assert sorted(table.to_table()["x"].to_pylist()) == [1.0] * 4 + [2.0] * 4
    _parquet(tmp_path / "b.parquet", 2.0)  # the same data, another file (inode) ...
    os.replace(tmp_path / "b.parquet", tmp_path / "t" / "b.parquet")  # ... put in its place
    with pytest.raises(NodegraphError, match="b.parquet"):
        table.to_table()
