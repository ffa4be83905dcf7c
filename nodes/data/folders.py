"""`data.ImageFolder`: a folder of photos, one subfolder per class, read lazily.

Validation lists the folder and reads each image's header (Pillow opens lazily: no pixels
are decoded) to learn the classes, the sample count and the image shape; the headers are
kept in the folder index (`nodegraph.kinds.folder_index`), so a later start reads none.
Training decodes the pixels in DataLoader workers, one image at a time, brought to one
size by the `resize` policy and then through the transforms wired into ``augment``
(`nodes/augment.py`): the random ones on the training split only. Small folders without
random augmentation are decoded once and held in memory (``storage = auto``), the fastest
path; large ones, or augmented ones, stream. An unreadable image stops the run naming the
file, or with ``on_error = skip`` is left out, counted and named (at the header stage and
in the workers).

``path`` may be a prefix in object storage (``s3://bucket/prefix``, allowed with
``--data-root``): listed there, each header read from the object's first bytes and kept in
the same index (keyed on the object's size and ETag), each photo fetched in the workers
(`nodes.data._images`). The Python export reads image folders on disk only.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from nodegraph.kinds import augment, declare, folder_index, remote
from nodegraph.kinds.datameta import DataMeta
from nodegraph.kinds.dataset import DataParams, data_params, split_indices
from nodegraph.kinds.folder_index import Names
from nodegraph.kinds.rawinput import ImageInput
from nodegraph.kinds.streamed import (
    STORAGE_PARAM,
    StreamedDataset,
    StreamScript,
    choose_storage,
    streams,
)
from nodegraph.model.errors import NodegraphError
from nodegraph.model.spec import (
    AUGMENT_IN,
    Port,
    bool_param,
    choice_param,
    int_param,
    str_param,
)
from nodes.data._images import (
    EXIF,
    RESIZE,
    SCRIPT_READER,
    ImageFiles,
    LocalHeaders,
    PhotoReader,
    RemoteHeaders,
    join,
    list_images,
    need_memory,
    refused_unread,
)


@dataclass
class _Found:
    """A folder's readable images (names relative to `root`, class indices), the class
    names, the files refused at the header stage (file, reason), and the (C, H, W) an
    image reaches the augment chain as; `raw`: photos go to the chain as decoded, uint8,
    at their own size (no `size`, a chain that fixes the output size), `shape` then being
    the first photo's."""

    root: Path | str
    names: Names
    labels: np.ndarray
    classes: list[str]
    refused: list[dict[str, str]]
    shape: tuple[int, int, int]
    raw: bool


def _scan(p: ImageFolderParams, chain: augment.Chain) -> _Found:
    """The folder listed and every image's header read, from the folder index
    (`nodegraph.kinds.folder_index`: cached across starts, read again for a changed
    file); with on_error = skip the refused files are left out and named, not dropped."""
    listing = list_images(p.path)
    read = (RemoteHeaders(p.exif, refused_unread(listing)) if isinstance(listing.root, str)
            else LocalHeaders(p.exif))
    headers, bad = folder_index.index(listing, f"image-header exif={p.exif}", read)
    names, labels = listing.names, listing.labels
    refused = [{"file": str(listing.path(r)), "reason": bad[r]} for r in sorted(bad)]
    if bad:
        if p.on_error != "skip":
            raise NodegraphError(f"{refused[0]['reason']} (set on_error = skip to leave it "
                                 "out)")
        keep = np.setdiff1d(np.arange(len(names)), np.fromiter(bad, np.int64))
        names, labels, headers = names.take(keep), labels[keep], headers[keep]
    if len(names) == 0:
        raise NodegraphError(f"image folder '{p.path}' holds no readable images")
    channels = 1 if p.grayscale else int(headers[:, 0].max())
    first = (channels, int(headers[0, 1]), int(headers[0, 2]))
    if p.size is not None:
        return _Found(listing.root, names, labels, listing.classes, refused,
                      (channels, p.size, p.size), False)
    if chain.fixed_shape(channels) is not None:
        return _Found(listing.root, names, labels, listing.classes, refused, first, True)
    other = np.flatnonzero(np.any(headers[:, 1:] != headers[0, 1:], axis=1))
    if len(other):
        k = int(other[0])
        raise NodegraphError(
            f"images differ in size: '{join(listing.root, names[0])}' is {first[1]} x "
            f"{first[2]} and '{join(listing.root, names[k])}' {headers[k, 1]} x "
            f"{headers[k, 2]} (height x "
            "width); set size to resize them all, or end the augment chain in a crop that "
            "fixes the size (augment.RandomResizedCrop, augment.CenterCrop)")
    return _Found(listing.root, names, labels, listing.classes, refused, first, False)


