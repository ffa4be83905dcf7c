"""Image files without image libraries: PNG and PGM/PPM/PBM read with numpy and zlib.

Pillow is not a dependency, so the image-folder block reads the two formats that need
nothing else: PNG (non-interlaced, every colour type and bit depth) and the Netpbm family
(P1–P6). Images come back as float32 arrays (channels, height, width) scaled to [0, 1];
an alpha channel is dropped. `resize` and `to_layout` serve every image data block.
"""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from nodegraph.kinds import footprint
from nodegraph.kinds.dataset import data_path
from nodegraph.model.errors import NodegraphError
from nodes.data._files import looked_at, read_bytes

IMAGE_SUFFIXES = (".png", ".pgm", ".ppm", ".pbm", ".pnm")


def read_image(path: str | Path) -> np.ndarray:
    """An image file as float32 (C, H, W) in [0, 1]; C is 1 (grey) or 3 (RGB)."""
    raw = read_bytes(str(path), "image")
    try:
        if raw[:8] == b"\x89PNG\r\n\x1a\n":
            return decode_png(raw)
        if raw[:1] == b"P" and raw[1:2] in b"123456":
            return decode_pnm(raw)
    except (ValueError, IndexError, struct.error, zlib.error) as e:
        raise NodegraphError(f"image '{path}' is damaged: {e}") from e
    raise NodegraphError(f"cannot read image '{path}': only PNG and PGM/PPM/PBM can be read "
                         "(other formats such as JPEG would need Pillow, which is not "
                         "installed)")


def image_header(path: str | Path) -> tuple[int, int, int]:
    """The (C, H, W) `read_image` gives for a file, from its header alone; the pixels
    (and damage in them) are read when the data is built."""
    raw = read_bytes(str(path), "image")
    try:
        if raw[:8] == b"\x89PNG\r\n\x1a\n":
            width, height, _, colour, _, _, interlace = struct.unpack(">IIBBBBB",
                                                                      raw[16:29])
            if colour not in _PNG_CHANNELS:
                raise ValueError(f"unknown PNG colour type {colour}")
            if interlace:
                raise ValueError("interlaced PNGs are not supported; save it without "
                                 "interlacing")
            return (3 if colour in (2, 3, 6) else 1), height, width
        if raw[:1] == b"P" and raw[1:2] in b"123456":
            kind = int(raw[1:2])
            (_, width, height, *_), _ = _pnm_header(raw, 3 if kind in (1, 4) else 4)
            return (3 if kind in (3, 6) else 1), height, width
    except (ValueError, IndexError, struct.error) as e:
        raise NodegraphError(f"image '{path}' is damaged: {e}") from e
    return read_image(path).shape  # not an image: read_image says why


# -- PNG ---------------------------------------------------------------------------------

_PNG_CHANNELS = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}  # colour type -> samples per pixel


