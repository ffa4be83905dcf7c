"""Hostile data folders (issue #33, item 1 and the reader-side stalls): what a reader finds
*inside* a folder a graph names passes the file gate (`nodegraph.kinds.gate`) too.

Each graph lives in project/ and names a folder there; something inside it leads to
outside/ (a symlinked class folder, image, .parquet, .txt or shard folder matched by a
glob; Arrow files named by a Hugging Face state.json with ../ or an absolute path), or is
a FIFO, or claims gigapixels, or names a million shards. `nodegraph validate` refuses each
by name — the node and the file as the graph or the listing names it, never what lies
outside — without reading it, and within seconds.
"""

from __future__ import annotations

import json
import os
import struct
import tarfile
import threading
import zlib
from pathlib import Path

import numpy as np
import pytest

import nodegraph
from nodegraph.cli.main import main

SECRET = "zebracorn-secret"


@pytest.fixture
def places(tmp_path, monkeypatch):
    """project/ (the graph's folder) and outside/ (what the graph must not read)."""
    project, outside = tmp_path / "project", tmp_path / "outside"
    project.mkdir()
    outside.mkdir()
    monkeypatch.chdir(tmp_path)
    return project, outside


def validate(capsys, project: Path, block: str, *extra: str, **params) -> tuple[int, str]:
    """`nodegraph validate` of a graph in `project` holding one data block 'reader'."""
    doc = {"format": "nodegraph", "version": 1, "name": "hostile",
           "nodes": {"reader": {"type": block, "params": params}}, "edges": []}
    (project / "graph.json").write_text(json.dumps(doc))
    code = main(["validate", *extra, str(project / "graph.json")])
    out = capsys.readouterr()
    return code, out.out + out.err


def within_seconds(call, seconds: float = 60):
    """`call()`'s result, or a failure when it is still running after `seconds` (a FIFO
    read waits for a writer forever)."""
    done: list = []
    worker = threading.Thread(target=lambda: done.append(call()), daemon=True)
    worker.start()
    worker.join(seconds)
    assert done, "still reading after a minute: the reader blocked"
    return done[0]


def refused_outside(code: int, text: str, outside: Path, named: str) -> None:
    assert code != 0, text
    assert "leads outside the graph's folder" in text, text
    assert "'reader'" in text and named in text, text
    assert str(outside) not in text and SECRET not in text, text
    assert "internal error" not in text, text


# -- images ------------------------------------------------------------------------------

def write_png(path: Path, size: int = 8, value: int = 0) -> None:
    from PIL import Image

    Image.new("L", (size, size), value).save(path)


def test_image_folder_refuses_a_class_folder_that_is_a_link_outside(places, capsys):
    project, outside = places
    (outside / "loot").mkdir()
    write_png(outside / "loot" / "secret.png")
    (project / "images" / "cats").mkdir(parents=True)
    write_png(project / "images" / "cats" / "a.png")
    (project / "images" / "dogs").symlink_to(outside / "loot")
    code, text = validate(capsys, project, "data.ImageFolder", path="images")
    refused_outside(code, text, outside, "dogs")


def test_image_folder_refuses_one_image_that_is_a_link_outside(places, capsys):
    project, outside = places
    write_png(outside / "secret.png", value=200)
    for name in ("cats", "dogs"):
        (project / "images" / name).mkdir(parents=True)
        write_png(project / "images" / name / "a.png")
    (project / "images" / "dogs" / "b.png").symlink_to(outside / "secret.png")
    code, text = validate(capsys, project, "data.ImageFolder", path="images")
    refused_outside(code, text, outside, "b.png")
    # allowed by name, the same folder reads
    code, text = validate(capsys, project, "data.ImageFolder", "--data-root", str(outside),
                          path="images")
    assert code == 0, text


def test_image_folder_refuses_a_fifo_among_the_images(places, capsys):
    project, _ = places
    (project / "images" / "cats").mkdir(parents=True)
    write_png(project / "images" / "cats" / "a.png")
    os.mkfifo(project / "images" / "cats" / "b.png")
    code, text = within_seconds(lambda: validate(capsys, project, "data.ImageFolder",
                                                 path="images"))
    assert code != 0 and "b.png" in text and "FIFO" in text, text


# -- tables, text --------------------------------------------------------------------------

def test_parquet_folder_refuses_a_table_file_that_is_a_link_outside(places, capsys):
    import pyarrow as pa
    import pyarrow.parquet as pq

    project, outside = places
    (project / "table").mkdir()
    pq.write_table(pa.table({"a": [1.0, 2.0], "y": [0.0, 1.0]}), project / "table" / "p1.parquet")
    pq.write_table(pa.table({"a": [7.0] * 3, "y": [9.0] * 3}), outside / "secret.parquet")
    (project / "table" / "p2.parquet").symlink_to(outside / "secret.parquet")
    code, text = validate(capsys, project, "data.Parquet", path="table", targets=["y"])
    refused_outside(code, text, outside, "p2.parquet")


