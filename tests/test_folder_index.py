"""The image folder's cached header index (`nodegraph.kinds.folder_index`), EXIF orientation,
photos reaching a size-fixing augment chain as uint8, and skipped files named.

The index: a second scan reads no header; a rewritten, added or renamed file is read again
(nothing stale is trusted); a damaged or hostile cache file is ignored, never unpickled;
the parallel build gives what the serial one does. EXIF: a JPEG whose orientation tag is 6
is read upright (Pillow's exif_transpose is the reference) in training, predict and the
Python export's reader; ``exif = ignore`` keeps the stored pixels. Raw photos: a folder of
mixed sizes with no `size` trains through RandomResizedCrop, its val split equals
torchvision's Resize + CenterCrop + ToDtype + Normalize on the decoded photo, and predict
on the file gives the val split's values. Skips: four bad files of four kinds are all
counted and named, on the console and in the run's history.
"""

from __future__ import annotations

import json
import os
import struct
import zlib
from functools import partial
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image, ImageOps

import nodegraph
from nodegraph.kinds import folder_index, gate
from nodegraph.kinds.dataset import files_relative_to
from nodegraph.model.errors import NodegraphError
from nodegraph.model.events import Emitter, Message
from nodes.data import folders
from nodes.data._images import header, list_images
from tests.test_image_folder import graph


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("NODEGRAPH_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _photo(path: Path, h: int, w: int, seed: int, exif: int | None = None) -> np.ndarray:
    a = np.random.default_rng(seed).integers(0, 256, (h, w, 3), dtype=np.uint8)
    img = Image.fromarray(a)
    if exif is None:
        img.save(path, quality=95)
    else:
        tags = Image.Exif()
        tags[0x0112] = exif
        img.save(path, quality=95, exif=tags)
    return a


def _folder(root: Path, sizes=((20, 30), (40, 24), (32, 32)), per_class: int = 3) -> Path:
    for k, cls in enumerate(("a", "b")):
        (root / cls).mkdir(parents=True)
        for i in range(per_class):
            h, w = sizes[(i + k) % len(sizes)]
            _photo(root / cls / f"{i}.jpg", h, w, seed=10 * k + i)
    return root


def _index_files(cache: Path) -> list[Path]:
    """The header index files (beside them, the listings kept: `*.listing.npz`)."""
    return [p for p in (cache / "folder-index").glob("*.npz")
            if not p.name.endswith(".listing.npz")]


def _counted(monkeypatch) -> list[Path]:
    """The files whose header is read, by either way: a plain JPEG's first bytes through
    `gate.head_in`, any other file through the reader's checked open (a file may be on
    the list twice when the first way leaves it to the second)."""
    read: list[Path] = []
    head_in = gate.head_in

    def counted_head(folder, name, *args):
        read.append(Path(os.readlink(f"/proc/self/fd/{folder}")) / name)
        return head_in(folder, name, *args)

    class Counting(folders.LocalHeaders):
        def __call__(self, path):
            read.append(Path(path).resolve())
            return super().__call__(path)
    monkeypatch.setattr(gate, "head_in", counted_head)
    monkeypatch.setattr(folders, "LocalHeaders", Counting)
    return read


def _scan(root: Path, **params):
    p = {"path": str(root), "grayscale": False, "size": 16, "resize": "stretch",
         "exif": "apply", "on_error": "stop", **params}
    return folders._scan(type("P", (), p)(), nodegraph.kinds.augment.Chain())


def test_a_second_scan_reads_no_header_and_a_changed_file_is_read_again(tmp_path, monkeypatch,
                                                                         cache):
    root = _folder(tmp_path / "photos")
    read = _counted(monkeypatch)
    first = _scan(root)
    assert len(set(read)) == 6
    assert len(_index_files(cache)) == 1
    read.clear()
    again = _scan(root)
    assert read == [] and list(again.names) == list(first.names)
    assert np.array_equal(again.labels, first.labels)
    # rewritten (another size, another mtime), added, renamed: exactly those are read
    victim = root / "a" / "1.jpg"
    _photo(victim, 50, 10, seed=99)
    os.utime(victim, ns=(1, 1))  # a different mtime whatever the clock's resolution
    _photo(root / "b" / "new.jpg", 20, 30, seed=7)
    (root / "b" / "2.jpg").rename(root / "b" / "2b.jpg")
    read.clear()
    listing = list_images(str(root))
    headers, bad = folder_index.index(listing, "image-header exif=apply",
                                      folders.LocalHeaders("apply"))
    assert sorted({p.name for p in read}) == ["1.jpg", "2b.jpg", "new.jpg"] and bad == {}
    row = list(listing.names).index("a/1.jpg")
    assert tuple(headers[row]) == (3, 50, 10)  # the new header, not the cached one


@pytest.mark.parametrize("garbage", ["bytes", "pickle", "shape"])
def test_a_hostile_or_damaged_cache_file_is_ignored_and_rebuilt(tmp_path, monkeypatch, cache,
                                                                 garbage):
    root = _folder(tmp_path / "photos")
    _scan(root)
    (path,) = _index_files(cache)
    if garbage == "bytes":
        path.write_bytes(b"PK\x03\x04 not a zip at all" * 10)
    elif garbage == "pickle":  # an object array: loading it would unpickle
        with open(path, "wb") as f:
            np.savez(f, **{k: np.array([{"evil": 1}], dtype=object)
                           for k in folder_index._FIELDS})
    else:  # well-formed arrays that do not fit together
        with np.load(path) as npz:
            arrays = {k: npz[k] for k in npz.files}
        arrays["headers"] = arrays["headers"][:2]
        with open(path, "wb") as f:
            np.savez(f, **arrays)
    assert folder_index._load(path) is None
    read = _counted(monkeypatch)
    found = _scan(root)
    assert len(set(read)) == 6 and len(found.names) == 6
    assert folder_index._load(path) is not None  # rewritten whole


def test_the_parallel_build_gives_what_the_serial_one_does(tmp_path, monkeypatch):
    root = _folder(tmp_path / "photos", per_class=12)
    (root / "a" / "bad.jpg").write_bytes(b"not a jpeg")
    serial = folder_index.index(list_images(str(root)), "t1", partial(header, exif="apply"))
    monkeypatch.setattr(folder_index, "PARALLEL_FROM", 4)
    said: list[str] = []
    parallel = folder_index.index(list_images(str(root)), "t2", partial(header, exif="apply"),
                                  said.append)
    assert np.array_equal(serial[0], parallel[0]) and serial[1].keys() == parallel[1].keys()
    assert len(serial[1]) == 1 and "bad.jpg" in next(iter(serial[1].values()))
    assert said[0].startswith("indexing 25 files") and "25 of 25 headers read" in said[-1]


# -- EXIF ----------------------------------------------------------------------------------

def test_exif_orientation_6_is_read_upright_in_training_predict_and_the_export(tmp_path):
    root = tmp_path / "phone"
    for cls in ("a", "b"):
        (root / cls).mkdir(parents=True)
        for i in range(2):
            _photo(root / cls / f"{i}.jpg", 8, 12, seed=i, exif=6)  # stored 8 x 12
    f = root / "a" / "0.jpg"
    with Image.open(f) as img:
        upright = np.asarray(ImageOps.exif_transpose(img).convert("RGB"))
    assert upright.shape == (12, 8, 3)
    expect = torch.from_numpy(upright.transpose(2, 0, 1).astype(np.float32) / 255)
    g = graph(root, size=None, val_fraction=0.0)
    assert nodegraph.train(g).history[0]["train"]["loss"] > 0
    data = nodegraph.compile(g, for_training=False).datasets["data"]
    assert data.port_shapes["x"][0] == (3, 12, 8)
    src = data.sources["train"]
    k = [str(p) for p in src.files].index(str(f))
    assert torch.allclose(src[k]["x"], expect)
    assert torch.allclose(torch.from_numpy(data.raw_inputs["x"].read(str(f))), expect)
    # the Python export's reader turns it the same way
    from nodes.data._images import SCRIPT_READER

    space = {"torch": torch, "np": np, "Path": Path, "Image": Image}
    exec(SCRIPT_READER, space)  # noqa: S102 (our own reader's text)
    script = space["ImageFiles"](root, ["a/0.jpg"], np.array([0]), 3, None, "stretch")
    assert torch.allclose(script[0]["x"], expect)
    ignored = space["ImageFiles"](root, ["a/0.jpg"], np.array([0]), 3, None, "stretch",
                                  exif="ignore")
    assert ignored[0]["x"].shape == (3, 8, 12)


def test_exif_ignore_keeps_the_stored_pixels(tmp_path):
    root = tmp_path / "phone"
    for cls in ("a", "b"):
        (root / cls).mkdir(parents=True)
        _photo(root / cls / "0.jpg", 8, 12, seed=1, exif=6)
    data = nodegraph.compile(graph(root, size=None, exif="ignore", val_fraction=0.0),
                             for_training=False).datasets["data"]
    assert data.port_shapes["x"][0] == (3, 8, 12)


# -- raw photos into a size-fixing chain ---------------------------------------------------

MEAN, STD = [0.5, 0.4, 0.3], [0.2, 0.25, 0.3]


def test_mixed_sizes_without_size_go_raw_to_a_crop_and_match_torchvision(tmp_path):
    from nodegraph.model.packages import load_torchvision

    load_torchvision()
    from torchvision.transforms import v2

    # shorter sides <= 32: decoded whole, as torchvision decodes them (no draft)
    root = _folder(tmp_path / "photos", sizes=((20, 30), (31, 24), (32, 32)), per_class=4)
    chain = [("augment.RandomResizedCrop", {"size": 16}), ("augment.HorizontalFlip", {}),
             ("augment.ColorJitter", {}), ("augment.Normalize", {"mean": MEAN, "std": STD})]
    g = graph(root, *chain, size=None, val_fraction=0.5, split="random")
    report = nodegraph.validate(g, for_training=True)
    assert report.ok, report
    data = nodegraph.compile(g, for_training=False).datasets["data"]
    assert data.port_shapes["x"][0] == (3, 16, 16)
    hand = v2.Compose([v2.ToImage(), v2.Resize(16, antialias=True), v2.CenterCrop(16),
                       v2.ToDtype(torch.float32, scale=True), v2.Normalize(MEAN, STD)])
    val = data.sources["val"]
    got = next(iter(data.batches("val")))["x"]
    files = val.files
    for i, f in enumerate(files):
        with Image.open(f) as img:
            want = hand(img.convert("RGB"))
        assert torch.allclose(got[i], want, atol=1e-5), f
    # predict on the files applies the same eval transform
    pre = data.raw_inputs["x"]
    read = torch.stack([torch.from_numpy(pre.read(str(f))) for f in files])
    for step in pre.steps:
        read = step(read)
    assert torch.allclose(read, got, atol=1e-5)
    train = next(iter(data.batches("train")))["x"]
    assert train.shape[1:] == (3, 16, 16) and train.dtype == torch.float32
    assert nodegraph.train(g).history[0]["train"]["loss"] > 0


def test_without_size_a_chain_that_keeps_the_size_still_needs_one_size(tmp_path):
    root = _folder(tmp_path / "photos")
    report = nodegraph.validate(graph(root, ("augment.HorizontalFlip", {}), size=None))
    assert "images differ in size" in report.for_node("data")[0].message
    assert "RandomResizedCrop" in report.for_node("data")[0].message


def test_a_large_jpeg_is_decoded_at_reduced_size_for_a_small_eval_crop(tmp_path):
    from nodes.data._images import decode

    _photo(tmp_path / "big.jpg", 400, 600, seed=0)
    assert decode(tmp_path / "big.jpg").size == (600, 400)
    small = decode(tmp_path / "big.jpg", side=64)
    assert small.size == (150, 100)  # 1/4: the shorter side stays >= 64
    assert min(decode(tmp_path / "big.jpg", side=150).size) >= 150


# -- nothing skipped in silence ------------------------------------------------------------

def _four_bad(root: Path) -> dict[str, str]:
    """Four bad files of four kinds: empty, not an image, a decompression bomb (a header
    claiming 100,000 x 100,000 pixels), damaged past its header (found in the workers)."""
    (root / "a" / "empty.jpg").write_bytes(b"")
    (root / "a" / "text.png").write_text("hello, not a picture")
    def chunk(kind: bytes, data: bytes) -> bytes:
        return (struct.pack(">I", len(data)) + kind + data
                + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))
    head = struct.pack(">IIBBBBB", 100_000, 100_000, 8, 0, 0, 0, 0)
    (root / "b" / "bomb.png").write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", head)
                                          + chunk(b"IDAT", zlib.compress(b"\0" * 64))
                                          + chunk(b"IEND", b""))
    whole = (root / "b" / "0.jpg").read_bytes()
    (root / "b" / "cut.jpg").write_bytes(whole[:len(whole) * 2 // 3])
    return {"empty.jpg": "", "text.png": "", "bomb.png": "decompression bomb",
            "cut.jpg": "damaged or truncated"}


def test_four_bad_files_of_four_kinds_are_counted_and_named(tmp_path):
    root = _folder(tmp_path / "photos")
    kinds = _four_bad(root)
    with pytest.raises(NodegraphError, match="on_error = skip"):
        nodegraph.compile(graph(root, size=16, val_fraction=0.0), for_training=False)
    events, said = Emitter(), []
    events.subscribe(lambda e: said.append(e.text), Message)
    g = graph(root, size=16, val_fraction=0.0, on_error="skip")
    g.update_training({"epochs": 2})
    result = nodegraph.train(g, events=events)
    reports = [s for s in said if "skipped" in s]
    assert reports and all("skipped 4 unreadable samples" in s for s in reports), reports
    for entry in result.history:  # every epoch: all four, named, with their reasons
        named = {Path(e["file"]).name: e["reason"] for e in entry["skipped"]}
        assert set(named) == set(kinds)
        for name, why in kinds.items():
            assert why in named[name] and name in named[name]
    json.dumps(result.history)  # as --metrics-out writes it


# -- the listing at scale ------------------------------------------------------------------

def test_names_pack_and_unpack_any_file_name():
    names = ["a/0.jpg", "b/café.png", "b/\udcff raw byte.jpg", "c/日本.jpeg", ""]
    packed = folder_index.Names.of(names)
    assert list(packed) == names
    assert list(packed.take([3, 0, 1])) == [names[3], names[0], names[1]]
    assert len(packed.blob) == sum(len(n.encode("utf-8", "surrogateescape")) for n in names)


def test_a_compile_lists_a_folder_once_and_a_change_is_listed_again(tmp_path, monkeypatch):
    root = _folder(tmp_path / "photos")
    listed: list[int] = []
    real = os.listdir

    def counting(path=None):
        listed.append(1)
        return real(path)
    monkeypatch.setattr(folder_index.os, "listdir", counting)
    nodegraph.compile(graph(root, size=16, val_fraction=0.0), for_training=False)
    assert len(listed) == 2  # validation and build: one listing of the two class folders
    listed.clear()
    with folder_index.one_listing():
        first = list_images(str(root))
        assert list_images(str(root)) is first and len(listed) == 2
        _photo(root / "b" / "new.jpg", 20, 30, seed=7)  # the folder's mtime moves
        os.utime(root / "b", ns=(1, 1))  # whatever the clock's resolution
        again = list_images(str(root))
        assert "b/new.jpg" in list(again.names) and len(listed) == 4
    listed.clear()
    list_images(str(root)), list_images(str(root))  # outside: listed every time
    assert len(listed) == 4


def test_the_listing_gives_what_scandir_and_stat_give(tmp_path, monkeypatch):
    root = _folder(tmp_path / "photos", per_class=5)
    (root / "a" / ".hidden.jpg").write_bytes(b"x")
    (root / "a" / "notes.txt").write_text("not an image")
    (root / "b" / "UPPER.JPG").write_bytes((root / "b" / "0.jpg").read_bytes())
    (root / "b" / "link.jpg").symlink_to(root / "a" / "0.jpg")
    monkeypatch.setattr(folder_index, "STAT_THREADS_FROM", 2)  # the threaded path too
    listing = list_images(str(root))
    want = sorted((f"{cls}/{e.name}", e.stat().st_size, e.stat().st_mtime_ns)
                  for cls in ("a", "b") for e in os.scandir(root / cls)
                  if not e.name.startswith(".") and e.name.lower().endswith((".jpg", ".png")))
    assert list(zip(listing.names, listing.sizes.tolist(), listing.mtimes.tolist(),
                    strict=True)) == want
    assert listing.labels.tolist() == [0] * 5 + [1] * 7


def test_a_raw_photo_is_the_tensor_torchvision_makes_of_it_without_a_warning(recwarn):
    from nodegraph.model.packages import load_torchvision
    from nodes.data._images import _uint8

    load_torchvision()
    from torchvision.transforms.v2.functional import pil_to_tensor

    a = np.random.default_rng(0).integers(0, 256, (5, 7, 3), dtype=np.uint8)
    for img in (Image.fromarray(a), Image.fromarray(a).convert("L")):
        got = _uint8(img)
        assert got.dtype == torch.uint8 and torch.equal(got, pil_to_tensor(img))
        got.add_(1)  # the tensor's own memory: the photo is untouched
        assert torch.equal(got, pil_to_tensor(img) + 1)
    assert not [w for w in recwarn if issubclass(w.category, UserWarning)]


def test_the_first_bytes_way_and_the_checked_way_agree_file_by_file(tmp_path, monkeypatch):
    """`LocalHeaders` reads a plain JPEG's header from its first bytes, opened by name in
    its class folder; every other file (a PNG, CMYK, a link, empty, damaged) goes through
    Pillow's checked way. Both give what Pillow alone gives, in the worker processes too."""
    root = _folder(tmp_path / "photos", per_class=4)
    a = root / "a"
    _photo(a / "turned.jpg", 20, 30, seed=3, exif=6)
    Image.fromarray(np.zeros((9, 7, 3), np.uint8)).save(a / "flat.png")
    Image.fromarray(np.zeros((9, 7, 3), np.uint8)).convert("CMYK").save(a / "cmyk.jpg")
    Image.fromarray(np.zeros((5, 6), np.uint8)).save(a / "grey.jpg")
    (a / "empty.jpg").write_bytes(b"")
    (a / "bad.jpg").write_bytes(b"\xff\xd8\xff not a jpeg")
    (a / "link.jpg").symlink_to(a / "turned.jpg")
    monkeypatch.setattr(folder_index, "PARALLEL_FROM", 4)
    with files_relative_to(tmp_path):
        listing = list_images(str(root))
        fast = folder_index.index(listing, "fast", folders.LocalHeaders("apply"))
        slow = folder_index.index(listing, "slow", partial(header, exif="apply"))
    assert np.array_equal(fast[0], slow[0]) and fast[1] == slow[1]
    names = list(listing.names)
    assert tuple(fast[0][names.index("a/link.jpg")]) == (3, 30, 20)  # followed, turned
    assert tuple(fast[0][names.index("a/grey.jpg")]) == (1, 5, 6)
    assert sorted(names[r] for r in fast[1]) == ["a/bad.jpg", "a/empty.jpg"]


def _listings(monkeypatch) -> list[Path]:
    """The folders listed file by file (the kept listing not used)."""
    listed: list[Path] = []
    listed_now = folder_index._listed_now

    def counted(root, *args):
        listed.append(root)
        return listed_now(root, *args)
    monkeypatch.setattr(folder_index, "_listed_now", counted)
    return listed


def test_a_later_start_keeps_the_listing_until_a_class_folder_changes(tmp_path, monkeypatch):
    """A million files are not listed again while no class folder's entries changed (its
    device, inode, mtime and ctime); an added, removed or renamed file moves its folder's
    stamp and the folder is listed again. A folder changed within SETTLED_NS of its
    listing is not trusted by the next start."""
    root = _folder(tmp_path / "photos")
    listed = _listings(monkeypatch)
    monkeypatch.setattr(folder_index, "SETTLED_NS", 0)  # the test's folders are brand new
    first = list_images(str(root))
    again = list_images(str(root))
    assert len(listed) == 1 and list(again.names) == list(first.names)
    assert np.array_equal(again.sizes, first.sizes) and np.array_equal(again.mtimes,
                                                                       first.mtimes)
    _photo(root / "b" / "new.jpg", 20, 30, seed=7)
    assert "b/new.jpg" in list(list_images(str(root)).names) and len(listed) == 2
    (root / "a" / "0.jpg").rename(root / "a" / "0b.jpg")
    names = list(list_images(str(root)).names)
    assert "a/0b.jpg" in names and "a/0.jpg" not in names and len(listed) == 3
    monkeypatch.setattr(folder_index, "SETTLED_NS", 10**18)  # every folder "just changed"
    _photo(root / "b" / "newer.jpg", 20, 30, seed=8)
    list_images(str(root))  # listed, kept, but not to be trusted
    list_images(str(root))
    assert len(listed) == 5


def test_a_refused_file_fixed_in_place_is_read_again_under_a_kept_listing(tmp_path,
                                                                          monkeypatch):
    root = _folder(tmp_path / "photos")
    monkeypatch.setattr(folder_index, "SETTLED_NS", 0)
    bad = root / "a" / "bad.jpg"
    bad.write_bytes(b"not a photo")
    assert [r["file"] for r in _scan(root, on_error="skip").refused] == [str(bad)]
    listed = _listings(monkeypatch)
    _photo(bad, 12, 12, seed=3)  # fixed in place: its folder's entries did not change
    os.utime(bad, ns=(1, 1))
    found = _scan(root, on_error="skip")
    assert listed == [] and found.refused == [] and "a/bad.jpg" in list(found.names)


@pytest.mark.parametrize("name", ["../outside.jpg", "a/.hidden.jpg", "b/0.jpg", "a/x/y.jpg"])
def test_a_kept_listing_with_a_name_the_listing_would_not_make_is_not_used(tmp_path,
                                                                          monkeypatch, cache,
                                                                          name):
    """The kept listing is a cache file, data from anyone: a name that leaves its class
    folder, is hidden, or sits in another class than its label says is refused, and the
    folder is listed again."""
    root = _folder(tmp_path / "photos")
    monkeypatch.setattr(folder_index, "SETTLED_NS", 0)
    list_images(str(root))
    (path,) = (cache / "folder-index").glob("*.listing.npz")
    with np.load(path) as npz:
        arrays = {k: npz[k] for k in npz.files}
    names = list(folder_index.Names(arrays["blob"].tobytes(), arrays["offsets"]))
    names[1] = name  # a row labelled class "a"
    packed = folder_index.Names.of(names)
    arrays["blob"], arrays["offsets"] = np.frombuffer(packed.blob, np.uint8), packed.offsets
    with open(path, "wb") as f:
        np.savez(f, **arrays)
    listed = _listings(monkeypatch)
    assert list(list_images(str(root)).names) != names and len(listed) == 1
