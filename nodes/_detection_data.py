"""Detection data: coloured shapes drawn in numpy, and boxes read from a COCO-style file.

A detection sample has a variable number of objects; the trainer's datasets hold one
fixed-shape tensor per port, so objects are padded to `max_objects` per image: `boxes`
(N, M, 4) in pixels (x0, y0, x1, y1), `labels` (N, M) class indices (−1 on padding) and
`mask` (N, M) 1 for a real object, 0 for padding. Every shape stays static, so shape
inference and the editor's wire labels work as for any tensor.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np

from nodegraph.kinds import gate
from nodegraph.kinds.dataset import data_path
from nodegraph.model.errors import NodegraphError
from nodes.data._images import grey, image_header, read_image, resize

CLASSES = ("square", "disc", "triangle")
MAX_ANNOTATIONS = 1 << 30  # bytes of a COCO annotation file (COCO 2017's largest: 450 MB)


def _inside(kind: int, box: np.ndarray, xs: np.ndarray, ys: np.ndarray) -> np.ndarray:
    """Which pixel centres (xs, ys) fall inside a shape filling `box` exactly."""
    x0, y0, x1, y1 = box
    if kind == 0:
        return (xs >= x0) & (xs <= x1) & (ys >= y0) & (ys <= y1)
    cx, cy, w, h = (x0 + x1) / 2, (y0 + y1) / 2, x1 - x0, y1 - y0
    if kind == 1:
        return ((xs - cx) / (w / 2)) ** 2 + ((ys - cy) / (h / 2)) ** 2 <= 1
    # an upright triangle: apex at the top centre, base along the bottom edge
    t = (ys - y0) / h
    return (t >= 0) & (t <= 1) & (np.abs(xs - cx) <= t * w / 2)


def _iou(a: np.ndarray, b: np.ndarray) -> float:
    w = min(a[2], b[2]) - max(a[0], b[0])
    h = min(a[3], b[3]) - max(a[1], b[1])
    inter = max(w, 0) * max(h, 0)
    area = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1])
    return inter / (area - inter)


def check_shapes(image_size: int, min_objects: int, max_objects: int, min_size: int,
                 max_size: int) -> None:
    """Refuse object counts and sizes `shapes` cannot draw."""
    if not 1 <= min_objects <= max_objects:
        raise NodegraphError(f"min_objects ({min_objects}) must be between 1 and max_objects "
                             f"({max_objects})")
    if not 2 <= min_size <= max_size <= image_size:
        raise NodegraphError(f"need 2 <= min_size ({min_size}) <= max_size ({max_size}) <= "
                             f"image_size ({image_size})")


def shapes(n: int, image_size: int, min_objects: int, max_objects: int, min_size: int,
           max_size: int, max_overlap: float, noise: float, seed: int) -> dict[str, np.ndarray]:
    """`n` images (N, 3, S, S) in [0, 1] of squares, discs and triangles in random colours
    on a dark noisy background; sides uniform in [min_size, max_size] pixels (whole
    pixels, so a box's edges lie on pixel edges), positions uniform inside the image, and a
    new shape is redrawn (up to 50 times) while it overlaps an earlier one with IoU above
    `max_overlap`. Later shapes are painted over earlier ones."""
    check_shapes(image_size, min_objects, max_objects, min_size, max_size)
    rng = np.random.default_rng(seed)
    images = np.empty((n, 3, image_size, image_size), np.float32)
    boxes = np.zeros((n, max_objects, 4), np.float32)
    labels = np.full((n, max_objects), -1, np.int64)
    mask = np.zeros((n, max_objects), np.float32)
    centres = np.arange(image_size) + 0.5
    xs, ys = np.meshgrid(centres, centres)
    for i in range(n):
        img = rng.uniform(0.0, 0.15, (3, 1, 1)) + rng.normal(0, noise, (3, image_size,
                                                                        image_size))
        placed: list[np.ndarray] = []
        for _ in range(rng.integers(min_objects, max_objects + 1)):
            for _try in range(50):
                w, h = rng.integers(min_size, max_size + 1, size=2)
                if rng.random() < 0.5:
                    h = w  # half the shapes are regular (square, circle, equal sides)
                x0 = rng.integers(0, image_size - w + 1)
                y0 = rng.integers(0, image_size - h + 1)
                box = np.array([x0, y0, x0 + w, y0 + h], np.float32)
                if all(_iou(box, b) <= max_overlap for b in placed):
                    break
            else:
                continue
            kind = int(rng.integers(len(CLASSES)))
            colour = rng.uniform(0.35, 1.0, 3)
            img = np.where(_inside(kind, box, xs, ys)[None], colour[:, None, None], img)
            j = len(placed)
            placed.append(box)
            boxes[i, j], labels[i, j], mask[i, j] = box, kind, 1.0
        images[i] = np.clip(img, 0.0, 1.0)
    return {"x": images, "boxes": boxes, "labels": labels, "mask": mask}


# -- a COCO-style file ----------------------------------------------------------------------

def _need(cond: bool, where: str, what: str) -> None:
    if not cond:
        raise NodegraphError(f"{where}: {what}")


def read_coco(path: str, images: str, size: int | None, max_objects: int | None,
              grayscale: bool) -> tuple[dict[str, np.ndarray], list[str]]:
    """Images and padded boxes from a COCO-style JSON (`images` with id, file_name;
    `annotations` with image_id, category_id, bbox [x, y, w, h] in pixels; `categories`
    with id, name) and the folder holding the image files. Classes are numbered 0.. in the
    order of their category ids; images without annotations are kept (no objects)."""
    def look(file: Path) -> tuple[np.ndarray, tuple[int, ...], tuple[int, int]]:
        pixels = read_image(file)
        if grayscale and pixels.shape[0] == 3:
            pixels = grey(pixels)
        h, w = pixels.shape[1:]
        if size is not None:
            pixels = resize(pixels[None], size)[0]
        return pixels, pixels.shape, (h, w)

    pictures, _, objects, m, names = _coco(path, images, max_objects, look)
    n = len(pictures)
    out: dict[str, np.ndarray] = {"x": np.stack(pictures).astype(np.float32),
           "boxes": np.zeros((n, m, 4), np.float32),
           "labels": np.full((n, m), -1, np.int64),
           "mask": np.zeros((n, m), np.float32)}
    for r, objs in enumerate(objects):
        for j, (box, cls) in enumerate(objs):
            out["boxes"][r, j], out["labels"][r, j], out["mask"][r, j] = box, cls, 1.0
    return out, names


def coco_shape(path: str, images: str, size: int | None, max_objects: int | None,
               grayscale: bool) -> tuple[int, tuple[int, int, int], int]:
    """What `read_coco` gives, from the JSON and the images' headers: the number of images,
    one image's (C, H, W) and the padded box count M; refused as it refuses (damage in the
    pixels is found when the data is built)."""
    def look(file: Path) -> tuple[None, tuple[int, ...], tuple[int, int]]:
        c, h, w = image_header(file)
        c = 1 if grayscale else c
        return None, ((c, h, w) if size is None else (c, size, size)), (h, w)

    _, shapes, _, m, _ = _coco(path, images, max_objects, look)
    c, h, w = shapes[0]
    return len(shapes), (c, h, w), m


def _coco(path: str, images: str, max_objects: int | None, look: Callable
          ) -> tuple[list, list[tuple[int, ...]], list[list[tuple]], int, list[str]]:
    """The images as `look(file)` gives them with their (C, H, W) (and their height and
    width before resizing, for the boxes), each image's objects (box in those pixels,
    class), the padded box count and the class names, after every check of the file."""
    file = data_path(path)
    try:
        doc = json.loads(gate.read_bytes(file, "annotation file", MAX_ANNOTATIONS, shown=path))
    except OSError as e:
        raise NodegraphError(f"cannot read the annotation file '{file}': {e.strerror}") from e
    except (ValueError, UnicodeDecodeError) as e:
        raise NodegraphError(f"'{file}' is not JSON: {e}") from e
    except RecursionError:
        raise NodegraphError(f"'{file}' is not JSON this reader takes: it nests too "
                             "deep") from None
    _need(isinstance(doc, dict), str(file), "the top level must be an object with 'images', "
          "'annotations' and 'categories'")
    for key in ("images", "annotations", "categories"):
        _need(isinstance(doc.get(key), list), str(file), f"'{key}' must be a list")
    cats = {}
    for k, c in enumerate(doc["categories"]):
        _need(isinstance(c, dict) and isinstance(c.get("id"), int), str(file),
              f"categories[{k}] needs an integer 'id'")
        cats[c["id"]] = str(c.get("name", c["id"]))
    class_of = {cid: i for i, cid in enumerate(sorted(cats))}
    folder = data_path(images) if images else file.parent
    rows: dict = {}
    pictures: list = []
    shapes: list = []
    scale: list = []
    for k, im in enumerate(doc["images"]):
        where = f"{file.name}: images[{k}]"
        _need(isinstance(im, dict) and isinstance(im.get("id"), int)
              and isinstance(im.get("file_name"), str), where,
              "needs an integer 'id' and a 'file_name'")
        _need(im["id"] not in rows, where, f"image id {im['id']} appears twice")
        picture, shape, (h, w) = look(folder / im["file_name"])
        rows[im["id"]] = len(pictures)
        pictures.append(picture)
        shapes.append(tuple(shape))
        scale.append((shape[2] / w, shape[1] / h))
    shapes_seen = set(shapes)
    _need(len(shapes_seen) <= 1, str(file), f"images differ in size {sorted(shapes_seen)}; "
          "set `size` to resize them all")
    objects: list[list[tuple]] = [[] for _ in pictures]
    for k, a in enumerate(doc["annotations"]):
        where = f"{file.name}: annotations[{k}]"
        _need(isinstance(a, dict) and a.get("image_id") in rows, where,
              f"'image_id' {a.get('image_id') if isinstance(a, dict) else None!r} names no "
              "image of 'images'")
        _need(a.get("category_id") in class_of, where,
              f"'category_id' {a.get('category_id')!r} names no category of 'categories'")
        bbox = a.get("bbox")
        _need(isinstance(bbox, list) and len(bbox) == 4
              and all(isinstance(v, int | float) for v in bbox) and bbox[2] > 0
              and bbox[3] > 0, where, "'bbox' must be [x, y, width, height] with positive "
              "width and height")
        r = rows[a["image_id"]]
        sx, sy = scale[r]
        x, y, w, h = bbox
        objects[r].append(([x * sx, y * sy, (x + w) * sx, (y + h) * sy],
                           class_of[a["category_id"]]))
    most = max((len(o) for o in objects), default=0)
    m = most if max_objects is None else max_objects
    _need(most <= m, str(file), f"an image has {most} boxes but max_objects is {m}; raise "
          "max_objects or leave it empty")
    _need(len(pictures) > 0, str(file), "'images' is empty")
    return pictures, shapes, objects, max(m, 1), [cats[c] for c in sorted(cats)]
