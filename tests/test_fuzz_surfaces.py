"""The file fuzzer's own parts (benchmarks/fuzz_files.py, `fuzz.py --surface`): its samples
read whole when undamaged, a case is the same from its seed alone, its bombs are what they
claim, and a refusal is judged by whether it names the file.
"""

from __future__ import annotations

import gzip
import io
import json
import subprocess
import sys
import zipfile
import zlib
from pathlib import Path

import pytest

from benchmarks import fuzz_files

ROOT = Path(__file__).resolve().parent.parent
CHEAP = ["idx", "cifar", "images", "table", "webdataset", "tokenizer"]


@pytest.fixture(scope="module")
def samples(tmp_path_factory):
    root = tmp_path_factory.mktemp("samples")
    return fuzz_files.make_samples(root, CHEAP)


@pytest.mark.parametrize("surface", CHEAP)
def test_each_undamaged_sample_reads_whole(samples, tmp_path, surface):
    case, done = fuzz_files.prepare(samples, tmp_path, surface, 0, 0, damage=False)
    assert done == [] and case.block.startswith("data.")
    assert fuzz_files.open_case(case, surface) == []


@pytest.mark.parametrize("surface", CHEAP)
def test_a_case_is_the_same_from_its_seed(samples, tmp_path, surface):
    first = [fuzz_files.prepare(samples, tmp_path / "a", surface, 3, i)[1] for i in range(6)]
    again = [fuzz_files.prepare(samples, tmp_path / "b", surface, 3, i)[1] for i in range(6)]
    assert first == again and all(first)
    assert len({tuple(d) for d in first}) > 1  # and the cases differ


def test_the_gzip_bomb_inflates_to_its_size(tmp_path):
    fuzz_files._gzip_bomb(tmp_path / "b.gz", 5 << 20)
    assert (tmp_path / "b.gz").stat().st_size < 64 << 10
    assert gzip.decompress((tmp_path / "b.gz").read_bytes()) == b"\0" * (5 << 20)


def test_the_png_bomb_is_a_valid_image_of_its_size(tmp_path):
    from PIL import Image

    fuzz_files._png_bomb(tmp_path / "b.png", 300, 200)
    with Image.open(tmp_path / "b.png") as image:
        image.load()
        assert image.size == (300, 200) and image.getextrema() == (0, 0)


def test_the_zip_bomb_keeps_the_other_members_and_inflates_one(tmp_path, monkeypatch):
    monkeypatch.setattr(fuzz_files, "BOMB_BYTES", 3 << 20)
    model = tmp_path / "m.ngz"
    with zipfile.ZipFile(model, "w") as z:
        z.writestr("graph.json", '{"a": 1}')
        z.writestr("run.json", "{}")
    fuzz_files._zip_bomb(model, tmp_path / "bomb.ngz", "run.json")
    with zipfile.ZipFile(tmp_path / "bomb.ngz") as z:
        assert z.testzip() is None and z.read("graph.json") == b'{"a": 1}'
        history = json.loads(z.read("run.json"))["history"]
        assert len(history) == (3 << 20) // 2 + 1 and z.getinfo("run.json").compress_size < \
            64 << 10


def test_a_repeated_deflate_is_the_deflate_of_the_whole():
    raw, crc, size = fuzz_files._deflated([(b"ab", 1), (b"xyz" * 100, 50), (b"!", 1)])
    whole = b"ab" + b"xyz" * 100 * 50 + b"!"
    assert zlib.decompress(raw, -15) == whole and crc == zlib.crc32(whole) and \
        size == len(whole)


def test_a_refusal_counts_only_when_it_names_a_file_of_the_sample(tmp_path):
    (tmp_path / "imgs" / "cats").mkdir(parents=True)
    (tmp_path / "imgs" / "cats" / "0.png").write_bytes(b"")
    case = fuzz_files.Case(tmp_path, tmp_path, "data.ImageFolder", {"path": "imgs",
                                                                    "storage": "auto"})
    assert fuzz_files.names_a_file("image 'imgs/cats/0.png' is damaged", case)
    assert fuzz_files.names_a_file("folder 'imgs' holds no class", case)
    assert not fuzz_files.names_a_file("storage auto: unsupported", case)
    assert not fuzz_files.names_a_file("internal error: KeyError: 3", case)


