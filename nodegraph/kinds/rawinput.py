"""How an image data port is read from a photo: the part of a model's preprocessing a data
block knows.

A network trained on a data block sees the block's values, not the user's photos: each
file decoded, brought to one size, passed through the deterministic part of the augment
chain (Normalize, a centre crop) and perhaps flattened. A data block that reads images
describes this with an `ImageInput` on its dataset (``dataset.raw_inputs = {"x":
ImageInput(...)}``), so `Model.predict`, `nodegraph.forward`, the Python export and the ONNX
export can start from a photo (`nodegraph.runtime.preprocess`). Two stages:

- `read` (outside any graph): a file path, or a decoded photo as a uint8 array (H, W) or
  (H, W, C) of any size, to float32 (C, H, W) in [0, 1] at the block's size, as the block
  reads its own files (decoding, resize policy, grey or RGB);
- `forward` (torch only, so ONNX can hold it): a batch of such images — or of decoded
  photos already at that size as uint8 (N, H, W, C) — through `steps` and the layout.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

# channel order per channel count, as the image blocks decode (Pillow's L and RGB)
CHANNEL_ORDER = {1: "grey", 3: "RGB"}


@dataclass(frozen=True)
class ImageInput:
    """One image port's raw form and how it becomes the port's value (see the module doc).
    `steps` are the augment chain's deterministic transforms (`augment.Chain.eval_steps`),
    `script` the same as ``v2.`` expressions for the Python export; `classes` the class
    names of the block's labels, when it knows them."""

    channels: int
    height: int
    width: int
    size: int | None  # the block's size param (None: images are used at their own size)
    policy: str  # the resize policy: stretch, crop or pad
    read: Callable[[Any], Any]  # path or uint8 photo -> float32 (C, H, W) numpy array
    steps: tuple[Callable, ...] = ()
    script: tuple[str, ...] = ()
    flat: bool = False
    classes: tuple[str, ...] = ()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """A batch of raw images as the port holds them: uint8 (N, H, W, C) photos are
        scaled to [0, 1] and put channels first; float (N, C, H, W) in [0, 1] pass; then
        the steps, then the layout (one row per sample when flat)."""
        if x.dtype == torch.uint8:
            x = x.permute(0, 3, 1, 2).to(torch.float32) / 255.0
        elif self.flat and x.ndim == 2:  # given as the port holds it, one row per sample
            x = x.reshape(x.shape[0], self.channels, self.height, self.width)
        for step in self.steps:
            x = step(x)
        return x.reshape(x.shape[0], -1) if self.flat else x

    def resize_text(self) -> str:
        """How a photo is brought to the block's size, in words."""
        if self.size is None:
            return f"none: every photo is {self.height} x {self.width} already"
        return {"stretch": f"stretch to {self.size} x {self.size} (bilinear)",
                "crop": f"scale the shorter side to {self.size} (bilinear), centre-crop "
                        f"{self.size} x {self.size}",
                "pad": f"scale the longer side to {self.size} (bilinear), centre on black "
                       f"{self.size} x {self.size}"}.get(self.policy, self.policy)


def image_inputs(dataset: Any) -> dict[str, ImageInput]:
    """The image ports of a dataset and their raw form (none for a table or arrays)."""
    found = getattr(dataset, "raw_inputs", None)
    return dict(found) if isinstance(found, dict) else {}
