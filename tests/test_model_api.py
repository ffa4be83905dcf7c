"""The Python API of issue #27: `nodegraph.fit` and the `Model` (fit on, predict, evaluate,
save/load, export), interrupts that keep the run, summaries and reprs, callbacks' state in
checkpoints, graphs with nothing to train by gradient, `nodegraph.search`."""

from __future__ import annotations

import json
import zipfile

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

import nodegraph
from nodegraph.model.errors import NodegraphError
from nodegraph.runtime import checkpoint


def xor():
    return nodegraph.load("examples/xor.json")


def moons():
    return nodegraph.load("examples/logistic_binary.json")  # z-scored, with val and test


def losses(history):
    return [h["train"]["loss"] for h in history]


# -- fit and fit on -------------------------------------------------------------------------

def test_fitting_on_continues_the_run_exactly_as_one_longer_fit():
    m = nodegraph.fit(xor(), epochs=30)
    result = m.fit(epochs=20)
    straight = nodegraph.fit(xor(), epochs=50)
    assert [h["epoch"] for h in m.history] == list(range(1, 51))
    assert result.history == m.history and m.epochs == 50
    # optimizer moments, the shuffling generator and the step count carried over: the
    # same numbers as one 50-epoch run, bit for bit
    assert losses(m.history) == losses(straight.history)
    assert m.global_step == straight.global_step == 50
    with pytest.raises(NodegraphError, match="how many more epochs"):
        m.fit()


def scheduled():
    g = moons()
    g.add("schedules.Exponential", "schedule")
    g.connect(("schedule", "schedule"), ("opt", "schedule"))
    return g


def test_fit_with_a_schedule_keeps_its_state():
    m = nodegraph.fit(scheduled(), epochs=4)
    m.fit(epochs=4)
    straight = nodegraph.fit(scheduled(), epochs=8)
    assert [h["lr"] for h in m.history] == [h["lr"] for h in straight.history]
    assert m.history[-1]["lr"]["opt"] < m.history[0]["lr"]["opt"]  # it did decay
    assert losses(m.history) == losses(straight.history)


def test_predict_over_a_split_and_over_raw_arrays_agree():
    m = nodegraph.fit(moons(), epochs=5)
    test = m.predict("test", batch_size=7)  # batches of 7 joined in order
    ds = m.compiled.datasets["data"]
    x = ds.tensors("test")["x"]
    n = ds.normalization["x"]
    raw = (x * n["scale"] + n["centre"]).numpy()  # as the data file holds them
    assert torch.allclose(m.predict(raw), test, atol=1e-5)
    assert torch.allclose(m.predict({"data.x": raw}, batch_size=1000), test, atol=1e-5)
    # the heads are what the losses and metrics read: the linear layer's output
    whole = m.predict("test", outputs="linear.output")
    assert torch.allclose(whole, test, atol=1e-6) and test.shape[0] == len(x)
    manual = m.compiled.module.blocks["linear"](x)
    assert torch.allclose(test, manual.detach(), atol=1e-6)
    with pytest.raises(NodegraphError, match="split 'tests'"):
        m.predict("tests")
    with pytest.raises(NodegraphError, match="no output 'nope'"):
        m.predict("test", outputs="linear.nope")
    with pytest.raises(NodegraphError, match="batch_size=0"):
        m.predict("test", batch_size=0)


def test_evaluate_gives_the_final_numbers():
    m = nodegraph.fit(moons(), epochs=5)
    for split in ("train", "val", "test"):
        assert m.evaluate(split) == m.final[split]
    with pytest.raises(NodegraphError, match="use one of"):
        m.evaluate("everything")


# -- save and load ----------------------------------------------------------------------------

