"""A plain JPEG's size, components and EXIF orientation from its first bytes, in pure Python.

Indexing a million photos through Pillow's `Image.open` costs ~75 µs of CPU a file (its
plugin machinery, a file object, the marker handlers); parsing the few markers before the
scan here costs a few µs. This parser is a fast path only, never a second opinion: it
answers for the files it fully understands — markers SOI, APP0, one APP1 EXIF block
(orientation read from IFD0), DQT, DHT, DRI, COM, one 8-bit SOF of 1 or 3 components, then
SOS, all within the bytes given — and for anything else (ICC or MPF segments, XMP, APP14,
fill bytes, a CMYK or 12-bit frame, a header cut short, a damaged table, a picture larger
than the decompression-bomb bound) it says None, and the caller asks Pillow, whose answer
and whose refusal messages are the reference. `tests/test_jpeg_head.py` holds it to
Pillow's answer on real and damaged files.
"""

from __future__ import annotations

import struct

# the frame markers Pillow reads as a start of frame (SOF0-3, 5-7, 9-11, 13-15)
_FRAMES = frozenset({0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD,
                     0xCE, 0xCF})
_SKIPPED = frozenset({0xC4, 0xDD, 0xFE, 0xE0})  # DHT, DRI, COM, APP0: read past
_EXIF = b"Exif\x00\x00"
# bytes per value of each TIFF field type Pillow knows (BYTE ASCII SHORT LONG RATIONAL
# SBYTE UNDEFINED SSHORT SLONG SRATIONAL FLOAT DOUBLE IFD)
_TIFF_SIZES = {1: 1, 2: 1, 3: 2, 4: 4, 5: 8, 6: 1, 7: 1, 8: 2, 9: 4, 10: 8, 11: 4, 12: 8,
               13: 4}


def parse(head: bytes, max_pixels: int) -> tuple[int, int, int, int] | None:
    """(components, height, width, EXIF orientation 1-8) of the JPEG whose first bytes
    are `head`, or None when the file is not one this parser fully understands."""
    if not head.startswith(b"\xff\xd8\xff"):
        return None
    at, end = 2, len(head)
    frame: tuple[int, int, int] | None = None
    turn: int | None = 1
    exif_seen = False
    while at + 4 <= end:
        if head[at] != 0xFF:
            return None
        marker = head[at + 1]
        length = (head[at + 2] << 8) | head[at + 3]
        if length < 2 or at + 2 + length > end:
            return None
        body = head[at + 4:at + 2 + length]
        if marker == 0xDA:  # start of scan: the header is complete
            if frame is None or turn is None:
                return None
            components, height, width = frame
            return (components, height, width, turn) if height * width <= max_pixels \
                else None
        if marker in _FRAMES:
            if frame is not None or len(body) < 6 or body[0] != 8 or body[5] not in (1, 3):
                return None
            height, width = (body[1] << 8) | body[2], (body[3] << 8) | body[4]
            if height == 0 or width == 0:
                return None
            frame = (body[5], height, width)
        elif marker == 0xDB:
            if not _tables_whole(body):
                return None
        elif marker == 0xE1:
            if not body.startswith(_EXIF) or exif_seen:
                return None  # XMP (Pillow may take the orientation from it), a second EXIF
            exif_seen = True
            turn = _orientation(body[len(_EXIF):])
        elif marker not in _SKIPPED:
            return None
        at += 2 + length
    return None


def _tables_whole(body: bytes) -> bool:
    """Every quantization table of a DQT segment complete (Pillow refuses one cut short)."""
    at = 0
    while at < len(body):
        size = 1 + (64 if body[at] < 16 else 128)
        if at + size > len(body):
            return False
        at += size
    return True


def _orientation(tiff: bytes) -> int | None:
    """The orientation (1-8; 1 when absent or out of range) in IFD0 of an EXIF block, or
    None when the block is not plain: a damaged directory, a field type Pillow does not
    know, a value stored past the block's end (Pillow then drops the whole directory), an
    odd orientation field."""
    if tiff[:4] == b"II*\x00":
        order = "<"
    elif tiff[:4] == b"MM\x00*":
        order = ">"
    else:
        return None
    (first,) = struct.unpack_from(order + "I", tiff, 4) if len(tiff) >= 8 else (0,)
    if first < 8 or first + 2 > len(tiff):
        return None
    (count,) = struct.unpack_from(order + "H", tiff, first)
    if count == 0 or first + 2 + 12 * count > len(tiff):
        return None
    found = None
    for k in range(count):
        tag, kind, n, where = struct.unpack_from(order + "HHII", tiff, first + 2 + 12 * k)
        if kind not in _TIFF_SIZES:
            return None
        size = n * _TIFF_SIZES[kind]
        if size > 4 and where + size > len(tiff):
            return None
        if tag == 0x0112:
            if found is not None or kind != 3 or n != 1:
                return None
            (found,) = struct.unpack_from(order + "H", tiff, first + 10 + 12 * k)
    return found if found is not None and 1 <= found <= 8 else 1
