"""Damaged data files for `benchmarks/fuzz.py --surface`: every reader a graph or a saved
model opens, not only the graph file.

Each surface has a pristine sample, made here once per run from seeded generators (the
functions of `examples/make_data.py`, `nodegraph.fit` on examples/xor.json; nothing is
downloaded), and a reader: the data block that opens it, checked by `validate` and then
built and read whole (every split), or `nodegraph.load_model` for a `.ngz`. A case copies
the sample into its own folder and damages it with one to three mutations, drawn from the
case's seed: bytes flipped, zeroed, cut or appended; a header field set to a huge or
negative number; a JSON member damaged with the graph fuzzer's own mutations
(`tests/mutations.py`); a file replaced by a FIFO, a directory, a symlink to `/dev/zero`,
a symlink loop, or a symlink to a valid copy kept *outside* the case's folder; decompression
bombs (a 13,000 x 13,000 PNG, a gzip or zip member that inflates to 1.5 GiB). A case
whose refusal is not a `NodegraphError` naming a file of the sample is a crash; one that
read a file through an outward link without complaint is an *escape*.
"""

from __future__ import annotations

import dataclasses
import gzip
import io
import json
import os
import random
import shutil
import struct
import tarfile
import zipfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SURFACES = ("graph", "ngz", "webdataset", "hf", "table", "idx", "cifar", "tokenizer",
            "images")
BOMB_BYTES = 3 << 29  # 1.5 GiB: a member or stream that inflates to this
BOMB_SIDE = 13_000  # pixels a side of the PNG bomb (169 megapixels)
OUTWARD = "outward link"  # in a mutation's description: it links outside the case


# -- the samples, made once per run -------------------------------------------------------

def make_samples(root: Path, surfaces: list[str]) -> Path:
    """Write the pristine sample of each surface into root/SURFACE, the valid copies that
    outward links point at into root/outside, and the bombs into root/bombs."""
    import numpy as np

    from examples import make_data

    root.mkdir(parents=True, exist_ok=True)
    bombs = root / "bombs"
    bombs.mkdir(exist_ok=True)
    _png_bomb(bombs / "bomb.png", BOMB_SIDE, BOMB_SIDE)
    _gzip_bomb(bombs / "bomb.gz", BOMB_BYTES)
    outside = root / "outside"
    outside.mkdir(exist_ok=True)
    (outside / "secret.txt").write_text("SECRET the ferryman crosses the river\n" * 20)
    rng = np.random.default_rng(0)
    for name in surfaces:
        if name == "graph":
            continue
        folder = root / name
        folder.mkdir(exist_ok=True)
        MAKERS[name](folder, rng, make_data)
    # valid files of each kind outside every case: what an outward link would read
    _images(outside / "imgs", rng)
    x, y = make_data.signals(8, 9)
    make_data.write_shard(outside / "evil.tar", x, y, 0)
    if "table" in surfaces:
        shutil.copy(root / "table" / "customers.parquet", outside / "evil.parquet")
    if "ngz" in surfaces:
        _zip_bomb(root / "ngz" / "model.ngz", bombs / "weights-bomb.ngz", "model.safetensors")
        _zip_bomb(root / "ngz" / "model.ngz", bombs / "run-bomb.ngz", "run.json")
    return root


def _make_ngz(folder: Path, rng, make_data) -> None:
    import nodegraph

    graph = nodegraph.load(Path(make_data.__file__).parent / "xor.json")
    nodegraph.fit(graph, epochs=2, device="cpu").save(folder / "model.ngz")


def _make_shards(folder: Path, rng, make_data) -> None:
    (folder / "shards").mkdir()
    for i in range(2):
        x, y = make_data.signals(6, i)
        make_data.write_shard(folder / "shards" / f"train-{i:03d}.tar", x, y, 6 * i)
    x, y = make_data.signals(4, 7)
    make_data.write_shard(folder / "shards" / "val-000.tar", x, y, 100)


def _make_hf(folder: Path, rng, make_data) -> None:
    make_data.write_hf(folder, train=40, test=12)


def _make_table(folder: Path, rng, make_data) -> None:
    import pyarrow as pa
    import pyarrow.csv as pacsv

    make_data.write_parquet(folder, n=80)
    pacsv.write_csv(pa.table(make_data.customers(40, 1)), folder / "customers.csv")


def _idx(array, dtype_code: int = 0x08) -> bytes:
    return bytes([0, 0, dtype_code, array.ndim]) + b"".join(
        struct.pack(">i", d) for d in array.shape) + array.tobytes()


def _make_idx(folder: Path, rng, make_data) -> None:
    import numpy as np

    images = rng.integers(0, 256, (30, 8, 8)).astype(np.uint8)
    labels = rng.integers(0, 10, 30).astype(np.uint8)
    (folder / "train-images-idx3-ubyte").write_bytes(_idx(images))
    (folder / "train-labels-idx1-ubyte").write_bytes(_idx(labels))
    (folder / "t10k-images-idx3-ubyte.gz").write_bytes(gzip.compress(_idx(images[:10])))
    (folder / "t10k-labels-idx1-ubyte.gz").write_bytes(gzip.compress(_idx(labels[:10])))


