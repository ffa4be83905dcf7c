"""An IDX file costs what its header promises, checked against what it holds (issue #33).

The file fuzzer's one blowup (idx, seed 7101, case 128: 2 GB RSS) was its own: it unpacked
a 1.5 GiB gzip bomb in memory to change a header byte. The reader was bounded there, but
it read a whole file (up to the memory limit) after checking a header that promised far
less: now it reads the promised bytes only, into one buffer of that size.
"""

from __future__ import annotations

import gzip
import struct
import tracemalloc

import numpy as np
import pytest

from benchmarks import fuzz_files
from nodegraph.kinds.dataset import files_relative_to
from nodegraph.model.errors import NodegraphError
from nodes.data import _arrays
from nodes.data import _files as files

VALUES = np.arange(6, dtype=np.uint8).reshape(2, 3)
JUNK = 16 << 20  # bytes after the promised values


def _idx(values: np.ndarray) -> bytes:
    return struct.pack(">BBBB", 0, 0, 0x08, values.ndim) + \
        struct.pack(f">{values.ndim}I", *values.shape) + values.tobytes()


def _peak(fn):
    """fn()'s result and the most memory Python allocated while it ran."""
    tracemalloc.start()
    try:
        out = fn()
        return out, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_file_longer_than_its_promise_costs_the_promise(tmp_path):
    (tmp_path / "x-idx2-ubyte").write_bytes(_idx(VALUES) + b"\x07" * JUNK)
    with files_relative_to(tmp_path):
        got, peak = _peak(lambda: files.read_idx("x-idx2-ubyte"))
    np.testing.assert_array_equal(got, VALUES)
    assert peak < JUNK // 4, f"{peak} bytes held for 6 values"


def test_a_gzip_with_zeros_after_its_promise_is_read_not_unpacked_whole(tmp_path):
    """16 MB of zeros after the values pack a thousandfold: the old reader unpacked the
    whole stream and refused it as a bomb; the promise alone is read."""
    (tmp_path / "x.gz").write_bytes(gzip.compress(_idx(VALUES) + bytes(JUNK)))
    with files_relative_to(tmp_path):
        got, peak = _peak(lambda: files.read_idx("x.gz"))
        dims, dtype, values = _arrays._idx_map("x.gz", "IDX file")
        mapped = values()
    np.testing.assert_array_equal(got, VALUES)
    np.testing.assert_array_equal(mapped, VALUES)
    assert dims == (2, 3) and dtype == np.dtype(">u1")
    assert peak < JUNK // 4


@pytest.mark.parametrize("gz", [False, True])
def test_a_header_promising_more_than_the_file_holds_is_refused_before_any_array(tmp_path, gz):
    raw = struct.pack(">BBBBII", 0, 0, 0x08, 2, 60_000, 60_000) + bytes(1000)
    name = "x.gz" if gz else "x-idx2-ubyte"
    (tmp_path / name).write_bytes(gzip.compress(raw) if gz else raw)
    with files_relative_to(tmp_path), pytest.raises(NodegraphError) as e:
        _peak(lambda: files.read_idx(name))
    assert name in str(e.value)


def test_the_fuzzer_never_unpacks_its_own_bomb(tmp_path):
    """idx seed 7101 case 128: a bomb, then a header byte of the same file changed. The
    fuzzer gunzipped the bomb (1.5 GiB, twice held: 3.3 GB RSS, counted as the reader's
    blowup); now the header goes before the bomb's zeros, and the reader refuses it."""
    samples = fuzz_files.make_samples(tmp_path / "samples", ["idx"])
    (case, done), peak = _peak(lambda: fuzz_files.prepare(samples, tmp_path, "idx", 7101, 128))
    assert "inflating" in done[0] and "header byte 8" in done[1]
    assert peak < 256 << 20, f"the fuzzer held {peak >> 20} MB making the case"
    bomb = case.folder / "t10k-images-idx3-ubyte.gz"
    with gzip.open(bomb) as f:
        assert f.read(16) == struct.pack(">BBBBIII", 0, 0, 8, 3, fuzz_files.BOMB_BYTES // 784,
                                           100_000, 28)
    errors, peak = _peak(lambda: fuzz_files.open_case(case, "idx"))
    assert errors and all(bomb.name in m for _, m in errors)
    assert peak < 256 << 20
