"""The volumetric blocks (`nodes/layers/volumetric.py`) against torch: Conv3d, BatchNorm3d,
MaxPool3d, AvgPool3d and AdaptiveAvgPool3d compute what the torch modules compute with the
same weights, refuse a 4-D input naming the port, and a small video network imports into
these blocks with no opaque node (issue #26, item 3)."""

from __future__ import annotations

import pytest
import torch
from blockcheck import build
from torch import nn

from nodegraph.interop.fx_roundtrip import round_trip
from nodegraph.model.errors import PortError

CLIP = torch.randn(2, 3, 5, 9, 8)


def _same(block_id: str, reference: nn.Module, x: torch.Tensor = CLIP, **params):
    _, _, module = build(block_id, {"input": x}, **params)
    module.load_state_dict(reference.state_dict())
    module.eval(), reference.eval()
    with torch.no_grad():
        return module(x), reference(x)


@pytest.mark.parametrize("params,reference", [
    ({"out_channels": 4}, nn.Conv3d(3, 4, 3)),
    ({"out_channels": 6, "kernel_size": [1, 3, 3], "stride": [1, 2, 2], "padding": [0, 1, 1],
      "bias": False}, nn.Conv3d(3, 6, (1, 3, 3), (1, 2, 2), (0, 1, 1), bias=False)),
    ({"out_channels": 3, "groups": 3, "dilation": [1, 2, 1]},
     nn.Conv3d(3, 3, 3, dilation=(1, 2, 1), groups=3)),
    ({"out_channels": 4, "padding": "same"}, nn.Conv3d(3, 4, 3, padding="same")),
])
def test_conv3d_equals_torch(params, reference):
    got, want = _same("layers.Conv3d", reference, **params)
    assert got.shape == want.shape and torch.allclose(got, want, atol=1e-6)


def test_batch_norm_3d_equals_torch_in_training_and_evaluation():
    reference = nn.BatchNorm3d(3)
    reference.running_mean.uniform_(-1, 1)
    _, _, module = build("norm.BatchNorm3d", {"input": CLIP})
    module.load_state_dict(reference.state_dict())
    module.train(), reference.train()
    assert torch.allclose(module(CLIP), reference(CLIP), atol=1e-6)
    assert torch.allclose(module.running_mean, reference.running_mean)
    module.eval(), reference.eval()
    assert torch.allclose(module(CLIP), reference(CLIP), atol=1e-6)


@pytest.mark.parametrize("block,params,reference", [
    ("layers.MaxPool3d", {"kernel_size": [2]}, nn.MaxPool3d(2)),
    ("layers.MaxPool3d", {"kernel_size": [1, 3, 3], "stride": [1, 2, 2], "padding": [0, 1, 1]},
     nn.MaxPool3d((1, 3, 3), (1, 2, 2), (0, 1, 1))),
    ("layers.AvgPool3d", {"kernel_size": [2], "ceil_mode": True}, nn.AvgPool3d(2, ceil_mode=True)),
    ("layers.AdaptiveAvgPool3d", {"output_size": [1]}, nn.AdaptiveAvgPool3d(1)),
    ("layers.AdaptiveAvgPool3d", {"output_size": [2, 3, 2]}, nn.AdaptiveAvgPool3d((2, 3, 2))),
])
def test_pooling_3d_equals_torch(block, params, reference):
    got, want = _same(block, reference, **params)
    assert got.shape == want.shape and torch.allclose(got, want, atol=1e-6)


@pytest.mark.parametrize("block,params", [
    ("layers.Conv3d", {"out_channels": 4}), ("norm.BatchNorm3d", {}),
    ("layers.MaxPool3d", {}), ("layers.AdaptiveAvgPool3d", {})])
def test_an_image_is_refused_naming_the_port(block, params):
    with pytest.raises(PortError) as error:
        build(block, {"input": torch.randn(2, 3, 8, 8)}, **params)
    assert error.value.port == "input" and "(N, C, D, H, W)" in str(error.value)


class TinyVideo(nn.Module):
    """r3d's pieces: a (1, 3, 3) stem, batch norm, pooling over time and space, a head."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv3d(3, 8, (1, 3, 3), padding=(0, 1, 1), bias=False),
                                  nn.BatchNorm3d(8), nn.ReLU())
        self.block = nn.Sequential(nn.Conv3d(8, 8, 3, padding=1), nn.BatchNorm3d(8),
                                   nn.ReLU(), nn.MaxPool3d((1, 2, 2)),
                                   nn.AvgPool3d(2, ceil_mode=True))
        self.pool = nn.AdaptiveAvgPool3d(1)
        self.fc = nn.Linear(8, 5)

    def forward(self, x):
        return self.fc(self.pool(self.block(self.stem(x))).flatten(1))


def test_a_video_network_imports_into_blocks(tmp_path):
    torch.manual_seed(0)
    result = round_trip(TinyVideo, (torch.randn(2, 3, 4, 16, 16),), tmp_path,
                        others=[(torch.randn(3, 3, 6, 20, 12),)])
    assert not result.errors, result.errors
    assert result.opaque == 0
    assert result.compiled <= 1e-5 and result.python <= 1e-5 and result.onnx <= 1e-4
    assert result.resized <= 1e-5 and result.trained