def _make_cifar(folder: Path, rng, make_data) -> None:
    make_data.write_cifar(folder, per_batch=6, test=6)


def _make_tokenizer(folder: Path, rng, make_data) -> None:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    text = make_data.corpus(60)
    (folder / "corpus.txt").write_text(text, encoding="utf-8")
    (folder / "texts").mkdir()
    for i, part in enumerate(text.split("\n")[:4]):
        (folder / "texts" / f"part{i}.txt").write_text(part + "\n", encoding="utf-8")
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator([text], trainers.BpeTrainer(
        vocab_size=120, min_frequency=2, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    tok.save(str(folder / "tokenizer.json"))


def _images(folder: Path, rng) -> None:
    from PIL import Image

    for cls in ("cats", "dogs"):
        (folder / cls).mkdir(parents=True, exist_ok=True)
        for i in range(3):
            pixels = rng.integers(0, 256, (8, 8, 3)).astype("uint8")
            ext = ("png", "jpg", "bmp")[i]
            Image.fromarray(pixels).save(folder / cls / f"{i}.{ext}")


def _make_images(folder: Path, rng, make_data) -> None:
    _images(folder / "imgs", rng)


MAKERS: dict[str, Callable] = {
    "ngz": _make_ngz, "webdataset": _make_shards, "hf": _make_hf, "table": _make_table,
    "idx": _make_idx, "cifar": _make_cifar, "tokenizer": _make_tokenizer,
    "images": _make_images}


def _png_chunk(kind: bytes, data: bytes) -> bytes:
    return (struct.pack(">I", len(data)) + kind + data
            + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))


def _png_bomb(path: Path, width: int, height: int) -> None:
    """A valid grey PNG of width x height zeros, written in a second (`_deflated`)."""
    row = b"\x00" * (width + 1)
    raw, _, _ = _deflated([(row, height)])
    adler = 1
    for _ in range(height):
        adler = zlib.adler32(row, adler)
    head = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + _png_chunk(b"IHDR", head)
                     + _png_chunk(b"IDAT", b"\x78\x01" + raw + struct.pack(">I", adler))
                     + _png_chunk(b"IEND", b""))


def _deflated(parts: list[tuple[bytes, int]]) -> tuple[bytes, int, int]:
    """A raw deflate stream of each (chunk, times) in turn, made in a second: after a full
    flush the compressor forgets, so one repeat's output is every repeat's. Returns the
    stream, the CRC-32 and the size of what it inflates to."""
    pack, out, crc, size = zlib.compressobj(1, zlib.DEFLATED, -15), [], 0, 0
    for chunk, times in parts:
        first = pack.compress(chunk) + pack.flush(zlib.Z_FULL_FLUSH)
        again = pack.compress(chunk) + pack.flush(zlib.Z_FULL_FLUSH) if times > 1 else b""
        out += [first, again * (times - 1)]
        for _ in range(times):
            crc = zlib.crc32(chunk, crc)
        size += len(chunk) * times
    out.append(pack.flush())
    return b"".join(out), crc, size


def _gzip_bomb(path: Path, size: int, head: bytes = b"") -> None:
    """A gzip of `head` and then `size` zero bytes, written in a second (`_deflated`)."""
    raw, crc, n = _deflated([(head, 1)] * bool(head) + [(b"\x00" * (1 << 20), size >> 20)])
    path.write_bytes(b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff" + raw
                     + struct.pack("<II", crc, n & 0xFFFFFFFF))


def _zip_bomb(model: Path, out: Path, member: str) -> None:
    """`model` with `member` replaced by one that inflates to BOMB_BYTES (zeros for the
    weights; for run.json a valid JSON object of that size), as a plain zip."""
    with zipfile.ZipFile(model) as src:
        members = {i.filename: src.read(i.filename) for i in src.infolist()}
    entries = []
    for name, data in members.items():
        if name != member:
            entries.append((name, *_deflated([(data, 1)])))
        elif name == "run.json":
            entries.append((name, *_deflated([(b'{"history": [', 1),
                                              (b"0," * (1 << 19), BOMB_BYTES >> 20),
                                              (b"0]}", 1)])))
        else:
            entries.append((name, *_deflated([(b"\x00" * (1 << 20), BOMB_BYTES >> 20)])))
    body, central = bytearray(), bytearray()
    for name, raw, crc, size in entries:
        head = struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0, 8, 0, 0, crc, len(raw),
                           size, len(name), 0)
        central += struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 20, 20, 0, 8, 0, 0, crc,
                               len(raw), size, len(name), 0, 0, 0, 0, 0, len(body))
        central += name.encode()
        body += head + name.encode() + raw
    end = struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, len(entries), len(entries),
                      len(central), len(body), 0)
    out.write_bytes(bytes(body + central) + end)


# -- mutations: each takes (case: Case, rng) and returns a description ---------------------

