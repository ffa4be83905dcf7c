"""Renaming a node rewrites every place that names it: params declared as node references
(kinds node and nodes), ties, training stages and the monitor, read from the declarations.

The example test renames, in every shipped example, each node that another node's param, a
tie or a stage names, and checks the renamed graph validates and trains to the same
history as the original (one short epoch per stage)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import torch

import nodegraph
from nodegraph.model import references
from nodegraph.model.spec import default_registry

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
REFERRING = [p.name for p in sorted(EXAMPLES.glob("*.json"))
             if references.referenced(nodegraph.load(p))]
HEAVY = {"char_transformer.json", "ddpm_digits.json", "dcgan_digits.json",
         "gan_digits.json", "vae_digits.json"}


def test_the_library_declares_every_param_that_names_nodes():
    """Params that name nodes are declared as such; no text param is a node id in disguise
    (the ones below name ports, files or columns)."""
    declared = {(s.id, p.name) for s in default_registry() for p in s.params if p.names_nodes}
    assert {("procedures.LotteryTicket", "model"), ("procedures.LotteryTicket", "metric"),
            ("norm.L2Penalty", "nodes"), ("norm.L1Penalty", "nodes"),
            ("metrics.ParameterCount", "nodes"), ("optimizers.Adam", "scope"),
            ("procedures.DDPMSample", "noise"), ("procedures.DBMGibbs", "top"),
            ("procedures.Interpolate", "encoder")} <= declared
    for spec in default_registry():
        if spec.binds:
            assert spec.param(spec.binds).names_nodes, spec.id


def renamed_id(graph: nodegraph.Graph) -> tuple[nodegraph.Graph, dict[str, str]]:
    renamed = copy.deepcopy(graph)
    names = {old: f"{old}_renamed" for old in sorted(references.referenced(graph))}
    for old, new in names.items():
        renamed.rename(old, new)
    return renamed, names


def _short(graph: nodegraph.Graph) -> None:
    """One epoch, one per stage: enough to see that the same model trains the same way."""
    graph.set_training("epochs", 1)
    if graph.training.get("stages"):
        graph.set_training("stages", [{**s, "epochs": 1} for s in graph.training["stages"]])


def _numbers(history: list[dict], names: dict[str, str]) -> str:
    """The history as text, with renamed ids put back and wall-clock times left out."""
    def strip(x):
        if isinstance(x, dict):
            return {names.get(k, k).replace("_renamed", ""): strip(v) for k, v in x.items()
                    if "time" not in k and "seconds" not in k}
        if isinstance(x, list):
            return [strip(v) for v in x]
        return x

    return json.dumps(strip(history), sort_keys=True)


def test_lottery_ticket_model_penalty_nodes_and_stages_follow_a_rename():
    g = nodegraph.load(EXAMPLES / "lottery_ticket.json")
    g.add("norm.L2Penalty", id="l2", nodes=["mlp"])
    g.set_training("stages", [{"name": "all", "epochs": 1, "optimizers": ["opt"],
                               "frozen": ["mlp"]}])
    g.set_training("monitor", "val.accuracy")
    g.rename("mlp", "net")
    g.rename("accuracy", "acc")
    assert g.node("lottery").params["model"] == "net"
    assert g.node("l2").params["nodes"] == ["net"]
    assert g.training["stages"][0]["frozen"] == ["net"]
    assert g.training["monitor"] == "val.acc"
    g.rename("opt", "adam")
    assert g.training["stages"][0]["optimizers"] == ["adam"]


def test_a_reference_to_a_missing_node_names_node_and_param():
    g = nodegraph.load(EXAMPLES / "lottery_ticket.json")
    g.set_param("lottery", "metric", "ghost")
    (p,) = nodegraph.validate(g).problems
    assert (p.node, p.port, p.kind) == ("lottery", "metric", "bad_param")
    assert "'ghost'" in p.message
    g.set_param("lottery", "metric", "opt")  # a node, but not a metric
    (p,) = nodegraph.validate(g).problems
    assert (p.node, p.port) == ("lottery", "metric") and "metric blocks" in p.message
    g.set_param("lottery", "metric", "accuracy")
    assert nodegraph.validate(g).ok


def test_a_scope_naming_a_missing_node_is_a_problem_without_training():
    g = nodegraph.load(EXAMPLES / "lottery_ticket.json")
    g.set_param("opt", "scope", ["mlp", "ghost"])
    (p,) = nodegraph.validate(g).problems
    assert (p.node, p.port) == ("opt", "scope") and "'ghost'" in p.message


def test_renaming_a_group_instance_carries_inner_ids():
    assert references.renamed_id("enc__fc", "enc", "e") == "e__fc"
    assert references.renamed_id("encoder__fc", "enc", "e") == "encoder__fc"


@pytest.mark.parametrize("name", [n for n in REFERRING if n not in HEAVY])
def test_every_referenced_node_of_an_example_can_be_renamed(name):
    _rename_and_train(name)


@pytest.mark.slow
@pytest.mark.parametrize("name", [n for n in REFERRING if n in HEAVY])
def test_every_referenced_node_of_a_heavy_example_can_be_renamed(name):
    _rename_and_train(name)


def _kinds(graph) -> list[str]:
    return sorted(p.kind for p in nodegraph.validate(graph, for_training=True).problems)


def _rename_and_train(name: str) -> None:
    original = nodegraph.load(EXAMPLES / name)
    _short(original)
    renamed, names = renamed_id(original)
    assert references.referenced(renamed) == set(names.values())
    assert not references.mentioned(renamed) & set(names)  # nothing names an old id
    # renaming adds no problem (a graph without an optimizer, hopfield's, keeps that one)
    assert _kinds(renamed) == _kinds(original)
    if "no_optimizer" in _kinds(original):  # a design that computes, not trains (hopfield)
        before, after = nodegraph.forward(original), nodegraph.forward(renamed)
        assert {(names.get(n, n), port) for n, port in before} == set(after)
        for (n, port), value in before.items():
            assert torch.equal(after[(names.get(n, n), port)], value), (n, port)
        return
    before = nodegraph.train(original).history
    after = nodegraph.train(renamed).history
    assert _numbers(after, names) == _numbers(before, names)


def test_procedures_import_no_part_of_the_trainer():
    """A block depends on the procedure interface, not on compile, train, events or
    settings: the runner's context hands it what it needs."""
    import ast

    root = EXAMPLES.parent / "nodes" / "procedures"
    banned = ("nodegraph.runtime", "nodegraph.model.events", "nodegraph.model.settings")
    paths = sorted(root.glob("*.py"))
    assert len(paths) >= 4
    for path in paths:
        tree = ast.parse(path.read_text())
        typing_only = {id(n) for block in ast.walk(tree) if isinstance(block, ast.If)
                       and getattr(block.test, "id", None) == "TYPE_CHECKING"
                       for n in ast.walk(block)}  # annotations, never imported at run time
        for node in ast.walk(tree):
            if id(node) in typing_only:
                continue
            if isinstance(node, ast.ImportFrom) and node.module:
                names = {node.module, *(f"{node.module}.{a.name}" for a in node.names)}
            elif isinstance(node, ast.Import):
                names = {a.name for a in node.names}
            else:
                continue
            assert not [n for n in names if n.startswith(banned)], (path.name, names)


def test_binds_must_name_a_reference_param():
    from nodegraph.model.spec import block, str_param

    with pytest.raises(ValueError, match="binds='model' must name one of its params"):
        block("x.Bad", "procedure", "bad", lambda p: None, params=[str_param("model")],
              binds="model")
