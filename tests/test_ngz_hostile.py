"""Saved models from anyone are bounded like graph files (issue #33, item 2).

Each hostile `.ngz` that could hang or take memory is loaded in a child process whose
address space is capped a few GB above what importing nodegraph takes (so the old readers,
which read whole members, fail there instead of taking the machine); the child reports the
error and how far its resident peak rose (VmHWM, reset before the load). Every refusal must
be a NodegraphError naming the file (and the member, where there is one), with a peak
rise under 300 MB. Small files with bad fields are loaded in this process.
"""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import textwrap
import zipfile
import zlib
from pathlib import Path

import pytest

import nodegraph
from nodegraph.interop import modelfile
from nodegraph.model.errors import NodegraphError

ROOT = Path(__file__).resolve().parents[1]
GIB = 1 << 30

_CHILD = textwrap.dedent("""
    import json, resource, sys, time
    import nodegraph
    import nodegraph.interop.model  # the reader's modules, imported before the clock starts
    from nodegraph.model.errors import NodegraphError

    size = next(int(line.split()[1]) for line in open("/proc/self/status")
                if line.startswith("VmSize:"))
    cap = size * 1024 + (3 << 30)  # the old readers fail here instead of taking the machine
    resource.setrlimit(resource.RLIMIT_AS, (cap, resource.getrlimit(resource.RLIMIT_AS)[1]))
    def status(key):
        return next(int(line.split()[1]) for line in open("/proc/self/status")
                    if line.startswith(key + ":"))

    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # the peak (VmHWM) starts again from the resident size now
    before = status("VmRSS")
    began = time.perf_counter()
    try:
        nodegraph.load_model(sys.argv[1])
        out = {"loaded": True}
    except NodegraphError as e:
        out = {"error": str(e)}
    except BaseException as e:
        out = {"other": repr(e)[:400]}
    out["seconds"] = round(time.perf_counter() - began, 3)  # with first-use imports
    after = status("VmHWM")
    out["rise_mb"] = round((after - before) / 1024, 1)
    out["peak_mb"] = round(after / 1024, 1)
    print(json.dumps(out))
""")


def _load_in_child(path: Path) -> dict:
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "HOME": "/tmp"}
    try:
        done = subprocess.run([sys.executable, "-c", _CHILD, str(path)], capture_output=True,
                              text=True, env=env, timeout=120)
    except subprocess.TimeoutExpired:
        pytest.fail(f"load_model('{path}') did not return within 120 s (it hangs)")
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def _refused(path: Path, *words: str) -> dict:
    out = _load_in_child(path)
    assert "error" in out, out
    assert str(path) in out["error"], out["error"]
    for word in words:
        assert word in out["error"], out["error"]
    assert out["rise_mb"] < 300, out
    print(path.name, out)  # the figures, for the record (pytest -s)
    return out


@pytest.fixture(scope="module")
def saved(tmp_path_factory) -> dict[str, bytes]:
    """The members of a real saved model (a small MLP under Adam and a OneCycle schedule)."""
    folder = tmp_path_factory.mktemp("ngz")
    graph = {
        "format": "nodegraph", "version": 1, "name": "hostile",
        "nodes": {
            "data": {"type": "data.Moons", "params": {"n": 64, "batch_size": 16}},
            "out": {"type": "layers.Linear", "params": {"out_features": 2}},
            "loss": {"type": "losses.CrossEntropy", "params": {}},
            "sched": {"type": "schedules.OneCycle",
                      "params": {"max_lr": 0.05, "total_steps": 20, "interval": "step"}},
            "opt": {"type": "optimizers.Adam", "params": {"lr": 0.01}},
        },
        "edges": [
            {"from": ["data", "x"], "to": ["out", "input"]},
            {"from": ["out", "output"], "to": ["loss", "input"]},
            {"from": ["data", "y"], "to": ["loss", "target"]},
            {"from": ["loss", "loss"], "to": ["opt", "loss"]},
            {"from": ["sched", "schedule"], "to": ["opt", "schedule"]},
        ],
        "training": {"epochs": 2, "seed": 0},
    }
    (folder / "g.json").write_text(json.dumps(graph))
    m = nodegraph.fit(nodegraph.load(folder / "g.json"))
    m.save(folder / "good.ngz")
    with zipfile.ZipFile(folder / "good.ngz") as zf:
        return {name: zf.read(name) for name in modelfile.MEMBERS}


def _deflated(data: bytes) -> bytes:
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    return c.compress(data) + c.flush()


