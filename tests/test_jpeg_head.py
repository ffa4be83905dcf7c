"""The pure-Python JPEG header parser (`nodes.data.jpeg_head`) against Pillow.

Pillow's answer (`_images.header` on the bytes: channels, height, width, turned by the EXIF
orientation) is the reference. The parser may decline (None: the index then asks Pillow),
but whenever it answers, it must give Pillow's header: on real photographs saved every way
people save them, and on thousands of damaged copies (cut, bytes changed, inserted,
deleted). It must also answer for the plain files, or it would save nothing.
"""

from __future__ import annotations

import io
import warnings

import numpy as np
import pytest
from PIL import Image
from sklearn.datasets import load_sample_images

from nodes.data import _images, jpeg_head
from nodes.data._images import LocalHeaders


def _jpeg(img: Image.Image, **options) -> bytes:
    buf = io.BytesIO()
    img.save(buf, "JPEG", **options)
    return buf.getvalue()


def _exif(**tags: int | str) -> bytes:
    exif = Image.Exif()
    for tag, value in tags.items():
        exif[int(tag.removeprefix("t"), 16)] = value
    return exif.tobytes()


@pytest.fixture(scope="module")
def files() -> dict[str, bytes]:
    """Real photographs (scikit-learn's), saved plain and every other way."""
    out: dict[str, bytes] = {}
    for k, photo in enumerate(load_sample_images().images):
        img = Image.fromarray(photo[:240, :320])
        small = img.resize((64, 48))
        out[f"{k}-plain"] = _jpeg(img, quality=85)
        out[f"{k}-progressive"] = _jpeg(img, progressive=True)
        out[f"{k}-grey"] = _jpeg(img.convert("L"))
        out[f"{k}-cmyk"] = _jpeg(img.convert("CMYK"))
        out[f"{k}-icc"] = _jpeg(small, icc_profile=b"\0" * 200)
        out[f"{k}-xmp"] = _jpeg(small, xmp=b"<x:xmpmeta tiff:Orientation=\"6\"/>")
        for turn in range(10):  # 0 and 9 are out of range: read as 1
            out[f"{k}-exif{turn}"] = _jpeg(small, exif=_exif(t0112=turn, t010F="Phone"))
        out[f"{k}-exif-none"] = _jpeg(small, exif=_exif(t010F="Phone"))
    return out


def _pillow(data: bytes) -> tuple[int, int, int] | str:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Pillow warns on damaged EXIF, then carries on
        try:
            return _images.header(data, "apply", name="photo.jpg")
        except Exception as e:  # noqa: BLE001 - whatever Pillow raises is its refusal
            return f"raised {type(e).__name__}"


def test_it_answers_as_pillow_does_for_photographs_saved_every_way(files):
    fast = LocalHeaders("apply")
    answered = {name: fast.from_head(data) for name, data in files.items()}
    for name, got in answered.items():
        if got is not None:
            assert got == _pillow(files[name]), name
    declined = {name for name, got in answered.items() if got is None}
    # the kinds it leaves to Pillow, and nothing else
    assert declined == {n for n in files if n.endswith(("-cmyk", "-icc", "-xmp"))}
    turned = {n: answered[n] for n in files if n.startswith("0-exif")}
    assert turned["0-exif6"] == (3, 64, 48) and turned["0-exif3"] == (3, 48, 64)
    assert turned["0-exif9"] == turned["0-exif0"] == turned["0-exif-none"] == (3, 48, 64)


def test_exif_ignore_keeps_the_stored_size(files):
    assert LocalHeaders("ignore").from_head(files["0-exif6"]) == (3, 48, 64)
    assert _images.header(files["0-exif6"], "ignore", name="x.jpg") == (3, 48, 64)


def test_on_damaged_copies_it_answers_only_what_pillow_answers(files):
    rng = np.random.default_rng(5)
    seeds = [files[n] for n in sorted(files) if not n.endswith(("-cmyk", "-icc", "-xmp"))]
    fast, answered = LocalHeaders("apply"), 0
    for _ in range(6000):
        data = bytearray(seeds[rng.integers(len(seeds))])
        kind = rng.integers(4)
        at = int(rng.integers(2, min(len(data), 700)))
        if kind == 0:
            data = data[:rng.integers(len(data))]
        elif kind == 1:
            for _ in range(rng.integers(1, 4)):
                data[int(rng.integers(min(len(data), 700)))] = int(rng.integers(256))
        elif kind == 2:
            data[at:at] = rng.integers(0, 256, int(rng.integers(1, 8)), np.uint8).tobytes()
        else:
            del data[at:at + int(rng.integers(1, 10))]
        got = fast.from_head(bytes(data))
        if got is not None:
            answered += 1
            assert got == _pillow(bytes(data)), bytes(data[:64]).hex()
    assert answered > 1000  # most damage is to the pixels, after the header


def test_a_picture_past_the_bomb_bound_is_left_to_pillow(files):
    data = bytearray(files["0-plain"])
    at = data.index(b"\xff\xc0") + 5  # SOF0: length, precision, then height and width
    data[at:at + 4] = (60000).to_bytes(2, "big") + (60000).to_bytes(2, "big")
    assert jpeg_head.parse(bytes(data), _images.MAX_PIXELS) is None
    assert "decompression bomb" in str(_pillow(bytes(data)))


def test_a_header_cut_before_the_scan_is_not_answered(files):
    data = files["0-plain"]
    scan = data.index(b"\xff\xda")
    whole = scan + 2 + int.from_bytes(data[scan + 2:scan + 4], "big")  # the SOS segment
    assert jpeg_head.parse(data[:whole], _images.MAX_PIXELS) == (3, 240, 320, 1)
    assert jpeg_head.parse(data[:whole - 1], _images.MAX_PIXELS) is None
    assert isinstance(_pillow(data[:whole - 1]), str)  # Pillow refuses it too
