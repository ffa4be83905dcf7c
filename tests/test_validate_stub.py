"""The validation engine on a small stub registry: five hand-written blocks, no `nodes`.

What the engine does — shape inference, the op cache its caller owns, data described by
metadata without building it, references declared as node params, problem kinds — is
checked here on blocks whose every number is known, apart from the library's blocks."""

from __future__ import annotations

import json

import pytest
import torch
from torch import nn

import nodegraph
from nodegraph.check import opcache
from nodegraph.check.opcache import OpCache
from nodegraph.kinds import declare as kinds
from nodegraph.kinds.datameta import sized
from nodegraph.kinds.dataset import DATA_PARAMS, from_arrays
from nodegraph.kinds.declare import family
from nodegraph.model.errors import Problem, ProblemKind
from nodegraph.model.graph import Graph
from nodegraph.model.spec import (
    LOSS_IN,
    LOSS_OUT,
    Registry,
    block,
    float_param,
    int_param,
    node_param,
)
from nodegraph.runtime.procedure import Procedure, run_procedure

CALLS = {"data": 0, "scale": 0}


def _data(p):
    CALLS["data"] += 1
    x = torch.arange(p.n * 3, dtype=torch.float32).reshape(p.n, 3).numpy()
    return from_arrays({"x": x, "y": x.sum(axis=1, keepdims=True)}, p)


def _data_meta(p):
    return sized({"x": ((3,), torch.float32), "y": ((1,), torch.float32)}, p.n, p)


class Scale(nn.Module):
    def __init__(self, factor: float):
        super().__init__()
        self.factor = factor

    def forward(self, x):
        return x * self.factor


def _scale(p, x):
    CALLS["scale"] += 1
    return Scale(p.factor)


class Mse(nn.Module):
    def forward(self, a, b):
        return ((a - b) ** 2).mean()


class Twice(Procedure):
    def __init__(self, p):
        self.p = p

    def run(self, ctx):
        model = ctx.model()  # the node the block binds
        x = ctx.batch()["x"]
        yield {"out": model(**{model.inputs[0]: x})[model.outputs[0]].tolist()}


stub = family("stub", "op", inputs=["input"], outputs=["output"])
SPECS = [
    kinds.data("stub.Rows", "n rows of 0, 1, 2, ...; y the row sums.", _data,
               outputs=["x", "y"], params=[int_param("n", 8, min=1), *DATA_PARAMS],
               meta=_data_meta),
    stub("Scale", "x times factor.", _scale, [float_param("factor", 2.0)]),
    stub("Dense", "A linear layer to one output.", lambda p, x: nn.Linear(
        x["input"].shape[-1], 1)),
    kinds.op("stub.Mse", "Mean squared error.", lambda p, x: Mse(), inputs=["a", "b"],
             outputs=[LOSS_OUT]),
    kinds.optimizer("stub.Sgd", "Plain SGD.", lambda p, named: torch.optim.SGD(
        [q for _, q in named], lr=p.lr), inputs=[LOSS_IN], params=[float_param("lr", 0.01)]),
    kinds.procedure("stub.Twice", "Runs the bound node on the first batch.", Twice,
                    params=[node_param("model", of=("op",))], binds="model"),
]


@pytest.fixture
def registry():
    return Registry(SPECS)


def graph(registry: Registry) -> Graph:
    g = Graph("stub", registry)
    g.add("stub.Rows", id="rows", batch_size=4)
    g.add("stub.Scale", id="scale", factor=3.0)
    g.add("stub.Dense", id="dense")
    g.add("stub.Mse", id="mse")
    g.add("stub.Sgd", id="sgd")
    g.add("stub.Twice", id="twice", model="scale")
    g.connect(("rows", "x"), ("scale", "input"))
    g.connect(("scale", "output"), ("dense", "input"))
    g.connect(("dense", "output"), ("mse", "a"))
    g.connect(("rows", "y"), ("mse", "b"))
    g.connect(("mse", "loss"), ("sgd", "loss"))
    return g


def test_shapes_and_counts_are_inferred_without_building_the_data(registry):
    CALLS.update(data=0, scale=0)
    report = nodegraph.validate(graph(registry), for_training=True, cache=OpCache())
    assert report.ok, report.problems
    assert report.shape("rows", "x") == (4, 3) and report.shape("dense", "output") == (4, 1)
    assert report.param_counts["dense"] == 3 + 1
    assert CALLS["data"] == 0 and report.datasets == {}
    assert report.data["rows"].num_batches("train") == 2


