"""`data.ImageFolder`: a folder of photos, one subfolder per class, read lazily.

Validation lists the folder and reads each image's header (Pillow opens lazily: no pixels
are decoded) to learn the classes, the sample count and the image shape. Training decodes
the pixels in DataLoader workers, one image at a time, brought to one size by the `resize`
policy and then through the transforms wired into ``augment`` (`nodes/augment.py`): the
random ones on the training split only. Small folders without random augmentation are
decoded once and held in memory (``storage = auto``), the fastest path; large ones, or
augmented ones, stream. An unreadable image stops the run naming the file, or with
``on_error = skip`` is left out and counted.
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path

import numpy as np
import torch

from nodegraph.kinds import augment, declare
from nodegraph.kinds.datameta import DataMeta
from nodegraph.kinds.dataset import DataParams, data_params, split_indices
from nodegraph.kinds.rawinput import ImageInput
from nodegraph.kinds.streamed import (
    STORAGE_PARAM,
    SampleError,
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
    RESIZE,
    SCRIPT_READER,
    ImageFiles,
    PhotoReader,
    channels_of,
    list_folder,
    need_memory,
    open_image,
)


def _scan(root: str, grayscale: bool, size: int | None, skip: bool
          ) -> tuple[list[Path], np.ndarray, tuple[int, int, int], list[str]]:
    """The folder's image files, their class indices, the (C, H, W) every image becomes
    and the class names, from the listing and the images' headers (cached while the
    folders are unchanged, so validation and the build read the headers once)."""
    classes, listed = list_folder(root)
    folder = listed[0][0].parent.parent
    stamp = tuple(os.stat(d).st_mtime_ns for d in [folder, *(f[0].parent for f in listed)])
    files, labels, shape = _headers(str(folder), stamp, grayscale, size, skip)
    return list(files), np.asarray(labels, dtype=np.int64), shape, classes


@lru_cache(maxsize=8)
def _headers(folder: str, stamp: tuple, grayscale: bool, size: int | None, skip: bool
             ) -> tuple[tuple[Path, ...], tuple[int, ...], tuple[int, int, int]]:
    del stamp  # part of the cache key only: a folder changed since is scanned again
    _, listed = list_folder(folder)
    files, labels, channels = [], [], 1
    sizes: dict[tuple[int, int], Path] = {}
    for k, names in enumerate(listed):
        for f in names:
            try:
                with open_image(f) as img:
                    c, hw = channels_of(img.mode), (img.height, img.width)
            except SampleError as e:
                if skip:
                    continue  # the workers skip it too: it is never listed
                raise NodegraphError(f"{e} (set on_error = skip to leave it out)") from e
            files.append(f)
            labels.append(k)
            channels = max(channels, c)
            sizes.setdefault(hw, f)
    if not files:
        raise NodegraphError(f"image folder '{folder}' holds no readable images")
    channels = 1 if grayscale else channels
    if size is not None:
        return tuple(files), tuple(labels), (channels, size, size)
    if len(sizes) > 1:
        (a, fa), (b, fb) = sorted(sizes.items())[0], sorted(sizes.items())[-1]
        raise NodegraphError(f"images differ in size: '{fa}' is {a[0]} x {a[1]} and '{fb}' "
                             f"{b[0]} x {b[1]} (height x width); set size to resize them all")
    (h, w), = sizes
    return tuple(files), tuple(labels), (channels, h, w)


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


def _ports(shape: tuple[int, int, int], p: ImageFolderParams, chain: augment.Chain) -> dict:
    x = chain.shape(shape)
    x = (int(np.prod(x)),) if p.layout == "flat" else x
    return {"x": (x, torch.float32), "y": chain.label_port((), torch.int64)}


class _Script:
    """The folder as code for the Python export (`nodegraph.kinds.streamed.StreamScript`):
    each split's files (relative to the folder) and labels go to the .npz beside the script,
    which reads them with `SCRIPT_READER` and the same v2 transforms."""

    def __init__(self, sources: dict, chain: augment.Chain, shape: tuple[int, int, int],
                 p: ImageFolderParams):
        self.sources, self.chain, self.shape, self.p = sources, chain, shape, p

    def __call__(self, node: str) -> StreamScript:
        p, arrays, readers, transforms = self.p, {}, {}, {}
        root = next(iter(self.sources.values())).files[0].parent.parent
        for split, src in self.sources.items():
            files, labels = f"{node}/{split}/files", f"{node}/{split}/labels"
            arrays[files] = np.array([f.relative_to(root).as_posix() for f in src.files],
                                     dtype=str)
            arrays[labels] = np.asarray(src.labels, dtype=np.int64)
            readers[split] = ("ImageFiles", [repr(str(root)), f'arrays["{files}"]',
                                             f'arrays["{labels}"]', str(self.shape[0]),
                                             repr(p.size), repr(p.resize)])
            steps, onehot = self.chain.script(split, self.shape)
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
    layout: str
    on_error: str
    storage: str


def _image_folder(p: ImageFolderParams):
    chain = augment.given()
    files, labels, shape, classes = _scan(p.path, p.grayscale, p.size, p.on_error == "skip")
    ports = _ports(shape, p, chain)
    idx = _splits(labels, p)
    sources = {s: ImageFiles([files[i] for i in rows], labels[rows], shape[0], p.size,
                             p.resize, None if p.size else shape[1:])
               for s, rows in idx.items() if len(rows)}
    flat = p.layout == "flat"
    transforms = {s: _Finish(chain.sample(s), flat) for s in ("train", "val", "test")}
    batch = chain.batch()
    ds = StreamedDataset(sources, ports, p.batch_size, p.shuffle, transforms=transforms,
                         batch_transforms={"train": batch} if batch else None,
                         augmented=chain.random, on_error=p.on_error)
    ds.script = _Script(sources, chain, shape, p)  # type: ignore[attr-defined]
    if not streams(p.storage, chain.random, ds.estimated_bytes()):
        need_memory(len(files), ds.estimated_bytes() // max(1, len(files)))
    data = choose_storage(ds, p.storage)
    data.raw_inputs = {"x": _raw_input(shape, p, chain, classes)}  # type: ignore[union-attr]
    return data


def _raw_input(shape: tuple[int, int, int], p: ImageFolderParams, chain: augment.Chain,
               classes: list[str]) -> ImageInput:
    """How port x is read from one photo, for predicting on raw photos."""
    c, h, w = shape
    return ImageInput(c, h, w, p.size, p.resize,
                      PhotoReader(c, p.size, p.resize, None if p.size else (h, w)),
                      chain.eval_steps(), tuple(chain.script("val", shape)[0]),
                      p.layout == "flat", tuple(classes))


def _image_folder_meta(p: ImageFolderParams):
    """The classes, counts and shapes from the listing and the images' headers; no pixel
    is decoded. The labels come from the listing, so a stratified split is known too, and
    so is the class count (one per subfolder)."""
    chain = augment.given()
    _, labels, shape, names = _scan(p.path, p.grayscale, p.size, p.on_error == "skip")
    ports = _ports(shape, p, chain)
    if chain.classes is not None and chain.classes < len(names):
        raise NodegraphError(f"MixUp/CutMix num_classes is {chain.classes}, but the folder "
                             f"holds {len(names)} classes: set num_classes = {len(names)}")
    sizes = {s: len(i) for s, i in _splits(labels, p).items() if len(i) > 0}
    nbytes = len(labels) * 4 * int(np.prod(ports["x"][0]))
    return DataMeta(ports, sizes, p.batch_size,
                    streamed=streams(p.storage, chain.random, nbytes),
                    classes={"y": len(names)})


BLOCKS = [
    declare.data(
        "data.ImageFolder",
        "Images sorted into one subfolder per class (cats/, dogs/, ...).\n\n"
        "Classes are numbered by sorted folder name. Reads JPEG, PNG, WebP, BMP, TIFF, GIF "
        "and PGM/PPM/PBM through Pillow, grey or colour (alpha dropped); pixels in [0, 1]. "
        "Images of different sizes need `size` (and `resize` says how). Wire augmentation "
        "blocks (augment.*) into `augment`: they run on the training split only. Large or "
        "augmented folders are read in worker processes as training goes (`storage`).",
        _image_folder, meta=_image_folder_meta, inputs=[AUGMENT_IN],
        outputs=[Port("x", doc="images (N, C, H, W), or one row per image with layout flat"),
                 Port("y", doc="class indices (N,); class probabilities (N, classes) when "
                      "MixUp or CutMix is wired in")],
        params=[str_param("path", doc="the folder holding one subfolder per class"),
                bool_param("grayscale", False, "convert colour images to grey (1 channel)"),
                int_param("size", None, "bring every image to size x size (see resize); "
                          "empty keeps the images' own size, which must then agree",
                          min=1, max=8192, nullable=True),
                choice_param("resize", RESIZE, "stretch",
                             "how an image becomes size x size: stretch (ignore the aspect "
                             "ratio), crop (scale the shorter side, cut the centre) or pad "
                             "(scale the longer side, black borders)"),
                choice_param("layout", ("flat", "image"), "image",
                             "image: (N, C, H, W); flat: one row of C*H*W values per image"),
                choice_param("on_error", ("stop", "skip"), "stop",
                             "an unreadable image: stop naming the file, or skip it (the "
                             "count is reported at the end of each epoch)"),
                STORAGE_PARAM,
                *data_params(val_fraction=0.2, split="stratified")],
        keywords=("images", "jpeg", "jpg", "png", "photos", "folder", "file", "pillow")),
]