def test_a_saved_model_loads_predicts_the_same_and_fits_on_the_same(tmp_path):
    m = nodegraph.fit(moons(), epochs=6)
    path = m.save(tmp_path / "run.ngz")
    with zipfile.ZipFile(path) as zf:
        assert sorted(zf.namelist()) == sorted(["graph.json", "model.safetensors",
                                                "state.safetensors", "run.json"])
    loaded = nodegraph.load_model(path)
    assert torch.equal(loaded.predict("test"), m.predict("test"))
    assert loaded.history == json.loads(json.dumps(m.history)) and loaded.epochs == 6
    assert loaded.global_step == m.global_step
    m.fit(epochs=3)
    loaded.fit(epochs=3)  # optimizer moments and the batch order came back
    assert losses(loaded.history) == losses(m.history)


def _write(path, members: dict[str, bytes]) -> None:
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)


def test_hostile_or_damaged_model_files_are_refused_by_name(tmp_path):
    good = nodegraph.fit(xor(), epochs=2).save(tmp_path / "good.ngz")
    with zipfile.ZipFile(good) as zf:
        parts = {n: zf.read(n) for n in zf.namelist()}
    cases = {
        "notzip": (None, "not a saved model"),
        "evil": ({**parts, "../../evil.py": b"print(1)"}, "holds members"),
        "missing": ({k: v for k, v in parts.items() if k != "run.json"}, "lacks run.json"),
        "badjson": ({**parts, "run.json": b"{"}, "run.json is damaged"),
        "badformat": ({**parts, "run.json": b'{"format": "x"}'}, "format 'nodegraph-model'"),
        "badtensors": ({**parts, "model.safetensors": b"\x00" * 20},
                       "model.safetensors is damaged"),
        "badgraph": ({**parts, "graph.json": b"[1]"}, "graph.json"),
    }
    for name, (members, message) in cases.items():
        path = tmp_path / f"{name}.ngz"
        if members is None:
            path.write_bytes(b"PK not really")
        else:
            _write(path, members)
        with pytest.raises(NodegraphError, match=message):
            nodegraph.load_model(path)
    many = tmp_path / "many.ngz"
    _write(many, {f"m{i}": b"" for i in range(50)})
    with pytest.raises(NodegraphError, match="lists 50 members"):
        nodegraph.load_model(many)
    with pytest.raises(NodegraphError, match="more than the 10 allowed"):
        nodegraph.load_model(good, max_bytes=10)
    with pytest.raises(NodegraphError, match="does not exist"):
        nodegraph.load_model(tmp_path / "nowhere.ngz")
    with pytest.raises(NodegraphError, match="is a folder"):
        nodegraph.load_model(tmp_path)


def test_a_failed_save_keeps_the_old_file(tmp_path):
    m = nodegraph.fit(xor(), epochs=1)
    path = m.save(tmp_path / "run.ngz")
    before = path.read_bytes()
    with pytest.raises(NodegraphError, match="cannot write the model file"):
        m.save(tmp_path / "missing" / "run.ngz")
    assert path.read_bytes() == before


def test_export_writes_the_trained_weights(tmp_path):
    m = nodegraph.fit(xor(), epochs=20)
    m.export("weights", tmp_path / "w.safetensors")
    saved = load_file(str(tmp_path / "w.safetensors"))
    assert torch.equal(saved["hidden.weight"], m.module.blocks["hidden"].weight.detach())
    with pytest.raises(NodegraphError, match="use one of python, onnx, weights"):
        m.export("tflite", tmp_path / "m.tflite")


# -- interrupts ------------------------------------------------------------------------------

class InterruptAt(nodegraph.Callback):
    """Raises KeyboardInterrupt (what Ctrl-C and a kernel's Stop do) at a step."""

    def __init__(self, step: int):
        self.step = step

    def on_step_end(self, trainer, values) -> None:
        if trainer.state.global_step == self.step:
            raise KeyboardInterrupt


