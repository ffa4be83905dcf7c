"""The file gate (`nodegraph.kinds.gate`): what it refuses, and that no reader goes around it.

The unit tests check the gate's promises one by one (a link swapped in after the check, a
FIFO, a file larger than its limit, a listing holding a link that leads out). The last
test reads the source of `nodegraph/` and `nodes/` and fails on any call that opens or
lists a path — `open()`, `Path.open/read_bytes/read_text`, `np.load`, `np.memmap`,
`Image.open`, `tarfile.open`, `zipfile.ZipFile`, `os.scandir`, `glob`, `rglob`,
`load_from_disk`, `Tokenizer.from_file`, safetensors' `load_file`, pyarrow's readers... —
outside the gate, except in the modules of `ALLOWED` (each with its reason) or on a line
marked ``# gated: <why>`` (a file object the gate opened, a member of an archive it
opened).
"""

from __future__ import annotations

import ast
import os
import threading
from pathlib import Path

import pytest

from nodegraph.kinds import confine, gate
from nodegraph.kinds.dataset import files_relative_to
from nodegraph.model.errors import NodegraphError

ROOT = Path(__file__).resolve().parents[1]


def test_a_link_swapped_in_after_the_check_is_not_followed(tmp_path, monkeypatch):
    (tmp_path / "a.bin").write_bytes(b"inside")
    (tmp_path / "secret").write_bytes(b"outside")
    real_checked = gate.checked

    def swap(path, *args, **kwargs):  # the check passes; then the file becomes a link
        resolved = real_checked(path, *args, **kwargs)
        os.replace(tmp_path / "a.bin", tmp_path / "old.bin")
        (tmp_path / "a.bin").symlink_to(tmp_path / "secret")
        return resolved

    monkeypatch.setattr(gate, "checked", swap)
    with pytest.raises(NodegraphError, match="cannot open data file '.*a.bin'"):
        gate.open_file(tmp_path / "a.bin", "data file")


def test_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path):
    os.mkfifo(tmp_path / "pipe")
    done: list = []

    def read():
        try:
            gate.read_bytes(tmp_path / "pipe", "data file", 100)
        except NodegraphError as e:
            done.append(str(e))

    worker = threading.Thread(target=read, daemon=True)
    worker.start()
    worker.join(30)
    assert done and "is a FIFO" in done[0]


def test_a_file_over_its_limit_is_refused_unread(tmp_path):
    (tmp_path / "big").write_bytes(b"x" * 101)
    with pytest.raises(NodegraphError, match="larger than 100 bytes"):
        gate.read_bytes(tmp_path / "big", "data file", 100)
    assert gate.read_bytes(tmp_path / "big", "data file", 101) == b"x" * 101


def test_a_listing_refuses_links_out_and_keeps_links_in(tmp_path):
    project, outside = tmp_path / "p", tmp_path / "o"
    (project / "d").mkdir(parents=True)
    outside.mkdir()
    (project / "d" / "a.txt").write_text("a")
    (project / "other.txt").write_text("b")
    (outside / "s.txt").write_text("secret")
    (project / "d" / "in.txt").symlink_to(project / "other.txt")
    (project / "d" / "skip.csv").symlink_to(outside / "s.txt")  # not matched: not looked at
    with files_relative_to(project):
        txt = gate.listing(project / "d", "text file", lambda n: n.endswith(".txt"))
        assert [f.name for f in txt] == ["a.txt", "in.txt"]
        (project / "d" / "out.txt").symlink_to(outside / "s.txt")
        with pytest.raises(confine.OutsideDataRoot, match="'.*out.txt' leads outside") as e:
            gate.listing(project / "d", "text file", lambda n: n.endswith(".txt"))
        assert str(outside) not in str(e.value)
        with confine.allowing([outside]):  # the user allowed it: read
            assert len(gate.listing(project / "d", "text file",
                                    lambda n: n.endswith(".txt"))) == 3
    # no graph folder (a graph built in code): where a file lies is not fenced
    assert len(gate.listing(project / "d", "text file", lambda n: n.endswith(".txt"))) == 3


