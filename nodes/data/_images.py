"""Image files through Pillow: decoding, headers, image folders and the resize policies.

Every image data block reads pixels here: JPEG, PNG, WebP, BMP, TIFF, GIF and the Netpbm
family (PGM/PPM/PBM), in grey, RGB, palette or with alpha. Images come back as float32
arrays (channels, height, width) in [0, 1]: 1 channel for grey (16-bit grey scaled by
65535), 3 for everything else, alpha dropped. `image_header` reads only the header
(Pillow opens lazily), so validation and listing never decode pixels. A damaged, truncated
or hostile file (a decompression bomb) is a `SampleError` naming the file.

`list_images` lists a folder of one subfolder per class; `ImageFiles` is the per-sample
reader a streamed image folder hands its DataLoader workers. A folder in object storage
(``s3://bucket/prefix``, `nodegraph.kinds.remote`) is listed there, each header read from
the object's first `HEAD_BYTES` (`RemoteHeaders`), and each photo fetched whole in the
workers (one bounded ranged GET) and decoded from its bytes.
"""

from __future__ import annotations

import contextlib
import io
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path, PurePosixPath
from typing import IO, Any

import numpy as np
import torch
import torch.nn.functional as F

from nodegraph.kinds import folder_index, footprint, gate, remote
from nodegraph.kinds.dataset import data_path
from nodegraph.kinds.streamed import SampleError
from nodegraph.model.errors import NodegraphError
from nodes.data import jpeg_head
from nodes.data._files import looked_at

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".webp", ".bmp", ".tif", ".tiff", ".gif",
                  ".pgm", ".ppm", ".pbm", ".pnm")
GREY_MODES = ("1", "L", "LA", "I", "I;16", "I;16B", "I;16L", "I;16N", "F", "La")
RESIZE = ("stretch", "crop", "pad")


def _pil():
    """Pillow, imported when an image is first read."""
    from PIL import Image

    return Image


# the most pixels one image may claim (Pillow's own default bound, held here so that no
# setting of Pillow's lifts it): a small file claiming more is a decompression bomb
MAX_PIXELS = 89_478_485
MAX_FILE = 256 * 2**20  # an image file larger than this is refused unread
HEAD_BYTES = 64 * 2**10  # an object's first bytes read for its header (EXIF included)


@contextlib.contextmanager
def open_image(source: str | Path | bytes, name: str | None = None) -> Iterator[Any]:
    """The image in `source` (a file, through the file gate, or the bytes of a tar member
    called `name`) opened lazily: header read, pixels not; a SampleError for a damaged
    file or one claiming more than MAX_PIXELS. Every image reader goes through here."""
    Image = _pil()
    shown = name if name is not None else "bytes" if isinstance(source, bytes) else str(source)
    with contextlib.ExitStack() as stack:
        f: IO[bytes]
        try:
            if isinstance(source, bytes):
                f = io.BytesIO(source)
            else:
                f = stack.enter_context(gate.open_file(Path(source), "image", MAX_FILE))
            with warnings.catch_warnings():
                warnings.simplefilter("error", Image.DecompressionBombWarning)
                img = stack.enter_context(Image.open(f))  # gated: f from gate.open_file, or bytes
        except NodegraphError as e:
            raise SampleError(str(e)) from None
        except Image.UnidentifiedImageError:  # its text names the file object, not the file
            raise SampleError(f"cannot read image '{shown}': not an image format Pillow "
                              "recognises (or empty, or damaged at its start)") from None
        except (OSError, ValueError, SyntaxError, Image.DecompressionBombWarning,
                Image.DecompressionBombError) as e:
            raise SampleError(f"cannot read image '{shown}': {e}") from e
        if img.width * img.height > MAX_PIXELS:
            raise SampleError(f"image '{shown}' claims {img.width:,} x {img.height:,} pixels, "
                              f"more than {MAX_PIXELS:,}: refused as a decompression bomb")
        yield img


def channels_of(mode: str, grayscale: bool = False) -> int:
    return 1 if grayscale or mode in GREY_MODES else 3


