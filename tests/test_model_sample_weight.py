"""`fit(sample_weight=...)` (issue #35, item 2): each sample's loss times its weight, a
batch's loss mean(loss_i * w_i) as Keras reduces it, checked against the same training
loop written by hand in PyTorch; the weights through shuffling, batching, the data
block's validation split and `validation_data=(x, y, w)`; and the refusals, each naming
the argument."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import nodegraph
from nodegraph.model.errors import NodegraphError


def linear_graph(loss: str = "mse", batch_size: int = 4, shuffle: bool = False,
                 lr: float = 0.1, **data) -> nodegraph.Graph:
    """data.Arrays (3 features) -> Linear -> MSE (1 output) or CrossEntropy (3 classes),
    plain SGD."""
    g = nodegraph.Graph("weighed")
    kind = "class" if loss == "ce" else "value"
    g.add("data.Arrays", "data", x_shape=[3], y_shape=[] if loss == "ce" else [1],
          target_kind=kind, batch_size=batch_size, shuffle=shuffle, normalize="none", **data)
    g.add("layers.Linear", "linear", out_features=3 if loss == "ce" else 1)
    g.add("losses.CrossEntropy" if loss == "ce" else "losses.MSE", "loss")
    g.add("optimizers.SGD", "opt", lr=lr)
    g.connect(("data", "x"), ("linear", "input"))
    g.connect(("linear", "output"), ("loss", "input"))
    g.connect(("data", "y"), ("loss", "target"))
    g.connect(("loss", "loss"), ("opt", "loss"))
    return g


def samples(loss: str = "mse", n: int = 12, seed: int = 0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 3)).astype(np.float32)
    if loss == "ce":
        y = rng.integers(0, 3, n)
    else:
        y = (x @ np.array([[1.0], [-2.0], [0.5]]) + 0.3 * rng.normal(size=(n, 1))
             ).astype(np.float32)
    w = rng.uniform(0.0, 3.0, n).astype(np.float32)
    return x, y, w


def initial(graph: nodegraph.Graph, x, y) -> torch.nn.Linear:
    """The seeded weights a fit starts from (a fit of 0 epochs holds them), in a Linear."""
    state = nodegraph.fit(graph, x=x, y=y, epochs=0).weights()
    lin = torch.nn.Linear(3, state["linear.weight"].shape[0])
    with torch.no_grad():
        lin.weight.copy_(state["linear.weight"])
        lin.bias.copy_(state["linear.bias"])
    return lin


def per_sample(loss: str, out: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """One loss per sample, as the losses give them with reduction 'none'."""
    if loss == "ce":
        return F.cross_entropy(out, target, reduction="none")
    return F.mse_loss(out, target, reduction="none").mean(dim=1)


def by_hand(lin: torch.nn.Linear, loss: str, x, y, w, epochs: int = 1, batch: int = 4,
            lr: float = 0.1, orders=None) -> list[float]:
    """SGD written out: per batch, (loss_none * w).mean(), backward, step. Returns each
    epoch's train loss as the trainer reports it (batch losses weighed by batch size)."""
    opt = torch.optim.SGD(lin.parameters(), lr=lr)
    xt, yt, wt = torch.as_tensor(x), torch.as_tensor(y), torch.as_tensor(w)
    n, reported = len(x), []
    for epoch in range(epochs):
        order = torch.arange(n) if orders is None else orders[epoch]
        total = 0.0
        for i in range(0, n, batch):
            idx = order[i:i + batch]
            value = (per_sample(loss, lin(xt[idx]), yt[idx]) * wt[idx]).mean()
            opt.zero_grad()
            value.backward()
            opt.step()
            total += float(value.detach()) * len(idx)
        reported.append(total / n)
    return reported


def close(a: torch.Tensor, b: torch.Tensor, tol: float = 1e-6) -> None:
    torch.testing.assert_close(a, b, atol=tol, rtol=tol)


