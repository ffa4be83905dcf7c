"""What a graph file's settings may make a run do (issue #33, items 3 and 6): write only
beside the file, start no more reader processes than the machine and the data can use,
count no more epochs than a run can list, never allocate on the CPU what the memory
estimate refuses; and every section the Graph owns beside its nodes (training, ui, groups,
ties) is type-checked at load, so a value of the wrong JSON type is a problem naming its
place, never an internal error (a property test mutates those sections of every example).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import nodegraph
from nodegraph.check.describe import describe
from nodegraph.kinds import footprint
from nodegraph.kinds.write_confine import OutsideGraphFolder
from nodegraph.model import fileformat, references
from nodegraph.model.errors import NodegraphError
from nodegraph.model.settings import MAX_EPOCHS, STAGE_KEYS, TRAINING_PARAMS
from tests.test_hostile_paths import assert_clean, run_cli
from tests.test_image_folder import _maker

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = sorted((ROOT / "examples").glob("*.json"))
XOR = json.loads((ROOT / "examples" / "xor.json").read_text())


def write(folder: Path, doc: dict, name: str = "g.json") -> str:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(json.dumps(doc))
    return str(path)


def xor(**training) -> dict:
    doc = json.loads(json.dumps(XOR))
    doc["training"] = {**doc.get("training", {}), "epochs": 1, "device": "cpu", **training}
    return doc


# -- item 6: the state beside the nodes, type-checked at load --------------------------------

def test_a_stage_named_by_an_object_is_a_problem_on_training_stages(tmp_path, capsys):
    doc = json.loads((ROOT / "examples" / "stacked_autoencoder.json").read_text())
    doc["training"]["stages"][0]["name"] = {"a": 1}
    path = write(tmp_path, doc)
    code, out = run_cli(capsys, "validate", path)
    assert code == 1 and path in out, out  # was: internal error: unhashable type: 'dict'
    assert "training.stages" in out and "stage 1: 'name' must be text" in out, out
    assert_clean(out)
    graph = fileformat.load(path)  # told at load, as an unknown param is
    assert any(p.port == "training.stages" for p in graph.load_problems)
    assert references.choices(graph, nodegraph.model.spec.Param("s", "stage")) == [
        "pretrain2", "finetune"]


@pytest.mark.parametrize("stages,message", [
    ([{"epochs": MAX_EPOCHS}, {"epochs": 1}], "the stages add up to 1,000,001 epochs"),
    ([{"epochs": 10**15}], "stage 1: 'epochs' must be a whole number from 0 to 1,000,000"),
    ([{"epochs": 1, "name": ["a"]}], "stage 1: 'name' must be text"),
    ([{"epochs": 1}] * 1001, "at most 1,000"),
])
def test_stages_are_checked_field_by_field_and_bounded(tmp_path, capsys, stages, message):
    code, out = run_cli(capsys, "validate", write(tmp_path, xor(stages=stages)))
    assert code == 1 and "training.stages" in out and message in out, out


def test_ui_group_ui_ties_and_name_of_the_wrong_type_are_named_at_load(tmp_path):
    doc = xor()
    doc["name"] = {"a": 1}
    doc["ui"] = {"positions": {"data": [1, 2], "out": "left", "hidden": [1, True]},
                 "comments": [{"id": "n", "kind": "comment", "rect": [0, 0, 9, 9]},
                              {"id": {"x": 1}, "kind": "comment", "rect": [0, 0, 9, 9]}],
                 "collapsed": [["data"]], "reroutes": {"w": [[1, "2"]]},
                 "layout_direction": {"x": 1}, "someone_elses": {"kept": True}}
    doc["ties"] = [{"from": ["out", "weight"], "to": ["hidden", 3]}]
    doc["groups"] = {"G": {"nodes": {}, "edges": [], "ui": {"positions": []}}}
    graph = nodegraph.load(write(tmp_path, doc, "named.json"))
    said = "\n".join(p.message for p in graph.load_problems)
    for where in ("ui/positions/out", "ui/positions/hidden", "ui/comments/#2",
                  "ui/collapsed/#1", "ui/reroutes/w", "ui/layout_direction", "ties/0",
                  "groups/G/ui/positions", "'name' must be text"):
        assert where in said, (where, said)
    assert graph.name == "named"
    assert graph.ui["positions"] == {"data": [1, 2]}  # the rest left out, told
    assert [n["id"] for n in graph.ui["comments"]] == ["n"]
    assert graph.ui["someone_elses"] == {"kept": True}  # not ours to judge: round-trips
    assert graph.groups["G"].body.ui == {}
    errors = nodegraph.validate(graph).errors  # ui is the editor's: warnings only
    assert [p.message for p in errors if "ties/0" not in p.message] == []


def test_a_training_setting_of_the_wrong_type_is_told_at_load_and_by_validation(tmp_path):
    graph = nodegraph.load(write(tmp_path, xor(monitor={"a": 1}, log_dir=["x"])))
    assert {p.port for p in graph.load_problems} >= {"training.monitor", "training.log_dir"}
    assert {p.port for p in nodegraph.validate(graph).errors} >= {"training.monitor",
                                                                   "training.log_dir"}


JSON = st.recursive(st.none() | st.booleans() | st.integers(-10**6, 10**6)
                    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=8),
                    lambda inner: st.lists(inner, max_size=3)
                    | st.dictionaries(st.text(max_size=6), inner, max_size=3), max_leaves=6)
SECTIONS = ("training", "ui", "groups", "ties")


def _places(doc: dict) -> list[tuple]:
    """JSON paths inside the sections the Graph owns beside its nodes: every one the file
    has, and each field those sections declare (a stage's name, a note's rect, a tie's
    end, a group's ui), whether the file has it or not."""
    out: list[tuple] = []
    todo = [((key,), doc[key]) for key in SECTIONS if key in doc]
    while todo:
        path, value = todo.pop()
        out.append(path)
        items = value.items() if isinstance(value, dict) else enumerate(value) \
            if isinstance(value, list) else ()
        todo += [((*path, k), v) for k, v in items]
    nodes = list(doc.get("nodes", {}))[:2] or ["x"]
    groups = list(doc["groups"]) if isinstance(doc.get("groups"), dict) else []
    out += [("training", p.name) for p in TRAINING_PARAMS]
    out += [("training", "stages", i, key) for i in (0, 1) for key in STAGE_KEYS]
    out += [("training", "stages", 0, key, 0) for key in ("optimizers", "frozen")]
    out += [("ui", "positions", n) for n in nodes] + [("ui", "positions", nodes[0], 0)]
    out += [("ui", "comments", 0, key) for key in ("id", "kind", "rect", "text", "color")]
    out += [("ui", key) for key in ("collapsed", "reroutes", "layout_direction")]
    out += [("ui", "collapsed", 0), ("ui", "reroutes", "w", 0)]
    out += [("ties", 0, end, i) for end in ("from", "to") for i in (0, 1)]
    out += [("groups", g, key) for g in groups for key in ("ui", "inputs", "outputs", "ties")]
    out += [("groups", g, "ui", "positions") for g in groups]
    return sorted(set(out), key=str)


def _put(doc: dict, path: tuple, value) -> None:
    """Set `path` in `doc` to `value`, making the objects and lists on the way."""
    holder = doc
    for key, after in zip(path[:-1], path[1:], strict=True):
        fresh = [] if isinstance(after, int) else {}
        if isinstance(holder, dict):
            if not isinstance(holder.get(key), dict | list):
                holder[key] = fresh
            holder = holder[key]
        else:
            while len(holder) <= key:
                holder.append(fresh)
            if not isinstance(holder[key], dict | list):
                holder[key] = fresh
            holder = holder[key]
        if isinstance(holder, list) != isinstance(after, int):
            return  # the file's container is of the other kind: left as it is
    if isinstance(holder, dict):
        holder[path[-1]] = value
    else:
        while len(holder) <= path[-1]:
            holder.append(None)
        holder[path[-1]] = value


SPECIAL = [{"name": {"a": 1}, "epochs": 1}, {"from": [{"a": 1}, "x"], "to": ["a", "b"]},
           [["data"]], {"a": [1, 2]}, ["x", "y"], {"a": 1}, [1, True], "", "LR", 10**15]


def _mutated(doc: dict, data) -> dict:
    doc = json.loads(json.dumps(doc))
    for _ in range(data.draw(st.integers(1, 3))):
        path = data.draw(st.sampled_from(_places(doc)))
        _put(doc, path, json.loads(json.dumps(data.draw(st.sampled_from(SPECIAL) | JSON))))
    return doc


@settings(max_examples=150, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.sampled_from(EXAMPLES), st.data())
def test_mutated_training_ui_groups_and_ties_are_refused_or_ok_never_internal(path, data):
    doc = _mutated(json.loads(path.read_text()), data)
    try:
        graph = fileformat.loads(json.dumps(doc), source=str(path))
    except NodegraphError:
        return
    graph.folder = path.parent  # its data beside it, as `load` sets
    try:
        report = nodegraph.validate(graph)
        json.dumps(describe(graph, report), default=str)  # validate --json, info
    except NodegraphError:
        pass
    again = fileformat.loads(fileformat.dumps(graph))  # saved and read back
    assert again.training == graph.training and again.ties == graph.ties
    copy = graph.copy()
    if copy.nodes:
        first = next(iter(copy.nodes))
        copy.rename(first, first + "_renamed")  # stages and monitor follow
        references.problems(copy)
    graph._repr_svg_()


# -- item 3: workers, epochs, batch sizes -----------------------------------------------------

@pytest.fixture
def four_images(tmp_path):
    return _maker().write_folder(tmp_path / "shapes", per_class=1, seed=3)  # 4 classes


def streamed(folder: Path, workers: int) -> dict:
    return {"format": "nodegraph", "version": 1, "name": "few",
            "nodes": {"data": {"type": "data.ImageFolder", "params": {
                "path": "shapes", "size": 8, "batch_size": 32, "storage": "stream"}},
                "flat": {"type": "layers.Flatten", "params": {}},
                "out": {"type": "layers.Linear", "params": {"out_features": 4}},
                "loss": {"type": "losses.CrossEntropy", "params": {}},
                "opt": {"type": "optimizers.SGD", "params": {"lr": 0.1}}},
            "edges": [{"from": ["data", "x"], "to": ["flat", "input"]},
                      {"from": ["flat", "output"], "to": ["out", "input"]},
                      {"from": ["out", "output"], "to": ["loss", "input"]},
                      {"from": ["data", "y"], "to": ["loss", "target"]},
                      {"from": ["loss", "loss"], "to": ["opt", "loss"]}],
            "training": {"epochs": 1, "device": "cpu", "workers": workers}}


@pytest.mark.parametrize("workers,message", [
    (100_000, "'workers' must be <= 256"),
    (40, "training.workers = 40 is more than"),
])
def test_workers_are_bounded_by_the_machine_and_the_batches(four_images, capsys, workers,
                                                            message):
    path = write(four_images.parent, streamed(four_images, workers))
    code, out = run_cli(capsys, "validate", path)
    assert code == 1 and "training.workers" in out and message in out, out
    code, out = run_cli(capsys, "run", path)  # refused before a process starts
    assert code == 1 and "epoch 1" not in out and "training.workers" in out, out


def test_more_workers_than_batches_start_only_one_per_batch(four_images, capsys, monkeypatch):
    from nodegraph.kinds import loading

    path = write(four_images.parent, streamed(four_images, 3))
    code, out = run_cli(capsys, "validate", path)
    assert code == 0 and "warning" in out and "training.workers = 3 is more than the 1 " \
        "batch(es) of the largest split of 'data'" in out and "only 1 start" in out, out
    started = []
    real = loading.DataLoader

    def counting(*args, **kwargs):
        started.append(kwargs.get("num_workers", 0))
        return real(*args, **kwargs)

    monkeypatch.setattr(loading, "DataLoader", counting)
    graph = nodegraph.load(path)
    nodegraph.train(graph, epochs=1)
    assert started and max(started) == 1


def test_more_workers_than_four_per_core_are_refused(four_images, monkeypatch):
    from nodegraph.check import bounds

    monkeypatch.setattr(bounds, "cores", lambda: 2)
    graph = nodegraph.load(write(four_images.parent, streamed(four_images, 9)))
    (p,) = [p for p in nodegraph.validate(graph).errors if p.port == "training.workers"]
    assert "more than 4 reader processes per core of this machine (2 cores: at most 8)" \
        in p.message


def test_one_worker_per_batch_passes(four_images):
    graph = nodegraph.load(write(four_images.parent, streamed(four_images, 1)))
    assert nodegraph.validate(graph, for_training=True).ok


@pytest.mark.parametrize("where,value", [("epochs", 10**15), ("epochs", MAX_EPOCHS + 1),
                                         ("workers", 10**9)])
def test_huge_training_numbers_are_refused_naming_the_setting(tmp_path, capsys, where, value):
    code, out = run_cli(capsys, "validate", write(tmp_path, xor(**{where: value})))
    assert code == 1 and f"training.{where}" in out and "must be <=" in out, out
    with pytest.raises(NodegraphError, match=f"'{where}' must be <="):
        nodegraph.train(nodegraph.load(write(tmp_path, xor(**{where: value}), "api.json")))


def test_a_batch_larger_than_the_data_is_a_warning_and_runs(tmp_path, capsys):
    doc = xor()
    doc["nodes"]["data"]["params"]["batch_size"] = 10**9
    path = write(tmp_path, doc)
    report = nodegraph.validate(nodegraph.load(path))
    assert report.ok, report.problems
    (p,) = [p for p in report.problems if p.port == "batch_size"]
    assert p.severity == "warning" and p.node == "data" and "1,000,000,000" in p.message
    code, out = run_cli(capsys, "run", path, "--epochs", "1")
    assert code == 0 and "epoch 1/1" in out, out


# -- item 3: where a file may have a run write ------------------------------------------------

@pytest.mark.parametrize("given", ["outside_abs", "../outside", "link/tb"])
def test_a_files_log_dir_outside_its_folder_is_refused_and_nothing_written(tmp_path, capsys,
                                                                           given):
    project, outside = tmp_path / "project", tmp_path / "outside"
    outside.mkdir()
    project.mkdir()
    (project / "link").symlink_to(outside)  # a link inside pointing out is out
    log_dir = str(outside / "tb") if given == "outside_abs" else given
    path = write(project, xor(log_dir=log_dir))
    code, out = run_cli(capsys, "run", path)
    assert code == 1 and "training.log_dir" in out and "outside the graph's folder" in out
    assert "--log-dir" in out and "epoch 1" not in out
    assert_clean(out)
    assert list(outside.iterdir()) == [] and sorted(os.listdir(project)) == ["g.json", "link"]
    with pytest.raises(OutsideGraphFolder, match="training.log_dir"):
        nodegraph.train(nodegraph.load(path))
    assert list(outside.iterdir()) == []


def test_a_log_dir_set_after_loading_is_the_users_and_the_files_own_stays_fenced(tmp_path):
    from nodegraph.kinds.write_confine import file_folder

    graph = nodegraph.load(write(tmp_path / "project", xor(log_dir="../out")))
    with pytest.raises(OutsideGraphFolder):
        file_folder(graph.copy(), "training.log_dir", "../out")  # a copy is the file's too
    graph.set_training("log_dir", str(tmp_path / "mine"))  # in Python, the editor
    assert file_folder(graph, "training.log_dir", graph.training["log_dir"]) == \
        tmp_path / "mine"


def test_the_user_may_write_anywhere_and_every_folder_is_named(tmp_path, capsys):
    pytest.importorskip("tensorboard")
    project, elsewhere = tmp_path / "project", tmp_path / "elsewhere"
    path = write(project, xor(log_dir="../not_this_one"))
    code, out = run_cli(capsys, "run", path, "--log-dir", str(elsewhere / "tb"),
                        "--checkpoint-dir", str(elsewhere / "ck"), "--metrics-out",
                        str(elsewhere / "m.json"), "--quiet")
    assert code == 0, out
    for line in (f"writing TensorBoard event files in {elsewhere / 'tb'}",
                 f"writing checkpoints in {elsewhere / 'ck'}",
                 f"writing metrics in {elsewhere} (as m.json)"):
        assert line in out, (line, out)
    assert any((elsewhere / "tb").iterdir()) and not (tmp_path / "not_this_one").exists()
    code, out = run_cli(capsys, "run", path, "--set",
                        f"training.log_dir={json.dumps(str(elsewhere / 'set'))}", "--quiet")
    assert code == 0 and f"writing TensorBoard event files in {elsewhere / 'set'}" in out


def test_a_relative_log_dir_is_written_beside_the_graph_and_named(tmp_path, capsys,
                                                                  monkeypatch):
    pytest.importorskip("tensorboard")
    project, cwd = tmp_path / "project", tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    path = write(project, xor(log_dir="runs/tb"))
    code, out = run_cli(capsys, "run", path, "--quiet")
    assert code == 0 and f"writing TensorBoard event files in {project / 'runs' / 'tb'}" in out
    assert any((project / "runs" / "tb").iterdir()) and list(cwd.iterdir()) == []


# -- item 3: shape inference allocates only what the estimate allows --------------------------

def _als(folder: Path, features: int, classes: int, cutoff: int) -> str:
    doc = {"format": "nodegraph", "version": 1, "name": "als",
           "nodes": {"data": {"type": "data.Digits", "params": {}},
                     "lin": {"type": "layers.Linear", "params": {"out_features": features}},
                     "als": {"type": "opaque.Module", "params": {
                         "target": "torch.nn:AdaptiveLogSoftmaxWithLoss", "index": 1,
                         "kwargs": {"in_features": features, "n_classes": classes,
                                    "cutoffs": [cutoff], "div_value": 1.0}}}},
           "edges": [{"from": ["data", "x"], "to": ["lin", "input"]},
                     {"from": ["lin", "output"], "to": ["als", "input"]},
                     {"from": ["data", "y"], "to": ["als", "input_2"]}]}
    return write(folder, doc, "als.json")


PEAK = """
import resource, sys
from nodegraph.cli.main import main
code = main(["validate", sys.argv[1]])
print("peak", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, code)
"""


def _validate_peak(path: str, limit: str) -> tuple[int, int, str]:
    env = {**os.environ, "NODEGRAPH_MEMORY_LIMIT": limit, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-c", PEAK, path], env=env, capture_output=True,
                          text=True, timeout=300)
    peak, code = proc.stdout.split("peak")[-1].split()
    return int(peak), int(code), proc.stdout + proc.stderr


def test_an_opaque_module_too_large_for_memory_is_never_built_on_the_cpu(tmp_path):
    """AdaptiveLogSoftmaxWithLoss cannot run on meta tensors; its CPU copy of 1,024 x
    (75,001 + 75,000) floats (+ a tail) is 0.6 GB, refused under a 64 MB limit before it
    is built: the process stays near the size of torch itself (it was 0.6 GB more)."""
    path = _als(tmp_path, 1024, 150_000, 75_000)
    peak, code, out = _validate_peak(path, "64M")
    assert code == 1 and "too_large" in out and "als.kwargs" in out, out
    assert "for the weights of torch.nn:AdaptiveLogSoftmaxWithLoss" in out  # before it ran
    base, _, _ = _validate_peak(str(ROOT / "examples" / "xor.json"), "64M")
    assert peak < base + 300 * 2**20, (peak, base)  # no 0.6 GB of weights was made


def test_a_small_opaque_module_that_reads_values_still_gets_its_shapes(tmp_path):
    report = nodegraph.validate(nodegraph.load(_als(tmp_path, 16, 40, 20)))
    assert report.ok, report.problems
    assert report.shape("als", "output") == ()  # the loss of the named tuple (output, loss)
    assert report.param_counts["als"] == 16 * 21 + 16 * 16 + 16 * 20  # head, tail proj, out


def test_bounded_work_stops_once_what_it_makes_passes_the_limit():
    made = []
    with footprint.memory_limit(2**20), pytest.raises(footprint.TooLarge, match="the test"):
        with footprint.bounded_work(0, "n", "the test"):
            for _ in range(100):
                made.append(torch.zeros(2**16))  # 256 KB each
    assert len(made) == 4  # the fifth passed 1 MB and stopped the work
    with footprint.memory_limit(2**20), pytest.raises(footprint.TooLarge, match="2.1 MB"):
        with footprint.bounded_work(2 * 2**20, "n", "a foreseen size"):
            pass