def test_the_op_cache_belongs_to_its_caller(registry):
    g = graph(registry)
    mine = OpCache()
    CALLS.update(scale=0)
    nodegraph.validate(g, cache=mine)
    assert CALLS["scale"] == 1 and len(mine) == 3  # scale, dense, mse
    nodegraph.validate(g, cache=mine)
    assert CALLS["scale"] == 1  # remembered
    nodegraph.validate(g, cache=OpCache())
    assert CALLS["scale"] == 2  # a fresh cache knows nothing
    with opcache.using(mine):
        nodegraph.validate(g)
    assert CALLS["scale"] == 2
    assert opcache.for_registry(registry) is not opcache.for_registry(Registry(SPECS))


def test_compile_materialises_the_data_and_the_graph_trains(registry):
    CALLS.update(data=0)
    g = graph(registry)
    g.update_training(epochs=2)
    result = nodegraph.train(g)
    assert CALLS["data"] == 1
    assert result.compiled.datasets["rows"].size("train") == 8
    assert len(result.history) == 2


def test_the_procedure_context_hands_over_the_bound_node(registry):
    frames = run_procedure(graph(registry), "twice")
    assert frames[0]["out"][0] == [0.0, 3.0, 6.0]


def test_problem_kinds_are_an_enum_that_reads_as_text(registry):
    g = graph(registry)
    g.disconnect(g.source_of("mse", "b"))
    g.set_param("twice", "model", "ghost")
    problems = nodegraph.validate(g, cache=OpCache()).problems
    kinds_found = {p.kind for p in problems}
    assert ProblemKind.MISSING_INPUT in kinds_found and "bad_param" in kinds_found
    assert all(isinstance(p.kind, ProblemKind) for p in problems)
    assert json.loads(json.dumps([p.to_dict() for p in problems]))[0]["kind"] in \
        {k.value for k in ProblemKind}
    assert Problem(None, None, "bad_param", "m").kind is ProblemKind.BAD_PARAM


def test_a_node_param_follows_a_rename_and_names_missing_nodes(registry):
    g = graph(registry)
    g.rename("scale", "times")
    assert g.node("twice").params["model"] == "times"
    g.set_param("twice", "model", "sgd")  # not an op
    (p,) = nodegraph.validate(g, cache=OpCache()).problems
    assert (p.node, p.port) == ("twice", "model") and "op blocks" in p.message


def test_a_build_of_the_wrong_arity_is_refused_when_declared():
    with pytest.raises(ValueError, match="build of an? op block takes 2"):
        block("stub.Bad", "op", "bad", lambda p: None)
    with pytest.raises(ValueError, match="build of a data block takes 1"):
        kinds.data("stub.Bad", "bad", lambda p, x: None)


def test_a_family_shares_prefix_ports_params_and_keywords():
    declare = family("fam", "op", inputs=["input"], outputs=["output"],
                     shared_params=[float_param("k", 1.0)], shared_keywords=("shared",))
    spec = declare("Thing", "a thing", lambda p, x: nn.Identity(), [int_param("n", 1)],
                   keywords=("own",))
    assert spec.id == "fam.Thing" and [p.name for p in spec.params] == ["n", "k"]
    assert spec.keywords == ("shared", "own") and spec.inputs[0].name == "input"


def test_a_stage_param_names_a_training_stage(registry):
    from nodegraph.model import references
    from nodegraph.model.spec import stage_param

    reg = Registry([*SPECS, kinds.procedure("stub.Staged", "Names a stage.", Twice,
                                            params=[stage_param("stage", "")])])
    g = graph(reg)
    g.add("stub.Staged", id="staged", stage="warm")
    g.set_training("stages", [{"name": "cold", "epochs": 1}, {"name": "hot", "epochs": 1}])
    (p,) = nodegraph.validate(g, cache=OpCache()).problems
    assert (p.node, p.port, p.kind) == ("staged", "stage", "bad_param")
    assert "'warm'" in p.message
    assert references.choices(g, reg.get("stub.Staged").param("stage")) == ["cold", "hot"]
    g.set_param("staged", "stage", "hot")
    assert nodegraph.validate(g, cache=OpCache()).ok


def test_an_installed_empty_cache_is_the_one_filled(registry):
    mine = OpCache()
    with opcache.using(mine):
        nodegraph.validate(graph(registry))
    assert len(mine) == 3
