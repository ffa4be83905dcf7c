"""Convolution, pooling and resizing blocks: the notes' worked examples (seed 004 eq 7,
seed 002's edge filters and parameter counts), PyTorch as the reference, hand-set and
initialised kernels, and shape errors that say what to insert."""

from __future__ import annotations

import pytest
import torch
from blockcheck import build, run_op
from test_nodes_layers import close, graph_counts, port_error
from torch.nn import functional as F

from nodegraph.model.errors import ParamError

# seed 004 eq 7: the 4x4 input of the convolution-arithmetic example
X4 = torch.tensor([[2, 5, 4, 1], [3, 1, 2, 0], [4, 5, 7, 1], [1, 2, 3, 4]],
                  dtype=torch.float32).view(1, 1, 4, 4)


# -- convolution ------------------------------------------------------------------------------

def test_conv2d_reproduces_seed004_eq7():
    # one 2-D filter may be written as its rows: the leading (1, 1) of the kernel is implied
    _, _, m = build("layers.Conv2d", {"input": X4}, out_channels=1, kernel_size=2, stride=2,
                    bias=False, weight=[[1, 0], [0, 1]])
    assert m.weight.shape == (1, 1, 2, 2)
    assert close(m(X4), [[[[3, 4], [6, 11]]]])


def test_conv2d_hand_set_kernel_shape_is_checked():
    x = torch.zeros(1, 3, 6, 6)
    with pytest.raises(ParamError, match=r"\(out_channels, in_channels/groups, kernel_h, "
                       r"kernel_w\) = \(2, 3, 3, 3\)"):
        build("layers.Conv2d", {"input": x}, out_channels=2, weight=[[1, 0], [0, 1]])
    kernels = torch.arange(2 * 3 * 9.0).view(2, 3, 3, 3)
    _, _, m = build("layers.Conv2d", {"input": x}, out_channels=2, weight=kernels.tolist(),
                    bias_init=[1.0, -1.0])
    assert torch.equal(m.weight, kernels) and torch.equal(m.bias, torch.tensor([1.0, -1.0]))


def test_conv_inits_count_the_kernel_in_the_fans():
    torch.manual_seed(0)
    x = torch.zeros(1, 16, 8, 8)
    _, _, m = build("layers.Conv2d", {"input": x}, out_channels=32, init="kaiming_normal")
    assert abs(m.weight.var().item() / (2 / (16 * 9)) - 1) < 0.05  # fan_in = C·k_h·k_w
    assert torch.equal(m.bias, torch.zeros(32))
    _, _, m = build("layers.Conv1d", {"input": torch.zeros(1, 16, 20)}, out_channels=32,
                    kernel_size=5, init="xavier_uniform")
    assert abs(m.weight.var().item() / (2 / (16 * 5 + 32 * 5)) - 1) < 0.05


def test_frozen_conv_counts_no_parameters():
    report = graph_counts([("img", "layers.Parameter", {"shape": [1, 3, 8, 8]}),
                           ("conv", "layers.Conv2d", {"out_channels": 10, "kernel_size": 3,
                                                      "trainable": False})],
                          [("img", "conv")])
    assert report.param_counts["conv"] == 0
    _, _, m = build("layers.Conv2d", {"input": torch.zeros(1, 3, 8, 8)}, out_channels=10,
                    trainable=False)
    assert not any(p.requires_grad for p in m.parameters())


def test_conv2d_params_reach_torch():
    x = torch.randn(2, 4, 9, 8)
    _, _, m = build("layers.Conv2d", {"input": x}, out_channels=6, kernel_size=[3, 2],
                    stride=2, padding=[1, 0], dilation=[2, 1], groups=2)
    ref = F.conv2d(x, m.weight, m.bias, stride=2, padding=(1, 0), dilation=(2, 1), groups=2)
    assert m.weight.shape == (6, 2, 3, 2) and close(m(x), ref, 1e-5)
    assert run_op("layers.Conv2d", {"input": x}, out_channels=3, kernel_size=5,
                  padding="same").shape == (2, 3, 9, 8)
    _, _, r = build("layers.Conv2d", {"input": x}, out_channels=3, padding=1,
                    padding_mode="reflect")
    assert close(r(x), F.conv2d(F.pad(x, (1, 1, 1, 1), mode="reflect"), r.weight, r.bias),
                 1e-5)


def test_conv2d_parameter_count_seed002():
    # 10 filters of 3x3x3 plus one bias each: 10 * (27 + 1) = 280 (seed 002, 8.18)
    report = graph_counts([("img", "layers.Parameter", {"shape": [1, 3, 8, 8]}),
                           ("conv", "layers.Conv2d", {"out_channels": 10, "kernel_size": 3})],
                          [("img", "conv")])
    assert report.param_counts["conv"] == 280
    assert report.shape("conv", "output") == (1, 10, 6, 6)


