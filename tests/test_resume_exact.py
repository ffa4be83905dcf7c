"""Continuing a run is exact (issue #32, item 4).

`load_model(...).fit(epochs=k)` after `n` epochs, in a new process, equals one
`fit(epochs=n+k)` bit for bit (Dropout, a per-step OneCycle schedule, random augmentation,
2 DataLoader workers, a callback drawing from numpy's and Python's generators); so does
`nodegraph run --checkpoint-dir` then `--resume`. A stop in the middle of an epoch goes back
to the end of the last whole epoch: the weights are those the history describes. Progress
of a continued fit counts on from where it starts, and callback state is current when a
checkpoint is written.
"""

from __future__ import annotations

import io
import json
import random
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

import nodegraph
from nodegraph.model.events import Emitter, EpochEnded, RunStarted
from nodegraph.runtime.callbacks.progress import Progress

ROOT = Path(__file__).resolve().parents[1]


def _small_graph(folder: Path, epochs: int = 4) -> Path:
    """Moons in memory, batches of 16, Dropout, Adam under a per-step OneCycle."""
    graph = {
        "format": "nodegraph", "version": 1, "name": "resume-small",
        "nodes": {
            "data": {"type": "data.Moons", "params": {"n": 160, "noise": 20.0,
                                                      "val_fraction": 0.2, "batch_size": 16,
                                                      "target": "binary"}},
            "hidden": {"type": "layers.Linear", "params": {"out_features": 16}},
            "relu": {"type": "activations.ReLU", "params": {}},
            "drop": {"type": "layers.Dropout", "params": {"p": 0.3}},
            "out": {"type": "layers.Linear", "params": {"out_features": 1}},
            "loss": {"type": "losses.BCEWithLogits", "params": {}},
            "sched": {"type": "schedules.OneCycle",
                      "params": {"max_lr": 0.05, "total_steps": 60, "interval": "step"}},
            "opt": {"type": "optimizers.Adam", "params": {"lr": 0.01}},
        },
        "edges": [
            {"from": ["data", "x"], "to": ["hidden", "input"]},
            {"from": ["hidden", "output"], "to": ["relu", "input"]},
            {"from": ["relu", "output"], "to": ["drop", "input"]},
            {"from": ["drop", "output"], "to": ["out", "input"]},
            {"from": ["out", "output"], "to": ["loss", "input"]},
            {"from": ["data", "y"], "to": ["loss", "target"]},
            {"from": ["loss", "loss"], "to": ["opt", "loss"]},
            {"from": ["sched", "schedule"], "to": ["opt", "schedule"]},
        ],
        "training": {"epochs": epochs, "seed": 5},
    }
    path = folder / "small.json"
    path.write_text(json.dumps(graph))
    return path