def _write_zip(path: Path, members: list[tuple[str, bytes, int, int]], gap: int = 0) -> Path:
    """A zip of (name, raw deflate data, CRC-32, unpacked size) members, written by hand so
    a member may unpack to far more than the file holds; `gap` bytes (a hole: no disk
    used) before the member list, which the end record then counts in the list's size."""
    out, central = bytearray(), bytearray()
    for name, raw, crc, size in members:
        offset, encoded = len(out), name.encode()
        out += struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0, 8, 0, 0x21, crc, len(raw),
                           size, len(encoded), 0) + encoded + raw
        central += struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 20, 20, 0, 8, 0, 0x21, crc,
                               len(raw), size, len(encoded), 0, 0, 0, 0, 0, offset) + encoded
    end = struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, len(members), len(members),
                      len(central) + gap, len(out), 0)
    with open(path, "wb") as f:
        f.write(out)
        f.seek(gap, os.SEEK_CUR)
        f.write(central + end)
    return path


def _plain(name: str, data: bytes) -> tuple[str, bytes, int, int]:
    return name, _deflated(data), zlib.crc32(data), len(data)


def _repeated(name: str, head: bytes, chunk: bytes, times: int, tail: bytes
              ) -> tuple[str, bytes, int, int]:
    """A member of `head`, `chunk` `times` over, then `tail`: deflated once per distinct
    piece (a chunk after a chunk always compresses alike), so 1 GiB costs a second."""
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    flush = zlib.Z_SYNC_FLUSH
    first = c.compress(head) + c.flush(flush) + c.compress(chunk) + c.flush(flush)
    again = c.compress(chunk) + c.flush(flush)
    raw = first + again * (times - 1) + c.compress(tail) + c.flush()
    crc = zlib.crc32(head)
    for _ in range(times):
        crc = zlib.crc32(chunk, crc)
    return name, raw, zlib.crc32(tail, crc), len(head) + len(chunk) * times + len(tail)


def _with(saved: dict[str, bytes], path: Path, **changed: tuple[str, bytes, int, int]
          ) -> Path:
    members = [changed.get(name.replace(".", "_")) or _plain(name, saved[name])
               for name in modelfile.MEMBERS]
    return _write_zip(path, members)


def test_the_hand_written_zip_is_a_model_that_loads(saved, tmp_path):
    out = _load_in_child(_with(saved, tmp_path / "same.ngz"))
    assert out.get("loaded"), out


def test_a_member_list_of_gigabytes_is_refused_before_it_is_read(saved, tmp_path):
    members = [_plain(name, saved[name]) for name in modelfile.MEMBERS]
    path = _write_zip(tmp_path / "directory.ngz", members, gap=3 * GIB)  # a sparse file
    _refused(path, "member list")


def test_a_fifo_is_refused_without_waiting(tmp_path):
    path = tmp_path / "fifo.ngz"
    os.mkfifo(path)
    _refused(path, "FIFO")


def test_a_symlink_to_dev_zero_is_refused(tmp_path):
    path = tmp_path / "zero.ngz"
    path.symlink_to("/dev/zero")
    _refused(path, "device")


def _header(saved: dict[str, bytes], member: str) -> tuple[bytes, int]:
    """The 8-byte length and JSON header of a saved safetensors member, and its data size."""
    blob = saved[member]
    (n,) = struct.unpack("<Q", blob[:8])
    return blob[:8 + n], len(blob) - 8 - n


def test_weights_inflating_to_a_gib_behind_a_true_header_are_refused(saved, tmp_path):
    head, _ = _header(saved, "model.safetensors")
    bomb = _repeated("model.safetensors", head, bytes(1 << 20), 1024, b"")
    path = _with(saved, tmp_path / "bomb.ngz", model_safetensors=bomb)
    assert path.stat().st_size < 2 << 20  # about 1 MB on disk
    _refused(path, "model.safetensors")


def test_a_header_claiming_a_gib_tensor_is_refused_before_its_data(saved, tmp_path):
    header = {"out.weight": {"dtype": "F32", "shape": [16384, 16384],
                             "data_offsets": [0, GIB]}}
    text = json.dumps(header).encode()
    head = struct.pack("<Q", len(text)) + text
    bomb = _repeated("model.safetensors", head, bytes(1 << 20), 1024, b"")
    _refused(_with(saved, tmp_path / "shape.ngz", model_safetensors=bomb),
             "model.safetensors", "(16384, 16384)")


