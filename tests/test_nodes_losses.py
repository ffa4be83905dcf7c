"""Loss blocks: numbers against torch.nn.functional or the closed-form formula."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from nodegraph.model.errors import PortError
from nodegraph.model.spec import LOSS_OUT
from tests.blockcheck import build, run_op

torch.manual_seed(0)
PRED, TARGET = torch.randn(6, 3), torch.randn(6, 3)


def close(a: torch.Tensor, b: torch.Tensor | float, tol: float = 1e-6) -> None:
    assert torch.allclose(torch.as_tensor(a, dtype=torch.float32),
                          torch.as_tensor(b, dtype=torch.float32), atol=tol, rtol=tol), (a, b)


def test_every_loss_outputs_a_loss_port(registry):
    losses = [s for s in registry if s.category == "losses"]
    assert len(losses) >= 12
    assert all(s.outputs == (LOSS_OUT,) for s in losses)


@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_regression_losses_match_torch(reduction):
    pair = {"input": PRED, "target": TARGET}
    close(run_op("losses.MSE", pair, reduction=reduction),
          F.mse_loss(PRED, TARGET, reduction=reduction))
    close(run_op("losses.MAE", pair, reduction=reduction),
          F.l1_loss(PRED, TARGET, reduction=reduction))
    close(run_op("losses.Huber", pair, reduction=reduction, delta=0.7),
          F.huber_loss(PRED, TARGET, reduction=reduction, delta=0.7))


def test_sse_is_the_sum_of_squares():
    close(run_op("losses.SSE", {"input": PRED, "target": TARGET}),
          ((PRED - TARGET) ** 2).sum().item(), 1e-5)


def test_huber_by_hand():
    e = torch.tensor([0.5, -3.0])
    got = run_op("losses.Huber", {"input": e, "target": torch.zeros(2)}, delta=2.0,
                 reduction="sum")
    close(got, 0.5 * 0.25 + 2.0 * (3.0 - 1.0))


def test_regression_loss_refuses_mismatched_shapes():
    with pytest.raises(PortError) as e:
        build("losses.MAE", {"input": PRED, "target": TARGET[:, :1]})
    assert e.value.port == "target"


@pytest.mark.parametrize("full", [False, True])
def test_gaussian_nll_with_variance_matches_torch(full):
    var = torch.rand(6, 3) + 0.1
    got = run_op("losses.GaussianNLL", {"input": PRED, "target": TARGET, "var": var},
                 full=full)
    close(got, F.gaussian_nll_loss(PRED, TARGET, var, full=full))
    by_hand = 0.5 * (var.log() + (PRED - TARGET) ** 2 / var) + (0.5 * math.log(2 * math.pi)
                                                               if full else 0.0)
    close(got, by_hand.mean())


def test_gaussian_nll_with_log_variance_equals_variance_form():
    log_var = torch.randn(6, 1)
    got = run_op("losses.GaussianNLL", {"input": PRED, "target": TARGET, "var": log_var},
                 var_input="log_variance", full=True, reduction="sum")
    close(got, F.gaussian_nll_loss(PRED, TARGET, log_var.exp(), full=True, reduction="sum"),
          1e-5)


def test_gaussian_nll_clamps_small_variances_like_torch():
    var = torch.tensor([[1e-9], [0.5], [2.0]], requires_grad=True)
    pred, y = PRED[:3, :1], TARGET[:3, :1]
    got = run_op("losses.GaussianNLL", {"input": pred, "target": y, "var": var}, eps=1e-3)
    (grad,) = torch.autograd.grad(got, var)
    reference = F.gaussian_nll_loss(pred, y, var, eps=1e-3)
    (expected,) = torch.autograd.grad(reference, var)
    close(got, reference, 1e-5)
    close(grad, expected, 1e-5)


def test_gaussian_nll_refuses_a_variance_of_the_wrong_shape():
    with pytest.raises(PortError) as e:
        build("losses.GaussianNLL", {"input": PRED, "target": TARGET,
                                     "var": torch.ones(6, 2)})
    assert e.value.port == "var"


def test_bce_on_probabilities_and_logits():
    logits, y = torch.randn(8, 1), torch.randint(0, 2, (8, 1)).float()
    prob = torch.sigmoid(logits)
    bce = run_op("losses.BCE", {"input": prob, "target": y})
    close(bce, F.binary_cross_entropy(prob, y))
    close(bce, -(y * prob.log() + (1 - y) * (1 - prob).log()).mean())
    close(run_op("losses.BCEWithLogits", {"input": logits, "target": y}), bce, 1e-5)


def test_bce_with_logits_pos_weight():
    logits, y = torch.randn(8, 2), torch.randint(0, 2, (8, 2)).float()
    got = run_op("losses.BCEWithLogits", {"input": logits, "target": y}, pos_weight=3.0)
    p = torch.sigmoid(logits)
    close(got, -(3.0 * y * p.log() + (1 - y) * (1 - p).log()).mean(), 1e-5)


def test_cross_entropy_sparse_dense_and_smoothing():
    scores, idx = torch.randn(5, 4), torch.tensor([0, 3, 1, 1, 2])
    close(run_op("losses.CrossEntropy", {"input": scores, "target": idx[:, None]}),
          F.cross_entropy(scores, idx))
    probs = torch.softmax(torch.randn(5, 4), -1)
    close(run_op("losses.CrossEntropy", {"input": scores, "target": probs}),
          -(probs * scores.log_softmax(-1)).sum(-1).mean())
    close(run_op("losses.CrossEntropy", {"input": scores, "target": idx},
                 label_smoothing=0.2), F.cross_entropy(scores, idx, label_smoothing=0.2))


def test_cross_entropy_refuses_targets_that_do_not_fit():
    with pytest.raises(PortError):
        build("losses.CrossEntropy", {"input": torch.randn(5, 4), "target": torch.rand(5, 3)})


def test_hinge_reads_zero_labels_as_minus_one():
    scores = torch.tensor([[2.0], [0.3], [-0.5], [0.2]])
    pm1 = torch.tensor([[1.0], [1.0], [-1.0], [-1.0]])
    expected = torch.tensor([0.0, 0.7, 0.5, 1.2]).mean()
    close(run_op("losses.Hinge", {"input": scores, "target": pm1}), expected)
    close(run_op("losses.Hinge", {"input": scores, "target": (pm1 > 0).long().reshape(-1)}),
          expected)
    close(run_op("losses.Hinge", {"input": scores, "target": pm1}, margin=2.0,
                 reduction="sum"), torch.tensor([0.0, 1.7, 1.5, 2.2]).sum())


def test_hinge_multiclass_is_torch_multi_margin():
    scores, idx = torch.randn(5, 3), torch.tensor([0, 2, 1, 1, 0])
    close(run_op("losses.Hinge", {"input": scores, "target": idx}, margin=0.5),
          F.multi_margin_loss(scores, idx, margin=0.5))
    with pytest.raises(PortError):
        build("losses.Hinge", {"input": scores, "target": torch.rand(5, 3)})


def test_kl_divergence_from_logits_and_log_probs():
    logits, p = torch.randn(4, 5), torch.softmax(torch.randn(4, 5), -1)
    log_q = logits.log_softmax(-1)
    by_hand = (p * (p.log() - log_q)).sum(-1).mean()
    close(run_op("losses.KLDivergence", {"input": logits, "target": p}), by_hand)
    close(run_op("losses.KLDivergence", {"input": log_q, "target": p},
                 input_kind="log_probs", reduction="sum"), by_hand * 4, 1e-5)
    close(F.kl_div(log_q, p, reduction="batchmean"), by_hand)


def test_kl_divergence_with_one_hot_targets_is_cross_entropy():
    logits, idx = torch.randn(4, 3), torch.tensor([2, 0, 1, 1])
    close(run_op("losses.KLDivergence", {"input": logits, "target": F.one_hot(idx, 3).float()}),
          F.cross_entropy(logits, idx))


def test_gaussian_kl_closed_form_and_torch_distributions():
    mu, logvar = torch.randn(6, 2), torch.randn(6, 2)
    got = run_op("losses.GaussianKL", {"mu": mu, "logvar": logvar})
    q = torch.distributions.Normal(mu, (0.5 * logvar).exp())
    reference = torch.distributions.kl_divergence(q, torch.distributions.Normal(0.0, 1.0))
    close(got, reference.sum(-1).mean(), 1e-5)
    close(run_op("losses.GaussianKL", {"mu": mu, "logvar": logvar}, reduction="sum"),
          reference.sum(), 1e-5)
    close(run_op("losses.GaussianKL", {"mu": torch.zeros(3, 2), "logvar": torch.zeros(3, 2)}),
          0.0)
    with pytest.raises(PortError):
        build("losses.GaussianKL", {"mu": mu, "logvar": logvar[:, :1]})


def test_weighted_sum_of_connected_losses():
    a, c = torch.tensor(2.0), torch.tensor(5.0)
    close(run_op("losses.WeightedSum", {"a": a, "c": c}, w_a=0.5, w_c=3.0), 16.0)
    close(run_op("losses.WeightedSum", {"b": a}), 2.0)
    with pytest.raises(PortError):
        build("losses.WeightedSum", {})
    with pytest.raises(PortError) as e:
        build("losses.WeightedSum", {"d": torch.ones(3)})
    assert e.value.port == "d"


def test_weighted_sum_trains_in_a_graph():
    from nodegraph.model.graph import Graph
    from nodegraph.runtime.train import train

    g = Graph("two losses")
    g.add("data.NoisyLine", id="data", n=32, batch_size=0, val_fraction=0.0)
    g.add("layers.Linear", id="lin", out_features=1)
    g.add("losses.MSE", id="mse")
    g.add("losses.MAE", id="mae")
    g.add("losses.WeightedSum", id="total", w_a=1.0, w_b=0.5)
    g.add("optimizers.SGD", id="opt", lr=0.1)
    g.connect(("data", "x"), ("lin", "input"))
    for loss in ("mse", "mae"):
        g.connect(("lin", "output"), (loss, "input"))
        g.connect(("data", "y"), (loss, "target"))
    g.connect(("mse", "loss"), ("total", "a"))
    g.connect(("mae", "loss"), ("total", "b"))
    g.connect(("total", "loss"), ("opt", "loss"))
    g.update_training(epochs=3, device="cpu")
    final = train(g).final["train"]
    close(final["total"], final["mse"] + 0.5 * final["mae"], 1e-5)
    close(final["loss"], final["total"])  # the parts are not counted twice


WIRING = {"input": ("lin", "output"), "target": ("data", "y"), "var": ("spread", "output"),
          "mu": ("lin", "output"), "logvar": ("spread", "output")}


@pytest.mark.parametrize("loss", ["losses.SSE", "losses.MAE", "losses.Huber", "losses.BCE",
                                  "losses.GaussianNLL", "losses.BCEWithLogits", "losses.Hinge",
                                  "losses.GaussianKL", "losses.KLDivergence"])
def test_losses_pass_validation_on_meta_tensors(loss):
    """Shape inference runs each loss on meta tensors: no value may be read there."""
    from nodegraph.check.validate import validate
    from nodegraph.model.graph import Graph

    g = Graph("meta")
    g.add("data.NoisyLine", id="data", n=16, batch_size=4)
    g.add("layers.Linear", id="lin", out_features=1)
    g.add("layers.Linear", id="spread", out_features=1)
    g.add(loss, id="loss", **({"pos_weight": 2.0} if loss == "losses.BCEWithLogits" else {}))
    g.add("optimizers.Adam", id="opt")
    g.connect(("data", "x"), ("lin", "input"))
    g.connect(("data", "x"), ("spread", "input"))
    for port in g.registry.get(loss).inputs:
        g.connect(WIRING[port.name], ("loss", port.name))
    g.connect(("loss", "loss"), ("opt", "loss"))
    report = validate(g, for_training=True)
    assert report.ok, [str(p) for p in report.errors]
    assert report.shape("loss", "loss") == ()


def test_cross_entropy_takes_sequences_and_ignores_minus_100():
    logits = torch.randn(3, 5, 7)
    target = torch.randint(0, 7, (3, 5))
    target[0, 0] = -100
    got = run_op("losses.CrossEntropy", {"input": logits, "target": target})
    want = F.cross_entropy(logits.permute(0, 2, 1), target, ignore_index=-100)
    assert got.item() == pytest.approx(want.item(), rel=1e-6)


# -- reduction none and scale ----------------------------------------------------------

SCALE = 0.5
LOGITS, CLASSES = torch.randn(6, 4), torch.tensor([0, 3, 1, 2, 2, 0])
PROBS = torch.rand(6, 3)
BITS = (torch.rand(6, 3) > 0.5).float()
# (block, inputs, params, torch's unreduced loss): reductions of the last are the reference
PER_ELEMENT = [
    ("losses.MSE", {"input": PRED, "target": TARGET}, {},
     lambda: F.mse_loss(PRED, TARGET, reduction="none")),
    ("losses.MAE", {"input": PRED, "target": TARGET}, {},
     lambda: F.l1_loss(PRED, TARGET, reduction="none")),
    ("losses.Huber", {"input": PRED, "target": TARGET}, {"delta": 0.7},
     lambda: F.huber_loss(PRED, TARGET, reduction="none", delta=0.7)),
    ("losses.BCE", {"input": PROBS, "target": BITS}, {},
     lambda: F.binary_cross_entropy(PROBS, BITS, reduction="none")),
    ("losses.BCEWithLogits", {"input": PRED, "target": BITS}, {"pos_weight": 2.0},
     lambda: F.binary_cross_entropy_with_logits(PRED, BITS, reduction="none",
                                                pos_weight=torch.tensor(2.0))),
    ("losses.CrossEntropy", {"input": LOGITS, "target": CLASSES}, {"label_smoothing": 0.1},
     lambda: F.cross_entropy(LOGITS, CLASSES, reduction="none", label_smoothing=0.1)),
    ("losses.GaussianNLL", {"input": PRED, "target": TARGET, "var": PROBS + 0.1}, {},
     lambda: F.gaussian_nll_loss(PRED, TARGET, PROBS + 0.1, reduction="none")),
    ("losses.Hinge", {"input": LOGITS, "target": CLASSES}, {"margin": 0.5},
     lambda: F.multi_margin_loss(LOGITS, CLASSES, margin=0.5, reduction="none")),
]


@pytest.mark.parametrize("case", PER_ELEMENT, ids=[c[0] for c in PER_ELEMENT])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_reduction_and_scale_match_torch(case, reduction):
    block_id, inputs, params, unreduced = case
    want = unreduced()
    want = {"mean": want.mean(), "sum": want.sum(), "none": want}[reduction]
    got = run_op(block_id, inputs, reduction=reduction, scale=SCALE, **params)
    assert got.shape == want.shape
    close(got, SCALE * want, 1e-5)
    close(run_op(block_id, inputs, reduction=reduction, **params), want, 1e-5)


def test_half_mse_is_scale_one_half():
    got = run_op("losses.MSE", {"input": PRED, "target": TARGET}, scale=0.5)
    close(got, 0.5 * ((PRED - TARGET) ** 2).mean())
    close(run_op("losses.SSE", {"input": PRED, "target": TARGET}, scale=0.5),
          0.5 * ((PRED - TARGET) ** 2).sum(), 1e-5)


def test_default_scale_builds_the_same_torch_module():
    """Files written before `scale` existed build exactly the module they built before."""
    from torch import nn

    assert type(build("losses.MSE", {"input": PRED, "target": TARGET})[-1]) is nn.MSELoss
    assert type(build("losses.MSE", {"input": PRED, "target": TARGET}, scale=2.0)[-1]) \
        is not nn.MSELoss


def test_cross_entropy_none_keeps_the_sequence_shape():
    logits, target = torch.randn(3, 5, 7), torch.randint(0, 7, (3, 5))
    target[0, 0] = -100
    got = run_op("losses.CrossEntropy", {"input": logits, "target": target}, reduction="none")
    want = F.cross_entropy(logits.permute(0, 2, 1), target, reduction="none")
    assert got.shape == (3, 5)
    close(got, want, 1e-5)


def test_hinge_single_score_none_is_per_element():
    s, t = torch.tensor([2.0, -0.3, 0.5, -1.2]), torch.tensor([1.0, 1.0, 0.0, 1.0])
    got = run_op("losses.Hinge", {"input": s, "target": t}, reduction="none", scale=2.0)
    close(got, 2.0 * torch.tensor([0.0, 1.3, 1.5, 2.2]))


def test_divergences_none_give_one_value_per_sample():
    logits, p = torch.randn(5, 4), torch.softmax(torch.randn(5, 4), -1)
    got = run_op("losses.KLDivergence", {"input": logits, "target": p}, reduction="none",
                 scale=0.25)
    want = F.kl_div(F.log_softmax(logits, -1), p, reduction="none").sum(-1)
    assert got.shape == (5,)
    close(got, 0.25 * want, 1e-5)
    close(run_op("losses.KLDivergence", {"input": logits, "target": p}, scale=0.25),
          0.25 * F.kl_div(F.log_softmax(logits, -1), p, reduction="batchmean"), 1e-5)
    mu, logvar = torch.randn(5, 3), torch.randn(5, 3)
    q = torch.distributions.Normal(mu, (0.5 * logvar).exp())
    prior = torch.distributions.Normal(torch.zeros(3), torch.ones(3))
    per_sample = torch.distributions.kl_divergence(q, prior).sum(-1)
    got = run_op("losses.GaussianKL", {"mu": mu, "logvar": logvar}, reduction="none", scale=3.0)
    assert got.shape == (5,)
    close(got, 3.0 * per_sample, 1e-5)
    close(run_op("losses.GaussianKL", {"mu": mu, "logvar": logvar}, scale=3.0),
          3.0 * per_sample.mean(), 1e-5)


def _line_graph(reduction: str):
    from nodegraph.model.graph import Graph

    g = Graph("per sample")
    g.add("data.NoisyLine", id="data", n=16, batch_size=4, val_fraction=0.0)
    g.add("layers.Linear", id="lin", out_features=1)
    g.add("losses.MSE", id="mse", reduction=reduction)
    g.add("optimizers.SGD", id="opt", lr=0.1)
    g.connect(("data", "x"), ("lin", "input"))
    g.connect(("lin", "output"), ("mse", "input"))
    g.connect(("data", "y"), ("mse", "target"))
    g.connect(("mse", "loss"), ("opt", "loss"))
    return g


def test_unreduced_loss_has_the_per_element_shape():
    from nodegraph.check.validate import validate

    g = _line_graph("none")
    g.remove("opt")
    report = validate(g)
    assert report.ok, [str(p) for p in report.errors]
    assert report.shape("mse", "loss") == (4, 1)


def test_unreduced_loss_into_an_optimizer_is_refused_on_its_port():
    from nodegraph.check.validate import validate

    report = validate(_line_graph("none"), for_training=True)
    problems = [p for p in report.errors if p.node == "opt" and p.port == "loss"]
    assert problems, [str(p) for p in report.errors]
    assert "mse.loss" in problems[0].message and "(4, 1)" in problems[0].message
    assert "reduction" in problems[0].hint
    assert validate(_line_graph("sum"), for_training=True).ok


def test_scaled_loss_exports_to_python_with_the_same_curve(tmp_path):
    import importlib.util

    import nodegraph
    from nodegraph.interop.export import to_python

    g = _line_graph("mean")
    g.set_param("mse", "scale", 0.5)
    g.update_training(epochs=2, device="cpu")
    path = to_python(g, tmp_path / "half_mse.py").path
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    _, mine = module.train(log=lambda line: None)
    theirs = nodegraph.train(g, device="cpu")
    assert [h["train"]["mse"] for h in mine["history"]] == pytest.approx(
        [h["train"]["mse"] for h in theirs.history], rel=1e-6)