def _same(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> None:
    assert sorted(a) == sorted(b)
    for k in a:
        assert torch.equal(a[k], b[k]), f"{k} differs by {(a[k] - b[k]).abs().max()}"


class Noisy(nodegraph.Callback):
    """Nudges a weight by numpy's and Python's global generators after each step, and
    counts steps: the run then depends on both generators and on a callback's state."""

    def __init__(self):
        self.steps = 0

    def on_step_end(self, trainer, values):
        self.steps += 1
        with torch.no_grad():
            w = next(iter(trainer.c.module.parameters()))
            w.view(-1)[0] += 1e-3 * float(np.random.randn()) + 1e-3 * random.random()

    def state_dict(self):
        return {"steps": self.steps}

    def load_state_dict(self, state):
        self.steps = state["steps"]


class StopAt(nodegraph.Callback):
    """Stops the run after `step` steps of epoch `epoch`, by KeyboardInterrupt (Ctrl-C) or
    by the run's control (the Stop button)."""

    def __init__(self, epoch: int, step: int, how: str):
        self.epoch, self.step, self.how, self.seen = epoch, step, how, 0

    def on_epoch_start(self, trainer):
        self.seen = 0

    def on_step_end(self, trainer, values):
        self.seen += 1
        if trainer.state.epoch == self.epoch and self.seen == self.step:
            if self.how == "interrupt":
                raise KeyboardInterrupt
            trainer.control.stop()


@pytest.mark.parametrize("how", ["interrupt", "stop"])
def test_a_stop_mid_epoch_goes_back_to_the_last_whole_epoch(tmp_path, how):
    g = nodegraph.load(_small_graph(tmp_path))
    whole = nodegraph.fit(g, epochs=2)
    m = nodegraph.fit(g, epochs=4, callbacks=[StopAt(3, 3, how)])
    assert m.cancelled and m.epochs == 2 and len(m.history) == 2
    assert m.global_step == whole.global_step
    _same(m.weights(), whole.weights())  # not 2 epochs plus 3 steps
    m.fit(epochs=2)  # the stopped epoch is trained again, as one run would have
    straight = nodegraph.fit(g, epochs=4)
    _same(m.weights(), straight.weights())
    assert [h["train"]["loss"] for h in m.history] == \
        [h["train"]["loss"] for h in straight.history]


def test_a_stop_mid_epoch_writes_the_whole_epochs_checkpoint(tmp_path):
    g = nodegraph.load(_small_graph(tmp_path))
    nodegraph.train(g, epochs=4, checkpoint_dir=tmp_path / "ck",
                    callbacks=[StopAt(3, 3, "interrupt")])
    nodegraph.train(g, epochs=2, checkpoint_dir=tmp_path / "two")
    info = json.loads((tmp_path / "ck/last/trainer.json").read_text())
    assert info["epoch"] == 2 and info["next"] == 2 and len(info["history"]) == 2
    _same(load_file(tmp_path / "ck/last/model.safetensors"),
          load_file(tmp_path / "two/last/model.safetensors"))
    resumed = nodegraph.train(g, epochs=4, checkpoint_dir=tmp_path / "ck", resume=True)
    straight = nodegraph.train(g, epochs=4)
    _same(resumed.compiled.module.block_state(), straight.compiled.module.block_state())


def test_fit_on_in_process_is_exact_whatever_runs_in_between(tmp_path):
    g = nodegraph.load(_small_graph(tmp_path))
    m = nodegraph.fit(g, epochs=2, callbacks=[Noisy()])
    torch.rand(100), np.random.rand(7), random.random()  # the user's own draws between fits
    m.fit(epochs=2, callbacks=[Noisy()])
    straight = nodegraph.fit(g, epochs=4, callbacks=[Noisy()])
    _same(m.weights(), straight.weights())
    assert m.callback_states["Noisy"] == straight.callback_states["Noisy"] == {"steps": 32}


def test_progress_of_a_continued_fit_counts_from_where_it_starts(tmp_path):
    g = nodegraph.load(_small_graph(tmp_path))
    m = nodegraph.fit(g, epochs=3)
    seen: list = []
    events = Emitter()
    events.subscribe(seen.append, RunStarted, EpochEnded)
    out = io.StringIO()
    m.fit(epochs=2, events=events, callbacks=[Progress("text", out)])
    started = [e for e in seen if isinstance(e, RunStarted)][0]
    assert (started.start_epoch, started.epochs) == (4, 5)
    assert [(e.epoch, e.epochs) for e in seen if isinstance(e, EpochEnded)] == [(4, 5), (5, 5)]
    lines = out.getvalue().strip().splitlines()
    assert lines[-1].split("]")[1].split()[:2] == ["epoch", "5/5"]
    assert "100%" in lines[-1]
    assert all("/2 " not in line and "/3 " not in line for line in lines)


class CountEpochs(nodegraph.Callback):
    def __init__(self):
        self.epochs = 0

    def on_epoch_end(self, trainer):
        self.epochs += 1

    def state_dict(self):
        return {"epochs": self.epochs}

    def load_state_dict(self, state):
        self.epochs = state["epochs"]


def test_callback_state_is_current_in_checkpoints_and_saved_models(tmp_path):
    g = nodegraph.load(_small_graph(tmp_path))
    nodegraph.train(g, epochs=3, checkpoint_dir=tmp_path / "ck", callbacks=[CountEpochs()])
    info = json.loads((tmp_path / "ck/last/trainer.json").read_text())
    assert info["callbacks"]["CountEpochs"] == {"epochs": 3}  # not one epoch behind
    m = nodegraph.fit(g, epochs=2, callbacks=[CountEpochs()])
    m.save(tmp_path / "m.ngz")
    loaded = nodegraph.load_model(tmp_path / "m.ngz")
    assert loaded.callback_states["CountEpochs"] == {"epochs": 2}
    counter = CountEpochs()
    loaded.fit(epochs=1, callbacks=[counter])
    assert counter.epochs == 3


_SCRIPT = textwrap.dedent("""
    import random, sys
    import numpy as np, torch
    import nodegraph
    from safetensors.torch import save_file

    class Noisy(nodegraph.Callback):
        def __init__(self):
            self.steps = 0
        def on_step_end(self, trainer, values):
            self.steps += 1
            with torch.no_grad():
                w = next(iter(trainer.c.module.parameters()))
                w.view(-1)[0] += 1e-3 * float(np.random.randn()) + 1e-3 * random.random()
        def state_dict(self):
            return {"steps": self.steps}
        def load_state_dict(self, state):
            self.steps = state["steps"]

    mode, folder = sys.argv[1], sys.argv[2]
    if mode == "first":
        g = nodegraph.load(folder + "/g.json")
        straight = nodegraph.fit(g, epochs=4, callbacks=[Noisy()])
        save_file(straight.weights(), folder + "/straight.safetensors")
        print("straight", straight.callback_states["Noisy"]["steps"])
        m = nodegraph.fit(g, epochs=2, callbacks=[Noisy()])
        m.save(folder + "/two.ngz")
    else:
        m = nodegraph.load_model(folder + "/two.ngz")
        m.fit(epochs=2, callbacks=[Noisy()])
        save_file(m.weights(), folder + "/continued.safetensors")
        print("continued", m.callback_states["Noisy"]["steps"], m.epochs)
""")


def _python(*args: str) -> str:
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "HOME": "/tmp"}
    done = subprocess.run([sys.executable, *args], capture_output=True, text=True, env=env,
                          cwd=ROOT, timeout=500)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def _image_graph(folder: Path) -> Path:
    """The shipped photo example with Dropout, a per-step OneCycle, its random augmentation
    (crop, flip, colour jitter) and 2 DataLoader workers, batches of 8."""
    g = json.loads((ROOT / "examples/jpeg_folder.json").read_text())
    shutil.copytree(ROOT / "examples/data/shapes_sample", folder / "shapes_sample")
    n = g["nodes"]
    n["data"]["params"].update(path="shapes_sample", batch_size=8)
    n["drop"] = {"type": "layers.Dropout", "params": {"p": 0.3}}
    n["sched"] = {"type": "schedules.OneCycle",
                  "params": {"max_lr": 0.01, "total_steps": 40, "interval": "step"}}
    g["edges"] = [e for e in g["edges"] if e["from"] != ["gap", "output"]] + [
        {"from": ["gap", "output"], "to": ["drop", "input"]},
        {"from": ["drop", "output"], "to": ["out", "input"]},
        {"from": ["sched", "schedule"], "to": ["opt", "schedule"]}]
    g["training"] = {"epochs": 4, "seed": 3, "workers": 2}
    path = folder / "g.json"
    path.write_text(json.dumps(g))
    return path