EXIF = ("apply", "ignore")
_TURNED = (5, 6, 7, 8)  # EXIF orientations that swap height and width


def orientation(img) -> int:
    """The EXIF orientation tag of an opened image (1: as stored), from its header: a PNG
    whose eXIf chunk is not before its pixels is not decoded to look for one (Pillow's
    getexif would load it)."""
    if img.format == "PNG" and "exif" not in img.info:
        return 1
    try:
        value = img.getexif().get(0x0112, 1)
    except (OSError, ValueError, SyntaxError, TypeError):  # a damaged EXIF block
        return 1
    return value if isinstance(value, int) and 1 <= value <= 8 else 1


def header(path: Path | str | bytes, exif: str = "apply", name: str | None = None
           ) -> tuple[int, int, int] | str:
    """(C, H, W) as `decode` gives them (turned by EXIF orientation under "apply"), from
    the header alone; or why the file is refused (the folder index's reader). `path` and
    `name` as `open_image` takes them (a file, or bytes and the name they came from)."""
    try:
        with open_image(path, name) as img:
            c, h, w = channels_of(img.mode), img.height, img.width
            turned = exif == "apply" and orientation(img) in _TURNED
    except SampleError as e:
        return str(e)
    return (c, w, h) if turned else (c, h, w)


def image_header(path: str | Path) -> tuple[int, int, int]:
    """The (C, H, W) `read_image` gives for a file, from its header alone."""
    try:
        with open_image(path) as img:
            return channels_of(img.mode), img.height, img.width
    except SampleError as e:
        raise NodegraphError(str(e)) from e


def decode(source: str | Path | bytes, name: str | None = None, exif: str = "apply",
           side: int | None = None):
    """The image decoded by Pillow in mode L (grey) or RGB; 16-bit and float grey stay
    (as I or F) for `to_array` to scale; turned upright by its EXIF orientation under
    `exif` "apply". With `side`, a JPEG may be decoded at 1/2, 1/4 or 1/8 scale (Pillow's
    draft) as long as its shorter side stays >= `side`. Truncated data is refused, not
    padded. `source` as `open_image` takes it: the one decoder of every image reader."""
    path = name if name is not None else "bytes" if isinstance(source, bytes) else source
    with open_image(source, name) as img:
        turn = orientation(img) if exif == "apply" else 1
        if side is not None and img.format == "JPEG":
            short = min(img.width, img.height)
            if short > 2 * side:
                scale = short / side
                img.draft(img.mode, (int(img.width / scale), int(img.height / scale)))
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("error")  # Pillow only warns on some damage
                img.load()
                if turn != 1:
                    return _upright(img, turn)
                if img.mode.startswith("I;16"):
                    return img.convert("I")
                if img.mode in ("I", "F", "RGB", "L"):  # loaded: closing the file keeps
                    return img  # the pixels (a copy here cost ~10 % of a photo's time)
                if img.mode in GREY_MODES:
                    return img.convert("L")
                rgba = img.convert("RGBA") if img.mode == "P" else img
                return rgba.convert("RGB")
        except (OSError, ValueError, SyntaxError, EOFError, Warning) as e:
            raise SampleError(f"image '{path}' is damaged or truncated: {e}") from e


def _upright(img, turn: int):
    """The loaded image turned as its EXIF orientation says (Pillow's exif_transpose), in
    the mode `decode` gives."""
    Image = _pil()
    method = {2: Image.Transpose.FLIP_LEFT_RIGHT, 3: Image.Transpose.ROTATE_180,
              4: Image.Transpose.FLIP_TOP_BOTTOM, 5: Image.Transpose.TRANSPOSE,
              6: Image.Transpose.ROTATE_270, 7: Image.Transpose.TRANSVERSE,
              8: Image.Transpose.ROTATE_90}[turn]
    if img.mode.startswith("I;16"):
        img = img.convert("I")
    elif img.mode not in ("I", "F", "RGB", "L"):
        img = img.convert("L") if img.mode in GREY_MODES else \
            (img.convert("RGBA") if img.mode == "P" else img).convert("RGB")
    return img.transpose(method)


