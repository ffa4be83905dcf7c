"""The run's CPU thread count: chosen from the step's work, overridden by the user in the
order --threads > training.threads > OMP_NUM_THREADS > automatic, and put back after."""

from __future__ import annotations

import pytest
import torch

import nodegraph
from nodegraph.model.errors import ValidationError
from nodegraph.model.events import Emitter, EpochEnded, Message
from nodegraph.runtime import threads
from nodegraph.runtime.train import training_options

AUTO = {}  # an environment without OMP_NUM_THREADS


@pytest.fixture
def idle_eight_cores(monkeypatch):
    """A machine of 8 idle cores, whatever this one is."""
    monkeypatch.setattr(threads, "physical_cores", lambda: 8)
    monkeypatch.setattr(threads, "busy_cores", lambda: 0)


@pytest.fixture(autouse=True)
def keep_torch_threads():
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


def line(**training):
    g = nodegraph.load("examples/line_fit.json")
    for k, v in training.items():
        g.set_training(k, v)
    return g


def compiled_line(batch: int = 20):
    g = line()
    g.set_param("data", "batch_size", batch)
    return nodegraph.compile(g, device="cpu")


def test_forward_flops_of_a_linear_layer_are_two_per_multiply_add():
    # Linear(1, 1) on a batch of B: one multiply-add per sample, 2·B FLOPs (the loss
    # and the data block count none)
    for batch in (20, 64):
        assert threads.forward_flops(compiled_line(batch)) == 2 * batch


def test_a_tiny_model_gets_one_thread_even_on_idle_cores(idle_eight_cores):
    choice = threads.choose(compiled_line(), None, AUTO)
    assert choice.threads == 1
    assert "FLOPs per step" in choice.reason


def test_a_large_step_gets_every_idle_core_and_no_more():
    big = 100 * threads.GRAIN * 8
    assert threads.automatic(big, cores=8, busy=0) == 8
    assert threads.automatic(big, cores=8, busy=5) == 3
    assert threads.automatic(big, cores=8, busy=12) == 1
    assert threads.automatic(3 * threads.GRAIN, cores=8, busy=0) == 3
    assert threads.automatic(threads.GRAIN / 2, cores=8, busy=0) == 1


def test_a_large_convolution_is_counted_large(idle_eight_cores):
    # a 3x3 conv of 64 -> 64 channels on 32x32 images, batch 32: 2·64·64·9·32·32·32 FLOPs,
    # as torch's own counter says
    from torch.utils.flop_counter import FlopCounterMode

    conv, x = torch.nn.Conv2d(64, 64, 3, padding=1), torch.zeros(32, 64, 32, 32)
    with torch.no_grad():
        flops = threads.layer_flops(conv, lambda: conv(x))
        reference = FlopCounterMode(display=False)
        with reference:
            conv(x)
    assert flops == 2 * 64 * 64 * 9 * 32 * 32 * 32 == reference.get_total_flops()
    assert threads.automatic(threads.TRAIN_FACTOR * flops, cores=8, busy=0) == 8


def test_linear_layers_count_like_torchs_counter():
    mlp = torch.nn.Sequential(torch.nn.Linear(30, 50), torch.nn.ReLU(), torch.nn.Linear(50, 7))
    x = torch.zeros(16, 30)
    from torch.utils.flop_counter import FlopCounterMode

    with torch.no_grad():
        ours = threads.layer_flops(mlp, lambda: mlp(x))
        reference = FlopCounterMode(display=False)
        with reference:
            mlp(x)
    assert ours == reference.get_total_flops() == 2 * 16 * (30 * 50 + 50 * 7)


def test_override_order_setting_then_environment_then_automatic(idle_eight_cores):
    c = compiled_line()
    assert threads.choose(c, 3, {"OMP_NUM_THREADS": "2"}).threads == 3
    assert threads.choose(c, None, {"OMP_NUM_THREADS": "2"}).threads == 2
    assert "OMP_NUM_THREADS" in threads.choose(c, None, {"OMP_NUM_THREADS": "2"}).reason
    assert threads.choose(c, None, {"OMP_NUM_THREADS": ""}).threads == 1  # automatic
    assert threads.choose(c, None, AUTO).threads == 1


def test_threads_argument_beats_the_files_setting():
    g = line(threads=2)
    assert training_options(g).threads == 2
    assert training_options(g, threads=5).threads == 5
    assert training_options(line()).threads is None
    with pytest.raises(ValidationError, match="threads"):
        training_options(g, threads=0)


def run_recording(graph, **kwargs):
    """Train one epoch; the thread count seen during the run and the log's messages."""
    seen, messages = [], []
    events = Emitter()
    events.subscribe(lambda e: seen.append(torch.get_num_threads()), EpochEnded)
    events.subscribe(lambda e: messages.append(e.text), Message)
    nodegraph.train(graph, epochs=1, events=events, **kwargs)
    return seen, messages


def test_train_applies_the_choice_says_it_and_restores_the_count(monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    torch.set_num_threads(2)
    seen, messages = run_recording(line(threads=2), threads=1)  # --threads beats the file
    assert seen == [1]
    assert torch.get_num_threads() == 2
    assert any("using 1 CPU thread" in m and "--threads" in m for m in messages)

    torch.set_num_threads(1)
    seen, _ = run_recording(line(threads=2))
    assert seen == [2]
    assert torch.get_num_threads() == 1


def test_environment_wins_over_the_automatic_choice(monkeypatch, idle_eight_cores):
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    torch.set_num_threads(1)
    seen, messages = run_recording(line())
    assert seen == [2]
    assert any("OMP_NUM_THREADS=2" in m for m in messages)
    assert torch.get_num_threads() == 1


def test_the_count_is_restored_when_the_run_fails(monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    torch.set_num_threads(2)
    events = Emitter()

    def fail(event):
        raise RuntimeError("listener broke")

    events.subscribe(fail, EpochEnded)
    with pytest.raises(RuntimeError, match="listener broke"):
        nodegraph.train(line(), epochs=1, events=events, threads=1)
    assert torch.get_num_threads() == 2


def test_physical_cores_is_at_least_one_and_at_most_the_usable_cpus():
    import os

    n = threads.physical_cores()
    assert 1 <= n <= len(os.sched_getaffinity(0))
    assert threads.busy_cores(samples=1) >= 0


def test_run_threads_option_reaches_the_trainer_and_is_said(capsys, monkeypatch):
    from nodegraph.cli.main import main

    monkeypatch.setenv("OMP_NUM_THREADS", "2")  # --threads wins over the environment too
    assert main(["run", "examples/xor.json", "--epochs", "1", "--threads", "1"]) == 0
    out = capsys.readouterr()
    assert "using 1 CPU thread (training.threads / --threads)" in out.out + out.err
