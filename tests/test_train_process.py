"""The training process the editor trains in: the same run as in this process, events in
order, Stop, failures named by node, and the trained model rebuilt from what it sends."""

from __future__ import annotations

import json

import pytest
import torch

import nodegraph
from nodegraph.model.events import EpochEnded, Message, RunFinished, RunStarted
from nodegraph.runtime.probes import ProbeFrame
from nodegraph.runtime.train_process import EventBatcher, TrainingProcess, plain_state, rebuild


def run(process: TrainingProcess, graph, **options) -> tuple[list, list, dict | None]:
    """Train in `process`; (events, failures, done payload)."""
    assert process.train(graph, options)
    events, failures = [], []
    while (message := process.receive()) is not None:
        if message[0] == "events":
            events += message[1]
        elif message[0] == "failed":
            failures.append(message[1:])
        elif message[0] == "done":
            return events, failures, message[1]
    raise AssertionError("the training process ended")


@pytest.fixture(scope="module")
def process():
    p = TrainingProcess()
    yield p
    p.close()


def test_a_run_in_the_process_equals_the_run_here(process):
    graph = nodegraph.load("examples/xor.json")
    here = nodegraph.train(graph.copy(), epochs=30)
    events, failures, payload = run(process, graph, epochs=30)
    assert not failures
    kinds = [type(e) for e in events if not isinstance(e, Message)]  # the thread choice, …
    assert kinds[0] is RunStarted and kinds[-1] is RunFinished
    assert [e.epoch for e in events if isinstance(e, EpochEnded)] == list(range(1, 31))
    assert any(isinstance(e, ProbeFrame) for e in events)  # the editor listens to all
    untimed = [{k: v for k, v in h.items() if k != "seconds"} for h in here.history]
    assert [{k: v for k, v in h.items() if k != "seconds"} for h in payload["history"]] == \
        untimed
    assert payload["final"] == here.final
    rebuilt = rebuild(graph, {"epochs": 30}, payload)
    for key, value in here.module.state_dict().items():
        assert torch.equal(rebuilt.module.state_dict()[key], value), key


def test_stop_ends_the_run_and_the_process_serves_the_next(process):
    graph = nodegraph.load("examples/xor.json")
    assert process.train(graph, {"epochs": 100_000})
    seen = 0
    while seen < 3:  # a few batches in, the run is under way
        message = process.receive()
        seen += message[0] == "events"
    process.send("stop")
    while (message := process.receive())[0] != "done":
        pass
    assert message[1]["cancelled"] and len(message[1]["history"]) < 100_000
    _, failures, payload = run(process, graph, epochs=2)
    assert not failures and len(payload["history"]) == 2


def test_a_failing_run_names_its_node(process):
    graph = nodegraph.load("examples/line_fit.json")
    graph.set_param("opt", "lr", 1e12)
    _, failures, payload = run(process, graph, epochs=5)
    assert payload is None
    message, node = failures[0]
    assert node in graph.nodes and "NaN" in message or "infinite" in message


def test_relative_data_paths_are_read_beside_the_graph_file(process, tmp_path):
    from tests.test_data_paths import line_graph

    (tmp_path / "data").mkdir()
    rows = "\n".join(f"{x:.3f},{3 * x - 1:.3f}" for x in torch.linspace(-1, 1, 32).tolist())
    (tmp_path / "data" / "line.csv").write_text("x,y\n" + rows + "\n")
    path = tmp_path / "graph.json"
    path.write_text(json.dumps(line_graph("data/line.csv")))
    graph = nodegraph.load(path)  # the process runs elsewhere: only the folder tells it
    _, failures, payload = run(process, graph, epochs=2)
    assert not failures and len(payload["history"]) == 2


def test_pruned_weights_come_back_multiplied_by_their_masks():
    layer = torch.nn.Linear(3, 2)
    torch.nn.utils.prune.l1_unstructured(layer, "weight", amount=0.5)
    state = plain_state(layer)
    assert set(state) == {"weight", "bias"}
    assert torch.equal(state["weight"], layer.weight.detach())
    fresh = torch.nn.Linear(3, 2)
    fresh.load_state_dict(state)
    assert (fresh.weight == 0).sum() == 3


def test_batches_keep_order_and_only_the_latest_step_without_a_loss():
    from nodegraph.model.events import Message, StepEnded

    sent = []
    batcher = EventBatcher(sent.append)
    batcher(Message("first"))  # not progress: sent at once
    for step in range(1, 6):
        batcher(StepEnded(1, step, 5, 0.5 if step == 3 else None))
    batcher(Message("last"))
    batcher.flush()
    events = [e for batch in sent for e in batch]
    assert [getattr(e, "step", getattr(e, "text", None)) for e in events] == \
        ["first", 3, 5, "last"]


def test_a_graph_no_file_can_hold_is_refused_and_the_process_stays(process):
    graph = nodegraph.load("examples/xor.json")
    graph.set_param("hidden", "out_features", {4, 5}, strict=False)  # a set: JSON has none
    assert not process.train(graph, {"epochs": 1}) and process.alive
    _, failures, payload = run(process, nodegraph.load("examples/xor.json"), epochs=1)
    assert not failures and len(payload["history"]) == 1


def test_a_process_that_ended_on_its_own_has_its_pipes_closed_when_dropped():
    """A process that died between runs was dropped from the editor's lists with both
    pipes open; the garbage collector then warned of unclosed files (an error in the GUI
    tests' teardown)."""
    from nodegraph.runtime import train_process

    p = TrainingProcess()
    p.popen.kill()
    p.popen.wait()
    assert train_process._living([p]) == []
    assert p._stdout.closed and p._stdin.closed
