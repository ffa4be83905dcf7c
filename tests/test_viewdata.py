"""The node views' numbers: histograms over time equal the frames', per-layer gradient
norms add up the parameters', the decision grid is the network's formula at the grid
points, the latent PCA is the covariance's eigenvectors, Hopfield energies follow
E = −½xᵀWx − bᵀx, and procedure frames are arranged as the editor shows them."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch

from nodegraph.model.errors import NodegraphError
from nodegraph.model.fileformat import load
from nodegraph.runtime import viewdata as vd
from nodegraph.runtime.compile import compile_graph
from nodegraph.runtime.probes import (
    BINS,
    Histogram,
    ParamSummary,
    ProbeFrame,
    Prober,
    summarize_grad,
    summarize_output,
)

EXAMPLES = Path(__file__).parent.parent / "examples"


def frame(step: int, outputs: dict, grads: dict | None = None,
          params: dict | None = None) -> ProbeFrame:
    """A probe frame of the given tensors (summarised as the prober would)."""
    return ProbeFrame(1, step, list(outputs),
                      {n: {"output": summarize_output(t)} for n, t in outputs.items()},
                      {n: {"output": summarize_grad(t)} for n, t in (grads or {}).items()},
                      params or {})


# -- from probe frames -----------------------------------------------------------------------


def test_histograms_over_time_equal_the_frames_histograms():
    g = torch.Generator().manual_seed(0)
    xs = [torch.randn(500, generator=g) * s + m for s, m in ((1, 0), (2, 1), (0.5, -3))]
    frames = [frame(10 * i + 1, {"act": x}, {"act": x / 100}) for i, x in enumerate(xs)]
    h = vd.histogram_history(frames, "act", "output", bins=64)
    assert h.steps == [1, 11, 21]
    assert h.edges[0] == pytest.approx(min(x.min().item() for x in xs))
    assert h.edges[-1] == pytest.approx(max(x.max().item() for x in xs))
    assert h.counts.sum(1) == pytest.approx([500] * 3)  # no sample lost or gained
    for x, row in zip(xs, h.counts, strict=True):
        # mass between two common edges ~ the share of samples there (up to one source bin)
        a, b = h.edges[10], h.edges[40]
        inside = ((x >= a) & (x < b)).sum().item()
        width = (x.max() - x.min()).item() / BINS
        near = [((x >= e - width) & (x < e + width)).sum().item() for e in (a, b)]
        assert abs(row[10:40].sum() - inside) <= sum(near)
    grads = vd.histogram_history(frames, "act", "output", which="grad")
    assert grads.edges[-1] == pytest.approx(max(x.max().item() for x in xs) / 100, rel=1e-5)
    assert vd.histogram_history(frames, "other", "output") is None


def test_histogram_columns_on_the_step_axis_show_the_latest_frame():
    h = vd.HistogramHistory([1, 3, 10], np.linspace(0, 1, 3),
                            np.array([[1.0, 0.0], [0.0, 1.0], [2.0, 2.0]]))
    xs, counts = vd.on_step_axis(h)
    assert xs.tolist() == list(range(1, 11))  # one column per step here
    assert counts[:, 1].tolist() == [0, 0, 1, 1, 1, 1, 1, 1, 1, 2]
    xs, counts = vd.on_step_axis(h, columns=4)
    assert xs.tolist() == [1, 4, 7, 10] and counts[:, 0].tolist() == [1, 0, 0, 2]


def test_rebin_onto_the_same_edges_gives_the_counts_back():
    hist = Histogram(-1.0, 3.0, list(range(BINS)))
    assert vd.rebin(hist, np.linspace(-1, 3, BINS + 1)) == pytest.approx(list(range(BINS)))
    halves = vd.rebin(hist, np.linspace(-1, 3, 2 * BINS + 1))
    assert halves[::2] + halves[1::2] == pytest.approx(list(range(BINS)))
    constant = vd.rebin(Histogram(0.25, 0.25, [7] + [0] * (BINS - 1)), np.linspace(0, 1, 5))
    assert constant.tolist() == [0, 7, 0, 0]


def test_stat_history_reads_one_number_per_frame():
    frames = [frame(s, {"a": torch.full((4,), float(s))}) for s in (1, 5, 9)]
    assert vd.stat_history(frames, "a", "output", "mean") == ([1, 5, 9], [1.0, 5.0, 9.0])


def test_layer_grad_norms_combine_a_layers_parameters_in_forward_order():
    params = {"out.weight": ParamSummary(3.0, 1, 0), "out.bias": ParamSummary(4.0, 1, 0),
              "hidden.weight": ParamSummary(1e-3, 1, 0)}
    f = ProbeFrame(1, 7, ["data", "hidden", "act", "out"], {}, {}, params)
    assert vd.layer_grad_norms(f) == {"hidden": pytest.approx(1e-3), "out": pytest.approx(5.0)}
    g = ProbeFrame(1, 9, ["data", "hidden", "act", "out"], {}, {},
                   {"hidden.weight": ParamSummary(2.0, 1, 0)})
    layers, steps, table = vd.grad_norm_history([f, g])
    assert layers == ["hidden", "out"] and steps == [7, 9]
    assert table[:, 0] == pytest.approx([1e-3, 5.0])
    assert table[0, 1] == 2.0 and math.isnan(table[1, 1])  # out did not step in frame 2


def probed_step(compiled) -> ProbeFrame:
    """One training step of `compiled` watched by a prober, as the trainer runs it."""
    module, run = compiled.module, compiled.optimizers[0]
    data, ds = next(iter(compiled.datasets.items()))
    values = {(data, k): v for k, v in next(ds.batches("train")).items()}
    ports = {node: [k[1] for k in out_keys] for node, _, _, out_keys in module.full_plan}
    with Prober(every=1).watch(module, ports) as watch:
        module.run(run.plan, values)[run.loss_key].backward()
    return watch.frame(1, 1)


def test_grad_norms_of_a_deep_sigmoid_net_shrink_towards_the_input():
    """The vanishing-gradient picture from a real probe frame of examples/deep_sigmoid.json."""
    compiled = compile_graph(load(EXAMPLES / "deep_sigmoid.json"))
    f = probed_step(compiled)
    layers, _, table = vd.grad_norm_history([f])
    assert layers == [f"fc{i}" for i in range(1, 11)] + ["out"]
    blocks = compiled.module.blocks
    autograd = [math.hypot(blocks[n].weight.grad.norm().item(), blocks[n].bias.grad.norm().item())
                for n in layers]  # on whichever device the graph compiled to
    assert table[:, 0] == pytest.approx(autograd, rel=1e-5)
    assert table[0, 0] < table[-1, 0] / 10  # fc1's gradient is tiny next to the output's


# -- from the model --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def xor():
    compiled = compile_graph(load(EXAMPLES / "xor.json"), for_training=False)
    torch.manual_seed(3)
    with torch.no_grad():
        for p in compiled.module.parameters():
            p.normal_()
    return compiled


def xor_formula(compiled, points: torch.Tensor) -> torch.Tensor:
    """out = W2 tanh(W1 x + b1) + b2, by hand from the blocks' weights."""
    blocks = compiled.module.blocks
    w1, b1 = blocks["hidden"].weight.cpu(), blocks["hidden"].bias.cpu()
    w2, b2 = blocks["out"].weight.cpu(), blocks["out"].bias.cpu()
    return (torch.tanh(points @ w1.T + b1) @ w2.T + b2).detach()


