"""Write a folder of generated JPEG photos, one subfolder per class, to train on.

Four classes a model must tell apart by shape, not colour: ``circle``, ``square``,
``triangle`` and ``cross``, each drawn bright at a random place, size and colour on a dark
background with noise, saved as JPEGs of mixed sizes (40 to 96 pixels a side, not all
square) — the kind of folder a user brings. Everything comes from `seed`, so the folder
is the same every time. It is the data of `examples/jpeg_folder.json`:

    python examples/make_shapes_jpegs.py examples/data/shapes      # 2,000 images
    python examples/make_shapes_jpegs.py examples/data/shapes --per-class 2500
    nodegraph run examples/jpeg_folder.json
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageFilter

CLASSES = ("circle", "cross", "square", "triangle")


def draw(kind: str, rng: np.random.Generator, size: tuple[int, int] | None = None) -> Image.Image:
    """One picture of a `kind` shape, of `size` (width, height) or a random one."""
    w, h = size or (int(rng.integers(40, 97)), int(rng.integers(40, 97)))
    # a dark background and a bright shape, each of a random colour: the shape stands out
    # whatever the colours, and the colour says nothing about the class
    background = tuple(int(v) for v in rng.integers(0, 90, 3))
    colour = tuple(int(v) for v in rng.integers(150, 256, 3))
    img = Image.new("RGB", (w, h), background)
    pen = ImageDraw.Draw(img)
    r = rng.uniform(0.28, 0.42) * min(w, h)
    cx, cy = rng.uniform(r, w - r), rng.uniform(r, h - r)
    if kind == "circle":
        pen.ellipse((cx - r, cy - r, cx + r, cy + r), fill=colour)
    elif kind == "square":
        pen.rectangle((cx - r, cy - r, cx + r, cy + r), fill=colour)
    elif kind == "triangle":
        turn = rng.uniform(0, 2 * math.pi)
        pen.polygon([(cx + r * math.cos(turn + k * 2 * math.pi / 3),
                      cy + r * math.sin(turn + k * 2 * math.pi / 3)) for k in range(3)],
                    fill=colour)
    else:  # a cross: two bars
        t = r / 3
        pen.rectangle((cx - r, cy - t, cx + r, cy + t), fill=colour)
        pen.rectangle((cx - t, cy - r, cx + t, cy + r), fill=colour)
    noise = rng.normal(0, 12, (h, w, 3))
    pixels = np.clip(np.asarray(img, np.float32) + noise, 0, 255).astype(np.uint8)
    return Image.fromarray(pixels).filter(ImageFilter.GaussianBlur(0.6))


def write_folder(root: str | Path, per_class: int = 500, seed: int = 0,
                 size: tuple[int, int] | None = None, quality: int = 90) -> Path:
    """Write `per_class` JPEGs of every class under `root`/<class>/; returns `root`."""
    root = Path(root)
    rng = np.random.default_rng(seed)
    for kind in CLASSES:
        folder = root / kind
        folder.mkdir(parents=True, exist_ok=True)
        for i in range(per_class):
            draw(kind, rng, size).save(folder / f"{kind}_{i:05d}.jpg", quality=quality)
    return root


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("root", nargs="?", default=str(Path(__file__).parent / "data" / "shapes"))
    parser.add_argument("--per-class", type=int, default=500)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--size", type=int, default=None,
                        help="every image size x size (default: mixed sizes)")
    args = parser.parse_args()
    size = (args.size, args.size) if args.size else None
    root = write_folder(args.root, args.per_class, args.seed, size)
    print(f"wrote {args.per_class * len(CLASSES)} JPEGs to {root}")


if __name__ == "__main__":
    main()
