"""The training loop's units, each driven by hand with a stand-in trainer (no run), and one
run that checks the loop calls the hooks in order."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch
from test_train import line, two_heads

import nodegraph
from nodegraph.model.errors import NodegraphError
from nodegraph.model.events import Emitter, Message, WeightsSnapshot
from nodegraph.runtime.callbacks import (
    BestWeights,
    Callback,
    Callbacks,
    Checkpointing,
    EarlyStopping,
    LoopState,
    Monitor,
    Probing,
    Stage,
    StageSchedule,
    WeightSnapshots,
)
from nodegraph.runtime.callbacks.fallback import compiled_or_eager
from nodegraph.runtime.callbacks.parallel import DataParallel, partial_plans
from nodegraph.runtime.callbacks.probing import output_ports
from nodegraph.runtime.callbacks.stages import stages_of
from nodegraph.runtime.probes import ProbeFrame, Prober


class Net(torch.nn.Module):
    """A module with the compiled module's weight interface."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(3, 2)

    def block_state(self):
        return dict(self.state_dict())

    def load_block_state(self, state):
        self.load_state_dict(state)


def stand_in(stages=(2,), compiled=None, **state):
    """A trainer as callbacks see it: its state, compiled graph, events and messages."""
    events, messages = Emitter(), []
    events.subscribe(messages.append, Message)
    loop = LoopState([Stage(f"s{i}", n, [], []) for i, n in enumerate(stages)])
    for k, v in state.items():
        setattr(loop, k, v)
    c = compiled or SimpleNamespace(module=Net(), optimizers=[])
    return SimpleNamespace(state=loop, c=c, events=events, messages=messages, active=[],
                           shuffle_rng=torch.Generator().manual_seed(0))


def texts(t):
    return [m.text for m in t.messages]


# -- the loop state and the dispatcher ---------------------------------------------------

def test_the_schedule_lists_each_epoch_of_each_stage_and_end_stage_moves_on():
    s = LoopState([Stage("a", 2, [], []), Stage("b", 0, [], []), Stage("c", 3, [], [])])
    assert s.schedule == [(0, 0), (0, 1), (2, 0), (2, 1), (2, 2)] and s.total == 5
    s.stage, s.index = 0, 1
    s.end_stage()  # the empty stage b is passed over
    assert (s.index, s.stopped_early, s.finished) == (2, False, False)
    s.stage, s.index = 2, 3
    s.end_stage()
    assert (s.index, s.stopped_early, s.finished) == (5, True, True)


def test_stages_default_to_one_stage_of_every_optimizer():
    assert stages_of([], ["a", "b"], 4) == [Stage("train", 4, ["a", "b"], [])]
    assert stages_of([{"epochs": 1, "frozen": ["x"]}, {"name": "n", "epochs": 2,
                                                        "optimizers": ["b"]}], ["a", "b"], 9) \
        == [Stage("stage 1", 1, ["a", "b"], ["x"]), Stage("n", 2, ["b"], [])]


def test_callbacks_are_called_in_order_and_step_hooks_only_where_defined():
    calls = []

    class Epochs(Callback):
        def __init__(self, name):
            self.name = name

        def on_epoch_end(self, trainer):
            calls.append(self.name)

    class Steps(Callback):
        def on_step_end(self, trainer, values):
            calls.append("step")

    a, b, steps = Epochs("a"), Epochs("b"), Steps()
    hooks = Callbacks([a, steps, b])
    hooks.on_epoch_end(None)
    assert calls == ["a", "b"]
    assert hooks.step_start == [] and hooks.step_end == [steps]


# -- the monitor and early stopping ------------------------------------------------------

def test_monitor_counts_epochs_since_the_best_and_skips_missing_values():
    m = Monitor("val.loss", rises=False, min_delta=0.1)
    assert [m.update(v, e) for e, v in enumerate([1.0, 0.95, 0.8, None, math.nan, 0.85], 1)] \
        == [True, False, True, False, False, False]
    assert (m.best, m.best_epoch, m.since_best) == (0.8, 3, 3)
    rising = Monitor("val.accuracy", rises=True)
    assert [rising.update(v, e) for e, v in enumerate([0.5, 0.4, 0.6], 1)] == [True, False, True]
    again = Monitor("val.loss", rises=False)
    again.load_state_dict(m.state_dict())
    assert again.state_dict() == {"best": 0.8, "best_epoch": 3, "since_best": 3}


