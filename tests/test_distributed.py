"""Data-parallel training: two gloo processes under torchrun follow the single-process run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from nodegraph.cli.run import without_option

# What the runs of one test may take together: under pytest-timeout's 300 s (pyproject), so
# a run that hangs is stopped here, with its whole process tree and its stderr in the report,
# instead of the timeout ending the test while torchrun's workers (each in a session of its
# own) go on eating the CPU of the tests after it.
BUDGET_S = 270

# One thread per process in both runs (torchrun sets it for its workers only): on the two
# cores two ranks and another xdist worker share, more threads only wait for each other.
# A rank that aborts prints the Python stack of every thread (faulthandler) into the report.
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONFAULTHANDLER": "1"}


@pytest.fixture
def deadline():
    return time.monotonic() + BUDGET_S


def run(tmp_path, deadline, name, *args):
    out = tmp_path / f"{name}.json"
    proc = subprocess.Popen([sys.executable, "-m", "nodegraph", "run", *args, "--quiet",
                             "--metrics-out", str(out)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=ENV, start_new_session=True)
    try:
        _, stderr = proc.communicate(timeout=max(1.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        stderr = _stop(proc)
        pytest.fail(f"`nodegraph run {' '.join(args)}` ran past the test's {BUDGET_S} s; "
                    f"its stderr ends:\n{stderr[-6000:]}")
    finally:  # pytest-timeout's failure, or ^C, lands here too
        if proc.poll() is None:
            _stop(proc)
    assert proc.returncode == 0, stderr[-6000:]
    return json.loads(out.read_text())


def _stop(proc: subprocess.Popen) -> str:
    """SIGTERM to the run's process group (nodegraph and torchrun; torchrun then stops its
    workers), SIGKILL if that does not end it; returns what it wrote to stderr."""
    for sig, grace in ((signal.SIGTERM, 30), (signal.SIGKILL, 10)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            pass
        try:
            return proc.communicate(timeout=grace)[1]
        except subprocess.TimeoutExpired:
            continue
    return ""


# The digits CNN in a quick mode: two epochs (its 60 would cost minutes on CI), and no
# dropout, because each rank draws its own dropout masks (seed + rank), so with dropout the
# two runs agree only in distribution, not to float tolerance. Its 1259 training images in
# batches of 32 end with an odd batch of 11, split 6 + 5. Marked slow (CI's own step): a
# minute of two CNN trainings, where the MLPs above check the same agreement in seconds.
CNN_QUICK = ["--epochs", "2", "--set", "dropout.p=0.0"]


@pytest.mark.parametrize("graph, extra", [
    ("examples/line_fit.json", ["--epochs", "4", "--set", "data.batch_size=25"]),  # uneven shards
    ("examples/xor.json", ["--epochs", "150"]),
    pytest.param("examples/cnn_digits.json", CNN_QUICK, marks=pytest.mark.slow),
])
def test_two_processes_match_one(tmp_path, deadline, graph, extra):
    single = run(tmp_path, deadline, "single", graph, *extra)
    double = run(tmp_path, deadline, "double", graph, *extra, "--nproc", "2")
    final = single["final"]
    if "accuracy" in final["train"]:  # it learned, so agreeing is no matter of chance
        assert final.get("test", final["train"])["accuracy"] > 0.85
    assert len(single["history"]) == len(double["history"])
    # the CNN's convolutions sum in another order when each rank holds half a batch: after
    # two epochs its losses differ in the fourth digit on some CPUs (1.2e-4 relative on a
    # Xeon of 2026), the MLPs' do not
    rel = 5e-4 if "cnn" in graph else 1e-4
    for a, b in zip(single["history"], double["history"], strict=True):
        for split in ("train", "val"):
            for key, value in a[split].items():
                assert b[split][key] == pytest.approx(value, rel=rel, abs=1e-6), (split, key)
    for split, stats in single["final"].items():
        for key, value in stats.items():
            assert double["final"][split][key] == pytest.approx(value, rel=rel, abs=1e-6)


def test_nproc_is_removed_before_torchrun_starts_the_workers():
    assert without_option(["run", "g.json", "--nproc", "2", "--quiet"], "--nproc") == [
        "run", "g.json", "--quiet"]
    assert without_option(["run", "--nproc=4", "g.json"], "--nproc") == ["run", "g.json"]


def test_a_rank_killed_by_a_signal_prints_its_stacks(monkeypatch):
    from nodegraph.runtime import distributed

    seen = {}
    monkeypatch.delenv("PYTHONFAULTHANDLER", raising=False)

    class Started:  # torchrun, as launch starts it
        def __init__(self, command, env):
            seen.update(command=command, env=env)

        def wait(self):
            return 0

    monkeypatch.setattr(distributed.subprocess, "Popen", Started)
    assert distributed.launch(2, ["run", "g.json"]) == 0
    assert seen["env"]["PYTHONFAULTHANDLER"] == "1"
    assert seen["command"][-4:] == ["-m", "nodegraph", "run", "g.json"]


def _descendants(pid: int) -> set[int]:
    """The processes below `pid`, read from /proc (ranks sit in sessions of their own)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    found, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