class _Finish:
    """A split's transform chain, then the layout (flat: one row per sample)."""

    def __init__(self, chain, flat: bool):
        self.chain, self.flat = chain, flat

    def __call__(self, sample: dict) -> dict:
        if self.chain is not None:
            sample = self.chain(sample)
        if self.flat:
            sample = {**sample, "x": sample["x"].reshape(-1)}
        return sample


def _splits(labels: np.ndarray, p: ImageFolderParams) -> dict[str, np.ndarray]:
    return split_indices(len(labels), p.val_fraction, p.test_fraction, p.split, p.split_seed,
                         labels, p.folds, p.fold)


def _ports(found: _Found, p: ImageFolderParams, chain: augment.Chain) -> dict:
    x = chain.shape(found.shape, torch.uint8, raw=True) if found.raw else chain.shape(found.shape)
    x = (int(np.prod(x)),) if p.layout == "flat" else x
    return {"x": (x, torch.float32), "y": chain.label_port((), torch.int64)}


class _Script:
    """The folder as code for the Python export (`nodegraph.kinds.streamed.StreamScript`):
    each split's files (relative to the folder) and labels go to the .npz beside the script,
    which reads them with `SCRIPT_READER` and the same v2 transforms."""

    def __init__(self, sources: dict, chain: augment.Chain, found: _Found,
                 p: ImageFolderParams):
        self.sources, self.chain, self.found, self.p = sources, chain, found, p

    def __call__(self, node: str) -> StreamScript:
        p, found, arrays, readers, transforms = self.p, self.found, {}, {}, {}
        if remote.is_url(found.root):
            raise NodegraphError(f"the image folder '{found.root}' is in object storage; the "
                                 "Python export reads image folders on disk: copy it to a "
                                 "folder (aws s3 sync) and set path to that folder")
        for split, src in self.sources.items():
            files, labels = f"{node}/{split}/files", f"{node}/{split}/labels"
            arrays[files] = np.array(list(src.names), dtype=str)
            arrays[labels] = np.asarray(src.labels, dtype=np.int64)
            readers[split] = ("ImageFiles", [repr(str(found.root)), f'arrays["{files}"]',
                                             f'arrays["{labels}"]', str(found.shape[0]),
                                             repr(p.size), repr(p.resize), repr(p.exif),
                                             repr(found.raw),
                                             repr(self.chain.side(split) if found.raw
                                                  else None)])
            steps, onehot = self.chain.script(split, found.shape, found.raw)
            flat = p.layout == "flat"
            transforms[split] = (None if not steps and onehot is None and not flat else
                                 (steps, onehot, flat))
        return StreamScript(readers, arrays, [SCRIPT_READER], [("PIL", "Image", "")],
                            transforms, self.chain.batch_script())


class ImageFolderParams(DataParams):
    path: str
    grayscale: bool
    size: int | None
    resize: str
    exif: str
    layout: str
    on_error: str
    storage: str