def test_monitor_reads_its_number_after_validation_and_resets_on_a_fresh_stage():
    m = Monitor("train.acc", rises=True)
    t = stand_in(epoch=1, train={"acc": 0.5}, val={"acc": 0.9})
    m.on_validation_end(t)
    assert t.state.improved and m.best == 0.5
    t.state.epoch, t.state.train = 2, {"acc": 0.4}
    m.on_validation_end(t)
    assert not t.state.improved and m.since_best == 1
    m.on_stage_start(t, fresh=False)  # a stage resumed in its middle keeps its watch
    assert m.best == 0.5
    m.on_stage_start(t, fresh=True)
    assert (m.best, m.best_epoch, m.since_best) == (None, None, 0)


def test_early_stopping_ends_the_stage_then_the_run_after_patience_epochs():
    m = Monitor("val.loss", rises=False)
    stop = EarlyStopping(m, patience=2)
    t = stand_in(stages=(3, 2), stage=0, index=1, epoch=1)
    m.update(1.0, 1), m.update(2.0, 2)
    stop.on_epoch_end(t)
    assert t.state.index == 1 and not t.messages  # one epoch without improvement: go on
    m.update(2.0, 3)
    t.state.epoch = 3
    stop.on_epoch_end(t)
    assert t.state.index == 3 and not t.state.stopped_early  # the second stage starts
    assert texts(t) == ["early stop after epoch 3: val.loss has not improved for 2 epochs "
                        "(best 1 at epoch 1)"]
    t.state.stage = 1
    stop.on_epoch_end(t)
    assert t.state.finished and t.state.stopped_early


def test_early_stopping_without_any_finite_value_says_so():
    m = Monitor("val.loss", rises=False)
    m.update(math.nan, 1)
    t = stand_in(stage=0, epoch=1)
    EarlyStopping(m, patience=1).on_epoch_end(t)
    assert "(no finite value yet)" in texts(t)[0] and t.state.stopped_early


# -- best weights and snapshots ----------------------------------------------------------

def test_best_weights_keeps_a_copy_of_the_best_epoch_and_restores_it():
    m = Monitor("val.loss", rises=False)
    best = BestWeights(m)
    t = stand_in(epoch=1)
    weight = t.c.module.fc.weight
    t.state.improved = m.update(0.5, 1)
    best.on_validation_end(t)
    kept = weight.detach().clone()
    with torch.no_grad():
        weight.add_(1.0)  # training goes on and gets worse
    t.state.improved = m.update(0.7, 2)
    best.on_validation_end(t)
    assert torch.equal(best.weights["fc.weight"], kept)
    best.on_run_end(t)
    assert torch.equal(weight, kept)
    assert texts(t) == ["restored the weights of epoch 1 (best val.loss = 0.5)"]


def test_best_weights_stay_out_when_cancelled_or_not_wanted_and_reset_per_stage():
    for restore, cancelled in ((True, True), (False, False)):
        m = Monitor("val.loss", rises=False)
        best = BestWeights(m, restore=restore)
        t = stand_in(epoch=1, improved=m.update(0.5, 1), cancelled=cancelled)
        best.on_validation_end(t)
        with torch.no_grad():
            t.c.module.fc.weight.add_(1.0)
        after = t.c.module.fc.weight.detach().clone()
        best.on_run_end(t)
        assert torch.equal(t.c.module.fc.weight, after) and not t.messages
    best.on_stage_start(t, fresh=False)
    assert best.weights is not None
    best.on_stage_start(t, fresh=True)
    assert best.weights is None


def test_snapshots_are_throttled_but_the_first_and_last_epoch_always_come():
    now = [100.0]
    snaps = WeightSnapshots(interval=0.5, clock=lambda: now[0])
    t = stand_in(stages=(4,))
    sent = []
    t.events.subscribe(sent.append, WeightsSnapshot)
    for epoch, at in zip((1, 2, 3, 4), (100.0, 100.2, 100.8, 100.9), strict=True):
        now[0] = at
        t.state.epoch, t.state.index = epoch, epoch
        snaps.on_epoch_end(t)
    assert [s.epoch for s in sent] == [1, 3, 4]
    weight = t.c.module.fc.weight
    assert torch.equal(sent[-1].state["fc.weight"], weight)
    assert sent[-1].state["fc.weight"].data_ptr() != weight.data_ptr()