@pytest.mark.slow
def test_load_model_then_fit_in_a_new_process_equals_one_longer_fit(tmp_path):
    _image_graph(tmp_path)
    script = tmp_path / "run.py"
    script.write_text(_SCRIPT)
    assert "straight 20" in _python(str(script), "first", str(tmp_path))
    assert "continued 20 4" in _python(str(script), "continued", str(tmp_path))
    _same(load_file(tmp_path / "continued.safetensors"),
          load_file(tmp_path / "straight.safetensors"))


@pytest.mark.slow
def test_cli_resume_from_a_checkpoint_equals_one_longer_run(tmp_path):
    graph = str(_image_graph(tmp_path))
    run = ["-m", "nodegraph", "run", graph, "--quiet"]
    _python(*run, "--epochs", "2", "--checkpoint-dir", str(tmp_path / "ck"))
    _python(*run, "--epochs", "4", "--checkpoint-dir", str(tmp_path / "ck"), "--resume")
    _python(*run, "--epochs", "4", "--checkpoint-dir", str(tmp_path / "straight"))
    _same(load_file(tmp_path / "ck/last/model.safetensors"),
          load_file(tmp_path / "straight/last/model.safetensors"))


def test_every_generator_comes_back_and_a_false_state_is_refused():
    from nodegraph.model.errors import NodegraphError
    from nodegraph.runtime import generators

    shuffle = torch.Generator().manual_seed(3)
    random.gauss(0, 1)  # Python's generator holds a cached Gaussian: kept too
    saved = generators.capture(shuffle)

    def draws():
        return (torch.rand(3).tolist(), torch.randint(0, 9, (3,), generator=shuffle).tolist(),
                np.random.rand(3).tolist(), np.random.randn(), random.random(),
                random.gauss(0, 1))

    first = draws()
    generators.restore(saved, shuffle)
    assert draws() == first
    with pytest.raises(NodegraphError, match="rng/torch"):
        generators.restore({"rng/torch": torch.full((5056,), 255, dtype=torch.uint8)}, shuffle)
    with pytest.raises(NodegraphError, match="rng/python"):
        generators.restore({"rng/python": torch.zeros(3, dtype=torch.int64)}, shuffle)
    with pytest.raises(NodegraphError, match="32 bits"):
        generators.restore({"rng/numpy": torch.full((626,), 2 ** 40, dtype=torch.int64)},
                           shuffle)
