"""Groups: subgraphs used as blocks, nested, instanced with own or shared weights; ties."""

from __future__ import annotations

import pytest
import torch

import nodegraph
from nodegraph.model import fileformat
from nodegraph.model.errors import GraphError
from nodegraph.model.graph import Graph, Tie
from nodegraph.model.groups import flatten, make_group


def history(result):
    return [{k: v for k, v in h.items() if k != "seconds"} for h in result.history]


def test_grouping_nodes_keeps_the_model_and_its_training():
    plain = nodegraph.load("examples/xor.json")
    grouped = plain.copy()
    instance = make_group(grouped, ["hidden", "act", "out"], "mlp")
    assert grouped.node(instance).type == "group.mlp"
    assert set(grouped.groups["mlp"].inputs) == {"input"}
    assert set(grouped.groups["mlp"].outputs) == {"output"}
    report = nodegraph.validate(grouped, for_training=True)
    assert report.ok, report.problems
    assert report.param_counts[instance] == 17
    assert report.shape_text(instance, "output") == "(N, 1)"
    a, b = nodegraph.train(plain, epochs=30), nodegraph.train(grouped, epochs=30)
    assert history(a) == history(b)


def test_groups_save_load_and_train_identically(tmp_path):
    g = nodegraph.load("examples/xor.json")
    make_group(g, ["hidden", "act"], "layer")
    path = tmp_path / "grouped.json"
    fileformat.save(g, path)
    again = fileformat.load(path)
    assert again.load_problems == []
    assert fileformat.dumps(again) == fileformat.dumps(g)
    assert history(nodegraph.train(g, epochs=10)) == history(nodegraph.train(again, epochs=10))


def siamese(share: bool) -> Graph:
    """Two encoders on x and 2x, summed: with `share` they are one set of weights."""
    g = Graph("siamese")
    g.add("data.Moons", id="data", n=64)
    g.add("layers.Scale", id="twice", scale=2.0, learnable=False)
    g.add("layers.Linear", id="fc", out_features=8)
    g.add("activations.Tanh", id="act")
    g.connect(("data", "x"), ("fc", "input"))
    g.connect(("fc", "output"), ("act", "input"))
    make_group(g, ["fc", "act"], "enc", instance="enc_a")  # its ports: input, output
    g.add("group.enc", id="enc_b", **({"share": "enc_a"} if share else {}))
    g.add("layers.Add", id="sum")
    g.add("layers.Linear", id="head", out_features=2)
    g.add("losses.CrossEntropy", id="loss")
    g.add("optimizers.Adam", id="opt", lr=0.01)
    g.connect(("data", "x"), ("twice", "input"))
    g.connect(("twice", "output"), ("enc_b", "input"))
    g.connect(("enc_a", "output"), ("sum", "a"))
    g.connect(("enc_b", "output"), ("sum", "b"))
    g.connect(("sum", "output"), ("head", "input"))
    g.connect(("head", "output"), ("loss", "input"))
    g.connect(("data", "y"), ("loss", "target"))
    g.connect(("loss", "loss"), ("opt", "loss"))
    return g


def test_shared_instances_use_one_set_of_weights():
    g = siamese(share=True)
    report = nodegraph.validate(g, for_training=True)
    assert report.ok, report.problems
    assert report.param_counts["enc_a"] == 2 * 8 + 8 and report.param_counts.get("enc_b", 0) == 0
    result = nodegraph.train(g, epochs=3)
    module = result.module
    assert module.module_of("enc_a__fc") is module.module_of("enc_b__fc")
    assert result.compiled.parameter_count() == 24 + 8 * 2 + 2
    assert "enc_b__fc.weight" not in module.block_state()
    # the shared weight learns from both uses: its gradient is the sum of both paths
    x = torch.randn(5, 2)
    fc = module.module_of("enc_a__fc")
    fc.zero_grad()
    out = torch.tanh(fc(x)) + torch.tanh(fc(2 * x))
    out.sum().backward()
    both = fc.weight.grad.clone()
    fc.zero_grad()
    torch.tanh(fc(x)).sum().backward()
    assert not torch.allclose(both, fc.weight.grad)