# -- checkpoints -------------------------------------------------------------------------

def checkpointed(stages=(5,)):
    net = Net()
    sgd = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
    sched = torch.optim.lr_scheduler.StepLR(sgd, step_size=1, gamma=0.5)
    run = SimpleNamespace(node="opt", optimizer=sgd, scheduler=sched)
    return stand_in(stages, SimpleNamespace(module=net, optimizers=[run]))


def test_a_checkpoint_brings_back_the_whole_run(tmp_path):
    t = checkpointed()
    t.c.module.fc.weight.sum().backward()
    t.c.optimizers[0].optimizer.step(), t.c.optimizers[0].scheduler.step()
    m = Monitor("val.loss", rises=False)
    m.update(0.25, 2)
    best = BestWeights(m)
    writer = Checkpointing(tmp_path, every=2, monitor=m, best=best)
    s = t.state
    s.history, s.global_step, s.improved = [{"epoch": 1}, {"epoch": 2}], 8, True
    t.shuffle_rng.manual_seed(7)
    for epoch in (1, 2):
        s.epoch, s.index = epoch, epoch
        writer.on_epoch_end(t)
    assert texts(t) == ["checkpoint written: epoch 2"]  # every 2 epochs
    assert (tmp_path / "best.safetensors").exists()

    back = checkpointed()
    m2 = Monitor("val.loss", rises=False)
    best2 = BestWeights(m2)
    back.state.resume = True
    Checkpointing(tmp_path, every=2, monitor=m2, best=best2).on_run_start(back)
    assert (back.state.epoch, back.state.index, back.state.global_step) == (2, 2, 8)
    assert back.state.history == s.history and m2.state_dict() == m.state_dict()
    for k, v in t.c.module.state_dict().items():
        assert torch.equal(back.c.module.state_dict()[k], v)
        assert torch.equal(best2.weights[k], v)
    opt, opt2 = t.c.optimizers[0], back.c.optimizers[0]
    assert opt2.scheduler.get_last_lr() == opt.scheduler.get_last_lr() == [0.05]
    buf = opt.optimizer.state[opt.optimizer.param_groups[0]["params"][0]]["momentum_buffer"]
    buf2 = opt2.optimizer.state[opt2.optimizer.param_groups[0]["params"][0]]["momentum_buffer"]
    assert torch.equal(buf, buf2)
    assert torch.equal(back.shuffle_rng.get_state(), t.shuffle_rng.get_state())
    assert texts(back) == ["resumed from the checkpoint of epoch 2"]


def test_checkpoints_come_after_the_last_epoch_and_only_from_the_writing_rank(tmp_path):
    t = checkpointed(stages=(3,))
    m = Monitor("val.loss", rises=False)
    t.state.epoch, t.state.index = 3, 3  # the last epoch, off the every-2 rhythm
    Checkpointing(tmp_path / "other", 2, m, writes=False).on_epoch_end(t)
    assert not (tmp_path / "other").exists()
    Checkpointing(tmp_path / "main", 2, m).on_epoch_end(t)
    assert (tmp_path / "main" / "last").is_dir()
    assert not (tmp_path / "main" / "best.safetensors").exists()  # no best kept
    t.state.resume = False
    Checkpointing(tmp_path / "none", 2, m).on_run_start(t)  # not resuming: nothing read
    with pytest.raises(NodegraphError, match="no checkpoint to resume from"):
        t.state.resume = True
        Checkpointing(tmp_path / "none", 2, m).on_run_start(t)


# -- stages ------------------------------------------------------------------------------

def staged_stand_in():
    c = nodegraph.compile(two_heads())
    t = stand_in(compiled=c)
    t.state = LoopState(stages_of([{"name": "one", "epochs": 1, "optimizers": ["opt1"],
                                    "frozen": ["fc2"]},
                                   {"name": "two", "epochs": 1}], ["opt1", "opt2"], 0))
    return t