def test_a_brace_range_is_bounded_and_padded(tmp_path):
    for i in (8, 9, 10):
        (tmp_path / f"s-{i:03d}.tar").write_bytes(b"")
    with files_relative_to(tmp_path):
        assert [f.name for f in gate.brace_range("s-{008..010}.tar", "shard")] == [
            "s-008.tar", "s-009.tar", "s-010.tar"]
        assert gate.brace_range("s-008.tar", "shard") is None
        with pytest.raises(NodegraphError, match="at most 100,000"):
            gate.brace_range("s-{0..100000}.tar", "shard")
        with pytest.raises(NodegraphError, match="runs backwards"):
            gate.brace_range("s-{9..1}.tar", "shard")


# -- nothing opens a path around the gate --------------------------------------------------

# modules that may open paths themselves, and why (paths relative to the repository)
ALLOWED = {
    "nodegraph/kinds/gate.py": "the gate itself",
    "nodegraph/kinds/gate_arrow.py": "the gate's opener for pyarrow.dataset (paths the gate "
                                     "checked, found again by device and inode)",
    "nodegraph/model/safe_read.py": "the bounded reader of files the user names (graph files)",
    "nodegraph/model/fileformat.py": "the graph file the user names (through safe_read) and "
                                     "the group files beside it",
    "nodegraph/model/outputs.py": "writes outputs (run logs, metrics, written files)",
    "nodegraph/model/allowlist.py": "hashes the installed source of a package the user "
                                    "trusts by name (its files or its RECORD), never a path "
                                    "from a graph file",
    "nodegraph/model/file_kinds.py": "sniffs the first bytes of the file the user names as a "
                                     "graph (a regular file only) to say what it is instead",
    "nodegraph/interop/modelfile.py": "the .ngz the user names (load_model / --init); its "
                                      "members are bounded there (issue #33 item 2)",
    "nodegraph/interop/modelfile_archive.py": "the .ngz the user names, opened as a regular "
                                              "file (O_NOFOLLOW, fstat) and each member read "
                                              "to its bound (issue #33 item 2)",
    "nodegraph/interop/importing/weights.py": "the weights `nodegraph import` wrote beside "
                                              "its graph",
    "nodegraph/interop/importing/finish.py": "reads back the .npz the import itself just wrote",
    "nodegraph/interop/importing/roundtrip.py": "reads back the script the export itself "
                                                "just wrote",
    "nodegraph/interop/importing/targets.py": "the Python file of a model the user imports by name",
    "nodegraph/interop/export/script.py": "writes the exported script's outputs",
    "nodegraph/runtime/checkpoint.py": "checkpoints this run (or --resume on the command "
                                       "line) wrote",
    "nodegraph/runtime/callbacks/checkpointing.py": "the best weights this run wrote",
    "nodegraph/runtime/run_history.py": "run records nodegraph wrote",
    "nodegraph/runtime/probe_frames.py": "frames the probe itself wrote",
    "nodegraph/runtime/train_process.py": "the editor's own pipe and /dev/null",
    "nodegraph/runtime/threads.py": "/proc (the machine's CPU count and load)",
    "nodegraph/kinds/footprint.py": "/proc and cgroup files (the memory available)",
    "nodegraph/runtime/referenced_weights.py": "weights named by --init-weights or a graph's "
                                               "imported weights, through safe_read and "
                                               "confine first",
    "nodegraph/runtime/procedure.py": "the weights file the caller names (`nodegraph "
                                      "procedure --weights`, the Python API)",
    "nodes/group.py": "the group documents shipped inside the package",
    "nodegraph/callbacks.py": "CSVLogger appends to the file a Python caller names in code, "
                              "never a path from a graph file",
}
ALLOWED_FOLDERS = {
    "nodegraph/gui/": "the editor opens files the user picks in a dialog, and its settings",
    "nodegraph/cli/": "files named on the command line and the outputs it writes",
}