def test_decision_grid_is_the_networks_output_at_the_grid_points(xor):
    grid = vd.decision_grid(xor, "out", resolution=7, margin=0.5)
    assert grid.input == ("data", "x")
    assert grid.xs == pytest.approx(np.linspace(-0.5, 1.5, 7))
    assert grid.ys == pytest.approx(np.linspace(-0.5, 1.5, 7))
    i, j = 2, 5  # row i is y, column j is x
    point = torch.tensor([[grid.xs[j], grid.ys[i]]], dtype=torch.float32)
    logit = xor_formula(xor, point)[0, 0].item()
    assert grid.scores[i, j, 0] == pytest.approx(logit, abs=1e-5)
    assert grid.prob[i, j] == pytest.approx(1 / (1 + math.exp(-logit)), abs=1e-5)
    assert grid.classes[i, j] == int(logit > 0)
    everywhere = xor_formula(xor, torch.tensor(
        [[x, y] for y in grid.ys for x in grid.xs], dtype=torch.float32))
    assert grid.scores[..., 0].flatten() == pytest.approx(everywhere[:, 0].numpy(), abs=1e-5)
    assert grid.points.tolist() == [[0, 0], [0, 1], [1, 0], [1, 1]]
    assert grid.labels.tolist() == [0, 1, 1, 0]


