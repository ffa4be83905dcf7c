"""A raw photo's ToFloat + Normalize run as one pass (`nodegraph.kinds.augment.ScaledNormalize`)
and give what torchvision's ToDtype(float32, scale=True) + Normalize give, to float rounding,
whatever the photo's memory layout, channel count or dtype."""

from __future__ import annotations

import pytest
import torch

from nodegraph.kinds.augment import Chain, ScaledNormalize, Step, ToFloat
from nodegraph.model.packages import load_torchvision

MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]


@pytest.fixture(scope="module")
def v2():
    load_torchvision()
    from torchvision.transforms import v2

    return v2


def _chain(v2, mean=MEAN, std=STD) -> Chain:
    norm = v2.Normalize(mean, std)
    return Chain((Step("HorizontalFlip", v2.RandomHorizontalFlip(), None),
                  Step("Normalize", norm, norm, floats=True)))


def _reference(v2, x: torch.Tensor, mean=MEAN, std=STD) -> torch.Tensor:
    return v2.Normalize(mean, std)(v2.ToDtype(torch.float32, scale=True)(x))


def test_a_raw_photos_to_float_and_normalize_are_one_step_equal_to_torchvision(v2):
    fn = _chain(v2).sample("val", raw=True)
    assert [type(f) for f in fn.fns] == [ScaledNormalize]
    photo = torch.randint(0, 256, (3, 37, 53), dtype=torch.uint8,
                          generator=torch.Generator().manual_seed(0))
    layouts = {"contiguous": photo, "as decoded (H, W, C) memory":
               photo.permute(1, 2, 0).contiguous().permute(2, 0, 1)}
    for name, x in layouts.items():
        got = fn({"x": x, "y": torch.tensor(0)})["x"]
        assert got.dtype == torch.float32 and got.shape == (3, 37, 53), name
        assert torch.allclose(got, _reference(v2, x), atol=2e-6, rtol=0), name
    # the training split: the flip first, then the same single step
    assert [type(f).__name__ for f in _chain(v2).sample("train", raw=True).fns] == \
        ["RandomHorizontalFlip", "ScaledNormalize"]
    # photos that are not raw (already float) keep the plain Normalize
    assert [type(f).__name__ for f in _chain(v2).sample("val").fns] == ["Normalize"]


def test_grey_float_and_mismatched_photos_go_through_both_steps(v2):
    grey = torch.randint(0, 256, (1, 9, 7), dtype=torch.uint8)
    one = ScaledNormalize(v2.Normalize([0.5], [0.25]))
    assert torch.allclose(one(grey), _reference(v2, grey, [0.5], [0.25]), atol=2e-6, rtol=0)
    fused = ScaledNormalize(v2.Normalize(MEAN, STD))
    floats = torch.rand(3, 5, 4)  # 16-bit grey arrives as float in [0, 1]
    assert torch.equal(fused(floats), v2.Normalize(MEAN, STD)(ToFloat()(floats)))
    try:  # three means on one channel: whatever torchvision does, the same
        want = _reference(v2, grey)
    except (RuntimeError, ValueError) as e:
        with pytest.raises(type(e)):
            fused(grey)
    else:
        assert torch.equal(fused(grey), want)
