"""`augment.*`: per-sample augmentation for image data blocks, on torchvision.transforms.v2.

Each block is one transform; chain them (``transform`` into the next one's ``input``) and
wire the last into a data block's ``augment`` input (`data.ImageFolder`). The random steps
run on the training split only, in the DataLoader workers, seeded per sample so a run
reproduces; val and test get each step's deterministic part (a centre crop for a random
crop, nothing for a flip; Normalize on every split). MixUp and CutMix act on whole
training batches and make the labels class probabilities (one-hot on val/test).
Images reach the chain as float tensors (C, H, W) in [0, 1] when the data block brings them
to one `size` itself; with no `size` and a chain that fixes the output size (RandomResizedCrop,
CenterCrop, a RandomCrop with a size), photos reach it as decoded, uint8 (C, H, W) of their
own size, and are scaled to [0, 1] just before Normalize (or at the end), the order
torchvision's tutorials write by hand.
"""

from __future__ import annotations

import math
from typing import Any

from nodegraph.kinds import declare
from nodegraph.kinds.augment import Step
from nodegraph.model.errors import NodegraphError
from nodegraph.model.packages import load_torchvision
from nodegraph.model.spec import Param, Params, choice_param, float_param, int_param


def _v2() -> Any:
    try:
        load_torchvision()
        from torchvision.transforms import v2
    except ImportError as e:
        raise NodegraphError(f"augmentation blocks need torchvision ({e}); install the "
                             "models extra: pip install 'nodegraph[models]'") from e
    return v2


class RandomResizedCropParams(Params):
    size: int
    scale_min: float
    scale_max: float
    ratio_min: float
    ratio_max: float


def _random_resized_crop(p: RandomResizedCropParams) -> Step:
    v2 = _v2()
    if p.scale_min > p.scale_max or p.ratio_min > p.ratio_max:
        raise NodegraphError("scale_min and ratio_min must not exceed scale_max and ratio_max")
    train = v2.RandomResizedCrop(p.size, scale=(p.scale_min, p.scale_max),
                                 ratio=(p.ratio_min, p.ratio_max), antialias=True)
    smallest = p.scale_min * min(p.ratio_min, 1 / p.ratio_max)  # the crop's least side²
    return Step("RandomResizedCrop", train,
                v2.Compose([v2.Resize(p.size, antialias=True), v2.CenterCrop(p.size)]),
                side=(math.ceil(p.size / math.sqrt(smallest)) if smallest > 0 else None,
                      p.size),
                script=(f"v2.RandomResizedCrop({p.size}, scale=({p.scale_min!r}, "
                        f"{p.scale_max!r}), ratio=({p.ratio_min!r}, {p.ratio_max!r}), "
                        "antialias=True)",
                        f"v2.Compose([v2.Resize({p.size}, antialias=True), "
                        f"v2.CenterCrop({p.size})])", None))


class _PadCrop:
    """Pad by `padding`, then crop a random window of the input's own size (CIFAR's crop)."""

    def __init__(self, padding: int, mode: str):
        self.padding, self.mode = padding, mode

    def __call__(self, x):
        v2 = _v2()
        return v2.RandomCrop(tuple(x.shape[-2:]), padding=self.padding,
                             padding_mode=self.mode)(x)


class RandomCropParams(Params):
    size: int | None
    padding: int
    padding_mode: str


def _random_crop(p: RandomCropParams) -> Step:
    v2 = _v2()
    if p.size is None:
        return Step("RandomCrop", _PadCrop(p.padding, p.padding_mode), None,
                    script=(f"v2.RandomCrop({{hw}}, padding={p.padding}, "
                            f"padding_mode={p.padding_mode!r})", None, None))
    return Step("RandomCrop", v2.RandomCrop(p.size, padding=p.padding or None,
                                            padding_mode=p.padding_mode, pad_if_needed=True),
                v2.CenterCrop(p.size),
                script=(f"v2.RandomCrop({p.size}, padding={p.padding or None}, "
                        f"padding_mode={p.padding_mode!r}, pad_if_needed=True)",
                        f"v2.CenterCrop({p.size})", None))


class HorizontalFlipParams(Params):
    p: float


