"""Layer and tensor-op blocks: numbers against formulas, the notes' worked examples, and
PyTorch; shape errors that name the port and say what to insert."""

from __future__ import annotations

import math

import pytest
import torch
from blockcheck import build, run_op
from torch.nn import functional as F

import nodegraph
from nodegraph.errors import ParamError, PortError

# seed 004 eq 7: the 4x4 input of the convolution-arithmetic example
X4 = torch.tensor([[2, 5, 4, 1], [3, 1, 2, 0], [4, 5, 7, 1], [1, 2, 3, 4]],
                  dtype=torch.float32).view(1, 1, 4, 4)


def close(a, b, tol=1e-6):
    return torch.allclose(torch.as_tensor(a, dtype=torch.float32),
                          torch.as_tensor(b, dtype=torch.float32), atol=tol)


def port_error(block_id, inputs, **params) -> PortError:
    with pytest.raises(PortError) as e:
        build(block_id, inputs, **params)
    return e.value


def graph_counts(nodes, edges) -> nodegraph.Report:
    """Validate a graph of (id, type, params) nodes and (src, dst) output->input wires."""
    g = nodegraph.Graph()
    for nid, kind, params in nodes:
        g.add(kind, id=nid, **params)
    for src, dst in edges:
        g.connect((src, "output"), (dst, "input"))
    report = nodegraph.validate(g)
    assert report.ok, report.problems
    return report


# -- dense and basis expansions -------------------------------------------------------------

def test_linear_is_x_w_transposed_plus_b():
    x = torch.randn(5, 3)
    _, _, m = build("layers.Linear", {"input": x}, out_features=2)
    assert close(m(x), x @ m.weight.T + m.bias)
    assert "(N, 4)" in str(port_error("layers.Linear", {"input": x}, out_features=2,
                                      in_features=4))


def test_polynomial_features_power_by_power():
    x = torch.tensor([[2.0, 3.0]])
    assert close(run_op("layers.PolynomialFeatures", {"input": x}, degree=3),
                 [[2, 3, 4, 9, 8, 27]])
    assert close(run_op("layers.PolynomialFeatures", {"input": x}, degree=2,
                        include_bias=True), [[1, 2, 3, 4, 9]])


def test_fourier_features_sines_then_cosines():
    x = torch.tensor([[0.5, 1.0]])
    out = run_op("layers.FourierFeatures", {"input": x}, num_frequencies=2, frequency=2.0)
    z = torch.tensor([1.0, 2.0, 2.0, 4.0])  # k·ω·x, feature-major
    assert close(out, torch.cat([z.sin(), z.cos()])[None])


def test_rbf_gaussian_bumps_with_learnable_centres_and_widths():
    x = torch.randn(6, 2)
    _, _, m = build("layers.RBF", {"input": x}, num_centers=3, width=0.5)
    out = m(x)
    c = m.centers.detach()
    expected = torch.exp(-((x[:, None] - c) ** 2).sum(-1) / (2 * 0.5**2))
    assert out.shape == (6, 3) and close(out, expected, 1e-5)
    assert close(m(c[:1])[0, 0], 1.0)  # a bump peaks at its centre
    out.sum().backward()
    assert m.centers.grad.abs().sum() > 0 and m.log_widths.grad.abs().sum() > 0


# -- convolution ------------------------------------------------------------------------------

def test_conv2d_reproduces_seed004_eq7():
    _, _, m = build("layers.Conv2d", {"input": X4}, out_channels=1, kernel_size=2, stride=2,
                    bias=False)
    with torch.no_grad():
        m.weight.copy_(torch.tensor([[1.0, 0.0], [0.0, 1.0]]).view(1, 1, 2, 2))
    assert close(m(X4), [[[[3, 4], [6, 11]]]])


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
                    bias=False)
    assert close(m(x), 2 * m.weight)
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


# -- tensor plumbing ------------------------------------------------------------------------

def test_flatten_order_channel_row_column():
    c, i, j = torch.meshgrid(torch.arange(2.0), torch.arange(2.0), torch.arange(2.0),
                             indexing="ij")
    x = (100 * c + 10 * i + j)[None]  # seed 002 (8.24): z111 z121 z211 z221 z112 ...
    assert close(run_op("layers.Flatten", {"input": x}), [[0, 1, 10, 11, 100, 101, 110, 111]])
    assert "batch" in str(port_error("layers.Flatten", {"input": x}, start_dim=0))


def test_reshape_keeps_batch_and_infers_minus_one():
    x = torch.arange(2 * 784.0).view(2, 784)
    assert torch.equal(run_op("layers.Reshape", {"input": x}, shape=[1, 28, 28]),
                       x.view(2, 1, 28, 28))
    assert run_op("layers.Reshape", {"input": x}, shape=[-1, 4]).shape == (2, 196, 4)
    e = port_error("layers.Reshape", {"input": x}, shape=[1, 28, 27])
    assert "(N, 784)" in str(e) and "784" in str(e)


def test_permute_numbers_dims_as_torch_with_batch_first():
    x = torch.randn(2, 5, 6, 3)
    assert torch.equal(run_op("layers.Permute", {"input": x}, dims=[3, 1, 2]),
                       x.permute(0, 3, 1, 2))
    assert "1..3" in str(port_error("layers.Permute", {"input": x}, dims=[3, 1]))