def to_array(img, grayscale: bool = False) -> np.ndarray:
    """A decoded Pillow image as float32 (C, H, W) in [0, 1]."""
    if img.mode in ("I", "F"):
        a = np.asarray(img, dtype=np.float32)
        a = a / 65535.0 if img.mode == "I" else a
        a = a[None]
    else:
        a = np.asarray(img, dtype=np.float32) / 255.0
        a = a[None] if a.ndim == 2 else a.transpose(2, 0, 1)
    if grayscale and len(a) == 3:
        a = grey(a)
    return np.ascontiguousarray(a)


def read_image(path: str | Path) -> np.ndarray:
    """An image file as float32 (C, H, W) in [0, 1]; C is 1 (grey) or 3 (RGB)."""
    try:
        return to_array(decode(path))
    except SampleError as e:
        raise NodegraphError(str(e)) from e


def fit(img, size: int | None, policy: str = "stretch"):
    """A Pillow image brought to size x size: stretched, centre-cropped after scaling the
    shorter side (crop) or letter-boxed in black after scaling the longer side (pad)."""
    if size is None or img.size == (size, size):
        return img
    Image = _pil()
    w, h = img.size
    if policy == "stretch":
        return img.resize((size, size), Image.BILINEAR)
    scale = size / (min(w, h) if policy == "crop" else max(w, h))
    nw, nh = max(1, round(w * scale)), max(1, round(h * scale))
    img = img.resize((nw, nh), Image.BILINEAR)
    if policy == "crop":
        left, top = (nw - size) // 2, (nh - size) // 2
        return img.crop((left, top, left + size, top + size))
    canvas = Image.new(img.mode, (size, size))
    canvas.paste(img, ((size - nw) // 2, (size - nh) // 2))
    return canvas


def _uint8(img) -> torch.Tensor:
    """A decoded photo as a tensor (C, H, W) as torchvision's ToImage makes it: uint8 for
    L and RGB, float32 in [0, 1] for 16-bit and float grey."""
    if img.mode in ("I", "F"):
        return torch.from_numpy(to_array(img))
    a = np.asarray(img)  # over the bytes Pillow just made, this array's alone: not copied
    with warnings.catch_warnings():  # again (8 % of a photo's time); torch may own them
        warnings.simplefilter("ignore", UserWarning)  # "not writable": nothing else reads them
        return torch.from_numpy(a[None] if a.ndim == 2 else a.transpose(2, 0, 1))


def _channels(x, channels: int):
    """`x` (C, H, W) with 1 or 3 channels, as `channels` says (grey as BT.601 luminance)."""
    if channels == 3 and len(x) == 1:
        return x.repeat(3, 1, 1) if isinstance(x, torch.Tensor) else np.repeat(x, 3, axis=0)
    if channels == 1 and len(x) == 3:
        if isinstance(x, torch.Tensor) and x.dtype == torch.uint8:
            w = torch.tensor([0.299, 0.587, 0.114])[:, None, None]
            return (x.to(torch.float32) * w).sum(0, keepdim=True).round().to(torch.uint8)
        return grey(np.asarray(x)) if not isinstance(x, torch.Tensor) else \
            torch.from_numpy(grey(x.numpy()))
    return x


class LocalHeaders:
    """The folder index's header reader for files on disk (`folder_index.index`): `header`
    of a path, and `from_head`, the header of a plain JPEG from its first `head_bytes`
    (`jpeg_head`, ~20 µs a file with the open where Pillow takes ~200 µs), None for any
    other file, which the index then reads through `header`."""

    what, limit, head_bytes = "image", MAX_FILE, HEAD_BYTES

    def __init__(self, exif: str):
        self.exif = exif

    def __call__(self, path: Path | str) -> tuple[int, int, int] | str:
        return header(path, self.exif)

    def from_head(self, head: bytes) -> tuple[int, int, int] | None:
        found = jpeg_head.parse(head, MAX_PIXELS)
        if found is None:
            return None
        channels, height, width, turn = found
        turned = self.exif == "apply" and turn in _TURNED
        return (channels, width, height) if turned else (channels, height, width)


class RemoteHeaders:
    """The folder index's header reader for objects (`folder_index.index`): the first
    `HEAD_BYTES` of each, read concurrently (`remote.heads`), and the header parsed from
    them; when those bytes do not hold the whole header (a TIFF's directory at its end, a
    JPEG with a large EXIF thumbnail) the object is read whole, bounded by MAX_FILE.
    `refused`: objects the listing already refuses (empty, too large), by URL."""

    def __init__(self, exif: str, refused: dict[str, str]):
        self.exif, self.refused = exif, refused

    def __call__(self, url: Path | str) -> tuple[int, int, int] | str:
        return self.many([url], lambda _: None)[0]

    def many(self, urls: Sequence[Path | str], say) -> list[tuple[int, int, int] | str]:
        todo = [str(u) for u in urls if str(u) not in self.refused]
        got: dict[str, bytes | NodegraphError] = {}
        step = 20_000  # a progress line per step read
        for i in range(0, len(todo), step):
            part = todo[i:i + step]
            got.update(zip(part, remote.heads(part, "image", HEAD_BYTES), strict=True))
            if len(todo) > step:
                say(f"  {len(got):,} of {len(todo):,} headers read")
        out: list[tuple[int, int, int] | str] = []
        for u in map(str, urls):
            data = got.get(u)
            if data is None:
                out.append(self.refused[u])
            elif isinstance(data, NodegraphError):
                out.append(str(data))
            else:
                found = header(data, self.exif, name=u)
                if isinstance(found, str) and len(data) >= HEAD_BYTES:  # cut short: all of it
                    try:
                        found = header(fetch(u), self.exif, name=u)
                    except SampleError as e:
                        found = str(e)
                out.append(found)
        return out


def fetch(url: str) -> bytes:
    """The whole object `url` (at most MAX_FILE bytes, `remote.fetch`); a missing or
    oversized object is a SampleError naming it, a storage that fails a RemoteError."""
    try:
        return remote.fetch(url, "image", MAX_FILE)
    except remote.RemoteError:
        raise
    except NodegraphError as e:
        raise SampleError(str(e)) from None


def join(root: Path | str, name: str) -> Path | str:
    """File `name` ("class/file") of a folder: a path, or a URL under a URL."""
    return f"{root}/{name}" if isinstance(root, str) else root / name


def _source(where: Path | str) -> tuple[Path | bytes, str | None]:
    """What `decode` takes for a file or an object (its bytes, fetched, and its URL)."""
    return (fetch(where), where) if isinstance(where, str) else (where, None)


class ImageFiles(torch.utils.data.Dataset):
    """The per-sample reader of an image folder: file i (`names[i]` under `root`) decoded,
    fitted, as x (C, H, W) float32 and its class y; run in the DataLoader's workers. With
    `raw`, x is the decoded photo at its own size (uint8 for 8-bit photos; `side`: a JPEG
    may be decoded smaller, its shorter side kept >= side), for an augment chain that
    fixes the size. `root` may be a URL (`list_images`): each photo is then fetched whole
    from object storage in the worker that decodes it."""

    def __init__(self, root: Path | str, names: Sequence[str], labels: np.ndarray,
                 channels: int,
                 size: int | None, policy: str, shape: tuple[int, int] | None = None, *,
                 exif: str = "apply", raw: bool = False, side: int | None = None):
        self.root: Path | str = root if remote.is_url(root) else Path(root)
        self.names, self.labels = names, labels
        self.channels, self.size, self.policy, self.shape = channels, size, policy, shape
        self.exif, self.raw, self.side = exif, raw, side

    def __len__(self) -> int:
        return len(self.names)

    @property
    def files(self) -> list[Path | str]:
        """The files' paths or URLs (made on request: a million are not kept)."""
        return [join(self.root, n) for n in self.names]

    def __getitem__(self, i: int) -> dict:
        path = join(self.root, self.names[i])
        source, name = _source(path)
        y = torch.tensor(int(self.labels[i]))
        if self.raw:
            photo = _uint8(decode(source, name, exif=self.exif, side=self.side))
            return {"x": _channels(photo, self.channels), "y": y}
        img = fit(decode(source, name, exif=self.exif), self.size, self.policy)
        if self.shape is not None and (img.height, img.width) != self.shape:
            raise SampleError(f"image '{path}' is {img.height} x {img.width}, the others "
                              f"{self.shape[0]} x {self.shape[1]}; set size to resize them")
        x = to_array(img, self.channels == 1)
        return {"x": torch.from_numpy(_channels(x, self.channels)), "y": y}


class PhotoReader:
    """One photo read as `ImageFiles` reads a folder's files: a path (decoded), or a photo
    already decoded as a uint8 array (H, W), (H, W, 1), (H, W, 3) or (H, W, 4), fitted to
    `size` by `policy`, as float32 (channels, H, W) in [0, 1]; `shape` (H, W) is required
    when there is no size. With `pre` (the eval chain up to where it fixes the size, for
    a folder read raw), the photo goes through it as uint8 instead of being fitted.
    Predicting on a raw photo (`nodegraph.kinds.rawinput`)."""

    def __init__(self, channels: int, size: int | None, policy: str,
                 shape: tuple[int, int] | None = None, *, exif: str = "apply",
                 pre: tuple | None = None, side: int | None = None):
        self.channels, self.size, self.policy, self.shape = channels, size, policy, shape
        self.exif, self.pre, self.side = exif, pre, side

    def __call__(self, photo) -> np.ndarray:
        if isinstance(photo, str | Path):
            try:
                source, url = _source(photo if remote.is_url(photo) else Path(photo))
                img = decode(source, url, exif=self.exif, side=self.side)
            except SampleError as e:
                raise NodegraphError(str(e)) from e
            name = f"image '{photo}'"
        else:
            a = np.asarray(photo)
            if a.dtype != np.uint8 or a.ndim not in (2, 3) or \
                    (a.ndim == 3 and a.shape[2] not in (1, 3, 4)):
                raise NodegraphError(f"a photo array must be uint8 (H, W) or (H, W, C) with C "
                                     f"1, 3 or 4, as Pillow decodes it; got {a.dtype} "
                                     f"{tuple(a.shape)}")
            a = a[..., 0] if a.ndim == 3 and a.shape[2] == 1 else a
            img = _pil().fromarray(np.ascontiguousarray(a))
            img = img.convert("RGB") if img.mode == "RGBA" else img
            name = f"the photo array {tuple(a.shape)}"
        if self.pre is not None:
            t = _channels(_uint8(img), self.channels)
            for fn in self.pre:
                t = fn(t)
            t = t.to(torch.float32).mul_(1.0 / 255) if t.dtype == torch.uint8 else t
            return np.ascontiguousarray(t.numpy(), dtype=np.float32)
        img = fit(img, self.size, self.policy)
        if self.shape is not None and (img.height, img.width) != tuple(self.shape):
            raise NodegraphError(f"{name} is {img.height} x {img.width}; the model reads "
                                 f"{self.shape[0]} x {self.shape[1]} (the data block has no "
                                 "size to resize it to)")
        x = to_array(img, self.channels == 1)
        return _channels(x, self.channels)


# -- folders -----------------------------------------------------------------------------

def list_images(root: str) -> folder_index.Listing:
    """The class names and each class's image files, sorted, with their sizes and mtimes
    (`folder_index.list_classes`); refuses a missing folder, a folder with no class
    subfolders, and a class folder with no images. Every class folder and symlinked image
    passes the file gate (`nodegraph.kinds.gate`): a symlink to a folder or an image
    outside, or a FIFO among the images, is refused by name. A URL is listed in object
    storage (`list_remote`)."""
    folder: Path | str
    if remote.is_url(root):
        listing = list_remote(root)
        folder = listing.root
    else:
        folder = data_path(root)
        if not folder.is_dir():
            raise NodegraphError(f"image folder '{root}'{looked_at(root, folder)} "
                                 f"{'is not a folder' if folder.exists() else 'does not exist'}")
        listing = folder_index.list_classes(folder, "image", IMAGE_SUFFIXES)
    if not listing.classes:
        raise NodegraphError(f"image folder '{root}' has no class subfolders (expected one "
                             "subfolder of images per class, e.g. cats/ and dogs/)")
    counts = np.bincount(listing.labels, minlength=len(listing.classes))
    for name, count in zip(listing.classes, counts, strict=True):
        if count == 0:
            raise NodegraphError(f"class folder '{join(folder, name)}' holds no images (read: "
                                 f"{', '.join(s[1:] for s in IMAGE_SUFFIXES)})")
    return listing


def list_remote(root: str) -> folder_index.Listing:
    """`list_images` of a prefix in object storage: one recursive listing (only keys under
    the allowed prefix; a key with an empty, "." or ".." part refused by name), a class per
    first part below `root`, its images the objects directly in it; each object's size and
    version (`remote.stamp`: ETag, modification time) key its cached header."""
    url = remote.normal(root, "image folder")
    found = remote.entries(url, "image folder", recursive=True)
    if not found:
        raise NodegraphError(f"image folder '{url}' holds no objects (or does not exist)")
    rows: dict[str, list[tuple[str, int, int]]] = {}
    for key, entry in found:
        parts = key[len(url) + 1:].split("/")
        if len(parts) < 2:
            continue  # an object beside the class folders, as a file beside them on disk
        files = rows.setdefault(parts[0], [])
        if len(parts) == 2 and PurePosixPath(parts[1]).suffix.lower() in IMAGE_SUFFIXES:
            files.append((parts[1], int(entry.get("size") or 0), remote.stamp(entry)))
    classes = sorted(rows)
    names, labels, sizes, stamps = [], [], [], []
    for k, cls in enumerate(classes):
        for name, size, version in sorted(rows[cls]):
            names.append(f"{cls}/{name}")
            labels.append(k)
            sizes.append(size)
            stamps.append(version)
    return folder_index.Listing(url, classes, folder_index.Names.of(names),
                                np.asarray(labels, np.int64), np.asarray(sizes, np.int64),
                                np.asarray(stamps, np.int64))


def refused_unread(listing: folder_index.Listing) -> dict[str, str]:
    """The objects of a remote listing refused from their listed size alone (empty, or
    larger than MAX_FILE), by URL, with why: `RemoteHeaders` reads none of them."""
    out = {}
    for i in np.flatnonzero((listing.sizes == 0) | (listing.sizes > MAX_FILE)):
        url = str(listing.path(int(i)))
        out[url] = (f"image '{url}' is empty" if listing.sizes[i] == 0 else
                    f"image '{url}' is larger than {MAX_FILE:,} bytes, the most nodegraph "
                    "reads for one")
    return out


def need_memory(count: int, sample_bytes: int) -> None:
    """Refuse, before decoding, images that cannot be held in memory (decoded, stacked,
    then split: three copies at the peak)."""
    footprint.need(count * sample_bytes * 3, "storage", "memory",
                   f"{count:,} decoded images")


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



# -- the Python export's reader (`nodegraph.interop.export.stream`) ------------------------

# `ImageFiles` as a script writes it: the same decoding, fitting and scaling without
# nodegraph (a damaged file stops the script with Pillow's own error)
SCRIPT_READER = '''\
class ImageFiles(torch.utils.data.Dataset):
    """Image files under `root` decoded by Pillow as nodegraph's image blocks read them: grey
    or RGB, turned upright by EXIF orientation (exif "apply"), brought to size x size by
    `policy`, float32 (channels, height, width) in [0, 1]; with `raw`, the decoded photo at
    its own size as uint8 (a JPEG decoded smaller down to a shorter side of `side`), for
    transforms that fix the size."""

    GREY = ("1", "L", "LA", "I", "I;16", "I;16B", "I;16L", "I;16N", "F", "La")

    def __init__(self, root, files, labels, channels, size, policy, exif="apply", raw=False,
                 side=None):
        self.root, self.files, self.labels = Path(root), [str(f) for f in files], labels
        self.channels, self.size, self.policy = channels, size, policy
        self.exif, self.raw, self.side = exif, raw, side

    def __len__(self):
        return len(self.files)

    def decode(self, path):
        with Image.open(path) as img:
            turn = img.getexif().get(0x0112, 1) if self.exif == "apply" else 1
            short = min(img.size)
            if self.side is not None and img.format == "JPEG" and short > 2 * self.side:
                scale = short / self.side
                img.draft(img.mode, (int(img.width / scale), int(img.height / scale)))
            img.load()
            if img.mode.startswith("I;16"):
                img = img.convert("I")
            elif img.mode not in ("I", "F", "RGB", "L"):
                img = (img.convert("L") if img.mode in self.GREY else
                       (img.convert("RGBA") if img.mode == "P" else img).convert("RGB"))
            else:
                img = img.copy()
            if turn in (2, 3, 4, 5, 6, 7, 8):
                img = img.transpose([Image.Transpose.FLIP_LEFT_RIGHT, Image.Transpose.ROTATE_180,
                                     Image.Transpose.FLIP_TOP_BOTTOM, Image.Transpose.TRANSPOSE,
                                     Image.Transpose.ROTATE_270, Image.Transpose.TRANSVERSE,
                                     Image.Transpose.ROTATE_90][turn - 2])
            return img

    def fit(self, img):
        size = self.size
        if size is None or img.size == (size, size):
            return img
        w, h = img.size
        if self.policy == "stretch":
            return img.resize((size, size), Image.BILINEAR)
        scale = size / (min(w, h) if self.policy == "crop" else max(w, h))
        nw, nh = max(1, round(w * scale)), max(1, round(h * scale))
        img = img.resize((nw, nh), Image.BILINEAR)
        if self.policy == "crop":
            left, top = (nw - size) // 2, (nh - size) // 2
            return img.crop((left, top, left + size, top + size))
        canvas = Image.new(img.mode, (size, size))  # pad: letter-boxed in black
        canvas.paste(img, ((size - nw) // 2, (size - nh) // 2))
        return canvas

    def __getitem__(self, i):
        img = self.decode(self.root / self.files[i])
        y = torch.tensor(int(self.labels[i]))
        if self.raw and img.mode in ("L", "RGB"):
            if self.channels == 1 and img.mode == "RGB":
                a = np.asarray(img, dtype=np.float32).transpose(2, 0, 1)
                weights = np.array([0.299, 0.587, 0.114], np.float32)[:, None, None]
                a = np.round((a * weights).sum(axis=0, keepdims=True)).astype(np.uint8)
            else:
                a = np.asarray(img)
                a = a[None] if a.ndim == 2 else a.transpose(2, 0, 1)
            x = torch.from_numpy(np.ascontiguousarray(a))
            return {"x": x.repeat(3, 1, 1) if self.channels == 3 and len(x) == 1 else x, "y": y}
        img = self.fit(img)
        if img.mode in ("I", "F"):
            a = np.asarray(img, dtype=np.float32)
            a = (a / 65535.0 if img.mode == "I" else a)[None]
        else:
            a = np.asarray(img, dtype=np.float32) / 255.0
            a = a[None] if a.ndim == 2 else a.transpose(2, 0, 1)
        if self.channels == 1 and len(a) == 3:  # luminance, ITU-R BT.601
            weights = np.array([0.299, 0.587, 0.114], np.float32)[:, None, None]
            a = (a * weights).sum(axis=0, keepdims=True)
        elif self.channels == 3 and len(a) == 1:
            a = np.repeat(a, 3, axis=0)
        return {"x": torch.from_numpy(np.ascontiguousarray(a)), "y": y}'''