def _command(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


def _ranks(pids: set[int]) -> list[int]:
    """The ranks among `pids`: `python -u -m nodegraph run ...` under torchrun."""
    return [p for p in pids if "-m nodegraph" in (c := _command(p))
            and "torch.distributed.run" not in c]


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_sigterm_to_nproc_run_stops_torchrun_and_its_ranks(tmp_path, deadline):
    proc = subprocess.Popen([sys.executable, "-m", "nodegraph", "run", "examples/xor.json",
                             "--nproc", "2", "--epochs", "100000", "--quiet"], env=ENV,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    below: set[int] = set()
    try:
        # torchrun and its two ranks, the ranks known by their command line: a count of
        # processes alone once sent the signal while torchrun was still starting
        while len(_ranks(below)) < 2 and time.monotonic() < deadline:
            time.sleep(0.2)
            below = _descendants(proc.pid)
        assert len(_ranks(below)) >= 2, "torchrun did not start its ranks"
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=max(1.0, deadline - time.monotonic()))
        while any(_alive(p) for p in below) and time.monotonic() < deadline:
            time.sleep(0.2)
        left = {p: _command(p) for p in below if _alive(p)}
        assert not left, f"ranks outlived the run they served: {left}"
    finally:  # nothing of this test may go on eating the CPU of the tests after it
        if proc.poll() is None:
            _stop(proc)
        for pid in below:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl, /proc")
def test_ranks_a_dying_torchrun_leaves_behind_are_stopped(tmp_path, deadline):
    """torchrun killed by a SIGTERM while it was still starting its ranks leaves them
    running in sessions of their own (seen once in CI). The launcher adopts them and
    stops them: here a stand-in torchrun that starts a 'rank' and dies of the signal."""
    pidfile = tmp_path / "rank.pid"
    fake = ("import subprocess, sys, time; p = subprocess.Popen([sys.executable, '-c', "
            "'import time; time.sleep(600)'], start_new_session=True); "
            f"open({str(pidfile)!r}, 'w').write(str(p.pid)); time.sleep(600)")
    runner = subprocess.Popen(
        [sys.executable, "-c", "import os, sys; from nodegraph.runtime.distributed import "
         f"launched; sys.exit(launched([sys.executable, '-c', {fake!r}], dict(os.environ)))"],
        env=ENV, stderr=subprocess.PIPE, text=True, start_new_session=True)
    rank = None
    try:
        while rank is None and time.monotonic() < deadline:
            time.sleep(0.1)
            rank = int(pidfile.read_text()) if pidfile.exists() and pidfile.read_text() \
                else None
        assert rank is not None, "the stand-in torchrun did not start its rank"
        runner.send_signal(signal.SIGTERM)
        _, err = runner.communicate(timeout=max(1.0, deadline - time.monotonic()))
        while _alive(rank) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _alive(rank), "the rank outlived the torchrun that started it"
        assert f"stopped 1 process(es) torchrun left running (pids {rank})" in err
    finally:
        if runner.poll() is None:
            _stop(runner)
        if rank is not None and _alive(rank):
            os.kill(rank, signal.SIGKILL)