def test_unshared_instances_have_their_own_weights():
    g = siamese(share=False)
    report = nodegraph.validate(g)
    assert report.param_counts["enc_a"] == report.param_counts["enc_b"] == 24
    module = nodegraph.compile(g).module
    a, b = module.module_of("enc_a__fc"), module.module_of("enc_b__fc")
    assert a is not b and not torch.equal(a.weight, b.weight)


def test_sharing_with_a_non_instance_is_refused():
    g = siamese(share=True)
    g.set_param("enc_b", "share", "head")
    (p,) = nodegraph.validate(g).problems
    assert p.kind == "bad_group" and "not an instance of group 'enc'" in p.message


def test_groups_nest_and_problems_point_into_them():
    g = nodegraph.load("examples/xor.json")
    make_group(g, ["hidden", "act"], "inner")
    make_group(g, ["inner", "out"], "outer", instance="net")
    flat = flatten(g)
    assert {"net__inner__hidden", "net__inner__act", "net__out"} <= set(flat.graph.nodes)
    assert nodegraph.validate(g, for_training=True).ok
    g.groups["inner"].body.set_param("hidden", "out_features", "four", strict=False)
    (p,) = nodegraph.validate(g).problems
    assert p.node == "net" and "inside, at 'inner/hidden'" in p.message
    assert p.kind == "bad_param"


def test_a_group_inside_itself_is_an_error():
    g = nodegraph.load("examples/xor.json")
    make_group(g, ["act"], "loop")
    g.groups["loop"].body.add_node(nodegraph.Node("again", "group.loop"), strict=False)
    (p,) = nodegraph.validate(g).problems
    assert p.kind == "bad_group" and "uses itself (loop -> loop" in p.message
    assert p.node == "loop" and "'again'" in p.message


def tied() -> Graph:
    g = Graph("tied")
    g.add("data.NoisyLine", id="data")
    g.add("layers.Linear", id="up", out_features=1, bias=False)
    g.add("layers.Linear", id="again", out_features=1, bias=False)
    g.add("losses.MSE", id="loss")
    g.add("optimizers.SGD", id="opt", lr=0.05)
    g.connect(("data", "x"), ("up", "input"))
    g.connect(("up", "output"), ("again", "input"))
    g.connect(("again", "output"), ("loss", "input"))
    g.connect(("data", "y"), ("loss", "target"))
    g.connect(("loss", "loss"), ("opt", "loss"))
    g.add_tie(Tie("up", "weight", "again", "weight"))
    return g


def test_tied_parameters_are_one_parameter_and_survive_save_and_resume(tmp_path):
    g = tied()
    again = fileformat.loads(fileformat.dumps(g))
    assert again.ties == g.ties
    result = nodegraph.train(g, epochs=3, checkpoint_dir=tmp_path)
    m = result.module
    assert m.blocks["up"].weight is m.blocks["again"].weight
    assert list(m.block_state()) == ["up.weight"]
    assert result.compiled.parameter_count() == 1
    resumed = nodegraph.train(tied(), epochs=4, checkpoint_dir=tmp_path, resume=True)
    assert len(resumed.history) == 4


def test_bad_ties_are_reported():
    g = tied()
    g.set_ties([Tie("up", "weight", "ghost", "weight"), *g.ties[1:]])  # as a file may
    assert [p.kind for p in nodegraph.validate(g).problems] == ["bad_tie"]
    g.set_ties([Tie("up", "bias", "again", "weight"), *g.ties[1:]])
    (p,) = nodegraph.validate(g).problems  # validation refuses what compile would
    assert (p.kind, p.node, p.port) == ("bad_tie", "up", "bias")
    with pytest.raises(nodegraph.ValidationError, match="has no parameter 'bias'"):
        nodegraph.compile(g)


def test_make_group_refuses_a_taken_name():
    g = nodegraph.load("examples/xor.json")
    make_group(g, ["act"], "g1")
    with pytest.raises(GraphError, match="already exists"):
        make_group(g, ["hidden"], "g1")


def test_a_copy_of_a_grouped_graph_is_independent():
    g = nodegraph.load("examples/xor.json")
    make_group(g, ["hidden", "act"], "layer")
    h = g.copy()
    h.groups["layer"].body.set_param("hidden", "out_features", 9)
    assert g.groups["layer"].body.node("hidden").params["out_features"] == 4
    assert h.groups["layer"].body.groups is h.groups


