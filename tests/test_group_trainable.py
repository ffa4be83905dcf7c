"""`trainable = false` on a group instance: every weight inside stays as it is (issue #34).

Fine-tuning an imported model freezes its lower groups with one param. The frozen weights
must come out of training bit for bit as they went in while the rest learns; no optimizer
holds them (Adam keeps no state for them); the param is checked, saved in the file and in
a `.ngz`, nests (an instance inside a frozen group is frozen too), and the Python export
writes the same freezing.
"""

from __future__ import annotations

import pytest
import torch

import nodegraph
from nodegraph.model import fileformat
from nodegraph.model.errors import GraphError
from nodegraph.model.graph import Graph
from nodegraph.model.groups import SEP, flatten, make_group


def _graph(trainable: bool | None = False) -> tuple[Graph, str]:
    """Blobs -> [Linear 16 -> Tanh -> Linear 8 -> Tanh] (a group) -> head Linear 3."""
    g = Graph("frozen-body")
    g.add("data.Blobs", id="data", n=240, centers=3, batch_size=32)
    g.add("layers.Linear", id="fc1", out_features=16)
    g.add("activations.Tanh", id="act1")
    g.add("layers.Linear", id="fc2", out_features=8)
    g.add("activations.Tanh", id="act2")
    g.add("layers.Linear", id="head", out_features=3)
    g.add("losses.CrossEntropy", id="loss")
    g.add("optimizers.Adam", id="opt", lr=0.05)
    for src, dst in [("data.x", "fc1.input"), ("fc1.output", "act1.input"),
                     ("act1.output", "fc2.input"), ("fc2.output", "act2.input"),
                     ("act2.output", "head.input"), ("head.output", "loss.input"),
                     ("data.y", "loss.target"), ("loss.loss", "opt.loss")]:
        g.connect(tuple(src.split(".")), tuple(dst.split(".")))
    g.update_training({"epochs": 3, "seed": 0})
    body = make_group(g, ["fc1", "act1", "fc2", "act2"], "Body", instance="body")
    if trainable is not None:
        g.set_param(body, "trainable", trainable)
    return g, body


def _weights(module, prefix: str) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in module.block_state().items()
            if k.startswith(prefix)}


def test_a_frozen_group_keeps_its_weights_bit_for_bit_while_the_head_learns():
    g, body = _graph(trainable=False)
    before = nodegraph.compile(g, device="cpu")
    frozen0 = _weights(before.module, body + SEP)
    head0 = _weights(before.module, "head.")
    assert len(frozen0) == 4 and len(head0) == 2  # two Linears' weight and bias
    result = nodegraph.train(g, device="cpu")
    frozen1 = _weights(result.module, body + SEP)
    head1 = _weights(result.module, "head.")
    assert all(torch.equal(frozen0[k], frozen1[k]) for k in frozen0)
    assert all(not torch.equal(head0[k], head1[k]) for k in head0)
    assert result.history[-1]["train"]["loss"] < result.history[0]["train"]["loss"]
    [run] = result.compiled.optimizers
    stepped = {id(p) for group in run.optimizer.param_groups for p in group["params"]}
    inside = [p for n, p in result.module.named_parameters() if n.startswith(f"blocks.{body}")]
    assert inside and not any(id(p) in stepped for p in inside)
    assert not any(id(p) in run.optimizer.state for p in inside)  # no Adam moments kept
    assert all(not p.requires_grad for p in inside)


def test_the_same_graph_trainable_moves_the_group_and_the_default_is_trainable():
    for trainable in (True, None):  # None: the param left at its default
        g, body = _graph(trainable=trainable)
        frozen0 = _weights(nodegraph.compile(g, device="cpu").module, body + SEP)
        result = nodegraph.train(g, epochs=1, device="cpu")
        moved = _weights(result.module, body + SEP)
        assert all(not torch.equal(frozen0[k], moved[k]) for k in frozen0)


def test_a_frozen_group_counts_no_trainable_parameters():
    g, body = _graph(trainable=True)
    assert nodegraph.validate(g).param_counts[body] == 2 * 16 + 16 + 16 * 8 + 8
    g.set_param(body, "trainable", False)
    report = nodegraph.validate(g, for_training=True)
    assert report.ok, report.problems
    assert report.param_counts[body] == 0 and report.param_counts["head"] == 8 * 3 + 3
    assert nodegraph.compile(g, device="cpu").parameter_count() == 27