def test_keras_mnist_convnet_has_34826_parameters():
    # seed 004 E8: conv32 - pool - conv64 - pool - flatten - dropout - dense10
    chain = [("img", "layers.Parameter", {"shape": [2, 1, 28, 28]}),
             ("c1", "layers.Conv2d", {"out_channels": 32, "kernel_size": 3}),
             ("r1", "activations.ReLU", {}),
             ("p1", "layers.MaxPool2d", {"kernel_size": 2}),
             ("c2", "layers.Conv2d", {"out_channels": 64, "kernel_size": 3}),
             ("r2", "activations.ReLU", {}),
             ("p2", "layers.MaxPool2d", {"kernel_size": 2}),
             ("flat", "layers.Flatten", {}),
             ("drop", "layers.Dropout", {"p": 0.5}),
             ("out", "layers.Linear", {"out_features": 10})]
    ids = [n[0] for n in chain]
    report = graph_counts(chain, list(zip(ids[:-1], ids[1:], strict=True)))
    assert report.shape("flat", "output") == (2, 1600)
    assert sum(v for k, v in report.param_counts.items() if k != "img") == 34826


def test_conv2d_on_flat_input_says_reshape():
    e = port_error("layers.Conv2d", {"input": torch.zeros(4, 784)}, out_channels=8)
    assert e.port == "input" and "(N, C, H, W)" in str(e) and "(N, 784)" in str(e)
    assert "Reshape" in e.hint and "[1, 28, 28]" in e.hint


def test_conv2d_shape_and_param_errors():
    x = torch.zeros(1, 3, 4, 4)
    assert "smaller than" in str(port_error("layers.Conv2d", {"input": x}, out_channels=2,
                                            kernel_size=5))
    assert "groups" in str(port_error("layers.Conv2d", {"input": x}, out_channels=4,
                                      groups=2))
    with pytest.raises(ParamError):
        build("layers.Conv2d", {"input": x}, out_channels=2, padding="same", stride=2)
    with pytest.raises(ValueError, match="kernel_size"):
        build("layers.Conv2d", {"input": x}, out_channels=2, kernel_size=[3, 3, 3])


def test_conv1d_hand_example_and_reference():
    x = torch.tensor([[[1.0, 2.0, 4.0, 7.0]]])
    _, _, m = build("layers.Conv1d", {"input": x}, out_channels=1, kernel_size=2, bias=False)
    with torch.no_grad():
        m.weight.copy_(torch.tensor([[[1.0, -1.0]]]))
    assert close(m(x), [[[-1, -2, -3]]])
    y = torch.randn(3, 2, 10)
    _, _, m = build("layers.Conv1d", {"input": y}, out_channels=4, kernel_size=3, stride=2,
                    padding=1)
    assert close(m(y), F.conv1d(y, m.weight, m.bias, stride=2, padding=1), 1e-5)


def test_conv_transpose2d_stamps_the_kernel():
    x = torch.tensor([[[[2.0]]]])
    _, _, m = build("layers.ConvTranspose2d", {"input": x}, out_channels=1, kernel_size=2,
                    bias=False, weight=[[1, 2], [3, 4]])
    assert close(m(x), [[[[2, 4], [6, 8]]]])
    # the transposed kernel is laid out (in_channels, out_channels/groups, ...)
    _, _, m = build("layers.ConvTranspose2d", {"input": torch.zeros(1, 3, 2, 2)},
                    out_channels=2, kernel_size=2, weight=torch.ones(3, 2, 2, 2).tolist())
    assert m.weight.shape == (3, 2, 2, 2)
    y = torch.randn(2, 3, 5, 5)
    _, _, m = build("layers.ConvTranspose2d", {"input": y}, out_channels=4, kernel_size=3,
                    stride=2, padding=1, output_padding=1)
    out = m(y)
    assert out.shape == (2, 4, 10, 10)  # (5-1)*2 - 2 + 2 + 1 + 1
    assert close(out, F.conv_transpose2d(y, m.weight, m.bias, 2, 1, 1), 1e-5)


def test_upsample_nearest_and_bilinear():
    x = torch.tensor([[[[1.0, 2.0], [3.0, 4.0]]]])
    assert close(run_op("layers.Upsample", {"input": x}),
                 [[[[1, 1, 2, 2], [1, 1, 2, 2], [3, 3, 4, 4], [3, 3, 4, 4]]]])
    out = run_op("layers.Upsample", {"input": x}, mode="bilinear", align_corners=True,
                 scale_factor=1.5)
    assert close(out, [[[[1, 1.5, 2], [2, 2.5, 3], [3, 3.5, 4]]]])
    assert "bilinear" in port_error("layers.Upsample", {"input": torch.zeros(1, 2, 3)},
                                    mode="bilinear").hint


# -- pooling --------------------------------------------------------------------------------

