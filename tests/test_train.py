"""The trainer: learning, checkpoints and resume, early stopping, schedules, several
optimizers, stopping, failures named by node."""

from __future__ import annotations

import pytest
import torch

import nodegraph
from nodegraph.model.errors import NodegraphError, NodeRuntimeError
from nodegraph.model.events import Emitter, EpochEnded, RunFinished, RunStarted, StepEnded
from nodegraph.model.graph import Graph
from nodegraph.model.spec import Registry, block, default_registry, float_param
from nodegraph.runtime.train import RunControl


def line(**data) -> Graph:
    g = nodegraph.load("examples/line_fit.json")
    for k, v in data.items():
        g.set_param("data", k, v)
    return g


def weights(result):
    return {k: v.clone() for k, v in result.module.block_state().items()}


def test_line_fit_recovers_slope_and_intercept():
    result = nodegraph.train(line())
    fc = result.module.blocks["line"]
    assert fc.weight.item() == pytest.approx(2.0, rel=0.05)
    assert fc.bias.item() == pytest.approx(-1.0, rel=0.05)
    assert set(result.final) == {"train", "val"}


def test_same_seed_same_run_other_seed_other_run():
    a, b = nodegraph.train(line(), epochs=3), nodegraph.train(line(), epochs=3)
    c = nodegraph.train(line(), epochs=3, seed=1)
    assert a.history[-1]["train"] == b.history[-1]["train"]
    assert a.history[-1]["train"] != c.history[-1]["train"]


def test_resume_continues_exactly_where_the_run_stopped(tmp_path):
    full = nodegraph.train(line(), epochs=6, checkpoint_dir=tmp_path / "full")
    nodegraph.train(line(), epochs=3, checkpoint_dir=tmp_path / "part")
    resumed = nodegraph.train(line(), epochs=6, checkpoint_dir=tmp_path / "part", resume=True)
    strip = [{k: v for k, v in h.items() if k != "seconds"} for h in full.history]
    assert [{k: v for k, v in h.items() if k != "seconds"} for h in resumed.history] == strip
    for k, v in weights(full).items():
        assert torch.equal(v, weights(resumed)[k]), k
    assert (tmp_path / "part" / "last" / "model.safetensors").exists()


def test_resume_without_checkpoint_is_a_clear_error(tmp_path):
    with pytest.raises(NodegraphError, match="no checkpoint to resume from"):
        nodegraph.train(line(), checkpoint_dir=tmp_path, resume=True)


def test_checkpoint_survives_a_crash_during_the_next_save(tmp_path, monkeypatch):
    from nodegraph.runtime import checkpoint

    nodegraph.train(line(), epochs=2, checkpoint_dir=tmp_path)
    real_save_file = checkpoint.save_file

    def crash(*args, **kwargs):
        raise OSError("power cut")

    monkeypatch.setattr(checkpoint, "save_file", crash)
    with pytest.raises(NodegraphError, match="cannot write the checkpoint.*power cut"):
        nodegraph.train(line(), epochs=4, checkpoint_dir=tmp_path, resume=True)
    monkeypatch.setattr(checkpoint, "save_file", real_save_file)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["last"]  # no temp folder left
    *_, info = checkpoint.load(tmp_path)
    assert info["epoch"] == 2


def test_early_stopping_restores_the_best_weights():
    g = line(noise=1.0, n=40)
    g.set_param("opt", "lr", 0.5)
    g.update_training({"epochs": 200, "patience": 3})
    result = nodegraph.train(g)
    assert result.stopped_early and len(result.history) < 200
    best = min(h["val"]["loss"] for h in result.history)
    assert result.final["val"]["loss"] == pytest.approx(best, rel=1e-5)
    assert result.history[result.best_epoch - 1]["val"]["loss"] == best


def test_step_schedule_halves_the_rate_every_epoch():
    g = line()
    g.add("schedules.Step", id="sched", step_size=1, gamma=0.5)
    g.connect(("sched", "schedule"), ("opt", "schedule"))
    result = nodegraph.train(g, epochs=4)
    assert [h["lr"]["opt"] for h in result.history] == pytest.approx([0.05, 0.025, 0.0125,
                                                                      0.00625])