def test_an_interrupt_ends_the_run_with_the_model_kept(tmp_path):
    g = moons()
    g.set_param("data", "batch_size", 16)  # 15 steps an epoch
    steps = 15
    m = nodegraph.fit(g, epochs=2)
    before = m.module.blocks["linear"].weight.detach().clone()
    result = m.fit(epochs=50, callbacks=[InterruptAt(2 * steps + 3 * steps + 4)],
                   checkpoint_dir=tmp_path / "ck")
    assert result.cancelled and m.cancelled and result.final == {}
    assert m.epochs == 5  # 2 + the 3 completed before the interrupt in epoch 6
    assert not torch.equal(before, m.module.blocks["linear"].weight)  # trained, kept
    assert m.predict("test").shape[0] > 0
    # the checkpoint of the weights so far, counting only the completed epochs
    assert checkpoint.written_epoch(tmp_path / "ck") == 5
    weights = load_file(str(tmp_path / "ck" / "last" / "model.safetensors"))
    assert torch.equal(weights["linear.weight"], m.module.blocks["linear"].weight.detach())
    m.fit(epochs=2)  # and it goes on
    assert m.epochs == 7 and not m.cancelled


def test_an_interrupt_inside_train_returns_the_result_so_far():
    result = nodegraph.train(xor(), epochs=100, callbacks=[InterruptAt(10)])
    assert result.cancelled and len(result.history) == 9
    assert "cancelled after 9 epoch(s)" in repr(result)


class Counter(nodegraph.Callback):
    def __init__(self):
        self.steps = 0

    def on_step_end(self, trainer, values) -> None:
        self.steps += 1

    def state_dict(self):
        return {"steps": self.steps}

    def load_state_dict(self, state):
        self.steps = state["steps"]


def test_callbacks_keep_their_state_across_a_resume(tmp_path):
    first = Counter()
    nodegraph.train(xor(), epochs=5, checkpoint_dir=tmp_path, callbacks=[first])
    info = json.loads((tmp_path / "last" / "trainer.json").read_text())
    assert info["callbacks"] == {"Counter": {"steps": 5}}
    again = Counter()
    nodegraph.train(xor(), epochs=8, checkpoint_dir=tmp_path, resume=True, callbacks=[again])
    assert again.steps == 8  # 5 from the checkpoint, 3 more

    class Bad(nodegraph.Callback):
        def state_dict(self):
            return {"tensor": torch.zeros(1)}

    with pytest.raises(NodegraphError, match="callback Bad: its state_dict"):
        nodegraph.train(xor(), epochs=1, checkpoint_dir=tmp_path / "b", callbacks=[Bad()])


# -- summaries and reprs ---------------------------------------------------------------------

def test_summaries_count_what_the_graph_and_the_model_hold():
    g = moons()
    table = nodegraph.summary(g)
    report = nodegraph.validate(g)
    assert table.params == sum(report.param_counts.values()) == 3
    row = next(r for r in table.rows if r["node"] == "linear")
    assert row["block"] == "layers.Linear" and row["params"] == 3 and row["trainable"] == 3
    assert "output (N, 1)" in row["output shape"] and row["memory"] > 0
    text = str(table)
    assert "output shape" in text and "total" in text and "linear" in text
    assert "<table" in table._repr_html_()
    m = nodegraph.fit(g, epochs=1)
    m.module.blocks["linear"].bias.requires_grad_(False)
    row = next(r for r in m.summary().rows if r["node"] == "linear")
    assert (row["params"], row["trainable"]) == (3, 2)


def test_reprs_are_short():
    g = moons()
    m = nodegraph.fit(g, epochs=3)
    for obj in (g, nodegraph.validate(g), m.result, m):
        assert len(repr(obj)) < 200, repr(obj)
        assert len(obj._repr_html_()) < 20000
    assert repr(g) == "<nodegraph.Graph 'logistic-binary': 6 nodes, 7 wires>" or \
        repr(g).startswith("<nodegraph.Graph 'logistic")


# -- nothing to train by gradient ----------------------------------------------------------