@pytest.mark.parametrize("kind, expected", [("Max", [[5, 4], [5, 7]]),
                                            ("Avg", [[2.75, 1.75], [3, 3.75]]),
                                            ("Min", [[1, 0], [1, 1]])])
def test_pool2d_on_seed004_input(kind, expected):
    assert close(run_op(f"layers.{kind}Pool2d", {"input": X4}, kernel_size=2),
                 [[expected]])


@pytest.mark.parametrize("kind, expected", [("Max", [3, 2, 5]), ("Avg", [2, 1, 4.5]),
                                            ("Min", [1, 0, 4])])
def test_pool1d_stride_defaults_to_window(kind, expected):
    x = torch.tensor([[[1.0, 3.0, 2.0, 0.0, 5.0, 4.0]]])
    assert close(run_op(f"layers.{kind}Pool1d", {"input": x}, kernel_size=2), [[expected]])


def test_pool_params_reach_torch_and_errors():
    x = torch.randn(2, 3, 7, 7)
    out = run_op("layers.MaxPool2d", {"input": x}, kernel_size=3, stride=2, padding=1,
                 ceil_mode=True)
    assert close(out, F.max_pool2d(x, 3, 2, 1, ceil_mode=True))
    out = run_op("layers.AvgPool2d", {"input": x}, kernel_size=3, stride=1, padding=1,
                 count_include_pad=False)
    assert close(out, F.avg_pool2d(x, 3, 1, 1, count_include_pad=False), 1e-6)
    assert "smaller than" in str(port_error("layers.MaxPool2d",
                                            {"input": torch.zeros(1, 1, 1, 1)}))
    with pytest.raises(ParamError, match="half"):
        build("layers.AvgPool2d", {"input": x}, kernel_size=2, padding=2)


@pytest.mark.parametrize("kind, reduce", [("Avg", torch.mean), ("Max", torch.amax)])
def test_global_pools_reduce_every_spatial_dim(kind, reduce):
    x = torch.randn(2, 3, 4, 5)
    assert close(run_op(f"layers.Global{kind}Pool", {"input": x}), reduce(x, dim=(2, 3)),
                 1e-6)
    assert "no" in port_error(f"layers.Global{kind}Pool", {"input": torch.zeros(2, 3)}).hint


# -- fixed filters (seed 002, section 8) ---------------------------------------------------

EDGE = torch.zeros(1, 1, 6, 6)
EDGE[..., :3] = 10.0  # (8.1): bright left half


@pytest.mark.parametrize("name, row", [("vertical_edge", [0, 30, 30, 0]),  # corrected 10->30
                                       ("sobel_x", [0, 40, 40, 0]),
                                       ("scharr_x", [0, 160, 160, 0]),
                                       ("difference_x", [0, 0, 10, 0, 0])])
def test_fixed_edge_filters_seed002(name, row):
    out = run_op("layers.FixedConv2d", {"input": EDGE}, filter=name)
    assert close(out[0, 0], torch.tensor(row, dtype=torch.float32).expand(out.shape[2], -1))


def test_hand_set_vertical_edge_kernel_gives_the_corrected_30():
    # seed 002 (8.11)-(8.12) as a learnable conv started at the filter: 30, not the printed 10
    kernel = [[1, 0, -1]] * 3
    out = run_op("layers.Conv2d", {"input": EDGE}, out_channels=1, weight=kernel, bias=False)
    assert close(out[0, 0], torch.tensor([0.0, 30, 30, 0]).expand(4, -1))


def test_fixed_filters_transpose_per_channel_and_learn_nothing():
    x = torch.cat([EDGE, EDGE.transpose(2, 3)], 1)  # channel 2: bright top half
    _, _, m = build("layers.FixedConv2d", {"input": x}, filter="sobel_y")
    out = m(x)
    assert close(out[0, 1, :, 1], [0, 40, 40, 0]) and close(out[0, 0], torch.zeros(4, 4))
    assert list(m.parameters()) == []
    i, j = torch.meshgrid(torch.arange(5.0), torch.arange(5.0), indexing="ij")
    lap = run_op("layers.FixedConv2d", {"input": (i**2 + j**2)[None, None]}, filter="laplacian")
    assert close(lap, torch.full((1, 1, 3, 3), 4.0))  # the discrete ∇² of i² + j²
    assert run_op("layers.FixedConv2d", {"input": EDGE}, padding="same").shape == EDGE.shape


def test_sizes_param_takes_an_int_or_one_per_dim(registry):
    p = registry.get("layers.Conv2d").param("kernel_size")
    assert p.check(3) == [3] and p.check([3, 5]) == [3, 5]
    for bad in ([1, 2, 3], 0, "3", True):
        with pytest.raises(ParamError):
            p.check(bad)
    padding = registry.get("layers.Conv2d").param("padding")
    assert padding.check("same") == "same" and padding.check(0) == [0]