@pytest.mark.parametrize("loss", ["mse", "ce"])
def test_one_epoch_equals_sgd_written_by_hand(loss):
    x, y, w = samples(loss)
    lin = initial(linear_graph(loss), x, y)
    want = by_hand(lin, loss, x, y, w)
    m = nodegraph.fit(linear_graph(loss), x=x, y=y, sample_weight=w, epochs=1)
    got = m.weights()
    close(got["linear.weight"], lin.weight.detach())
    close(got["linear.bias"], lin.bias.detach())
    assert m.history[0]["train"]["loss"] == pytest.approx(want[0], rel=1e-6)
    # and the weights changed the run: without them it ends elsewhere
    plain = nodegraph.fit(linear_graph(loss), x=x, y=y, epochs=1).weights()
    assert not torch.allclose(plain["linear.weight"], got["linear.weight"], atol=1e-4)


def test_weights_travel_with_their_samples_through_shuffling():
    x, y, w = samples("mse", n=10)
    g = linear_graph(shuffle=True, batch_size=3)
    lin = initial(g, x, y)
    # the trainer's batch order: a generator seeded with the run's seed (0), one
    # permutation per epoch
    rng = torch.Generator().manual_seed(0)
    orders = [torch.randperm(10, generator=rng) for _ in range(3)]
    want = by_hand(lin, "mse", x, y, w, epochs=3, batch=3, orders=orders)
    m = nodegraph.fit(g, x=x, y=y, sample_weight=w, epochs=3)
    close(m.weights()["linear.weight"], lin.weight.detach())
    assert [h["train"]["loss"] for h in m.history] == pytest.approx(want, rel=1e-6)


@pytest.mark.parametrize("loss", ["mse", "ce"])
def test_weights_of_one_are_no_weights(loss):
    x, y, _ = samples(loss)
    plain = nodegraph.fit(linear_graph(loss, shuffle=True), x=x, y=y, epochs=3)
    ones = nodegraph.fit(linear_graph(loss, shuffle=True), x=x, y=y, epochs=3,
                         sample_weight=np.ones(len(x)))
    # the trained weights bit for bit: the gradient of mean(loss_i * 1) is the block's own
    for k, v in plain.weights().items():
        assert torch.equal(v, ones.weights()[k]), k
    # the reported losses: MSE's mean is torch's mean of the same per-element losses,
    # exactly; cross-entropy's fused kernel sums its rows in another order than
    # Tensor.mean, so its figures agree to float32 rounding
    for a, b in zip(plain.history, ones.history, strict=True):
        if loss == "mse":
            assert a["train"] == b["train"]
        else:
            assert a["train"]["loss"] == pytest.approx(b["train"]["loss"], rel=1e-6)


def test_weight_zero_on_half_trains_as_the_other_half_alone():
    """Full-batch gradient descent on 16 samples. mean(loss_i * w_i) divides by the
    batch's 16 samples, zeros included: with 8 samples weighed 2 and 8 weighed 0 that is
    exactly the mean loss of the 8 alone; weighed 1 (not 2) it is half of it, so it trains
    as the 8 alone at half the learning rate."""
    x, y, _ = samples("mse", n=16, seed=3)
    kept = np.array([0, 2, 3, 5, 8, 11, 12, 15])
    chosen = np.zeros(16, np.float32)
    chosen[kept] = 1.0
    alone = nodegraph.fit(linear_graph(batch_size=0), x=x[kept], y=y[kept], epochs=5)
    twice = nodegraph.fit(linear_graph(batch_size=0), x=x, y=y, epochs=5,
                          sample_weight=2 * chosen)
    for k, v in alone.weights().items():
        close(twice.weights()[k], v)
    assert [h["train"]["loss"] for h in twice.history] == \
        pytest.approx([h["train"]["loss"] for h in alone.history], rel=1e-6)
    once = nodegraph.fit(linear_graph(batch_size=0), x=x, y=y, epochs=5,
                         sample_weight=chosen)
    half_lr = nodegraph.fit(linear_graph(batch_size=0, lr=0.05), x=x[kept], y=y[kept],
                            epochs=5)
    for k, v in half_lr.weights().items():
        close(once.weights()[k], v)
    # the unweighted mean over the 16 trains elsewhere: the zeros did leave samples out
    every = nodegraph.fit(linear_graph(batch_size=0), x=x, y=y, epochs=5).weights()
    assert not torch.allclose(every["linear.weight"], alone.weights()["linear.weight"],
                              atol=1e-3)


