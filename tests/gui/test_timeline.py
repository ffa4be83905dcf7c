"""The timeline: scrubbing a run's frames and replaying a --probe-out recording."""

from __future__ import annotations

import nodegraph
from nodegraph.gui.training.timeline import FrameLog
from nodegraph.model.events import Emitter
from nodegraph.model.fileformat import load
from nodegraph.runtime.probes import ProbeFrame, ProbeWriter, read_frames
from tests.gui.test_animation import probe_every_step


def frame(step: int) -> ProbeFrame:
    return ProbeFrame(1, step, [], {}, {}, {})


def test_a_full_log_thins_evenly_and_keeps_the_start():
    log = FrameLog(limit=4)
    for step in range(1, 11):
        log.add(frame(step))
    assert [f.step for f in log.frames] == [1, 5, 9, 10]  # every 4th, and the newest
    log.add(frame(11))
    assert [f.step for f in log.frames] == [1, 5, 9, 11]
    big = FrameLog(limit=100)
    big.replace([frame(s) for s in range(1, 1001)])
    assert len(big) <= 100 and big[0].step == 1 and big[len(big) - 1].step == 1000
    gaps = {b.step - a.step for a, b in zip(big.frames, big.frames[1:-1], strict=False)}
    assert gaps == {16}  # one stride throughout


def test_scrubbing_the_run_replays_a_frame_and_stops_following(xor_window):
    w = xor_window
    probe_every_step(w)
    w.epochs.setValue(5)
    assert w.start_training() and w.runner.wait(180)
    timeline, animator = w.watch.timeline, w.watch.animator
    assert [f.step for f in timeline.log.frames] == [1, 2, 3, 4, 5]
    assert timeline.slider.value() == 4 and timeline.live.isChecked()
    timeline.slider.setValue(1)
    assert animator.frame.step == 2 and not timeline.live.isChecked()
    assert "step 2 (epoch 2) · frame 2/5" in timeline.info.text()
    later = ProbeFrame(6, 6, timeline.log[4].order, timeline.log[4].outputs,
                       timeline.log[4].grads, timeline.log[4].params)
    w.watch.on_event(later)  # a frame arriving while the user looks at an old one
    assert len(timeline.log) == 6 and animator.frame.step == 2 and timeline.slider.value() == 1
    timeline.live.setChecked(True)
    assert animator.frame.step == 6


def test_a_probe_out_recording_opens_and_replays(make_window, xor_file, tmp_path):
    out = tmp_path / "xor.jsonl"
    writer, events = ProbeWriter(out), Emitter()  # what `nodegraph run --probe-out` does
    events.subscribe(writer, ProbeFrame)
    graph = load(xor_file)
    # a frame every third step
    graph.update_training(probe_every=3, probe_budget=1000.0, probe_rate=0)
    nodegraph.train(graph, epochs=30, device="cpu", events=events)
    writer.close()
    recorded = list(read_frames(out))
    assert [f.step for f in recorded] == list(range(1, 31, 3))
    w = make_window(str(xor_file))
    assert "Open Probe Recording…" in [a.text().replace("&", "")
                                       for a in w.menuBar().actions()[0].menu().actions()]
    assert w.watch.open_recording(str(out))
    timeline, animator = w.watch.timeline, w.watch.animator
    assert len(timeline.log) == len(recorded) and not timeline.live.isChecked()
    assert animator.frame.step == recorded[0].step  # the first frame plays
    timeline.slider.setValue(len(recorded) - 1)
    last = recorded[-1]
    assert animator.frame.step == last.step
    assert f"xor.jsonl: step {last.step}" in timeline.info.text()
    assert animator.steps[1].node == "hidden"  # after the data source, the first layer
    assert not w.watch.open_recording(str(tmp_path / "missing.jsonl"))