def test_optimizer_state_larger_than_its_parameters_is_refused(saved, tmp_path):
    head, size = _header(saved, "state.safetensors")
    header = json.loads(head[8:])
    header["optim/opt/0/exp_avg"] = {"dtype": "F32", "shape": [GIB // 4],
                                     "data_offsets": [size, size + GIB]}
    text = json.dumps(header).encode()
    blob = saved["state.safetensors"]
    bomb = _repeated("state.safetensors", struct.pack("<Q", len(text)) + text
                     + blob[len(head):], bytes(1 << 20), 1024, b"")
    _refused(_with(saved, tmp_path / "state.ngz", state_safetensors=bomb),
             "state.safetensors", "optim/opt/0/exp_avg")


def test_a_run_json_inflating_to_256_mb_is_refused(saved, tmp_path):
    chunk = b'{"epoch": 1},' * ((1 << 20) // 13)
    run = _repeated("run.json", b'{"format": "nodegraph-model", "version": 1, "history": [',
                    chunk, 255, b'{}]}')
    path = _with(saved, tmp_path / "run256.ngz", run_json=run)
    assert path.stat().st_size < 1 << 20
    _refused(path, "run.json", "10,485,760")


def test_a_run_json_that_lies_about_its_size_stops_at_the_bound(saved, tmp_path):
    name, raw, crc, _ = _repeated("run.json", b'{"history": [', b"{}," * 349525, 255, b"{}]}")
    path = _with(saved, tmp_path / "lies.ngz", run_json=(name, raw, crc, 100))
    _refused(path, "run.json")


def _run_with(saved: dict[str, bytes], path: Path, change) -> Path:
    run = json.loads(saved["run.json"])
    change(run)
    return _with(saved, path, run_json=_plain("run.json", json.dumps(run).encode()))


@pytest.mark.parametrize(("name", "change", "words"), [
    ("lr_text", lambda r: r["optimizers"]["opt"]["param_groups"][0].update(
        lr="not a number"), ["param_groups[0].lr", "number"]),
    ("step_huge", lambda r: r.update(global_step=10 ** 30), ["global_step"]),
    ("step_text", lambda r: r.update(global_step="12"), ["global_step"]),
    ("history_epochs", lambda r: r.update(history=[{"epoch": i} for i in
                                                   range(1, 200_002)]), ["100,000"]),
    ("history_numbering", lambda r: r["history"][1].update(epoch="2"), ["entry 2"]),
    ("history_value", lambda r: r["history"][0]["train"].update(loss={"deep": [[[[[1]]]]]}),
     ["history[1].train.loss"]),
    ("lr_nan", lambda r: r["optimizers"]["opt"]["param_groups"][0].update(lr=float("nan")),
     ["finite"]),
    ("betas_short", lambda r: r["optimizers"]["opt"]["param_groups"][0].update(betas=[0.9]),
     ["betas"]),
    ("params_other", lambda r: r["optimizers"]["opt"]["param_groups"][0].update(
        params=[0, 1, 2, 3]), ["parameters"]),
    ("optimizer_unknown", lambda r: r["optimizers"].update(other={}), ["other"]),
    ("schedule_attribute", lambda r: r["schedules"]["opt"].update(optimizer="x"),
     ["optimizer"]),
    ("schedule_phase", lambda r: r["schedules"]["opt"]["_schedule_phases"][0].update(
        start_lr="params"), ["start_lr"]),
    ("schedule_step", lambda r: r["schedules"]["opt"].update(last_epoch=10 ** 30),
     ["last_epoch"]),
    ("callbacks", lambda r: r.update(callbacks={"X": [1]}), ["callbacks"]),
    ("final", lambda r: r.update(final={"test": [1]}), ["final.test"]),
    ("braces", lambda r: r.update(pad=[[]] * 1_100_000), ["objects and arrays"]),
])
def test_run_json_fields_are_type_checked_at_load(saved, tmp_path, name, change, words):
    path = _run_with(saved, tmp_path / f"{name}.ngz", change)  # small: read in this process
    with pytest.raises(NodegraphError) as e:
        nodegraph.load_model(path)
    for word in (str(path), "run.json", *words):
        assert word in str(e.value)


def test_a_changed_but_valid_run_json_still_loads(saved, tmp_path):
    def change(r):
        r["optimizers"]["opt"]["param_groups"][0]["lr"] = 0.5
        r["callbacks"] = {"Counter": {"n": 3}}
    m = nodegraph.load_model(_run_with(saved, tmp_path / "ok.ngz", change))
    assert m.compiled.optimizers[0].optimizer.param_groups[0]["lr"] == 0.5
    assert m.callback_states == {"Counter": {"n": 3}}


def test_a_graph_that_does_not_validate_is_named_with_its_file(saved, tmp_path):
    """Found by `benchmarks/fuzz.py --surface ngz` (seed 0, case 8): a graph.json whose
    wires were changed gave "the graph has 3 problem(s)", naming no file."""
    doc = json.loads(saved["graph.json"])
    doc["edges"][0]["to"] = ["loss", "input"]  # the Linear left without its input
    path = _with(saved, tmp_path / "rewired.ngz",
                 graph_json=_plain("graph.json", json.dumps(doc).encode()))
    with pytest.raises(NodegraphError, match=r"rewired\.ngz'.*graph\.json.*problem"):
        nodegraph.load_model(path)