def weighed_loss(m, loss: str, x, y, w) -> float:
    """The model's mean(loss_i * w_i) over the given rows, from its trained weights."""
    state = m.weights()
    with torch.no_grad():
        out = torch.as_tensor(x) @ state["linear.weight"].T + state["linear.bias"]
        return float((per_sample(loss, out, torch.as_tensor(y)) * torch.as_tensor(w)).mean())


@pytest.mark.parametrize("loss", ["mse", "ce"])
def test_the_validation_split_takes_its_slice_of_the_weights(loss):
    x, y, w = samples(loss, n=40, seed=1)
    m = nodegraph.fit(linear_graph(loss, val_fraction=0.25, split_seed=4), x=x, y=y,
                      sample_weight=w, epochs=1)
    ds = m.compiled.datasets["data"]
    rows = {s: ds.rows[s].numpy() for s in ("train", "val")}
    assert len(rows["val"]) == 10 and len(rows["train"]) == 30
    held = m.fitted_sample_weights["data"]
    for s in ("train", "val"):  # each split's weights are its own rows'
        assert torch.equal(held[s], torch.as_tensor(w[rows[s]]))
    v = rows["val"]
    want = weighed_loss(m, loss, x[v], y[v], w[v])
    assert m.history[0]["val"]["loss"] == pytest.approx(want, rel=1e-6)
    assert m.evaluate("val")["loss"] == pytest.approx(want, rel=1e-6)
    assert m.final["val"]["loss"] == pytest.approx(want, rel=1e-6)
    unweighed = weighed_loss(m, loss, x[v], y[v], np.ones(len(v), np.float32))
    assert want != pytest.approx(unweighed, rel=1e-3)
    # the model outside fit and evaluate holds no weights: predict reads the split as ever
    assert "sample_weight" not in ds.ports
    assert m.predict("val").shape[0] == 10


def test_validation_data_with_weights_and_evaluate_with_weights():
    x, y, w = samples("ce", n=24, seed=2)
    xv, yv, wv = samples("ce", n=9, seed=5)
    m = nodegraph.fit(linear_graph("ce"), x=x, y=y, sample_weight=w,
                      validation_data=(xv, yv, wv), epochs=2)
    want = weighed_loss(m, "ce", xv, yv, wv)
    assert m.history[-1]["val"]["loss"] == pytest.approx(want, rel=1e-6)
    assert m.evaluate(x=xv, y=yv, sample_weight=wv)["loss"] == pytest.approx(want, rel=1e-6)
    plain = weighed_loss(m, "ce", xv, yv, np.ones(9, np.float32))
    assert m.evaluate(x=xv, y=yv)["loss"] == pytest.approx(plain, rel=1e-6)
    # validation data without weights weighs its samples 1, as Keras does
    m2 = nodegraph.fit(linear_graph("ce"), x=x, y=y, sample_weight=w,
                       validation_data=(xv, yv), epochs=1)
    assert m2.history[0]["val"]["loss"] == pytest.approx(
        weighed_loss(m2, "ce", xv, yv, np.ones(9, np.float32)), rel=1e-6)


def test_fit_on_keeps_the_weights_and_every_form_of_them_is_the_same():
    pd = pytest.importorskip("pandas")
    x, y, w = samples("mse", n=12)
    whole = nodegraph.fit(linear_graph(shuffle=True), x=x, y=y, sample_weight=w, epochs=3)
    parts = nodegraph.fit(linear_graph(shuffle=True), x=x, y=y, sample_weight=w, epochs=1)
    parts.fit(epochs=2)  # on the same data, with the weights it had
    for k, v in whole.weights().items():
        assert torch.equal(parts.weights()[k], v), k
    want = whole.history
    for form in (torch.as_tensor(w), list(map(float, w)), pd.Series(w),
                 w.astype(np.float64)):
        got = nodegraph.fit(linear_graph(shuffle=True), x=x, y=y, sample_weight=form,
                            epochs=3).history
        assert [h["train"] for h in got] == [h["train"] for h in want], type(form)