def two_heads() -> Graph:
    g = Graph("two")
    g.add("data.NoisyLine", id="data")
    for i in (1, 2):
        g.add("layers.Linear", id=f"fc{i}", out_features=1)
        g.add("losses.MSE", id=f"loss{i}")
        g.add("optimizers.SGD", id=f"opt{i}", lr=0.1, scope=[f"fc{i}"])
        g.connect(("data", "x"), (f"fc{i}", "input"))
        g.connect((f"fc{i}", "output"), (f"loss{i}", "input"))
        g.connect(("data", "y"), (f"loss{i}", "target"))
        g.connect((f"loss{i}", "loss"), (f"opt{i}", "loss"))
    return g


def test_each_optimizer_changes_only_its_scope():
    g = two_heads()
    g.set_param("opt2", "lr", 0.0)
    before = nodegraph.compile(g).module.block_state()
    result = nodegraph.train(g, epochs=2)
    after = result.module.block_state()
    assert not torch.equal(before["fc1.weight"], after["fc1.weight"])
    assert torch.equal(before["fc2.weight"], after["fc2.weight"])
    assert {"loss", "loss1", "loss2"} <= set(result.history[0]["train"])


def test_gradient_clipping_bounds_the_update():
    g = line()
    g.set_param("opt", "lr", 1.0)
    g.set_param("opt", "clip_grad_norm", 0.01)
    g.set_param("data", "batch_size", 0)  # one step per epoch
    before = nodegraph.compile(g).module.block_state()
    after = nodegraph.train(g, epochs=1).module.block_state()
    step = torch.cat([(after[k] - before[k]).flatten() for k in before])
    assert step.norm().item() == pytest.approx(0.01, rel=1e-3)


def test_events_arrive_in_order_and_steps_only_when_asked():
    events, seen = Emitter(), []
    events.subscribe(seen.append, RunStarted, EpochEnded, RunFinished)
    nodegraph.train(line(), epochs=2, events=events)
    assert [type(e) for e in seen] == [RunStarted, EpochEnded, EpochEnded, RunFinished]
    assert not events.wants(StepEnded)
    steps = []
    events.subscribe(steps.append, StepEnded)
    nodegraph.train(line(), epochs=1, events=events)
    assert [s.step for s in steps] == list(range(1, 9))  # 160 samples / 20
    assert steps[-1].loss is not None and steps[0].loss is None


def test_stop_request_cancels_within_the_epoch():
    events, control = Emitter(), RunControl()
    events.subscribe(lambda e: control.stop() if e.step == 3 and e.epoch == 2 else None,
                     StepEnded)
    result = nodegraph.train(line(), epochs=50, events=events, control=control)
    assert result.cancelled and len(result.history) == 1 and result.final == {}


def test_nan_loss_names_the_node_where_it_started():
    g = line()
    g.set_param("opt", "lr", 1e6)
    with pytest.raises(NodeRuntimeError, match="NaN or infinite.*node '(line|loss)'") as err:
        nodegraph.train(g, epochs=20)
    assert err.value.node in {"line", "loss"} and "learning rate" in err.value.hint


def test_unknown_and_missing_devices_are_clear_errors():
    with pytest.raises(NodegraphError, match="unknown device 'tpu9'"):
        nodegraph.train(line(), device="tpu9")
    if not torch.cuda.is_available():
        with pytest.raises(NodegraphError, match="no CUDA GPU is available"):
            nodegraph.train(line(), device="cuda:1")


def test_a_block_failing_at_run_time_is_named():
    def explode(p, x):
        class Boom(torch.nn.Module):
            def forward(self, input):
                if not torch.is_grad_enabled() or input.device.type == "meta":
                    return input
                raise RuntimeError("kaput")
        return Boom()

    registry = Registry(default_registry())
    registry.register(block("test.Boom", "op", "Fails when trained.", explode,
                            inputs=["input"], outputs=["output"]))
    g = Graph("boom", registry)
    g.add("data.NoisyLine", id="data")
    g.add("layers.Linear", id="fc", out_features=1)
    g.add("test.Boom", id="boom")
    g.add("losses.MSE", id="loss")
    g.add("optimizers.SGD", id="opt")
    g.connect(("data", "x"), ("fc", "input"))
    g.connect(("fc", "output"), ("boom", "input"))
    g.connect(("boom", "output"), ("loss", "input"))
    g.connect(("data", "y"), ("loss", "target"))
    g.connect(("loss", "loss"), ("opt", "loss"))
    with pytest.raises(NodeRuntimeError, match="node 'boom': RuntimeError: kaput"):
        nodegraph.train(g, epochs=1)