def test_tokenized_text_folder_refuses_a_text_file_that_is_a_link_outside(places, capsys):
    project, outside = places
    (project / "corpus" / "deep").mkdir(parents=True)
    (project / "corpus" / "a.txt").write_text("the cat sat on the mat\n" * 50)
    (outside / "secret.txt").write_text((SECRET + " ") * 200)
    (project / "corpus" / "deep" / "b.txt").symlink_to(outside / "secret.txt")
    code, text = validate(capsys, project, "data.TokenizedText", path="corpus",
                          vocab_size=300, seq_len=4)
    refused_outside(code, text, outside, "b.txt")


def test_the_secret_never_reaches_a_trained_vocabulary(places):
    """The same folder built in Python: refused before the tokenizer is trained."""
    from nodegraph.kinds.dataset import files_relative_to
    from nodegraph.model.errors import NodegraphError
    from nodegraph.model.spec import default_registry

    project, outside = places
    (project / "corpus").mkdir()
    (project / "corpus" / "a.txt").write_text("the cat sat on the mat\n" * 50)
    (outside / "secret.txt").write_text((SECRET + " ") * 200)
    (project / "corpus" / "b.txt").symlink_to(outside / "secret.txt")
    spec = default_registry().get("data.TokenizedText")
    params, _ = spec.resolve_params({"path": "corpus", "vocab_size": 300, "seq_len": 4})
    with files_relative_to(project), pytest.raises(NodegraphError, match="leads outside"):
        spec.build(params)


# -- Hugging Face datasets ---------------------------------------------------------------------

def save_hf(folder: Path, value: float) -> None:
    import datasets

    datasets.disable_progress_bars()
    datasets.Dataset.from_dict({"a": [value] * 6, "label": [0, 1] * 3}).save_to_disk(str(folder))


@pytest.mark.parametrize("how", ["relative", "absolute"])
def test_hf_state_json_naming_arrow_files_outside_is_refused(places, capsys, how):
    project, outside = places
    save_hf(project / "ds", 1.0)
    save_hf(outside / "loot", 7.0)
    state_path = project / "ds" / "state.json"
    state = json.loads(state_path.read_text())
    arrow = state["_data_files"][0]["filename"]
    state["_data_files"][0]["filename"] = ("../../outside/loot/" + arrow if how == "relative"
                                           else str(outside / "loot" / arrow))
    state_path.write_text(json.dumps(state))
    code, text = validate(capsys, project, "data.HFDataset", path="ds", inputs=["a"])
    assert code != 0 and "'reader'" in text, text
    assert "_data_files[0].filename" in text and "not a file name inside the folder" in text
    assert "internal error" not in text


def test_hf_dataset_dict_naming_a_split_outside_is_refused(places, capsys):
    project, outside = places
    save_hf(outside / "loot", 7.0)
    (project / "dd").mkdir()
    (project / "dd" / "dataset_dict.json").write_text(json.dumps(
        {"splits": ["../../outside/loot"]}))
    code, text = validate(capsys, project, "data.HFDataset", path="dd", inputs=["a"])
    assert code != 0 and "split" in text and "not a file name inside the folder" in text, text


@pytest.mark.parametrize("which", ["arrow", "state.json", "dataset_info.json"])
def test_a_fifo_inside_an_hf_folder_is_refused_without_blocking(places, capsys, which):
    project, _ = places
    save_hf(project / "ds", 1.0)
    state = json.loads((project / "ds" / "state.json").read_text())
    name = state["_data_files"][0]["filename"] if which == "arrow" else which
    (project / "ds" / name).unlink()
    os.mkfifo(project / "ds" / name)
    code, text = within_seconds(lambda: validate(capsys, project, "data.HFDataset", path="ds",
                                                 inputs=["a"]))
    assert code != 0 and "FIFO" in text and name in text, text


def test_hf_arrow_file_that_is_a_link_outside_is_refused(places, capsys):
    project, outside = places
    save_hf(project / "ds", 1.0)
    save_hf(outside / "loot", 7.0)
    arrow = json.loads((project / "ds" / "state.json").read_text())["_data_files"][0]["filename"]
    (project / "ds" / arrow).unlink()
    (project / "ds" / arrow).symlink_to(outside / "loot" / arrow)
    code, text = validate(capsys, project, "data.HFDataset", path="ds", inputs=["a"])
    refused_outside(code, text, outside, arrow)