def test_decision_grid_refuses_nodes_without_a_2d_input_or_that_need_targets(xor):
    with pytest.raises(NodegraphError, match="model's output node"):
        vd.decision_grid(xor, "loss")


def test_class_probabilities_of_logits_probabilities_and_softmax():
    p, c = vd.class_probabilities(torch.tensor([[0.0], [2.0], [-1.0]]))
    assert p.tolist() == pytest.approx([0.5, 1 / (1 + math.exp(-2)), 1 / (1 + math.e)])
    assert c.tolist() == [0, 1, 0]
    p, c = vd.class_probabilities(torch.tensor([[0.2], [0.9]]))  # already probabilities
    assert p.tolist() == pytest.approx([0.2, 0.9]) and c.tolist() == [0, 1]
    logits = torch.tensor([[1.0, 3.0, 0.0], [2.0, 0.0, 0.0]])
    p, c = vd.class_probabilities(logits)
    assert c.tolist() == [1, 0]
    assert p.tolist() == pytest.approx(logits.softmax(1).max(1).values.tolist())


def test_pca_2d_projects_on_the_covariances_leading_eigenvectors():
    g = torch.Generator().manual_seed(1)
    z = (torch.randn(300, 5, generator=g) * torch.tensor([5.0, 2.0, 1.0, 0.5, 0.1])).numpy()
    z = z @ np.linalg.qr(np.random.default_rng(0).normal(size=(5, 5)))[0]  # rotate
    points, explained = vd.pca_2d(z)
    cov = np.cov(z.T)
    values, vectors = np.linalg.eigh(cov)
    top = vectors[:, ::-1][:, :2]
    expected = (z - z.mean(0)) @ top
    for k in range(2):  # each axis up to its sign
        assert np.abs(points[:, k]) == pytest.approx(np.abs(expected[:, k]), abs=1e-6)
    assert explained == pytest.approx(values[::-1][:2] / values.sum())
    flat, _ = vd.pca_2d(np.array([[1.0, 2.0], [3.0, 4.0]]))
    assert flat.tolist() == [[1, 2], [3, 4]]  # a 2-D code is shown as it is


def test_latent_scatter_of_the_autoencoder_code_is_its_pca_on_val_with_labels():
    compiled = compile_graph(load(EXAMPLES / "autoencoder.json"), for_training=False)
    scatter = vd.latent_scatter(compiled, "code")
    values = vd.data_values(compiled, scatter.split)
    x = values[("data", "x")]
    blocks = compiled.module.blocks
    code = torch.relu(x @ blocks["enc"].weight.T + blocks["enc"].bias).detach().cpu().numpy()
    expected, _ = vd.pca_2d(code)
    assert scatter.split == "val" and scatter.dims == 32
    assert scatter.points == pytest.approx(expected, abs=1e-4)
    assert scatter.labels.tolist() == values[("data", "y")].tolist()