def _flip(p: HorizontalFlipParams) -> Step:
    return Step("HorizontalFlip", _v2().RandomHorizontalFlip(p.p), None,
                script=(f"v2.RandomHorizontalFlip({p.p!r})", None, None))


class ColorJitterParams(Params):
    brightness: float
    contrast: float
    saturation: float
    hue: float


def _jitter(p: ColorJitterParams) -> Step:
    return Step("ColorJitter", _v2().ColorJitter(p.brightness, p.contrast, p.saturation, p.hue),
                None, script=(f"v2.ColorJitter({p.brightness!r}, {p.contrast!r}, "
                              f"{p.saturation!r}, {p.hue!r})", None, None))


class RandAugmentParams(Params):
    num_ops: int
    magnitude: int


def _randaugment(p: RandAugmentParams) -> Step:
    return Step("RandAugment", _v2().RandAugment(num_ops=p.num_ops, magnitude=p.magnitude),
                None, script=(f"v2.RandAugment(num_ops={p.num_ops}, magnitude={p.magnitude})",
                              None, None))


def _trivial(p) -> Step:
    return Step("TrivialAugment", _v2().TrivialAugmentWide(), None,
                script=("v2.TrivialAugmentWide()", None, None))


class NormalizeParams(Params):
    mean: list[float]
    std: list[float]


def _normalize(p: NormalizeParams) -> Step:
    if len(p.mean) != len(p.std) or not p.mean:
        raise NodegraphError("mean and std need one value per channel, as many of each")
    if any(s <= 0 for s in p.std):
        raise NodegraphError("every std must be positive")
    fn = _v2().Normalize(list(p.mean), list(p.std))
    text = f"v2.Normalize({list(p.mean)!r}, {list(p.std)!r})"
    return Step("Normalize", fn, fn, script=(text, text, None), floats=True)


class SizeParams(Params):
    size: int


def _resize(p: SizeParams) -> Step:
    fn = _v2().Resize(p.size, antialias=True)
    text = f"v2.Resize({p.size}, antialias=True)"
    return Step("Resize", fn, fn, script=(text, text, None), side=(p.size, p.size))


def _center_crop(p: SizeParams) -> Step:
    fn = _v2().CenterCrop(p.size)
    text = f"v2.CenterCrop({p.size})"
    return Step("CenterCrop", fn, fn, script=(text, text, None))


class BatchMixParams(Params):
    alpha: float
    num_classes: int


def _batch_step(name: str):
    def build(p: BatchMixParams) -> Step:
        v2 = _v2()
        cls = v2.MixUp if name == "MixUp" else v2.CutMix
        return Step(name, batch=cls(alpha=p.alpha, num_classes=p.num_classes),
                    classes=p.num_classes,
                    script=(None, None, f"v2.{name}(alpha={p.alpha!r}, "
                                        f"num_classes={p.num_classes})"))
    return build


_ALPHA = float_param("alpha", 1.0, "the Beta(alpha, alpha) distribution the mixing share "
                     "is drawn from", min=0.001)
_CLASSES = int_param("num_classes", doc="classes of the labels (the model's outputs)", min=2)