def test_closure_optimizers_get_a_closure():
    registry = Registry(default_registry())
    registry.register(block(
        "test.LBFGS", "optimizer", "L-BFGS for the engine test.",
        lambda p, named: torch.optim.LBFGS([t for _, t in named], lr=p.lr,
                                           line_search_fn="strong_wolfe"),
        inputs=[nodegraph.model.spec.LOSS_IN], params=[float_param("lr", 1.0)], closure=True))
    g = nodegraph.model.fileformat.loads(nodegraph.model.fileformat.dumps(line()), registry)
    g.remove("opt")
    g.add("test.LBFGS", id="opt")
    g.connect(("loss", "loss"), ("opt", "loss"))
    g.set_param("data", "batch_size", 0)
    g.set_param("data", "noise", 0.0)
    result = nodegraph.train(g, epochs=3)
    fc = result.module.blocks["line"]
    assert fc.weight.item() == pytest.approx(2.0, abs=1e-4)
    assert fc.bias.item() == pytest.approx(-1.0, abs=1e-4)


def test_zero_epochs_evaluates_a_graph_without_optimizer():
    g = nodegraph.load("examples/xor.json")
    g.remove("opt")
    result = nodegraph.train(g, epochs=0)
    assert result.history == [] and set(result.final["train"]) == {"loss", "accuracy"}
    with pytest.raises(nodegraph.ValidationError, match="no optimizer"):
        nodegraph.train(g, epochs=1)


def test_torch_compile_trains_the_same_and_falls_back_cleanly(monkeypatch):
    eager = nodegraph.train(line(), epochs=2)
    g = line()
    g.set_training("compile", "aot_eager")  # dynamo traces our plan; no C compiler needed
    compiled = nodegraph.train(g, epochs=2)
    for a, b in zip(eager.history, compiled.history, strict=True):
        assert b["train"]["loss"] == pytest.approx(a["train"]["loss"], rel=1e-5)

    def broken(fn, **kwargs):
        def fail(*a, **k):
            raise RuntimeError("no compiler here")
        return fail

    monkeypatch.setattr(torch, "compile", broken)
    events, messages = Emitter(), []
    events.subscribe(messages.append, nodegraph.model.events.Message)
    again = nodegraph.train(g, epochs=2, events=events)
    assert again.history[-1]["train"]["loss"] == pytest.approx(
        eager.history[-1]["train"]["loss"], rel=1e-5)
    assert any("torch.compile failed (no compiler here)" in m.text for m in messages)


def test_node_ids_may_be_names_of_module_attributes():
    """'double', 'train' or 'eval' are fine node ids, though nn.ModuleDict has methods of
    those names; the blocks are still found, trained and saved under their ids."""
    g = nodegraph.load("examples/xor.json")
    for old, new in (("hidden", "double"), ("act", "eval"), ("out", "train")):
        g.rename(old, new)
    result = nodegraph.train(g, epochs=3)
    m = result.compiled.module
    assert isinstance(m.module_of("double"), torch.nn.Linear)
    assert {"double.weight", "train.weight"} <= set(m.block_state())
    m.eval()  # the ModuleDict's own methods still work
    assert not m.module_of("double").training


def test_weight_snapshots_are_copies_of_the_epochs_weights():
    from nodegraph.model.events import WeightsSnapshot

    g = nodegraph.load("examples/xor.json")
    events, snaps = Emitter(), []
    events.subscribe(snaps.append, WeightsSnapshot)
    result = nodegraph.train(g, epochs=3, events=events)
    assert snaps and snaps[-1].epoch == 3  # throttled, but the last epoch always comes
    final = result.compiled.module.block_state()
    assert set(snaps[-1].state) == set(final)
    for k, v in final.items():
        assert torch.equal(snaps[-1].state[k], v) and snaps[-1].state[k] is not v
    first = nodegraph.train(g, epochs=1).compiled.module.block_state()
    assert snaps[0].epoch == 1  # the first epoch always comes: a copy taken then
    assert torch.equal(snaps[0].state["hidden.weight"], first["hidden.weight"])
    assert not torch.equal(snaps[0].state["hidden.weight"], final["hidden.weight"])