@dataclass
class Case:
    """One case's folder and what its reader is given."""

    folder: Path
    samples: Path
    block: str = ""
    params: dict[str, Any] = field(default_factory=dict)
    outside: Path | None = None  # where outward links point: a worker's own copy (own_outside)

    @property
    def beyond(self) -> Path:
        """The folder of valid files outside the case that its outward links point to."""
        return self.outside or self.samples / "outside"

    def files(self, *suffixes: str) -> list[Path]:
        """The regular files of the case (not through links), those ending in `suffixes`."""
        out = []
        for top, _dirs, names in os.walk(self.folder):
            for name in names:
                p = Path(top) / name
                if p.is_file() and not p.is_symlink() and (
                        not suffixes or name.endswith(suffixes)):
                    out.append(p)
        return sorted(out)

    def rel(self, p: Path) -> str:
        return str(p.relative_to(self.folder))


def _pick(case: Case, rng: random.Random, *suffixes: str) -> Path | None:
    files = case.files(*suffixes) or case.files()
    return rng.choice(files) if files else None


def flip_bytes(case, rng, target=None):
    p = target or _pick(case, rng)
    if p is None:
        return "nothing to flip"
    data = bytearray(p.read_bytes())
    if not data:
        return f"{case.rel(p)} empty"
    n = rng.choice([1, 1, 4, 32])
    near = rng.random() < 0.5  # headers and footers hold the sizes
    for _ in range(n):
        i = rng.randrange(min(len(data), 512)) if near and rng.random() < 0.5 else (
            len(data) - 1 - rng.randrange(min(len(data), 512)) if near
            else rng.randrange(len(data)))
        data[i] = rng.randrange(256)
    p.write_bytes(bytes(data))
    return f"{case.rel(p)}: {n} byte(s) set{' near an end' if near else ''}"


def cut(case, rng, target=None):
    p = target or _pick(case, rng)
    if p is None:
        return "nothing to cut"
    data = p.read_bytes()
    n = rng.randrange(len(data) + 1)
    p.write_bytes(data[:n])
    return f"{case.rel(p)}: cut at {n} of {len(data)}"


def append(case, rng, target=None):
    p = target or _pick(case, rng)
    if p is None:
        return "nothing to append to"
    n = rng.randrange(1, 3000)  # the case's own bytes (os.urandom made it unreplayable)
    junk = rng.choice([b"\x00" * 7, random.Random(f"{p.name}:{n}").randbytes(n),
                       b"\xff" * 512])
    with open(p, "ab") as f:
        f.write(junk)
    return f"{case.rel(p)}: {len(junk)} byte(s) appended"