# -- WebDataset shards ------------------------------------------------------------------------

def write_shard(path: Path, members: dict[str, bytes]) -> None:
    import io

    with tarfile.open(path, "w") as tar:
        for name, raw in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(raw)
            tar.addfile(info, io.BytesIO(raw))


def npy(a: np.ndarray) -> bytes:
    import io

    buf = io.BytesIO()
    np.save(buf, a)
    return buf.getvalue()


def test_a_glob_through_a_symlinked_folder_is_refused(places, capsys):
    project, outside = places
    (outside / "shards").mkdir()
    write_shard(outside / "shards" / "s.tar", {"k.npy": npy(np.zeros(2, np.float32)),
                                               "k.cls": b"1"})
    (project / "link").symlink_to(outside / "shards")
    for pattern in ("link/*.tar", "l*/*.tar", "l*/s.tar", "*/*.tar"):
        code, text = validate(capsys, project, "data.WebDataset", shards=pattern)
        assert code != 0 and "leads outside the graph's folder" in text, (pattern, text)
        assert str(outside) not in text, text


def test_a_shard_that_is_a_link_outside_in_a_folder_or_range_is_refused(places, capsys):
    project, outside = places
    write_shard(outside / "s.tar", {"k.npy": npy(np.zeros(2, np.float32)), "k.cls": b"1"})
    (project / "shards").mkdir()
    write_shard(project / "shards" / "x-0.tar", {"k.npy": npy(np.ones(2, np.float32)),
                                                 "k.cls": b"0"})
    (project / "shards" / "x-1.tar").symlink_to(outside / "s.tar")
    for pattern in ("shards", "shards/x-{0..1}.tar", "shards/*.tar"):
        code, text = validate(capsys, project, "data.WebDataset", shards=pattern)
        refused_outside(code, text, outside, "x-1.tar")