def decode_png(raw: bytes) -> np.ndarray:
    chunks = _png_chunks(raw)
    width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", chunks["IHDR"])
    if colour not in _PNG_CHANNELS:
        raise ValueError(f"unknown PNG colour type {colour}")
    if interlace:
        raise ValueError("interlaced PNGs are not supported; save it without interlacing")
    bits = _PNG_CHANNELS[colour] * depth
    stride, step = -(-width * bits // 8), max(1, bits // 8)
    data = _unfilter(zlib.decompress(chunks["IDAT"]), height, stride, step)
    samples = _unpack(data, width * _PNG_CHANNELS[colour], depth)  # (H, W*channels)
    pixels = samples.reshape(height, width, _PNG_CHANNELS[colour])
    if colour == 3:  # palette indices
        palette = np.frombuffer(chunks["PLTE"], np.uint8).reshape(-1, 3)
        return (palette[pixels[..., 0]] / 255.0).astype(np.float32).transpose(2, 0, 1)
    pixels = pixels[..., :3] if colour == 6 else pixels[..., :1] if colour == 4 else pixels
    return (pixels / float(2 ** depth - 1)).astype(np.float32).transpose(2, 0, 1)


def _png_chunks(raw: bytes) -> dict[str, bytes]:
    """The chunks by type; IDAT chunks joined in order."""
    chunks: dict[str, bytes] = {"IDAT": b""}
    pos = 8
    while pos + 8 <= len(raw):
        length, kind = struct.unpack(">I4s", raw[pos:pos + 8])
        body = raw[pos + 8:pos + 8 + length]
        name = kind.decode("latin-1")
        chunks[name] = chunks.get(name, b"") + body if name == "IDAT" else body
        pos += 12 + length
        if name == "IEND":
            break
    if "IHDR" not in chunks or not chunks["IDAT"]:
        raise ValueError("the PNG has no header or no image data")
    return chunks


def _unfilter(data: bytes, height: int, stride: int, step: int) -> np.ndarray:
    """Undo PNG's per-row filters (None, Sub, Up, Average, Paeth); `step` is the number of
    bytes per pixel (at least 1), the distance to the 'left' byte."""
    rows = np.frombuffer(data, np.uint8)[:height * (stride + 1)].reshape(height, stride + 1)
    out = np.empty((height, stride), np.uint8)
    prior = np.zeros(stride, np.int64)
    for r in range(height):
        kind, line = rows[r, 0], rows[r, 1:].astype(np.int64)
        if kind == 0:
            cur = line
        elif kind == 1:  # Sub: a running sum per byte lane
            cur = np.cumsum(line.reshape(-1, step), axis=0).reshape(-1) % 256
        elif kind == 2:
            cur = (line + prior) % 256
        elif kind in (3, 4):
            cur = np.asarray(_unfilter_sequential(line.tolist(), prior.tolist(), step, kind))
        else:
            raise ValueError(f"unknown PNG filter type {kind} in row {r}")
        out[r] = cur
        prior = np.asarray(cur, np.int64)
    return out


def _unfilter_sequential(line: list[int], prior: list[int], step: int, kind: int) -> list[int]:
    """Average and Paeth depend on the byte just decoded, so they go byte by byte."""
    cur = line[:]
    for i in range(len(cur)):
        left = cur[i - step] if i >= step else 0
        up = prior[i]
        if kind == 3:
            pred = (left + up) // 2
        else:
            corner = prior[i - step] if i >= step else 0
            p = left + up - corner
            pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
            pred = left if pa <= pb and pa <= pc else up if pb <= pc else corner
        cur[i] = (cur[i] + pred) & 255
    return cur


def _unpack(data: np.ndarray, count: int, depth: int) -> np.ndarray:
    """Samples of `depth` bits from each row of bytes, `count` per row."""
    if depth == 8:
        return data[:, :count].astype(np.int64)
    if depth == 16:
        return data.view(">u2")[:, :count].astype(np.int64)
    bits = np.unpackbits(data, axis=1).reshape(len(data), -1, depth)
    weights = 1 << np.arange(depth - 1, -1, -1)
    return (bits * weights).sum(axis=2)[:, :count]


# -- Netpbm (PBM/PGM/PPM) ----------------------------------------------------------------

def decode_pnm(raw: bytes) -> np.ndarray:
    kind = raw[1] - ord("0")
    channels = 3 if kind in (3, 6) else 1
    bitmap = kind in (1, 4)
    fields, pos = _pnm_header(raw, 3 if bitmap else 4)
    width, height = fields[1], fields[2]
    top = 1 if bitmap else fields[3]
    count = width * height * channels
    if kind in (1, 2, 3):  # plain text, comments allowed to the end of a line
        text = b" ".join(line.split(b"#")[0] for line in raw[pos:].splitlines())
        tokens = [bytes([c]) for c in text if c in b"01"] if kind == 1 else text.split()
        values = np.array([int(t) for t in tokens[:count]], dtype=np.int64)
    elif kind == 4:  # packed bits, rows padded to whole bytes
        packed = np.frombuffer(raw, np.uint8, height * -(-width // 8), pos)
        values = np.unpackbits(packed.reshape(height, -1), axis=1)[:, :width].astype(np.int64)
    else:
        dtype = ">u1" if top < 256 else ">u2"
        values = np.frombuffer(raw, dtype, count, pos).astype(np.int64)
    scaled = values.reshape(height, width, channels) / float(top)
    if bitmap:
        scaled = 1.0 - scaled  # in PBM, 1 is black
    return scaled.astype(np.float32).transpose(2, 0, 1)


def _pnm_header(raw: bytes, n: int) -> tuple[list[int], int]:
    """The first `n` header fields (magic, width, height[, maxval]) skipping comments,
    and the offset of the data (after one whitespace byte)."""
    fields: list[int] = []
    pos = 2
    while len(fields) < n - 1:
        while raw[pos:pos + 1].isspace() or raw[pos:pos + 1] == b"#":
            if raw[pos:pos + 1] == b"#":
                pos = raw.index(b"\n", pos)
            pos += 1
        start = pos
        while pos < len(raw) and raw[pos:pos + 1].isdigit():
            pos += 1
        if start == pos:
            raise ValueError("malformed Netpbm header")
        fields.append(int(raw[start:pos]))
    return [0, *fields], pos + 1


# -- folders -----------------------------------------------------------------------------

def read_folder(root: str, grayscale: bool, size: int | None
                ) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Images (N, C, H, W), class indices (N,) and class names of a folder holding one
    subfolder per class (sorted by name). Grey images become RGB when any image is in
    colour, unless `grayscale` turns everything grey; `size` resizes to size × size."""
    classes, listed = list_folder(root, size)
    images, labels = [], []
    for k, files in enumerate(listed):
        for f in files:
            image = read_image(f)
            image = grey(image) if grayscale else image
            images.append(image if size is None else resize(image[None], size)[0])
            labels.append(k)
    return _stack(images, root), np.array(labels, dtype=np.int64), classes


def folder_shape(root: str, grayscale: bool, size: int | None
                 ) -> tuple[tuple[int, int, int], np.ndarray]:
    """The (C, H, W) of every image `read_folder` gives, and the class indices, from the
    listing and the images' headers (refusing what it refuses, but damaged pixels)."""
    _, listed = list_folder(root, size)
    heads = [image_header(f) for files in listed for f in files]
    labels = np.repeat(np.arange(len(listed), dtype=np.int64), [len(f) for f in listed])
    channels = 1 if grayscale else max(c for c, _, _ in heads)
    if size is not None:
        return (channels, size, size), labels
    shapes = sorted({(h, w) for _, h, w in heads})
    if len(shapes) > 1:
        raise _sizes_differ(root, shapes)
    return (channels, *shapes[0]), labels


def list_folder(root: str, size: int | None) -> tuple[list[str], list[list[Path]]]:
    """The class names and each class's image files, sorted; refuses an empty folder or
    class, and a `size` whose images cannot fit in memory."""
    folder = data_path(root)
    if not folder.is_dir():
        raise NodegraphError(f"image folder '{root}'{looked_at(root, folder)} "
                             f"{'is not a folder' if folder.exists() else 'does not exist'}")
    classes = sorted(d.name for d in folder.iterdir() if d.is_dir()
                     and not d.name.startswith("."))
    if not classes:
        raise NodegraphError(f"image folder '{root}' has no class subfolders "
                             "(expected one subfolder of images per class)")
    listed = []
    for name in classes:
        files = sorted(f for f in (folder / name).iterdir()
                       if f.is_file() and f.suffix.lower() in IMAGE_SUFFIXES)
        if not files:
            raise NodegraphError(f"class folder '{folder / name}' holds no PNG or "
                                 "PGM/PPM/PBM images")
        listed.append(files)
    if size is not None:  # float32 RGB images, resized, stacked, then split
        count = sum(map(len, listed))
        footprint.need(count * 3 * size * size * 4 * 3, "size", size,
                       f"{count:,} images of {size} x {size}")
    return classes, listed


def _stack(images: list[np.ndarray], root: str) -> np.ndarray:
    """One array of equally shaped images; grey ones repeated to RGB when colours mix."""
    if any(len(i) == 3 for i in images):
        images = [np.repeat(i, 3, axis=0) if len(i) == 1 else i for i in images]
    shapes = sorted({i.shape[1:] for i in images})
    if len(shapes) > 1:
        raise _sizes_differ(root, shapes)
    return np.stack(images)


def _sizes_differ(root: str, shapes: list) -> NodegraphError:
    return NodegraphError(f"images in '{root}' differ in size ({shapes[0]} and "
                          f"{shapes[-1]}, height x width); set size to resize them all")


# -- shaping -----------------------------------------------------------------------------

def resize(images: np.ndarray, size: int) -> np.ndarray:
    """(N, C, H, W) images bilinearly resized to size × size (PyTorch's interpolate with
    align_corners=False); values stay within the input's range."""
    t = torch.as_tensor(np.asarray(images, np.float32))
    out = F.interpolate(t, size=(size, size), mode="bilinear", align_corners=False)
    return out.numpy()


def to_layout(images: np.ndarray, layout: str) -> np.ndarray:
    """(N, C, H, W) as they are ("image") or one row of C*H*W values per sample ("flat")."""
    return images.reshape(len(images), -1) if layout == "flat" else images


def grey(image: np.ndarray) -> np.ndarray:
    """An RGB image (3, H, W) as luminance (1, H, W) with the ITU-R BT.601 weights."""
    if len(image) == 1:
        return image
    weights = np.array([0.299, 0.587, 0.114], np.float32)[:, None, None]
    return (image * weights).sum(axis=0, keepdims=True)