def test_concat_and_split_invert_each_other():
    a, b = torch.randn(2, 3), torch.randn(2, 4)
    ab = run_op("layers.Concat", {"a": a, "b": b})
    assert torch.equal(ab, torch.cat([a, b], 1))
    a2, b2 = run_op("layers.Split", {"input": ab}, split_size=3)
    assert torch.equal(a2, a) and torch.equal(b2, b)
    e = port_error("layers.Concat", {"a": a, "b": torch.randn(3, 4)}, dim=1)
    assert "(N, 3)" in str(e) and "(N, 4)" in str(e)
    assert "between 1 and 6" in port_error("layers.Split", {"input": ab}, split_size=7).hint


def test_add_multiply_broadcast_and_name_both_shapes():
    a, b = torch.randn(4, 3), torch.randn(3)
    assert close(run_op("layers.Add", {"a": a, "b": b}), a + b)
    assert close(run_op("layers.Multiply", {"a": a, "b": b}), a * b)
    e = port_error("layers.Add", {"a": a, "b": torch.randn(4, 5)})
    assert "(N, 3)" in str(e) and "(N, 5)" in str(e)


def test_matmul_and_its_shape_error():
    a, b = torch.randn(2, 3, 4), torch.randn(2, 4, 5)
    assert close(run_op("layers.MatMul", {"a": a, "b": b}), torch.bmm(a, b), 1e-5)
    e = port_error("layers.MatMul", {"a": a, "b": torch.randn(2, 3, 5)})
    assert "(4)" in str(e) and "(3)" in str(e)


def test_residual_add_needs_equal_shapes():
    x, s = torch.randn(2, 4), torch.randn(2, 4)
    assert close(run_op("layers.ResidualAdd", {"input": x, "skip": s}), x + s)
    e = port_error("layers.ResidualAdd", {"input": x, "skip": torch.randn(2, 1)})
    assert e.port == "skip" and "(N, 4)" in str(e) and "(N, 1)" in str(e)


def test_scale_learnable_or_fixed():
    x = torch.tensor([1.0, -2.0])
    _, _, m = build("layers.Scale", {"input": x}, scale=3.0)
    y = m(x)
    y.sum().backward()
    assert close(y, [3, -6]) and close(m.scale.grad, -1.0)
    _, _, fixed = build("layers.Scale", {"input": x}, scale=0.5, learnable=False)
    assert close(fixed(x), [0.5, -1]) and list(fixed.parameters()) == []


def test_embedding_looks_up_rows():
    idx = torch.tensor([[0, 2], [2, 1]])
    _, _, m = build("layers.Embedding", {"input": idx}, num_embeddings=3, embedding_dim=4,
                    padding_idx=1)
    out = m(idx)
    assert out.shape == (2, 2, 4) and torch.equal(out[0, 1], m.weight[2])
    assert torch.equal(out[1, 1], torch.zeros(4))
    e = port_error("layers.Embedding", {"input": torch.zeros(2, 2)}, num_embeddings=3,
                   embedding_dim=4)
    assert e.kind == "dtype_mismatch"


def test_dropout_train_scales_survivors_eval_passes_through():
    torch.manual_seed(0)
    x = torch.ones(10000)
    _, _, m = build("layers.Dropout", {"input": x}, p=0.25)
    out = m.train()(x)
    assert abs((out == 0).float().mean() - 0.25) < 0.02
    assert close(out[out != 0], torch.full_like(out[out != 0], 1 / 0.75))
    assert torch.equal(m.eval()(x), x)


def test_stop_gradient_and_identity():
    x = torch.randn(3, requires_grad=True)
    y = run_op("layers.StopGradient", {"input": x})
    assert torch.equal(y, x) and not y.requires_grad
    assert run_op("layers.Identity", {"input": x}) is x


# -- tensors without inputs ---------------------------------------------------------------

def test_parameter_inits():
    torch.manual_seed(3)
    _, _, m = build("layers.Parameter", shape=[2, 3], init="normal", scale=0.5)
    torch.manual_seed(3)
    assert torch.equal(m(), torch.nn.init.normal_(torch.empty(2, 3), 0, 0.5))
    assert m().requires_grad and m().shape == (2, 3)
    assert torch.equal(build("layers.Parameter", shape=[4], init="constant", scale=2.0)[2](),
                       torch.full((4,), 2.0))
    u = build("layers.Parameter", shape=[100, 100], init="xavier_uniform")[2]()
    assert u.abs().max() <= math.sqrt(6 / 200) and u.abs().max() > 0.9 * math.sqrt(6 / 200)
    with pytest.raises(ParamError):
        build("layers.Parameter", shape=[3], init="xavier_uniform")


def test_constant_from_json():
    m = build("layers.Constant", value=[[1, 0], [0, 1]])[2]
    assert torch.equal(m(), torch.eye(2)) and list(m.parameters()) == []
    assert build("layers.Constant", value=[3, 4], dtype="int64")[2]().dtype == torch.int64
    with pytest.raises(ParamError, match="rectangular"):
        build("layers.Constant", value=[[1, 2], [3]])


def test_sizes_param_takes_an_int_or_one_per_dim(registry):
    p = registry.get("layers.Conv2d").param("kernel_size")
    assert p.check(3) == [3] and p.check([3, 5]) == [3, 5]
    for bad in ([1, 2, 3], 0, "3", True):
        with pytest.raises(ParamError):
            p.check(bad)
    padding = registry.get("layers.Conv2d").param("padding")
    assert padding.check("same") == "same" and padding.check(0) == [0]