@pytest.mark.slow
def test_the_smoke_prints_a_table_per_surface_and_exits_on_what_it_finds(tmp_path):
    """Two cases of two file surfaces through the worker processes: the table has a row
    per surface, and the exit status is 1 exactly when a crash, hang or blowup is listed."""
    run = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "fuzz.py"), "--smoke",
                          "--surface", "cifar,idx", "--file-cases", "2", "--jobs", "1"],
                         capture_output=True, text=True, cwd=ROOT, timeout=550)
    out = run.stdout
    assert "surface" in out and "\ncifar " in out and "\nidx " in out, out + run.stderr
    rows = {line.split()[0]: [int(v) for v in line.split()[1:]]
            for line in io.StringIO(out) if line.split() and line.split()[0] in ("cifar",
                                                                                  "idx")}
    assert all(r[0] == 4 and sum(r[1:]) == 4 for r in rows.values())  # 2 cases x 2 seeds
    bad = sum(r[3] + r[4] + r[5] for r in rows.values())
    assert run.returncode == (1 if bad else 0), out


@pytest.mark.parametrize("read, outcome", [("inward.txt", "read"), ("outward.txt", "escape")])
def test_only_a_file_opened_outside_the_case_is_an_escape(tmp_path, monkeypatch, read,
                                                          outcome):
    """A symlink inside the case's folder that points inside it is allowed by design: a case
    that holds an outward link but reads only inside is "read" (the old rule, by the
    mutation's name, called it an escape); a case that opens a file outside is one."""
    from benchmarks import fuzz

    samples, folder = tmp_path / "samples", tmp_path / "case"
    (samples / "outside").mkdir(parents=True)
    folder.mkdir()
    (samples / "outside" / "secret.txt").write_text("SECRET")
    (folder / "data.txt").write_text("mine")
    (folder / "inward.txt").symlink_to(folder / "data.txt")
    (folder / "outward.txt").symlink_to(samples / "outside" / "secret.txt")
    case = fuzz_files.Case(folder, samples, "data.TokenizedText", {})
    done = [f"outward.txt -> {fuzz_files.OUTWARD} to secret.txt"]
    monkeypatch.setattr(fuzz_files, "prepare", lambda *a, **k: (case, done))
    monkeypatch.setattr(fuzz_files, "open_case", lambda made, s: (made.folder / read
                                                                  ).read_text() and [])
    monkeypatch.setattr(fuzz_files, "remove", lambda p: None)
    got, detail = fuzz.run_file_case(samples, tmp_path, "tokenizer", 0, 0)
    assert got == outcome, detail
    if outcome == "escape":
        assert "outside/secret.txt" in detail


def test_a_neighbours_escape_is_not_charged_to_this_workers_case(tmp_path, monkeypatch):
    """With --jobs above 1 every worker watched one shared ``outside`` folder, so a file a
    neighbour's case read there was charged to whichever case this worker ran at the time
    (issue #33: escapes counted on a 16-core run that replays alone did not show). Each
    worker now has its own copy, where `prepare` points its cases' outward links."""
    from benchmarks import fuzz

    samples = tmp_path / "samples"
    (samples / "outside").mkdir(parents=True)
    (samples / "outside" / "secret.txt").write_text("SECRET")
    (samples / "tokenizer").mkdir()
    (samples / "tokenizer" / "corpus.txt").write_text("words\n")
    mine, theirs = tmp_path / "mine", tmp_path / "theirs"
    for scratch in (mine, theirs):
        scratch.mkdir()
        fuzz_files.own_outside(samples, scratch)
    neighbour, _ = fuzz_files.prepare(samples, theirs, "tokenizer", 0, 0, damage=False)
    assert neighbour.beyond == theirs / "outside"
    said = fuzz_files.outward(neighbour, None, neighbour.folder / "corpus.txt")
    assert fuzz_files.OUTWARD in said and \
        (neighbour.folder / "corpus.txt").resolve() == theirs / "outside" / "secret.txt"
    case, _ = fuzz_files.prepare(samples, mine, "tokenizer", 0, 1, damage=False)
    monkeypatch.setattr(fuzz_files, "prepare", lambda *a, **k: (case, []))
    # while this worker's case reads only its own file, the neighbour escapes
    monkeypatch.setattr(fuzz_files, "open_case", lambda made, s: (
        (made.folder / "corpus.txt").read_text(), (neighbour.folder / "corpus.txt"
                                                   ).read_text()) and [])
    assert fuzz.run_file_case(samples, mine, "tokenizer", 0, 1) == ("read", "")
    # and the neighbour's own watch sees it
    monkeypatch.setattr(fuzz_files, "prepare", lambda *a, **k: (neighbour, [said]))
    monkeypatch.setattr(fuzz_files, "open_case", lambda made, s: (
        made.folder / "corpus.txt").read_text() and [])
    got, detail = fuzz.run_file_case(samples, theirs, "tokenizer", 0, 0)
    assert got == "escape" and "outside/secret.txt" in detail, detail