# (receiver, attribute) pairs that open or list a path; None: any receiver
CALLS = {
    (None, "read_bytes"), (None, "read_text"), (None, "iterdir"), (None, "glob"),
    (None, "rglob"), (None, "load_from_disk"), (None, "from_file"), (None, "load_file"),
    (None, "scandir"), (None, "listdir"), ("os", "walk"), (None, "read_table"),
    (None, "read_parquet"), ("pd", "read_csv"), ("pandas", "read_csv"),
    (None, "memmap"), (None, "ZipFile"),
    (None, "TarFile"), (None, "dataset"), (None, "open_memmap"), (None, "fdopen"),
    ("np", "load"), ("numpy", "load"), ("torch", "load"), ("pq", "ParquetFile"),
    ("Image", "open"), ("tarfile", "open"), ("gzip", "open"), ("zipfile", "ZipFile"),
    ("os", "open"), ("io", "open"), ("bz2", "open"), ("lzma", "open"), ("codecs", "open"),
    ("glob", "glob"), ("glob", "iglob"), ("shutil", "copyfile"), ("mmap", "mmap"),
}

# receivers whose calls go through the gate: the gate, and the data readers built on it
GATED = {"gate", "files"}


def _opens(call: ast.Call) -> str | None:
    """What `call` opens a path with, or None."""
    func = call.func
    if isinstance(func, ast.Name):
        return func.id if func.id in ("open", "ZipFile", "TarFile", "memmap", "scandir",
                                      "load_file", "load_from_disk") else None
    if not isinstance(func, ast.Attribute):
        return None
    if any(k.arg == "fileobj" for k in call.keywords):
        return None  # reads a file object it is given
    receiver = func.value.id if isinstance(func.value, ast.Name) else None
    if receiver in GATED:
        return None
    if (None, func.attr) in CALLS or (receiver, func.attr) in CALLS:
        return f"{receiver or '...'}.{func.attr}"
    if func.attr == "open":
        return f"{receiver or '...'}.open"  # Path.open, and any other receiver's open
    return None


def _sources():
    for top in ("nodegraph", "nodes"):
        for path in sorted((ROOT / top).rglob("*.py")):
            yield path.relative_to(ROOT).as_posix(), path


def ungated() -> list[str]:
    found = []
    for name, path in _sources():
        if name in ALLOWED or name.startswith(tuple(ALLOWED_FOLDERS)):
            continue
        text = path.read_text(encoding="utf-8")
        lines = text.splitlines()
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.Call) and (how := _opens(node)):
                marked = any("# gated:" in lines[k] for k in range(
                    node.lineno - 1, getattr(node, "end_lineno", node.lineno)))
                if not marked:
                    found.append(f"{name}:{node.lineno}: {how}")
    return found


def test_no_code_opens_a_path_around_the_gate():
    found = ungated()
    assert not found, ("these open or list a path without nodegraph.kinds.gate (go through "
                       "it, or mark a gated file object with '# gated: why'):\n"
                       + "\n".join(found))


def test_the_scan_finds_what_it_looks_for():
    """The scan is no test that cannot fail: each kind of call it means is found."""
    source = ("open(p)\np.read_bytes()\nnp.load(p)\nImage.open(p)\nroot.rglob('*')\n"
              "os.scandir(p)\nglob.glob(p)\np.open()\ndatasets.load_from_disk(p)\n"
              "pq.read_table(p)\nzipfile.ZipFile(p)\ntarfile.open(p)\nnp.memmap(p)\n"
              "tarfile.open(fileobj=f)\ngate.open_file(p, 'x')\n")
    calls = [n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Call)]
    hits = [_opens(c) for c in calls]
    assert sum(h is not None for h in hits) == 13, hits
    for name in [*ALLOWED, *ALLOWED_FOLDERS]:
        assert (ROOT / name).exists(), f"allowlisted {name} no longer exists"