@pytest.mark.parametrize("loss", ["mse", "ce"])
def test_a_trained_model_fits_on_new_weighted_arrays_as_by_hand(loss):
    x, y, _ = samples(loss, n=12)
    x2, y2, w2 = samples(loss, n=8, seed=7)
    m = nodegraph.fit(linear_graph(loss), x=x, y=y, epochs=1)  # unweighted first
    state = m.weights()
    lin = torch.nn.Linear(3, state["linear.weight"].shape[0])
    with torch.no_grad():
        lin.weight.copy_(state["linear.weight"])
        lin.bias.copy_(state["linear.bias"])
    want = by_hand(lin, loss, x2, y2, w2, epochs=2)  # plain SGD: no state to carry
    m.fit(x2, y2, sample_weight=w2, epochs=2)
    close(m.weights()["linear.weight"], lin.weight.detach())
    assert [h["train"]["loss"] for h in m.history[1:]] == pytest.approx(want, rel=1e-6)
    m.fit(x2, y2, epochs=1)  # new arrays without weights: unweighted again
    assert m.fitted_sample_weights == {}


def test_class_and_sample_weights_together_divide_by_the_batch_size():
    """Keras' rule for both: each sample's loss times its class's weight times its own,
    the sum over the batch's samples divided by their number (not by the total class
    weight, as CrossEntropy's own mean with class weights alone divides)."""
    x, y, w = samples("ce", n=12)
    m = nodegraph.fit(linear_graph("ce", batch_size=0), x=x, y=y, epochs=1,
                      class_weight={0: 0.5, 2: 3.0}, sample_weight=w)
    lin = initial(linear_graph("ce", batch_size=0), x, y)  # the same seeded start
    with torch.no_grad():
        per = F.cross_entropy(lin(torch.as_tensor(x)), torch.as_tensor(y), reduction="none")
    cw = torch.tensor([0.5, 1.0, 3.0])[torch.as_tensor(y)]
    want = float((per * cw * torch.as_tensor(w)).mean())
    assert m.history[0]["train"]["loss"] == pytest.approx(want, rel=1e-6)


def test_refusals_name_the_argument():
    x, y, w = samples("mse", n=12)

    def fit(**kw):
        return nodegraph.fit(linear_graph(), **{"x": x, "y": y, "epochs": 1, **kw})

    with pytest.raises(NodegraphError, match=r"fit\(sample_weight=...\) has 11 weights for "
                                             r"12 samples"):
        fit(sample_weight=w[:11])
    with pytest.raises(NodegraphError, match=r"fit\(sample_weight=...\): weights must be "
                                             r">= 0 \(sample 3 has -1\)"):
        fit(sample_weight=np.where(np.arange(12) == 3, -1.0, 1.0))
    for bad in (np.nan, np.inf):
        with pytest.raises(NodegraphError, match=r"fit\(sample_weight=...\): weights must "
                                                 r"be finite numbers \(sample 5 has"):
            fit(sample_weight=np.where(np.arange(12) == 5, bad, 1.0))
    with pytest.raises(NodegraphError, match=r"fit\(sample_weight=...\) takes a 1-D array, "
                                             r"one weight per sample \(got shape \(12, 1\)"):
        fit(sample_weight=w[:, None])
    with pytest.raises(NodegraphError, match=r"fit\(sample_weight=...\) takes numbers"):
        fit(sample_weight=["a"] * 12)
    with pytest.raises(NodegraphError, match=r"fit\(validation_data=...\)'s sample weights "
                                             r"\(its third item\) has 3 weights for 4"):
        fit(sample_weight=w, validation_data=(x[:4], y[:4], w[:3]))
    with pytest.raises(NodegraphError, match=r"sample_weight=...\) weighs your own samples"):
        nodegraph.fit(nodegraph.load("examples/line_fit.json"), epochs=1, sample_weight=w)
    m = fit()
    with pytest.raises(NodegraphError, match=r"evaluate\(sample_weight=...\) weighs your "
                                             "own samples"):
        m.evaluate(sample_weight=w)
    with pytest.raises(NodegraphError, match=r"evaluate\(sample_weight=...\) has 2 weights"):
        m.evaluate(x=x, y=y, sample_weight=w[:2])