def _image_folder(p: ImageFolderParams):
    chain = augment.given()
    found = _scan(p, chain)
    ports = _ports(found, p, chain)
    idx = _splits(found.labels, p)
    own = None if p.size or found.raw else found.shape[1:]
    sources = {s: ImageFiles(found.root, found.names.take(rows), found.labels[rows],
                             found.shape[0], p.size, p.resize, own, exif=p.exif,
                             raw=found.raw, side=chain.side(s) if found.raw else None)
               for s, rows in idx.items() if len(rows)}
    flat = p.layout == "flat"
    transforms = {s: _Finish(chain.sample(s, raw=found.raw), flat)
                  for s in ("train", "val", "test")}
    batch = chain.batch()
    ds = StreamedDataset(sources, ports, p.batch_size, p.shuffle, transforms=transforms,
                         batch_transforms={"train": batch} if batch else None,
                         augmented=chain.random, on_error=p.on_error)
    ds.refused = found.refused
    ds.script = _Script(sources, chain, found, p)  # type: ignore[attr-defined]
    n = len(found.names)
    if not streams(p.storage, chain.random, ds.estimated_bytes()):
        need_memory(n, ds.estimated_bytes() // max(1, n))
    data = choose_storage(ds, p.storage)
    data.raw_inputs = {"x": _raw_input(found, p, chain, ports)}  # type: ignore[union-attr]
    return data


def _raw_input(found: _Found, p: ImageFolderParams, chain: augment.Chain,
               ports: dict) -> ImageInput:
    """How port x is read from one photo, for predicting on raw photos. For photos going
    to the chain raw, the reader runs the eval chain up to where the size is fixed (a
    centre crop), and the rest (Normalize) is what the model's preprocessing applies."""
    c, h, w = found.shape
    flat = p.layout == "flat"
    if found.raw:
        pre, post, script = chain.eval_parts(c)
        c, h, w = (chain.shape(found.shape, torch.uint8, raw=True))
        return ImageInput(c, h, w, None, p.resize,
                          PhotoReader(c, None, p.resize, (h, w), exif=p.exif, pre=pre,
                                      side=chain.side("val")),
                          post, script, flat, tuple(found.classes))
    return ImageInput(c, h, w, p.size, p.resize,
                      PhotoReader(c, p.size, p.resize, None if p.size else (h, w),
                                  exif=p.exif),
                      chain.eval_steps(), tuple(chain.script("val", found.shape)[0]),
                      flat, tuple(found.classes))


def _image_folder_meta(p: ImageFolderParams):
    """The classes, counts and shapes from the listing and the images' headers (the folder
    index); no pixel is decoded. The labels come from the listing, so a stratified split
    is known too, and so is the class count (one per subfolder)."""
    chain = augment.given()
    found = _scan(p, chain)
    ports = _ports(found, p, chain)
    k = len(found.classes)
    if chain.classes is not None and chain.classes < k:
        raise NodegraphError(f"MixUp/CutMix num_classes is {chain.classes}, but the folder "
                             f"holds {k} classes: set num_classes = {k}")
    sizes = {s: len(i) for s, i in _splits(found.labels, p).items() if len(i) > 0}
    nbytes = len(found.labels) * 4 * int(np.prod(ports["x"][0]))
    return DataMeta(ports, sizes, p.batch_size,
                    streamed=streams(p.storage, chain.random, nbytes),
                    classes={"y": k})


BLOCKS = [
    declare.data(
        "data.ImageFolder",
        "Images sorted into one subfolder per class (cats/, dogs/, ...).\n\n"
        "Classes are numbered by sorted folder name. Reads JPEG, PNG, WebP, BMP, TIFF, GIF "
        "and PGM/PPM/PBM through Pillow, grey or colour (alpha dropped); pixels in [0, 1]. "
        "Images of different sizes need `size` (and `resize` says how), or an augment chain "
        "that fixes the size (RandomResizedCrop, CenterCrop): the photos then reach it as "
        "decoded, uint8, as torchvision's tutorials feed them. EXIF orientation is applied "
        "(`exif`). Wire augmentation "
        "blocks (augment.*) into `augment`: they run on the training split only. Large or "
        "augmented folders are read in worker processes as training goes (`storage`).",
        _image_folder, meta=_image_folder_meta, inputs=[AUGMENT_IN],
        outputs=[Port("x", doc="images (N, C, H, W), or one row per image with layout flat"),
                 Port("y", doc="class indices (N,); class probabilities (N, classes) when "
                      "MixUp or CutMix is wired in")],
        params=[str_param("path", doc="the folder holding one subfolder per class, or a "
                          "prefix in object storage (s3://bucket/prefix)"),
                bool_param("grayscale", False, "convert colour images to grey (1 channel)"),
                int_param("size", None, "bring every image to size x size (see resize); "
                          "empty keeps the images' own size, which must then agree unless "
                          "the augment chain fixes it (a crop: photos then reach the chain "
                          "as decoded, uint8)",
                          min=1, max=8192, nullable=True),
                choice_param("resize", RESIZE, "stretch",
                             "how an image becomes size x size: stretch (ignore the aspect "
                             "ratio), crop (scale the shorter side, cut the centre) or pad "
                             "(scale the longer side, black borders)"),
                choice_param("exif", EXIF, "apply",
                             "apply: turn each photo upright as its EXIF orientation says "
                             "(as phones store them); ignore: use the pixels as stored"),
                choice_param("layout", ("flat", "image"), "image",
                             "image: (N, C, H, W); flat: one row of C*H*W values per image"),
                choice_param("on_error", ("stop", "skip"), "stop",
                             "an unreadable image: stop naming the file, or skip it (counted "
                             "and named each epoch, all of them in the run's history)"),
                STORAGE_PARAM,
                *data_params(val_fraction=0.2, split="stratified")],
        keywords=("images", "jpeg", "jpg", "png", "photos", "folder", "file", "pillow")),
]