def test_images_and_attention_heads_are_one_samples_maps():
    t = torch.arange(2 * 3 * 4 * 5, dtype=torch.float32).reshape(2, 3, 4, 5)
    maps = vd.as_images(t, sample=1)
    assert maps.shape == (3, 4, 5) and (maps == t[1].numpy()).all()
    grid = vd.image_grid(maps, cols=2, pad=1)
    assert grid.shape == (2 * 4 + 1, 2 * 5 + 1)
    assert (grid[:4, :5] == maps[0]).all() and (grid[:4, 6:] == maps[1]).all()
    assert (grid[5:, :5] == maps[2]).all() and np.isnan(grid[5:, 6:]).all()
    assert np.isnan(grid[4]).all()  # the gap between rows
    tiles = vd.image_grid(maps, cols=3, per_tile=True)
    assert tiles[:4, :5] == pytest.approx((maps[0] - maps[0].min()) / np.ptp(maps[0]))
    assert vd.as_images(torch.zeros(2, 10)) is None
    w = torch.rand(2, 4, 6, 6)
    assert (vd.attention_heads(w, 1) == w[1].numpy()).all()
    assert vd.attention_heads(w[:, 0]).shape == (1, 6, 6)
    assert vd.is_attention(w, "weights") and not vd.is_attention(w, "output")


def test_hopfield_recall_energy_follows_the_energy_formula():
    compiled = compile_graph(load(EXAMPLES / "hopfield_2d.json"), for_training=False)
    recall = vd.hopfield_recall(compiled, "hopfield", limit=5)
    block = compiled.module.blocks["hopfield"]
    w, b = block.weight.cpu().numpy(), block.bias.cpu().numpy()
    x = recall.trajectory
    energy = -0.5 * np.einsum("nsi,ij,nsj->ns", x, w, x) - x @ b
    assert recall.trajectory.shape == (5, 61, 2)
    assert recall.energy == pytest.approx(energy, abs=1e-4)
    start = vd.data_values(compiled, "train", 5)[("data", "x")]
    assert recall.trajectory[:, 0] == pytest.approx(start.cpu().numpy())
    settled = recall.iterations[0]
    assert np.abs(x[0, settled] - x[0, settled - 1]).max() <= block.tol


# -- procedures ------------------------------------------------------------------------------


def test_gibbs_chain_frames_become_one_row_per_chain_one_column_per_kept_frame():
    compiled = compile_graph(load(EXAMPLES / "rbm_digits.json"), for_training=False)
    t = vd.procedure_trajectory(compiled, "sample", steps=12, count=3)
    assert t.kind == "images" and t.images.shape == (3, 10, 8, 8)
    assert t.labels[0] == "step 0" and t.labels[-1] == "step 12"
    assert ((t.images >= 0) & (t.images <= 1)).all()  # P(v = 1 | h)
    assert compiled.module.training  # the editor's copy keeps its mode


def test_shape_trajectory_arranges_each_kind_of_procedure():
    prior = [{"index": i, "z": [0.0], "image": [[i, i], [i, i]]} for i in range(4)]
    t = vd.shape_trajectory(prior)
    assert t.kind == "images" and t.images.shape == (1, 4, 2, 2) and t.images[0, 3, 0, 0] == 3
    ddpm = [{"t": 100 - 10 * i, "x": [[i, -i], [0, 1]]} for i in range(11)]
    t = vd.shape_trajectory(ddpm, max_cols=6)
    assert t.kind == "points" and len(t.points) == 6
    assert t.labels[0] == "t = 100" and t.labels[-1] == "t = 0"
    assert t.points[-1].tolist() == [[10, -10], [0, 1]]
    text = [{"t": 1, "token": 3, "char": "a", "text": "ha"}, {"t": 2, "text": "hab"}]
    assert vd.shape_trajectory(text).text == "hab"
    forecast = [{"t": i, "prediction": [i, i + 2], "target": [i]} for i in range(3)]
    assert vd.shape_trajectory(forecast).series == {"prediction": [1, 2, 3],
                                                    "target": [0, 1, 2]}
    assert vd.spread(10, 4) == [0, 3, 6, 9] and vd.spread(3, 5) == [0, 1, 2]
    with pytest.raises(NodegraphError, match="no frames"):
        vd.shape_trajectory([])