def png_bytes(width: int, height: int) -> bytes:
    """A valid grey PNG of width x height black pixels, made without holding its pixels
    (zeros compress a thousandfold: 13,000 x 13,000 is some 170 KB)."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return (struct.pack(">I", len(data)) + kind + data
                + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))

    packer = zlib.compressobj(9)
    row = bytes(1 + width)  # filter byte 0, then the row's pixels
    idat = b"".join(packer.compress(row) for _ in range(height)) + packer.flush()
    head = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", head) + chunk(b"IDAT", idat) + chunk(b"IEND", b"")


def test_a_decompression_bomb_in_a_shard_is_refused_as_in_an_image_folder(places, capsys):
    project, _ = places
    bomb = png_bytes(13_000, 13_000)
    assert len(bomb) < 1_000_000
    write_shard(project / "bomb.tar", {"k.png": bomb, "k.cls": b"1"})
    code, text = validate(capsys, project, "data.WebDataset", shards="bomb.tar",
                          x_field="png")
    assert code != 0 and "decompression bomb" in text and "k.png" in text, text
    (project / "images" / "cats").mkdir(parents=True)
    (project / "images" / "cats" / "k.png").write_bytes(bomb)
    code, text = validate(capsys, project, "data.ImageFolder", path="images")
    assert code != 0 and "decompression bomb" in text and "k.png" in text, text


def test_a_huge_brace_range_is_refused_at_once(places, capsys):
    project, _ = places
    code, text = within_seconds(lambda: validate(capsys, project, "data.WebDataset",
                                                 shards="x-{000000..999999}.tar"), 30)
    assert code != 0 and "1,000,000 files" in text and "at most 100,000" in text, text


def test_a_brace_range_looks_each_folder_up_once_not_each_name(places, monkeypatch):
    from nodegraph.kinds.dataset import files_relative_to
    from nodes.data import shards

    project, _ = places
    (project / "s").mkdir()
    for i in range(2000):
        (project / "s" / f"x-{i:04d}.tar").write_bytes(b"")
    calls = [0]
    real = Path.resolve

    def counted(self, *args, **kwargs):
        calls[0] += 1
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Path, "resolve", counted)
    with files_relative_to(project):
        found = shards.expand("s/x-{0000..1999}.tar")
        assert len(found) == 2000 and found[7].name == "x-0007.tar"
        assert calls[0] < 20, calls[0]  # not one (or more) per name
        (project / "s" / "x-0042.tar").unlink()
        with pytest.raises(Exception, match="x-0042.tar' .*does not exist"):
            shards.expand("s/x-{0000..1999}.tar")


# -- gzip inside data files ------------------------------------------------------------------

def test_a_gzipped_idx_promising_more_than_memory_is_refused_unpacked(tmp_path):
    """A 60 KB .gz whose IDX header promises 4 GiB (and holds 64 MB of zeros): refused from
    its header, before a byte more is unpacked; read whole, refused at the limit."""
    import gzip

    from nodegraph.kinds import footprint
    from nodegraph.model.errors import NodegraphError
    from nodes.data import _files

    head = bytes([0, 0, 0x08, 3]) + struct.pack(">III", 4096, 1024, 1024)
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)  # gzip framing
    body = packer.compress(head) + b"".join(packer.compress(bytes(1 << 20)) for _ in range(64))
    (tmp_path / "bomb.idx.gz").write_bytes(body + packer.flush())
    assert (tmp_path / "bomb.idx.gz").stat().st_size < 200_000
    assert gzip.decompress((tmp_path / "bomb.idx.gz").read_bytes())[:16] == head
    with footprint.memory_limit(1 << 30):
        with pytest.raises(NodegraphError, match="promises 4.3 GB of values, more than the 1.1 GB"):
            _files.idx_header(str(tmp_path / "bomb.idx.gz"))
    with footprint.memory_limit(32 << 20), pytest.raises(
            NodegraphError, match="larger than|decompression bomb"):  # whichever bound is lower
        _files.read_bytes(str(tmp_path / "bomb.idx.gz"), "IDX file")
    with pytest.raises(NodegraphError, match="promises 4.3 GB|decompression bomb"):
        _files.read_idx(str(tmp_path / "bomb.idx.gz"))  # its header read first, streaming


def test_hf_json_nested_past_the_parser_is_refused_by_name(places, capsys):
    project, _ = places
    save_hf(project / "ds", 1.0)
    (project / "ds" / "state.json").write_text("[" * 200_000 + "]" * 200_000)
    code, text = validate(capsys, project, "data.HFDataset", path="ds", inputs=["a"])
    assert code != 0 and "state.json" in text and "internal error" not in text, text


def test_a_shard_of_many_members_is_scanned_without_keeping_their_headers(tmp_path):
    """tarfile keeps each header it reads; a shard of 20,000 empty members must not keep
    them all (a 10 MB tar of a million members would hold a gigabyte of headers)."""
    import tracemalloc

    from nodes.data import shards

    write_shard(tmp_path / "many.tar", {f"{i:06d}.txt": b"" for i in range(20_000)})
    tracemalloc.start()
    keys = shards.scan(tmp_path / "many.tar", (".npy", ".cls"))
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert keys == [] and peak < 2_000_000, peak


def test_a_corpus_of_one_endless_line_is_read_in_bounded_parts(tmp_path):
    """A 48 MB text file without a newline is read in parts of at most MAX_LINE characters,
    pieces of at most PIECE_CHARS: never the whole line at once."""
    import tracemalloc

    from nodes.data import text

    (tmp_path / "one.txt").write_bytes(b"ab " * (16 << 20))
    tracemalloc.start()
    total = sum(len(line) for piece in text._file_pieces([tmp_path / "one.txt"], False)
                for line in piece)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert total == 3 * (16 << 20)
    assert peak < 24 << 20, peak  # two pieces at most (the one given, the next); old: 48 MB+


def test_a_gzipped_idx_that_inflates_a_thousand_fold_is_refused_as_a_bomb(tmp_path):
    """Found by `benchmarks/fuzz.py --smoke` (idx, seed 0, case 2): labels promising and
    holding 1.5 GiB of zeros in a 1.5 MB gzip were unpacked whole (2 GB resident)."""
    import gzip
    import struct

    from nodes.data import _files

    n = 300_000_000  # 300 MB of zero labels: deflate packs them about 1,000 to 1
    path = tmp_path / "labels-idx1-ubyte.gz"
    with gzip.open(path, "wb", compresslevel=9) as f:
        f.write(struct.pack(">BBBBI", 0, 0, 0x08, 1, n))
        zeros = bytes(1 << 20)
        for _ in range(n >> 20):
            f.write(zeros)
        f.write(bytes(n - (n >> 20 << 20)))
    with pytest.raises(nodegraph.NodegraphError, match="decompression bomb"):
        _files.idx_header(str(path))
    with pytest.raises(nodegraph.NodegraphError, match="decompression bomb"):
        _files.read_bytes(str(path), "IDX file")
    real = tmp_path / "real-idx1-ubyte.gz"  # labels as MNIST's: about 2 to 1
    rng = np.random.default_rng(0)
    with gzip.open(real, "wb") as f:
        f.write(struct.pack(">BBBBI", 0, 0, 0x08, 1, 6000))
        f.write(rng.integers(0, 10, 6000, dtype=np.uint8).tobytes())
    assert _files.idx_header(str(real))[0] == (6000,)
