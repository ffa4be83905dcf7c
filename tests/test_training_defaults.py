"""Training settings are defaulted in one place (`nodegraph.model.settings`): validation
resolves them once (`Report.settings`) and compile, the dtype rule and the stage check read
that, so a file that sets nothing gets exactly the declared defaults everywhere."""

from __future__ import annotations

import json
from pathlib import Path

import torch

from nodegraph.check.validate import validate
from nodegraph.kinds import dtypes
from nodegraph.model.fileformat import loads
from nodegraph.model.settings import TRAINING_PARAMS, resolve
from nodegraph.runtime.compile import compile_graph, resolve_device

XOR = Path(__file__).resolve().parents[1] / "examples" / "xor.json"
DECLARED = {p.name: p.default for p in TRAINING_PARAMS}


def xor(**training) -> object:
    """examples/xor.json with exactly `training` as its training section."""
    doc = json.loads(XOR.read_text())
    doc["training"] = training
    return loads(json.dumps(doc), source=str(XOR))


def weights(compiled) -> dict[str, torch.Tensor]:
    return {k: v.clone() for k, v in compiled.module.state_dict().items()}


def test_validation_resolves_the_declared_defaults():
    report = validate(xor())
    assert dict(report.settings) == DECLARED == dict(resolve({})[0])
    set_some = validate(xor(epochs=3, dtype="float64")).settings
    assert set_some["epochs"] == 3 and set_some["dtype"] == "float64"
    assert {k: v for k, v in set_some.items() if k not in ("epochs", "dtype")} == {
        k: v for k, v in DECLARED.items() if k not in ("epochs", "dtype")}


def test_compile_uses_the_declared_defaults():
    compiled = compile_graph(xor())
    assert dict(compiled.report.settings) == DECLARED
    assert compiled.device == resolve_device(DECLARED["device"])
    assert {p.dtype for p in compiled.module.parameters()} == {dtypes.NAMES[DECLARED["dtype"]]}
    # seed: the same weights as the default seed written out, others than another seed
    explicit = weights(compile_graph(xor(seed=DECLARED["seed"])))
    other = weights(compile_graph(xor(seed=DECLARED["seed"] + 1)))
    defaulted = weights(compiled)
    assert all(torch.equal(defaulted[k], explicit[k]) for k in defaulted)
    assert not all(torch.equal(defaulted[k], other[k]) for k in defaulted)


def test_compile_uses_what_the_file_sets():
    compiled = compile_graph(xor(dtype="float64", device="cpu", seed=5))
    assert compiled.device == torch.device("cpu")
    assert {p.dtype for p in compiled.module.parameters()} == {torch.float64}
    assert all(torch.equal(a, b) for a, b in zip(weights(compiled).values(), weights(
        compile_graph(xor(dtype="float64"), device="cpu", seed=5)).values(), strict=True))


def test_a_bad_setting_is_a_problem_and_the_rest_runs_on_its_default():
    report = validate(xor(dtype="float16", stages="all"))
    where = {(p.port, p.kind) for p in report.problems}
    assert ("training.dtype", "bad_param") in where  # not a KeyError in the dtype rule
    assert ("training.stages", "bad_param") in where  # the stage check saw the value
    assert report.settings["dtype"] == DECLARED["dtype"]
    assert report.outputs and {m.dtype for m in report.outputs.values()} == {torch.float32}