def test_a_loss_that_cannot_weigh_its_samples_is_refused():
    x, y, w = samples("mse", n=12)
    g = linear_graph()
    g.remove("loss")
    g.add("losses.SSE", "loss")  # a sum of squares: no per-sample reduction
    g.connect(("linear", "output"), ("loss", "input"))
    g.connect(("data", "y"), ("loss", "target"))
    g.connect(("loss", "loss"), ("opt", "loss"))
    with pytest.raises(NodegraphError, match=r"optimizer 'opt' minimises 'loss' "
                                             r"\(losses.SSE\), which cannot weigh its "
                                             r"samples: it has no per-sample \('none'\) "
                                             "reduction"):
        nodegraph.fit(g, x=x, y=y, sample_weight=w, epochs=1)
    nodegraph.fit(g, x=x, y=y, epochs=1)  # unweighted, it trains


def test_a_weighted_sum_is_weighed_part_by_part_and_a_sum_reduction_sums():
    x, y, w = samples("mse", n=8)
    g = linear_graph(batch_size=0)
    g.set_param("loss", "reduction", "sum")
    g.add("losses.MAE", "mae")
    g.add("losses.WeightedSum", "total", w_b=0.5)
    g.connect(("linear", "output"), ("mae", "input"))
    g.connect(("data", "y"), ("mae", "target"))
    g.disconnect(next(e for e in g.edges_into("opt") if e.dst_port == "loss"))
    g.connect(("loss", "loss"), ("total", "a"))
    g.connect(("mae", "loss"), ("total", "b"))
    g.connect(("total", "loss"), ("opt", "loss"))
    m = nodegraph.fit(g, x=x, y=y, sample_weight=w, epochs=1)
    lin = initial(g, x, y)
    with torch.no_grad():
        out, t, wt = lin(torch.as_tensor(x)), torch.as_tensor(y), torch.as_tensor(w)
        sse = ((out - t) ** 2 * wt[:, None]).sum()  # reduction sum: sum(loss_i * w_i)
        mae = ((out - t).abs().mean(1) * wt).mean()
    train = m.history[0]["train"]  # by node: "loss" is the MSE node's own
    assert train["total"] == pytest.approx(float(sse + 0.5 * mae), rel=1e-6)
    assert train["loss"] == pytest.approx(float(sse), rel=1e-6)
    assert train["mae"] == pytest.approx(float(mae), rel=1e-6)


def test_a_divergence_batchmean_sums_each_sample_and_divides_by_the_batch():
    rng = np.random.default_rng(4)
    x = rng.normal(size=(10, 3)).astype(np.float32)
    p = rng.dirichlet(np.ones(3), 10).astype(np.float32)  # target distributions
    w = rng.uniform(0, 2, 10).astype(np.float32)
    g = linear_graph(batch_size=0)
    g.set_param("data", "y_shape", [3])
    g.set_param("linear", "out_features", 3)
    g.remove("loss")
    g.add("losses.KLDivergence", "loss")  # reduction batchmean
    g.connect(("linear", "output"), ("loss", "input"))
    g.connect(("data", "y"), ("loss", "target"))
    g.connect(("loss", "loss"), ("opt", "loss"))
    m = nodegraph.fit(g, x=x, y=p, sample_weight=w, epochs=1)
    lin = initial(g, x, p)
    with torch.no_grad():
        log_q = lin(torch.as_tensor(x)).log_softmax(-1)
        pt = torch.as_tensor(p)
        per = (pt * (pt.log() - log_q)).sum(-1)  # one divergence per sample
    want = float((per * torch.as_tensor(w)).sum() / 10)
    assert m.history[0]["train"]["loss"] == pytest.approx(want, rel=1e-5)