BLOCKS = [
    declare.transform(
        "augment.RandomResizedCrop",
        "Crop a random part of the image (share `scale` of its area, aspect in `ratio`) and "
        "resize it to size x size.\n\nThe standard ImageNet augmentation "
        "(torchvision.transforms.v2.RandomResizedCrop); val/test get Resize + CenterCrop.",
        _random_resized_crop,
        params=[int_param("size", 224, "output height and width", min=1),
                float_param("scale_min", 0.08, "smallest share of the area kept", min=0.0,
                            max=1.0),
                float_param("scale_max", 1.0, "largest share of the area kept", min=0.0,
                            max=1.0),
                float_param("ratio_min", 3 / 4, "smallest aspect ratio (width / height)",
                            min=0.01),
                float_param("ratio_max", 4 / 3, "largest aspect ratio", min=0.01)],
        keywords=("augmentation", "crop", "resize", "imagenet")),
    declare.transform(
        "augment.RandomCrop",
        "Pad the image by `padding` pixels and crop a random window of size x size (empty: "
        "the image's own size, CIFAR's crop).\n\nval/test get a centre crop "
        "(torchvision.transforms.v2.RandomCrop).",
        _random_crop,
        params=[int_param("size", None, "window height and width; empty: the input's size",
                          min=1, nullable=True),
                int_param("padding", 4, "pixels added on every side before cropping", min=0),
                choice_param("padding_mode", ("constant", "edge", "reflect", "symmetric"),
                             "constant", "what the padding holds (constant: zeros)")],
        keywords=("augmentation", "crop", "cifar", "padding")),
    declare.transform(
        "augment.Resize",
        "Scale the image so its shorter side is `size` (bilinear, antialiased), on every "
        "split; the aspect ratio is kept (torchvision.transforms.v2.Resize).",
        _resize, params=[int_param("size", 256, "the shorter side after resizing", min=1)],
        keywords=("resize", "scale", "imagenet")),
    declare.transform(
        "augment.CenterCrop",
        "Cut the central size x size window, on every split (padded with zeros when the "
        "image is smaller; torchvision.transforms.v2.CenterCrop).",
        _center_crop, params=[int_param("size", 224, "output height and width", min=1)],
        keywords=("crop", "centre", "center", "imagenet")),
    declare.transform(
        "augment.HorizontalFlip",
        "Mirror the image left to right with probability p (training only).",
        _flip, params=[float_param("p", 0.5, "probability of a flip", min=0.0, max=1.0)],
        keywords=("augmentation", "flip", "mirror")),
    declare.transform(
        "augment.ColorJitter",
        "Randomly change brightness, contrast, saturation and hue (training only).\n\n"
        "Each factor is drawn from [1 - v, 1 + v] (hue: [-v, v]); "
        "torchvision.transforms.v2.ColorJitter.",
        _jitter,
        params=[float_param("brightness", 0.4, "brightness change", min=0.0),
                float_param("contrast", 0.4, "contrast change", min=0.0),
                float_param("saturation", 0.4, "saturation change", min=0.0),
                float_param("hue", 0.0, "hue shift", min=0.0, max=0.5)],
        keywords=("augmentation", "colour", "color", "brightness", "contrast")),
    declare.transform(
        "augment.RandAugment",
        "RandAugment: num_ops operations drawn per image from a fixed list (rotate, shear, "
        "colour, posterize, ...) at strength `magnitude` (training only).",
        _randaugment,
        params=[int_param("num_ops", 2, "operations per image", min=1, max=10),
                int_param("magnitude", 9, "strength of each operation (0-30)", min=0, max=30)],
        keywords=("augmentation", "autoaugment", "policy")),
    declare.transform(
        "augment.TrivialAugment",
        "TrivialAugment (wide): one operation per image at a random strength; no settings "
        "to tune (training only).",
        _trivial, keywords=("augmentation", "autoaugment", "policy")),
    declare.transform(
        "augment.Normalize",
        "Subtract `mean` and divide by `std`, channel by channel, on every split.\n\n"
        "ImageNet's statistics are the default; a 1-channel image takes one value each.",
        _normalize,
        params=[Param("mean", "floats", [0.485, 0.456, 0.406], "per-channel mean"),
                Param("std", "floats", [0.229, 0.224, 0.225], "per-channel standard "
                      "deviation")],
        keywords=("normalise", "normalization", "standardise", "imagenet")),
    declare.transform(
        "augment.MixUp",
        "MixUp: each training batch is mixed with itself shuffled, images and labels alike; "
        "the labels become class probabilities (one-hot on val/test).",
        _batch_step("MixUp"), params=[_ALPHA, _CLASSES],
        keywords=("augmentation", "mixup", "regularisation", "batch")),
    declare.transform(
        "augment.CutMix",
        "CutMix: a random box of each training image is pasted from another image of the "
        "batch, labels mixed by the box's area (probabilities; one-hot on val/test). Chained "
        "with MixUp, one of the two is drawn per batch.",
        _batch_step("CutMix"), params=[_ALPHA, _CLASSES],
        keywords=("augmentation", "cutmix", "regularisation", "batch")),
]