def test_the_tree_branch_of_trees_vs_mlp_runs_alone_with_the_same_accuracies():
    full = nodegraph.load("examples/trees_vs_mlp.json")
    tree = full.copy()
    for node in list(tree.nodes):
        if node not in ("data", "tree", "tree_acc", "tree_confusion", "tree_ece"):
            tree.remove(node)
    alone = nodegraph.train(tree)
    both = nodegraph.train(full, epochs=1)
    for split in ("train", "val", "test"):
        assert alone.final[split]["tree_acc"] == both.final[split]["tree_acc"]
        assert "loss" not in alone.final[split]  # no loss in the graph, none reported
    assert alone.final["test"]["tree_acc"] > 0.9
    out = nodegraph.forward(tree, compiled=alone.compiled)  # fitted: forward works
    assert out["tree", "output"].shape[1] == 2
    m = nodegraph.fit(tree)
    assert m.predict("test").shape == (len(m.compiled.datasets["data"].tensors("test")["x"]),
                                       2)


def test_a_saved_tree_model_fits_again_on_load_and_predicts_the_same(tmp_path):
    g = nodegraph.load("examples/trees_vs_mlp.json")
    for node in list(g.nodes):
        if node not in ("data", "forest", "forest_acc"):
            g.remove(node)
    m = nodegraph.fit(g)
    loaded = nodegraph.load_model(m.save(tmp_path / "forest.ngz"))
    assert torch.equal(loaded.predict("test"), m.predict("test"))
    assert loaded.evaluate("test") == m.final["test"]


def test_a_graph_with_weights_but_no_optimizer_still_asks_for_one():
    g = xor()
    g.remove("opt")
    with pytest.raises(nodegraph.ValidationError, match="no optimizer"):
        nodegraph.train(g, epochs=3)


# -- search ----------------------------------------------------------------------------------

def test_default_pruners_warm_up_for_a_quarter_of_the_run():
    from nodegraph.runtime.search import pruner_for

    median = pruner_for("median", rises=False, epochs=50)
    assert median._n_warmup_steps == 13 and median._n_startup_trials == 5
    assert pruner_for("median:2", rises=False, epochs=50)._n_warmup_steps == 2
    assert pruner_for("percentile:25", rises=False, epochs=8)._n_warmup_steps == 2


def test_the_readme_xor_search_keeps_the_best_trials():
    pytest.importorskip("optuna")
    result = nodegraph.search(xor(), {"opt.lr": "loguniform:1e-4:1e-1",
                                      "hidden.out_features": "int:2:16"},
                              trials=30, epochs=50, seed=0)
    done = sorted((t for t in result.trials if t.state == "COMPLETE"), key=lambda t: t.value)
    low, high = sorted(t.params["opt.lr"] for t in done[:2])
    pruned = [t for t in result.trials if t.state == "PRUNED"]
    # no trial with a learning rate between the best two was pruned, and the best is there
    assert not [t for t in pruned if low <= t.params["opt.lr"] <= high]
    assert low <= result.best.params["opt.lr"] <= high
    assert result.best.value < 0.01  # XOR learnt
    with pytest.raises(NodegraphError, match="no node 'nope'"):
        nodegraph.search(xor(), {"nope.lr": [0.1]}, trials=1)
    assert np.isfinite(result.best.value)


def test_ctrl_c_ends_a_search_rather_than_one_trial(monkeypatch):
    pytest.importorskip("optuna")
    from nodegraph.runtime.callbacks.pruning import TrialPruning

    seen = []

    def interrupted(self, trainer) -> None:
        seen.append(self.trial.number)
        if self.trial.number == 1 and trainer.state.epoch == 2:
            raise KeyboardInterrupt  # Ctrl-C in the middle of the second trial

    monkeypatch.setattr(TrialPruning, "on_validation_end", interrupted)
    with pytest.raises(KeyboardInterrupt):
        nodegraph.search(xor(), {"opt.lr": [0.01, 0.1]}, trials=5, epochs=3)
    assert max(seen) == 1  # no third trial began