def big_number(case, rng, target=None):
    """A 32-bit field at a 4-byte boundary of the first 64 bytes set huge or negative."""
    p = target or _pick(case, rng)
    if p is None:
        return "no file"
    data = bytearray(p.read_bytes())
    if len(data) < 8:
        return f"{case.rel(p)} too short"
    at = 4 * rng.randrange(min(16, len(data) // 4))
    value = rng.choice([0, 0xFFFFFFFF, 0x7FFFFFFF, 0x80000000, 1 << 24, 65536])
    data[at:at + 4] = struct.pack(">I", value)
    p.write_bytes(bytes(data))
    return f"{case.rel(p)}: bytes {at}..{at + 3} = {value:#x}"


def _replace(case, rng, target, make: Callable[[Path], None], what: str) -> str:
    p = target or _pick(case, rng)
    if p is None:
        return "no file"
    if p.is_dir() and not p.is_symlink():
        shutil.rmtree(p)
    else:
        p.unlink()
    make(p)
    return f"{case.rel(p)} -> {what}"


def fifo(case, rng, target=None):
    return _replace(case, rng, target, os.mkfifo, "a FIFO")


def dev_zero(case, rng, target=None):
    return _replace(case, rng, target, lambda p: p.symlink_to("/dev/zero"), "/dev/zero")


def a_directory(case, rng, target=None):
    return _replace(case, rng, target, lambda p: p.mkdir(), "a directory")


def link_loop(case, rng, target=None):
    return _replace(case, rng, target, lambda p: p.symlink_to(p.name), "a symlink to itself")


def outward(case, rng, target=None):
    """A file replaced by a symlink to a valid file of its kind outside the case."""
    p = target or _pick(case, rng)
    if p is None:
        return "no file"
    kinds = {".png": "imgs/cats/0.png", ".jpg": "imgs/cats/1.jpg", ".bmp": "imgs/cats/2.bmp",
             ".tar": "evil.tar", ".parquet": "evil.parquet"}
    dest = case.beyond / kinds.get(p.suffix, "secret.txt")
    return _replace(case, rng, p, lambda q: q.symlink_to(dest), f"{OUTWARD} to {dest.name}")


def extra_entry(case, rng, suffix: str, folder: Path | None = None) -> str:
    """A FIFO, a /dev/zero link or an outward link added beside the sample's files."""
    folder = folder or (_pick(case, rng) or case.folder / "x").parent
    if folder.is_symlink() or not folder.is_dir():  # replaced by an earlier mutation
        folder = case.folder
    p = folder / f"zz-extra{suffix}"
    how = rng.choice([fifo, dev_zero, outward, link_loop])
    if p.is_symlink() or p.exists():
        remove(p)
    p.write_bytes(b"")
    return "added " + how(case, rng, p)


BYTES: list[Callable] = [flip_bytes, flip_bytes, cut, append, big_number]
NODES: list[Callable] = [fifo, dev_zero, a_directory, link_loop, outward]


def json_member(text: str, rng: random.Random) -> tuple[str, str]:
    """A JSON text damaged by one of the graph fuzzer's generic mutations."""
    from tests import mutations as m

    try:
        doc = json.loads(text)
    except ValueError:
        return text[: len(text) // 2], "cut in half"
    if rng.random() < 0.2:
        new, what = rng.choice([m.bom, m.trailing, m.truncate, m.literal])(text, rng, False)
        return new, what
    how = rng.choice([m.drop_key, m.wrong_type, m.swap_values, m.change_number,
                      m.change_string, m.change_list])
    try:
        doc, what = how(doc, rng, False)
    except IndexError:  # nothing it can act on (an earlier mutation left `{}` or a scalar):
        return m.literal(text, rng, False)  # the fuzzer's worker died on it, counted a crash
    return json.dumps(doc, allow_nan=True), what


def json_file(case, rng, target=None):
    p = target or _pick(case, rng, ".json")
    if p is None:
        return "no JSON"
    text, what = json_member(p.read_text(encoding="utf-8", errors="replace"), rng)
    p.write_text(text, encoding="utf-8")
    return f"{case.rel(p)}: {what}"


# -- the surfaces --------------------------------------------------------------------------

def _ngz(case: Case, rng: random.Random) -> list[str]:
    path = case.folder / "model.ngz"
    roll = rng.random()
    if roll < 0.08:
        which = rng.choice(["weights-bomb.ngz", "run-bomb.ngz"])
        shutil.copy(case.samples / "bombs" / which, path)
        return [f"model.ngz -> {which} (a member inflating to {BOMB_BYTES >> 20} MiB)"]
    if roll < 0.18:
        return [rng.choice([fifo, dev_zero, link_loop, a_directory])(case, rng, path)]
    if roll < 0.4:
        return [rng.choice(BYTES)(case, rng, path)]
    with zipfile.ZipFile(path) as z:
        members = {i.filename: z.read(i.filename) for i in z.infolist()}
    done = []
    for _ in range(rng.choice([1, 1, 2])):
        name = rng.choice(sorted(members))
        how = rng.random()
        if name.endswith(".json") and how < 0.7:
            text, what = json_member(members[name].decode("utf-8", "replace"), rng)
            members[name] = text.encode()
        elif how < 0.8:
            data = bytearray(members[name])
            for _ in range(rng.choice([1, 8])):
                i = rng.randrange(min(len(data), 256)) if rng.random() < 0.6 else \
                    rng.randrange(len(data))
                data[i] = rng.randrange(256)
            members[name], what = bytes(data), "bytes set"
        elif how < 0.9:
            members[name] = members[name][: rng.randrange(len(members[name]) + 1)]
            what = "cut"
        else:
            extra = rng.choice(["../evil.json", "/abs.json", "extra.bin", name])
            members[extra], what = b"{}", f"member {extra!r} added"
        done.append(f"model.ngz:{name}: {what}")
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in members.items():
            z.writestr(name, data)
    return done


def _shards_setup(case: Case, rng: random.Random) -> None:
    case.block = "data.WebDataset"
    case.params = {"shards": "shards/train-{000..001}.tar", "val_shards": "shards/val-000.tar",
                   "storage": rng.choice(["auto", "stream"])}


def _shards(case: Case, rng: random.Random) -> list[str]:
    done = []
    for _ in range(rng.choice([1, 1, 2, 3])):
        roll = rng.random()
        shard = rng.choice(case.files(".tar") or [case.folder / "shards" / "train-000.tar"])
        if roll < 0.35:
            done.append(_tar_member(case, rng, shard))
        elif roll < 0.6:  # (never read a FIFO or link an earlier mutation left: it blocks)
            done.append(rng.choice(BYTES)(case, rng, shard) if shard.is_file()
                        and not shard.is_symlink() else "gone")
        elif roll < 0.75:
            done.append(rng.choice(NODES)(case, rng, shard) if shard.is_file() else "gone")
        elif roll < 0.85:
            done.append(extra_entry(case, rng, ".tar", case.folder / "shards"))
            case.params["shards"] = rng.choice(["shards", "shards/*.tar", "shards/*"])
        else:
            pattern = rng.choice(["shards/train-{000000..999999}.tar", "shards/t*-*.tar",
                                  "shards/{a,b}-{0..3}.tar", "../*.tar", "/dev/zero",
                                  "shards/train-{001..000}.tar", "s*/../../outside/*.tar",
                                  "shards/train-{0..99999999999999999999}.tar"])
            case.params[rng.choice(["shards", "val_shards"])] = pattern
            done.append(f"shards pattern {pattern!r}")
    return done


def _tar_member(case: Case, rng: random.Random, shard: Path) -> str:
    """Rewrite `shard` with one member changed: its payload, its type, its name, or a PNG
    bomb as the x field."""
    if not shard.is_file() or shard.is_symlink():
        return "no shard"
    try:
        with tarfile.open(shard) as tar:
            members = [(m, tar.extractfile(m).read() if m.isfile() else b"")
                       for m in tar.getmembers()]
    except (tarfile.TarError, OSError):
        return "shard already unreadable"
    i = rng.randrange(len(members))
    info, data = members[i]
    roll = rng.random()
    if roll < 0.3 and info.name.endswith(".npy"):
        text, what = bytearray(data), "npy header damaged"
        for _ in range(3):
            text[rng.randrange(min(len(text), 128))] = rng.choice(b"(),0123456789'<>fiub:{} ")
        data = bytes(text)
    elif roll < 0.45:
        bomb = (case.samples / "bombs" / "bomb.png").read_bytes()
        info = tarfile.TarInfo(info.name.rsplit(".", 1)[0] + ".png")
        data, what = bomb, "a PNG bomb as the x field"
        case.params["x_field"] = "png"
    elif roll < 0.6:
        kind = rng.choice([tarfile.SYMTYPE, tarfile.LNKTYPE, tarfile.FIFOTYPE, tarfile.DIRTYPE])
        new = tarfile.TarInfo(info.name)
        new.type, new.linkname = kind, rng.choice(["/etc/passwd", "../../x", info.name])
        info, data, what = new, b"", f"member type {kind!r}"
    elif roll < 0.75:
        new = tarfile.TarInfo(rng.choice(["../evil.cls", "/abs.cls", "a/../../b.npy",
                                          "x" * 200 + ".npy", ".npy", "k.", "k..npy"]))
        info, what = new, f"member renamed {new.name!r}"
    elif roll < 0.85:
        data = rng.choice([b"", b"-1", b"1e999", b"nan", b"99999999999999999999", b"\xff\xfe"])
        what = f"payload {data!r}"
    else:
        members.pop(i)
        what = f"member {info.name} dropped"
        with tarfile.open(shard, "w") as tar:
            for m, d in members:
                tar.addfile(m, io.BytesIO(d) if m.isfile() else None)
        return f"{case.rel(shard)}: {what}"
    info.size = len(data) if info.isfile() else 0
    members[i] = (info, data)
    with tarfile.open(shard, "w", format=tarfile.GNU_FORMAT) as tar:
        for m, d in members:
            tar.addfile(m, io.BytesIO(d) if m.isfile() else None)
    return f"{case.rel(shard)}: {what}"


def _hf_setup(case: Case, rng: random.Random) -> None:
    case.block = "data.HFDataset"
    case.params = {"path": "signals_hf", "inputs": ["signal"], "targets": ["label"],
                   "storage": rng.choice(["auto", "stream"])}


def _hf(case: Case, rng: random.Random) -> list[str]:
    done = []
    for _ in range(rng.choice([1, 1, 2])):
        roll = rng.random()
        if roll < 0.3:
            done.append(json_file(case, rng))
        elif roll < 0.45:
            state = rng.choice(case.files("state.json") or [case.folder / "x"])
            try:  # (an earlier mutation may have damaged it: the worker died on that,
                doc = json.loads(state.read_text()) if state.is_file() else None
            except ValueError:  # counted an hf crash: "worker died")
                done.append(f"{case.rel(state)}: already damaged")
                continue
            if state.is_file():
                bad = rng.choice(["../../../outside/secret.txt", "/dev/zero",
                                  str(case.beyond / "secret.txt"), "..", "",
                                  "zz-extra.arrow"])
                files = doc.get("_data_files") if isinstance(doc, dict) else None
                if isinstance(files, list) and files and isinstance(files[0], dict):
                    doc["_data_files"][0]["filename"] = bad
                state.write_text(json.dumps(doc))
                done.append(f"{case.rel(state)}: _data_files[0].filename = {bad!r}"
                            + (f" ({OUTWARD})" if "outside" in bad else ""))
        elif roll < 0.7:
            done.append(rng.choice(BYTES)(case, rng, _pick(case, rng, ".arrow")))
        elif roll < 0.85:
            done.append(rng.choice(NODES)(case, rng, _pick(case, rng, ".arrow", ".json")))
        else:
            done.append(extra_entry(case, rng, rng.choice([".arrow", ".json", ""])))
    return done


CSV_LINES = [b'"unclosed,1,2\n', b"\x00\x00\x00\n", b"a" * 100_000 + b"\n",
             b",".join([b"1"] * 5000) + b"\n", b"\xff\xfe\xfd,1\n", b"1e999,nan,inf\n",
             b"99999999999999999999999,1,1,basic,north,yes\n", b"\n\n\n", b"\r\r\n"]


def _table_setup(case: Case, rng: random.Random) -> None:
    name = "customers.csv" if rng.random() < 0.35 else "customers.parquet"
    case.block = "data.CSV" if name.endswith("csv") and rng.random() < 0.5 else "data.Parquet"
    case.params = {"path": name, "targets": ["churn"], "target_kind": "class"}
    if case.block == "data.Parquet":
        case.params["storage"] = rng.choice(["auto", "stream"])
        if rng.random() < 0.2:
            (case.folder / ("customers.csv" if name.endswith("parquet")
                            else "customers.parquet")).unlink()
            case.params["path"] = "."  # a folder of tables


def _table(case: Case, rng: random.Random) -> list[str]:
    name = Path(case.params["path"]).name
    name = name if name.startswith("customers") else next(
        p.name for p in case.files() if p.name.startswith("customers"))
    use_csv = name.endswith(".csv")
    target = case.folder / name
    done = []
    for _ in range(rng.choice([1, 1, 2])):
        roll = rng.random()
        if roll < 0.3 and use_csv and target.is_file():
            lines = target.read_bytes().split(b"\n")
            at = rng.randrange(len(lines))
            junk = rng.choice(CSV_LINES)
            target.write_bytes(b"\n".join(lines[:at] + [junk.rstrip(b"\n")] + lines[at:]))
            done.append(f"{name}: line {at} = {junk[:30]!r}")
        elif roll < 0.7 and target.is_file():
            done.append(rng.choice(BYTES)(case, rng, target))
        elif roll < 0.85 and target.is_file():
            done.append(rng.choice(NODES)(case, rng, target))
        else:
            done.append(extra_entry(case, rng, rng.choice([".parquet", ".csv", ".arrow"]),
                                    case.folder))
            case.params["path"] = "."
    return done


def _idx_setup(case: Case, rng: random.Random) -> None:
    case.block = "data.MNIST"
    case.params = {"images": "train-images-idx3-ubyte", "labels": "train-labels-idx1-ubyte",
                   "storage": rng.choice(["auto", "stream"])}
    if rng.random() < 0.4:
        case.params.update(test_images="t10k-images-idx3-ubyte.gz",
                           test_labels="t10k-labels-idx1-ubyte.gz")


# a gzip the fuzzer itself unpacks to mutate (not a bomb: that would be the fuzzer's blowup)
MAX_UNPACKED = 64 << 20


def _inflates_to(gz: bytes) -> int:
    """What a gzip says it unpacks to (its trailer's ISIZE: right for the fuzzer's own)."""
    return struct.unpack("<I", gz[-4:])[0] if len(gz) >= 18 else 0


def _idx_head(size: int) -> bytes:
    """An IDX header of uint8 images 28 x 28, as many as `size` bytes of values hold."""
    return struct.pack(">BBBBIII", 0, 0, 0x08, 3, size // 784, 28, 28)


def _idx_case(case: Case, rng: random.Random) -> list[str]:
    done = []
    for _ in range(rng.choice([1, 1, 2])):
        roll = rng.random()
        target = case.folder / rng.choice([v for k, v in case.params.items() if k != "storage"])
        if not target.is_file() or target.is_symlink():
            done.append("already replaced")
        elif roll < 0.35:
            data = bytearray(target.read_bytes())
            bomb = target.suffix == ".gz" and _inflates_to(bytes(data)) > MAX_UNPACKED
            if bomb:  # never unpacked here: a header is made for its zeros (all its values)
                data = bytearray(_idx_head(BOMB_BYTES))
            elif target.suffix == ".gz":
                try:  # (an earlier mutation may have damaged it: the fuzzer's worker died on
                    data = bytearray(gzip.decompress(bytes(data)))  # that, an idx "crash")
                except (OSError, EOFError, zlib.error):
                    done.append(f"{target.name}: already damaged")
                    continue
            at = rng.choice([2, 3, 4, 8, 12])
            value = rng.choice([0, 1, 255, 0x0D, 0x0E, 0x0C, 9])
            if at in (2, 3):
                data[at] = value
            else:
                value = rng.choice([0, 1, 0x7FFFFFFF, 0xFFFFFFFF, 65536, 100_000])
                data[at:at + 4] = struct.pack(">I", value)
            raw = bytes(data)
            if bomb:
                _gzip_bomb(target, BOMB_BYTES, raw)
            else:
                target.write_bytes(gzip.compress(raw) if target.suffix == ".gz" else raw)
            done.append(f"{target.name}: header byte {at} = {value:#x}"
                        + " (of an IDX header put before the gzip's zeros)" * bomb)
        elif roll < 0.45:
            shutil.copy(case.samples / "bombs" / "bomb.gz", target.with_suffix(".gz")
                        if target.suffix != ".gz" else target)
            if target.suffix != ".gz":
                target.unlink()
                key = next(k for k, v in case.params.items() if v == target.name)
                case.params[key] = target.name + ".gz"
            done.append(f"{target.name}: a gzip inflating to {BOMB_BYTES >> 20} MiB")
        elif roll < 0.8:
            done.append(rng.choice(BYTES)(case, rng, target))
        else:
            done.append(rng.choice(NODES)(case, rng, target))
    return done


def _cifar_setup(case: Case, rng: random.Random) -> None:
    case.block = "data.CIFAR"
    case.params = {"path": "cifar-10-batches-bin", "storage": rng.choice(["auto", "stream"]),
                   "variant": rng.choice(["auto", "auto", "auto", "cifar10", "cifar100"])}


def _cifar(case: Case, rng: random.Random) -> list[str]:
    folder = case.folder / "cifar-10-batches-bin"
    done = []
    for _ in range(rng.choice([1, 1, 2])):
        roll = rng.random()
        target = _pick(case, rng, ".bin")
        if target is None:
            done.append("no file")
        elif roll < 0.25:
            data = bytearray(target.read_bytes())
            for r in range(0, len(data), 3073):
                if rng.random() < 0.5:
                    data[r] = rng.choice([10, 99, 255])
            target.write_bytes(bytes(data))
            done.append(f"{case.rel(target)}: label bytes out of range")
        elif roll < 0.6:
            done.append(rng.choice(BYTES)(case, rng, target))
        elif roll < 0.75:
            done.append(rng.choice(NODES)(case, rng, target))
        elif roll < 0.85:
            done.append(json_file(case, rng, folder / "batches.meta.txt")
                        if (folder / "batches.meta.txt").is_file() else "no meta")
        else:
            name = rng.choice(["data_batch_6.bin", "train.bin", "test.bin", "zz.bin"])
            remove(folder / name)  # (a FIFO an earlier draw added: writing it blocked for
            (folder / name).write_bytes(b"")  # ever, a cifar "hang" of the fuzzer's own)
            done.append("added " + rng.choice([fifo, dev_zero, outward])(case, rng,
                                                                          folder / name))
    return done


def _tokenizer_setup(case: Case, rng: random.Random) -> None:
    case.block = "data.TokenizedText"
    corpus = rng.choice(["corpus.txt", "corpus.txt", "texts"])
    case.params = {"path": corpus, "seq_len": 8, "storage": rng.choice(["auto", "stream"])}
    if rng.random() < 0.7:
        case.params.update(tokenizer="file", tokenizer_file="tokenizer.json")
    else:
        case.params.update(tokenizer=rng.choice(["bpe", "wordpiece"]), vocab_size=100)


def _tokenizer(case: Case, rng: random.Random) -> list[str]:
    corpus = case.params["path"]
    done = []
    for _ in range(rng.choice([1, 1, 2])):
        roll = rng.random()
        tok = case.folder / "tokenizer.json"
        if roll < 0.4 and tok.is_file() and not tok.is_symlink():
            done.append(json_file(case, rng, tok))
        elif roll < 0.55:
            done.append(rng.choice(NODES)(case, rng, rng.choice([tok, case.folder / corpus])))
        elif roll < 0.75:
            target = _pick(case, rng, ".txt")
            if target is not None and rng.random() < 0.5:
                target.write_bytes(rng.choice([b"\xff\xfe\x00bad", b"", b"\x00" * 5000,
                                               "\u202e\u0000é".encode() * 100]))
                done.append(f"{case.rel(target)}: replaced by odd bytes")
            else:
                done.append(rng.choice(BYTES)(case, rng, target))
        else:
            done.append(extra_entry(case, rng, ".txt", case.folder / "texts"))
    return done


def _images_setup(case: Case, rng: random.Random) -> None:
    case.block = "data.ImageFolder"
    case.params = {"path": "imgs", "size": rng.choice([8, 8, None]),
                   "storage": rng.choice(["auto", "stream"]),
                   "on_error": rng.choice(["stop", "skip"])}


def _images_case(case: Case, rng: random.Random) -> list[str]:
    done = []
    for _ in range(rng.choice([1, 1, 2])):
        roll = rng.random()
        image = _pick(case, rng, ".png", ".jpg", ".bmp")
        if roll < 0.4 and image is not None:
            done.append(rng.choice(BYTES)(case, rng, image))
        elif roll < 0.5 and image is not None:
            dest = image.with_suffix(".png")
            if dest.is_symlink():  # an earlier outward link: copying through it wrote the
                dest.unlink()  # bomb over the outside sample (an "escape" of the fuzzer's)
            shutil.copy(case.samples / "bombs" / "bomb.png", dest)
            if image.suffix != ".png":
                image.unlink()
            done.append(f"{case.rel(image)} -> a {BOMB_SIDE}x{BOMB_SIDE} PNG bomb")
        elif roll < 0.65 and image is not None:
            done.append(rng.choice(NODES)(case, rng, image))
        elif roll < 0.75:
            cls = case.folder / "imgs" / rng.choice(["cats", "dogs"])
            if cls.is_dir() and not cls.is_symlink():
                shutil.rmtree(cls)
                cls.symlink_to(case.beyond / "imgs" / "cats")
                done.append(f"imgs/{cls.name} -> {OUTWARD} to a folder of images")
        elif roll < 0.9:
            done.append(extra_entry(case, rng, rng.choice([".png", ".jpg", ""]),
                                    case.folder / "imgs" / rng.choice(["cats", "dogs"])))
        else:
            deep = case.folder / "imgs" / "deep"
            (deep / ("d/" * 50)).mkdir(parents=True, exist_ok=True)
            remove(deep / "a.png")  # (never write through what an earlier draw made)
            (deep / "a.png").write_bytes(b"")
            done.append("imgs/deep: a class 50 folders deep, an empty image")
    return done


SETUPS: dict[str, Callable[[Case, random.Random], None]] = {
    "ngz": lambda case, rng: None, "webdataset": _shards_setup, "hf": _hf_setup,
    "table": _table_setup, "idx": _idx_setup, "cifar": _cifar_setup,
    "tokenizer": _tokenizer_setup, "images": _images_setup}
MUTATORS: dict[str, Callable[[Case, random.Random], list[str]]] = {
    "ngz": _ngz, "webdataset": _shards, "hf": _hf, "table": _table, "idx": _idx_case,
    "cifar": _cifar, "tokenizer": _tokenizer, "images": _images_case}


def prepare(samples: Path, scratch: Path, surface: str, seed: int, index: int,
            damage: bool = True) -> tuple[Case, list[str]]:
    """Case `index` of `seed` on `surface`: its folder (a fresh copy of the sample under
    `scratch`), damaged unless `damage` is false; returns the case and what was done."""
    rng = random.Random(f"{surface}:{seed}:{index}")
    folder = scratch / f"{surface}-{seed}-{index}"
    remove(folder)
    shutil.copytree(samples / surface, folder, symlinks=True)
    case = Case(folder, samples, outside=scratch / "outside" if (scratch / "outside").is_dir()
                else None)
    SETUPS[surface](case, rng)
    if not damage:
        return case, []
    try:
        return case, MUTATORS[surface](case, rng)
    except OSError as e:  # a mutation undone by an earlier one (a folder now a FIFO)
        return case, [f"(a mutation could not be made: {e})"]


def own_outside(samples: Path, scratch: Path) -> Path:
    """A copy of the samples' ``outside`` folder in a worker's `scratch`, where the outward
    links of the worker's cases point (`prepare`): its inotify watch then sees only its own
    cases' opens. With one ``outside`` for all, each worker's watch saw every worker's
    opens, and with ``--jobs`` above 1 an escape was also charged to whichever case a
    neighbour was running at the time."""
    shutil.copytree(samples / "outside", scratch / "outside", symlinks=True)
    return scratch / "outside"


def remove(folder: Path) -> None:
    """Remove a case's folder or one entry: anything not a real directory (a FIFO, a link,
    a file) is unlinked, never opened (`rmtree` opens its top path: a FIFO blocked it)."""
    if folder.is_symlink() or (folder.exists() and not folder.is_dir()):
        folder.unlink()
        return
    shutil.rmtree(folder, ignore_errors=True)


def open_case(case: Case, surface: str) -> list[tuple[str, str]]:
    """Open the case as a user would: the (kind, message) of each error it was refused
    with, or [] when it was read whole. Exceptions other than a `NodegraphError` escape;
    one that validation caught and reported as the node's `shape_error` (a data block has
    no inputs to blame) is returned with that kind, for the caller to count."""
    import nodegraph
    from nodegraph.kinds.dataset import files_relative_to
    from nodegraph.model.errors import NodegraphError
    from nodegraph.model.graph import Graph

    if surface == "ngz":
        try:
            nodegraph.load_model(case.folder / "model.ngz", device="cpu")
        except NodegraphError as e:
            return [("refused", str(e))]
        return []
    graph = Graph("fuzz")
    graph.folder = case.folder
    try:
        graph.add(case.block, id="data", **case.params)
    except NodegraphError as e:
        return [("refused", str(e))]
    report = nodegraph.validate(graph)
    if not report.ok:
        return [(p.kind, p.message) for p in report.problems if p.severity == "error"]
    spec = graph.registry.get(case.block)
    params, problems = spec.resolve_params(case.params)
    if problems:
        return [("bad_param", str(p)) for p in problems]
    try:
        with files_relative_to(case.folder):
            data = spec.build(params)
            if getattr(data, "options", None) is not None and data.options.workers is None:
                # one loader process a split, as a fuzz worker has one core: by default a
                # split of 256+ samples starts min(8, cores - 1) per split, each through
                # the worker's fork server (the tokenizer sample's 283 contexts: 16 starts
                # a case, past the 5 s limit on 16 cores; issue #33, fuzz33's report)
                data.options = dataclasses.replace(data.options, workers=1)
            for split in ("train", "val", "test"):
                if data.has(split):
                    data.tensors(split)
    except NodegraphError as e:
        return [("refused", str(e))]
    return []


PATH_PARAMS = ("path", "shards", "val_shards", "test_shards", "images", "labels",
               "test_images", "test_labels", "tokenizer_file")


def names_a_file(message: str, case: Case) -> bool:
    """True when `message` names the sample's file, folder, or one inside it."""
    names = {case.folder.name, *(str(case.params[k]) for k in PATH_PARAMS
                                 if isinstance(case.params.get(k), str))}
    for _top, dirs, files in os.walk(case.folder):
        names.update(dirs)
        names.update(files)
    names = {n for n in names if len(n) >= 3 and n not in ("..", "d")}
    return any(n in message for n in names) or "model.ngz" in message
