"""Layer and tensor-op blocks: numbers against formulas, the notes' worked examples, and
PyTorch; initialisations by their variance, hand-set and frozen weights; shape errors that
name the port and say what to insert. Convolution and pooling are in test_nodes_conv."""

from __future__ import annotations

import math

import pytest
import torch
from blockcheck import build, run_op

import nodegraph
from nodegraph.model.errors import ParamError, PortError


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


def linear(n_in: int, n_out: int, **params):
    """A built Linear for a (4, n_in) input."""
    return build("layers.Linear", {"input": torch.zeros(4, n_in)}, out_features=n_out,
                 **params)[2]


def test_linear_default_init_is_torchs():
    torch.manual_seed(5)
    m = linear(3, 2)
    torch.manual_seed(5)
    ref = torch.nn.Linear(3, 2)
    assert torch.equal(m.weight, ref.weight) and torch.equal(m.bias, ref.bias)


@pytest.mark.parametrize("init, variance", [
    ("xavier_normal", 2 / (200 + 300)),  # seed 002 (7.19): Var = 2/(n_in + n_out)
    ("xavier_uniform", 2 / (200 + 300)),
    ("kaiming_normal", 2 / 200),  # He: Var = 2/fan_in
    ("kaiming_uniform", 2 / 200),
    ("normal", 0.3**2),
])
def test_linear_random_inits_have_their_variance(init, variance):
    torch.manual_seed(0)
    m = linear(200, 300, init=init, init_std=0.3)
    assert abs(m.weight.var().item() / variance - 1) < 0.03  # 60,000 draws
    assert abs(m.weight.mean().item()) < 0.02 * math.sqrt(variance)  # 5 std errors
    assert torch.equal(m.bias, torch.zeros(300))  # any init but default starts biases at 0
    assert torch.equal(linear(3, 2, init="zeros").weight, torch.zeros(2, 3))


def test_linear_hand_set_weights_are_used_exactly():
    m = linear(3, 2, weight=[[0.2, -1.2, 0.5], [-0.7, -0.7, 1.0]], bias_init=[0.4, 0.7])
    x = torch.tensor([[1.0, 0.0, -2.0]])
    assert torch.equal(m.weight, torch.tensor([[0.2, -1.2, 0.5], [-0.7, -0.7, 1.0]]))
    assert close(m(x), [[0.4 + 0.2 - 1.0, 0.7 - 0.7 - 2.0]])
    # one output: its row may be written flat, as a TLU's weights
    tlu = linear(2, 1, weight=[-1, -1], bias_init=[1.5], init="xavier_normal")
    assert torch.equal(tlu.weight, torch.tensor([[-1.0, -1.0]]))
    assert torch.equal(tlu.bias, torch.tensor([1.5]))


@pytest.mark.parametrize("params, words", [
    ({"weight": [[1, 2], [3, 4], [5, 6]]}, ["'weight'", "(out_features, in_features)",
                                            "(2, 3)", "(3, 2)"]),
    ({"weight": [[1, 2, 3], [4, 5]]}, ["'weight'", "rectangular"]),
    ({"bias_init": [1.0]}, ["'bias_init'", "2 values"]),
    ({"bias_init": [1.0, 2.0], "bias": False}, ["'bias_init'", "bias is off"]),
])
def test_linear_hand_set_values_of_the_wrong_shape_are_named(params, words):
    with pytest.raises(ParamError) as e:
        linear(3, 2, **params)
    assert all(w in str(e.value) for w in words), str(e.value)


def test_hand_set_weight_problem_reaches_validation():
    g = nodegraph.Graph()
    g.add("data.XOR", id="data")
    g.add("layers.Linear", id="hidden", out_features=2, weight=[[1, 1]])
    g.connect(("data", "x"), ("hidden", "input"))
    problems = nodegraph.validate(g).for_node("hidden")
    assert problems and "'weight'" in problems[0].message and "(2, 2)" in problems[0].message


def xor_net(frozen: dict) -> nodegraph.Graph:
    g = nodegraph.Graph()
    g.add("data.XOR", id="data")
    g.add("layers.Linear", id="hidden", out_features=4, **frozen)
    g.add("activations.Tanh", id="act")
    g.add("layers.Linear", id="out", out_features=1)
    g.add("losses.BCEWithLogits", id="loss")
    g.add("optimizers.Adam", id="opt", lr=0.1)
    for a, b in [(("data", "x"), ("hidden", "input")), (("hidden", "output"), ("act", "input")),
                 (("act", "output"), ("out", "input")), (("out", "output"), ("loss", "input")),
                 (("data", "y"), ("loss", "target")), (("loss", "loss"), ("opt", "loss"))]:
        g.connect(a, b)
    return g


def test_frozen_linear_is_not_trained_nor_counted():
    g = xor_net({"trainable": False, "init": "xavier_normal"})
    assert nodegraph.validate(g).param_counts == {"hidden": 0, "act": 0, "out": 5, "loss": 0}
    before = nodegraph.compile(g).module.blocks
    hidden0, out0 = before["hidden"].weight.clone(), before["out"].weight.clone()
    after = nodegraph.train(g, epochs=5).module.blocks  # same seed: same start
    assert torch.equal(after["hidden"].weight, hidden0)
    assert torch.equal(after["hidden"].bias, torch.zeros(4))
    assert not torch.equal(after["out"].weight, out0)
    assert nodegraph.validate(xor_net({})).param_counts["hidden"] == 12


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