def test_freezing_everything_leaves_nothing_to_train():
    g, _ = _graph(trainable=True)
    whole = make_group(g, ["body", "head"], "Net", instance="net")
    g.set_param(whole, "trainable", False)
    report = nodegraph.validate(g, for_training=True)
    assert [p.kind for p in report.errors] == ["nothing_to_train"], report.problems


def test_an_instance_inside_a_frozen_group_is_frozen_and_a_frozen_inner_one_alone():
    g, body = _graph(trainable=True)
    outer = make_group(g, [body, "head"], "Net", instance="net")
    assert flatten(g).frozen == set()
    g.set_param(outer, "trainable", False)
    assert flatten(g).frozen == {f"net{SEP}body{SEP}{n}" for n in ("fc1", "act1", "fc2", "act2")
                                 } | {f"net{SEP}body", f"net{SEP}head"}
    g.set_param(outer, "trainable", True)
    g.groups["Net"].body.set_param(body, "trainable", False)  # the inner instance only
    flat = flatten(g)
    assert flat.frozen == {f"net{SEP}body{SEP}{n}" for n in ("fc1", "act1", "fc2", "act2")}
    result = nodegraph.train(g, epochs=1, device="cpu")
    trained = {id(p) for p in result.compiled.optimizers[0].params}
    names = {n for n, p in result.module.named_parameters() if id(p) in trained}
    assert names == {f"blocks.net{SEP}head.weight", f"blocks.net{SEP}head.bias"}


def test_trainable_must_be_true_or_false():
    g, body = _graph(trainable=None)
    with pytest.raises(GraphError, match="trainable"):
        g.set_param(body, "trainable", "no")
    g.set_param(body, "trainable", "no", strict=False)  # as a hand-edited file has it
    [problem] = nodegraph.validate(g).errors
    assert (problem.node, problem.port, problem.kind) == (body, "trainable", "bad_param")
    assert "true or false" in problem.message


def test_trainable_round_trips_through_the_file_and_a_ngz(tmp_path):
    g, body = _graph(trainable=False)
    path = tmp_path / "frozen.json"
    fileformat.save(g, path)
    again = fileformat.load(path)
    assert again.load_problems == [] and again.node(body).params["trainable"] is False
    assert fileformat.dumps(again) == fileformat.dumps(g)
    model = nodegraph.fit(again, epochs=1)
    saved = model.save(tmp_path / "frozen.ngz")
    loaded = nodegraph.load_model(saved)
    assert loaded.graph.node(body).params["trainable"] is False
    frozen0 = _weights(loaded.module, body + SEP)
    loaded.fit(epochs=1)  # training on from the saved model keeps the group frozen
    frozen1 = _weights(loaded.module, body + SEP)
    assert frozen0 and all(torch.equal(frozen0[k], frozen1[k]) for k in frozen0)


def test_the_python_export_freezes_the_same_weights(tmp_path):
    """The exported script freezes the group's layers and steps only the head: its training
    matches nodegraph's, and its frozen layers end as they began."""
    import importlib.util

    from nodegraph.interop.export import to_python

    g, body = _graph(trainable=False)
    path = to_python(g, tmp_path / "model.py").path
    text = path.read_text()
    assert f"self.{body}{SEP}fc1.requires_grad_(False)" in text
    assert "torch.optim.Adam(model.head.parameters()" in text
    spec = importlib.util.spec_from_file_location("frozen_export", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    torch.manual_seed(0)
    start = module.FrozenBody().state_dict()
    model, exported = module.train(epochs=2, log=lambda *_: None)
    ours = nodegraph.train(g, epochs=2, device="cpu")
    for theirs, mine in zip(exported["history"], ours.history, strict=True):
        assert theirs["train"]["loss"] == pytest.approx(mine["train"]["loss"], rel=1e-5)
    end = model.state_dict()
    assert all(torch.equal(start[k], end[k]) for k in start if k.startswith(body))
    assert not torch.equal(start["head.weight"], end["head.weight"])