def test_a_stage_steps_its_optimizers_and_freezes_its_nodes_until_the_run_ends():
    t = staged_stand_in()
    stages, fc2 = StageSchedule(), t.c.module.module_of("fc2")
    t.state.stage = 0
    stages.on_stage_start(t, fresh=True)
    assert [o.node for o in t.active] == ["opt1"]
    assert {step[0] for step in t.c.eval_plan} <= {step[0] for step in t.active[0].plan}
    assert not any(p.requires_grad for p in fc2.parameters())
    assert all(p.requires_grad for p in t.c.module.module_of("fc1").parameters())
    t.c.module.train()
    stages.on_epoch_start(t)
    assert not fc2.training and t.c.module.module_of("fc1").training
    assert texts(t) == ["stage 1/2 'one': 1 epochs, optimizers opt1, frozen fc2"]
    t.state.stage = 1
    stages.on_stage_start(t, fresh=True)
    assert [o.node for o in t.active] == ["opt1", "opt2"]
    assert all(p.requires_grad for p in t.c.module.parameters())
    t.state.stage = 0
    stages.on_stage_start(t, fresh=True)
    stages.on_run_end(t)
    assert all(p.requires_grad for p in t.c.module.parameters())


# -- probes ------------------------------------------------------------------------------

def probe_stand_in():
    c = nodegraph.compile(line())
    t = stand_in(compiled=c)
    t.failed = []
    t.fail_nonfinite = lambda node, values, epoch: t.failed.append(node)
    batch = next(iter(c.datasets["data"].batches("train", False, None, node="data")))
    return t, batch


def test_probing_watches_the_steps_the_prober_picks_and_removes_its_hooks():
    t, batch = probe_stand_in()
    frames = []
    t.events.subscribe(frames.append, ProbeFrame)
    probe = Probing(Prober(every=2, budget=1000.0, rate=0.0), output_ports(t.c.module))
    o = t.c.optimizers[0]
    for step in (1, 2, 3):
        t.state.epoch, t.state.global_step = 1, step
        values = dict(batch)
        probe.on_step_start(t, values)
        o.optimizer.zero_grad()
        t.c.module.run(o.plan, values)[o.loss_key].backward()
        o.optimizer.step()
        probe.on_step_end(t, values)
    assert [f.step for f in frames] == [1, 3]
    assert frames[0].order == ["line", "loss"] and "line" in frames[0].grads
    assert frames[0].params["line.weight"].update_ratio > 0 and not t.failed
    assert all(not m._forward_hooks for m in t.c.module.modules())


def test_a_failed_step_leaves_no_probe_hooks_behind():
    t, batch = probe_stand_in()
    probe = Probing(Prober(every=1, budget=1000.0, rate=0.0), output_ports(t.c.module))
    t.state.global_step = 1
    probe.on_step_start(t, dict(batch))
    assert any(m._forward_hooks for m in t.c.module.modules())
    probe.on_exception(t, RuntimeError("the step failed"))
    assert all(not m._forward_hooks for m in t.c.module.modules())


def test_a_probed_nan_stops_the_run_at_its_node():
    t, batch = probe_stand_in()
    probe = Probing(Prober(every=1, budget=1000.0, rate=0.0), output_ports(t.c.module))
    t.state.global_step = 1
    with torch.no_grad():
        t.c.module.module_of("line").weight.fill_(math.nan)
    values = dict(batch)
    probe.on_step_start(t, values)
    o = t.c.optimizers[0]
    t.c.module.run(o.plan, values)[o.loss_key].backward()
    probe.on_step_end(t, values)
    assert t.failed == ["line"]


# -- DDP and the compile fallback --------------------------------------------------------

class TwoRanks:
    """Rank 0 of two; the other rank's numbers are given."""

    main, rank, world = True, 0, 2

    def __init__(self, other_sums, other_metrics):
        self.other_sums, self.other_metrics = other_sums, other_metrics

    def sum(self, values):
        return [a + b for a, b in zip(values, self.other_sums, strict=True)]

    def gather(self, obj):
        return [obj, (obj[0], self.other_metrics)]


def test_data_parallel_sums_losses_exactly_and_averages_metrics():
    from nodegraph.runtime.train import _Sums

    sums = _Sums({"loss": ("loss", "loss")}, True, ["loss"])
    sums.sums, sums.count = {"loss": 6.0}, 3  # 3 samples, mean 2.0
    ddp = DataParallel(TwoRanks([2.0, 1], {"accuracy": 0.0, "confusion": "B"}))
    stats = ddp.reduce(sums, {"accuracy": 1.0, "confusion": "A"})
    assert stats["loss"] == pytest.approx(8.0 / 4)
    assert stats["accuracy"] == pytest.approx(0.5) and stats["confusion"] == "A"
    assert ddp.writes