def test_an_optimizer_scope_may_name_a_group_instance():
    g = siamese(share=False)
    g.set_param("opt", "scope", ["enc_a", "head"])
    assert nodegraph.validate(g, for_training=True).ok
    before = nodegraph.compile(g).module.block_state()
    after = nodegraph.train(g, epochs=1).module.block_state()
    assert not torch.equal(before["enc_a__fc.weight"], after["enc_a__fc.weight"])
    assert torch.equal(before["enc_b__fc.weight"], after["enc_b__fc.weight"])


def tied_pairs() -> Graph:
    """A group whose body ties its two layers (x → Wx → W(Wx)), used twice with weights of
    its own: each instance ties its own pair, and the two pairs stay apart."""
    g = tied()
    make_group(g, ["up", "again"], "square", instance="first")  # the tie goes into the body
    g.add("group.square", id="second")
    g.disconnect(g.source_of("loss", "input"))
    g.add("layers.Add", id="both")
    g.connect(("first", "output"), ("both", "a"))
    g.connect(("data", "x"), ("second", "input"))
    g.connect(("second", "output"), ("both", "b"))
    g.connect(("both", "output"), ("loss", "input"))
    return g


def test_ties_in_a_group_body_save_load_and_flatten_per_instance(tmp_path):
    g = tied_pairs()
    path = tmp_path / "tied.json"
    fileformat.save(g, path)
    again = fileformat.load(path)
    assert again.load_problems == [] and again.ties == ()
    assert again.groups["square"].body.ties == (Tie("up", "weight", "again", "weight"),)
    assert fileformat.dumps(again) == fileformat.dumps(g)
    assert flatten(again).graph.ties == (Tie("first__up", "weight", "first__again", "weight"),
                                        Tie("second__up", "weight", "second__again", "weight"))


def test_ties_in_a_group_body_hold_in_each_instance_while_training():
    result = nodegraph.train(fileformat.loads(fileformat.dumps(tied_pairs())), epochs=3)
    m = result.module
    first, second = (m.module_of(f"{i}__up").weight for i in ("first", "second"))
    assert m.module_of("first__again").weight is first
    assert m.module_of("second__again").weight is second and second is not first
    assert result.compiled.parameter_count() == 2
    assert sorted(m.block_state()) == ["first__up.weight", "second__up.weight"]


def test_a_body_tie_naming_a_missing_node_is_reported_with_the_group():
    g = tied_pairs()
    g.groups["square"].body.set_ties([Tie("up", "weight", "gone", "weight")])
    problems = [p for p in nodegraph.validate(g).problems if p.kind == "bad_tie"]
    assert [p.message for p in problems] == [
        "group 'square': a tie names node 'gone', which is not in the group's body"]


def test_a_nested_instance_port_leads_to_the_inner_blocks():
    g = nodegraph.load("examples/xor.json")
    make_group(g, ["hidden", "act"], "inner")
    make_group(g, ["inner", "out"], "outer", instance="net")
    flat = flatten(g)
    assert flat.inputs[("net", "input")] == [("net__inner__hidden", "input")]
    assert flat.outputs[("net", "output")] == ("net__out", "output")


def test_grouping_tied_nodes_moves_their_tie_into_the_body():
    g = tied()
    instance = make_group(g, ["up", "again"], "pair")
    assert g.ties == () and g.groups["pair"].body.ties == (Tie("up", "weight", "again",
                                                                "weight"),)
    assert nodegraph.validate(g).ok
    m = nodegraph.train(g, epochs=2).module
    assert m.module_of(f"{instance}__up").weight is m.module_of(f"{instance}__again").weight


def test_grouping_one_tied_node_keeps_the_tie_naming_it_inside_the_instance():
    g = tied()
    instance = make_group(g, ["again"], "tail")
    assert g.ties == (Tie("up", "weight", f"{instance}__again", "weight"),)
    assert g.groups["tail"].body.ties == ()
    assert nodegraph.validate(g).ok
    m = nodegraph.train(g, epochs=2).module
    assert m.module_of("up").weight is m.module_of(f"{instance}__again").weight


def test_removing_a_tied_node_removes_its_tie():
    g = tied()
    g.remove("again")
    assert g.ties == ()
