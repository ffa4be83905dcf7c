"""Detection data sources: images with a variable number of labelled boxes each.

Both blocks output `x` (N, C, H, W) images in [0, 1] and the objects padded to a fixed
count M per image: `boxes` (N, M, 4) as x0, y0, x1, y1 in pixels, `labels` (N, M) class
indices (−1 on padding) and `mask` (N, M), 1 for a real object and 0 for padding. The
detection blocks (`detection.*`) read that triple; the split and batching params are those
of every data block.
"""

from __future__ import annotations

import functools

import torch

from nodegraph.kinds import footprint
from nodegraph.kinds.datameta import DataMeta, Ports, split_sizes
from nodegraph.kinds.dataset import DataParams, data_params, from_arrays
from nodegraph.kinds.declare import data
from nodegraph.model.spec import (
    Port,
    bool_param,
    float_param,
    int_param,
    str_param,
)
from nodegraph.model.types import BOXES
from nodes._detection_data import CLASSES, check_shapes, coco_shape, read_coco, shapes

OUTPUTS = [Port("x", doc="images (N, C, H, W) in [0, 1]"),
           Port("boxes", BOXES, "true boxes (N, M, 4): x0, y0, x1, y1 in pixels, padded"),
           Port("labels", doc="class of each box (N, M), −1 on padding"),
           Port("mask", doc="1 for a real box, 0 for padding (N, M)")]


# the editor validates on every edit, and drawing 1,500 images takes a second or two;
# from_arrays copies what it keeps (a split is an index), so the cached arrays stay as drawn
_drawn = functools.lru_cache(maxsize=4)(shapes)


def _need_images(p: ShapesParams) -> None:
    per_image = (3 * p.image_size ** 2 + 6 * p.max_objects) * 4  # float32 pixels, objects
    # the drawn arrays, the dataset's tensors and its split copies
    footprint.need(3 * p.n * per_image, "n", p.n,
                   f"{p.n:,} images of {p.image_size}x{p.image_size}")


def _ports(image: tuple[int, int, int], m: int) -> Ports:
    """One sample's shapes of the detection ports: images (C, H, W), M objects."""
    return {"x": (image, torch.float32), "boxes": ((m, 4), torch.float32),
            "labels": ((m,), torch.int64), "mask": ((m,), torch.float32)}


class ShapesParams(DataParams):
    n: int
    image_size: int
    min_objects: int
    max_objects: int
    min_size: int
    max_size: int
    max_overlap: float
    noise: float
    seed: int


def _shapes_meta(p: ShapesParams):
    """Shapes from the params; the split has no class labels (no port `y`) to stratify."""
    _need_images(p)
    check_shapes(p.image_size, p.min_objects, p.max_objects, p.min_size, p.max_size)
    return DataMeta(_ports((3, p.image_size, p.image_size), p.max_objects),
                    split_sizes(p.n, p), p.batch_size)


def _shapes(p: ShapesParams):
    _need_images(p)
    arrays = _drawn(p.n, p.image_size, p.min_objects, p.max_objects, p.min_size, p.max_size,
                    p.max_overlap, p.noise, p.seed)
    return from_arrays(arrays, p, normalize_ports=())


class CocoBoxesParams(DataParams):
    path: str
    images: str
    size: int | None
    max_objects: int | None
    grayscale: bool


def _coco_meta(p: CocoBoxesParams):
    """Shapes from the annotation file and the images' headers."""
    n, image, m = coco_shape(p.path, p.images, p.size, p.max_objects, p.grayscale)
    return DataMeta(_ports(image, m), split_sizes(n, p), p.batch_size)


def _coco(p: CocoBoxesParams):
    arrays, _names = read_coco(p.path, p.images, p.size, p.max_objects, p.grayscale)
    return from_arrays(arrays, p, normalize_ports=())


BLOCKS = [
    data("data.Shapes",
         "Synthetic detection images: squares, discs and triangles in random colours.\n\n"
         "Each image holds min_objects to max_objects shapes of random size and place on "
         "a dark noisy background; the class is the shape (0 square, 1 disc, 2 triangle), "
         "never the colour. Generated from `seed`, so runs compare. Boxes are padded to "
         "max_objects per image with a mask.",
         _shapes, meta=_shapes_meta, outputs=OUTPUTS,
         params=[int_param("n", 1500, "number of images", min=1),
                 int_param("image_size", 64, "image side in pixels", min=8),
                 int_param("min_objects", 1, "fewest shapes per image", min=1),
                 int_param("max_objects", 3, "most shapes per image (the padded M)", min=1),
                 int_param("min_size", 10, "smallest box side in pixels", min=2),
                 int_param("max_size", 24, "largest box side in pixels", min=2),
                 float_param("max_overlap", 0.1, "largest IoU between two shapes of an "
                             "image (shapes are redrawn until they overlap less)",
                             min=0, max=1),
                 float_param("noise", 0.03, "std of the background's Gaussian pixel noise",
                             min=0),
                 int_param("seed", 0, "seed of the generator", min=0),
                 *data_params(batch_size=32, val_fraction=0.1, test_fraction=0.2)],
         keywords=("detection", "boxes", "objects", "yolo", "synthetic", *CLASSES)),
    data("data.CocoBoxes",
         "Images and boxes from a COCO-style annotation file and an image folder.\n\n"
         "The JSON holds `images` (id, file_name), `annotations` (image_id, category_id, "
         "bbox [x, y, width, height] in pixels) and `categories` (id, name); classes are "
         "numbered 0, 1, … in the order of their ids. Images are PNG or PGM/PPM; `size` "
         "resizes them (and their boxes) to size x size.",
         _coco, meta=_coco_meta, outputs=OUTPUTS,
         params=[str_param("path", doc="the annotation JSON file"),
                 str_param("images", "", "the folder holding the image files; empty: the "
                           "JSON file's folder"),
                 int_param("size", None, "resize every image to size x size; empty keeps "
                           "their own size (then they must all match)", min=8,
                           nullable=True),
                 int_param("max_objects", None, "boxes per image after padding; empty: the "
                           "most any image has", min=1, nullable=True),
                 bool_param("grayscale", False, "convert colour images to grey"),
                 *data_params(batch_size=16, val_fraction=0.2)],
         keywords=("detection", "coco", "boxes", "annotations", "file")),
]