def test_ddp_looks_for_unused_parameters_only_when_an_optimizer_leaves_some():
    assert not partial_plans(nodegraph.compile(line()))
    assert partial_plans(nodegraph.compile(two_heads()))  # each optimizer trains one head


def test_compile_falls_back_to_eager_once_with_a_warning(monkeypatch):
    events, messages = Emitter(), []
    events.subscribe(messages.append, Message)
    eager = []

    def run(plan, values):
        eager.append(plan)
        return values

    def broken(fn, backend):
        def fail(plan, values):
            raise RuntimeError("no compiler\nhere")
        return fail

    monkeypatch.setattr(torch, "compile", broken)
    call = compiled_or_eager(run, "inductor", events)
    assert call("p1", {}) == {} and call("p2", {}) == {} and eager == ["p1", "p2"]
    assert [m.text for m in messages] == ["torch.compile failed (no compiler); running eager"]

    def unavailable(fn, backend):
        raise RuntimeError("not on this platform")

    monkeypatch.setattr(torch, "compile", unavailable)
    assert compiled_or_eager(run, "inductor", events) is run
    assert "torch.compile unavailable (not on this platform)" in messages[-1].text


def test_graph_errors_are_not_compiler_failures(monkeypatch):
    def node_fails(plan, values):
        raise NodegraphError("node 'fc': bad input")

    monkeypatch.setattr(torch, "compile", lambda fn, backend: node_fails)
    call = compiled_or_eager(lambda plan, values: values, "inductor", Emitter())
    with pytest.raises(NodegraphError, match="node 'fc'"):
        call("p", {})


# -- the loop ----------------------------------------------------------------------------

class Recorder(Callback):
    """Writes down each hook as the loop calls it."""

    def __init__(self):
        self.calls = []

    def on_run_start(self, trainer):
        self.calls.append("run_start")

    def on_stage_start(self, trainer, fresh):
        self.calls.append(f"stage_start {trainer.state.stage} {fresh}")

    def on_epoch_start(self, trainer):
        self.calls.append(f"epoch_start {trainer.state.epoch}")

    def on_step_start(self, trainer, values):
        self.calls.append("step_start")

    def on_step_end(self, trainer, values):
        self.calls.append("step_end")

    def on_validation_end(self, trainer):
        self.calls.append(f"validation_end {sorted(trainer.state.val)}")

    def on_epoch_end(self, trainer):
        self.calls.append(f"epoch_end {trainer.state.index}")

    def on_run_end(self, trainer):
        self.calls.append("run_end")


def test_the_loop_calls_the_hooks_in_order():
    g = two_heads()
    g.set_training("stages", [{"name": "a", "epochs": 1, "optimizers": ["opt1"]},
                              {"name": "b", "epochs": 1, "optimizers": ["opt2"]}])
    g.set_param("data", "batch_size", 80)  # 160 training samples: 2 steps an epoch
    rec = Recorder()
    result = nodegraph.train(g, callbacks=[rec])
    val = "validation_end ['loss', 'loss1', 'loss2']"
    epoch = ["step_start", "step_end"] * 2
    assert rec.calls == ["run_start",
                         "stage_start 0 True", "epoch_start 1", *epoch, val, "epoch_end 1",
                         "stage_start 1 True", "epoch_start 2", *epoch, val, "epoch_end 2",
                         "run_end"]
    assert [h["stage"] for h in result.history] == ["a", "b"]


def test_an_unwatched_run_has_no_step_hooks():
    from nodegraph.runtime.train import RunControl, Trainer, training_options

    g = line()
    opts = training_options(g)
    trainer = Trainer(nodegraph.compile(g), opts, Emitter(), RunControl(), None)
    assert trainer.callbacks.step_start == [] and trainer.callbacks.step_end == []
    watched = Emitter()
    watched.subscribe(lambda f: None, ProbeFrame)
    trainer = Trainer(nodegraph.compile(g), opts, watched, RunControl(), None)
    assert [type(cb) for cb in trainer.callbacks.step_end] == [Probing]


def test_a_callback_can_end_the_run():
    class StopAfterTwo(Callback):
        def on_epoch_end(self, trainer):
            if trainer.state.epoch == 2:
                trainer.state.end_stage()

    result = nodegraph.train(line(), epochs=5, callbacks=[StopAfterTwo()])
    assert [h["epoch"] for h in result.history] == [1, 2] and result.stopped_early
    assert set(result.final) == {"train", "val"}  # a stop, not a cancel: evaluated as usual
