"""The in-process readers that map or decode a file read the descriptor the gate checked,
never the name again (issue #33, item 1's race; the brief named nodes/data/_arrays.py's
`np.load(self.path, mmap_mode="r")` and nodes/data/_images.py's `Image.open(path)`, but
those two are the exported script's own readers, code written out for a user's script that
runs without nodegraph; the readers nodegraph runs are `gate.map_npy`, `gate.memmap` and
`_images.open_image`, tried here).

As in tests/test_gate_swap.py, the file is swapped right after the gate's check returns,
the worst moment, by a symlink to a file outside or by another file copied in place: the
outcome must be a refusal naming the file, never the data from outside.
"""

from __future__ import annotations

import shutil
import struct
from pathlib import Path

import numpy as np
import pytest

from nodegraph.kinds import gate
from nodegraph.model.errors import NodegraphError
from nodes.data import _images

OUTSIDE_VALUE = 99


def _swap_after_check(monkeypatch, target: Path, replacement: Path, how: str) -> list[Path]:
    """Make `gate.checked` replace `target` right after its first check of it."""
    real, done = gate.checked, []

    def checking(path, what, **kw):
        out = real(path, what, **kw)
        if Path(path).name == target.name and not done:
            target.rename(target.with_name(target.name + ".orig"))
            if how == "symlink":
                target.symlink_to(replacement)
            else:
                shutil.copyfile(replacement, target)
            done.append(target)
        return out

    monkeypatch.setattr(gate, "checked", checking)
    return done


def _pair(tmp_path: Path, name: str, write) -> tuple[Path, Path]:
    (tmp_path / "mine").mkdir()
    (tmp_path / "outside").mkdir()
    mine, outside = tmp_path / "mine" / name, tmp_path / "outside" / name
    write(mine, 1)
    write(outside, OUTSIDE_VALUE)
    return mine, outside


@pytest.mark.parametrize("how", ["symlink", "copy"])
def test_a_mapped_npy_swapped_after_the_check_is_refused(tmp_path, monkeypatch, how):
    mine, outside = _pair(tmp_path, "x.npy",
                          lambda p, v: np.save(p, np.full((4, 3), v, np.float32)))
    done = _swap_after_check(monkeypatch, mine, outside, how)
    with pytest.raises(NodegraphError) as e:
        mapped = gate.map_npy(mine, "x file")
        assert OUTSIDE_VALUE not in np.asarray(mapped), "the file swapped in was read"
    assert done and "x.npy" in str(e.value)


def _idx(path: Path, value: int) -> None:
    path.write_bytes(struct.pack(">BBBBII", 0, 0, 8, 2, 4, 3) + bytes([value]) * 12)


@pytest.mark.parametrize("how", ["symlink", "copy"])
def test_a_mapped_idx_swapped_after_the_check_is_refused(tmp_path, monkeypatch, how):
    mine, outside = _pair(tmp_path, "x-idx2-ubyte", _idx)
    done = _swap_after_check(monkeypatch, mine, outside, how)
    with pytest.raises(NodegraphError) as e:
        mapped = gate.memmap(mine, "IDX file", np.uint8, 12, (4, 3))
        assert OUTSIDE_VALUE not in np.asarray(mapped), "the file swapped in was read"
    assert done and "x-idx2-ubyte" in str(e.value)


def _png(path: Path, value: int) -> None:
    from PIL import Image

    Image.fromarray(np.full((5, 5), value, np.uint8)).save(path)


@pytest.mark.parametrize("how", ["symlink", "copy"])
def test_an_image_swapped_after_the_check_is_refused(tmp_path, monkeypatch, how):
    mine, outside = _pair(tmp_path, "a.png", _png)
    done = _swap_after_check(monkeypatch, mine, outside, how)
    with pytest.raises(_images.SampleError) as e:
        img = _images.decode(mine)
        assert OUTSIDE_VALUE not in np.asarray(img), "the file swapped in was read"
    assert done and "a.png" in str(e.value)
