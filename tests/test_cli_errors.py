"""The command line on damaged checkpoints, unwritable or full output paths and a folder
given as a graph: each ends in a message naming the file and the problem, before training
when the problem can be seen then, and leaves no half-written file or temp folder behind.
A run killed with SIGKILL resumes to exactly the history of an uninterrupted one."""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from nodegraph.cli.main import main
from nodegraph.model import outputs
from nodegraph.runtime import checkpoint

GRAPH = "examples/line_fit.json"


def run_cli(capsys, *args) -> tuple[int, str, str]:
    code = main(["run", GRAPH, *args])
    out, err = capsys.readouterr()
    return code, out, err


def leftovers(folder: Path) -> list[str]:
    """Temp files and folders the writers make: none may outlive a run."""
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*")
                  if p.name.startswith((".last.", ".nodegraph-check.")) or ".tmp" in p.name)


def assert_clear_error(code: int, err: str, *words: str) -> None:
    assert code == 1
    assert "internal error" not in err and "Traceback" not in err
    lines = err.strip().splitlines()
    assert lines[-1].startswith("error: "), err  # one line of our own, at the end
    assert [line for line in lines if "error" in line] == lines[-1:], err
    for word in words:
        assert word in err, (word, err)


def assert_not_trained(out: str, err: str) -> None:
    assert "epoch 1" not in out + err and "trainable parameters" not in out + err


@pytest.fixture
def good_checkpoint(tmp_path, capsys) -> Path:
    ck = tmp_path / "ck"
    assert main(["run", GRAPH, "--epochs", "2", "--checkpoint-dir", str(ck), "--quiet"]) == 0
    capsys.readouterr()
    return ck


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


# -- damaged checkpoints ------------------------------------------------------------------

def damage_truncated(path: Path) -> None:
    path.write_bytes(path.read_bytes()[:50])


def damage_garbage(path: Path) -> None:
    path.write_bytes(b"garbage, not safetensors at all\n" * 4)


@pytest.mark.parametrize("damage", [damage_truncated, damage_garbage])
@pytest.mark.parametrize("name", ["model.safetensors", "state.safetensors"])
def test_a_damaged_safetensors_file_is_named(good_checkpoint, capsys, damage, name):
    damaged = good_checkpoint / "last" / name
    damage(damaged)
    before = snapshot(good_checkpoint)
    code, out, err = run_cli(capsys, "--epochs", "4", "--checkpoint-dir", str(good_checkpoint),
                             "--resume")
    assert_clear_error(code, err, f"checkpoint file '{damaged}' is damaged",
                       "not a safetensors file", "without --resume")
    assert_not_trained(out, err)
    assert snapshot(good_checkpoint) == before  # the evidence is left as it was


@pytest.mark.parametrize("text, problem", [
    ('{"epoch": 2, "next": 2, "hist', "it is not valid JSON"),
    ("", "it is not valid JSON"),
    ("[1, 2]", "it holds a JSON list, not an object"),
    ('{"epoch": 2, "next": 2}', "it lacks history"),
    ('{"epoch": "two", "next": 2, "history": []}', "'epoch' should be a JSON integer"),
    ('{"epoch": 2, "next": 2, "history": [], "optimizers": {"opt": {"state": 3}}}',
     "its optimizer state is malformed"),
])
def test_a_bad_trainer_json_is_named(good_checkpoint, capsys, text, problem):
    info = good_checkpoint / "last" / "trainer.json"
    info.write_text(text)
    code, out, err = run_cli(capsys, "--epochs", "4", "--checkpoint-dir", str(good_checkpoint),
                             "--resume")
    assert_clear_error(code, err, f"checkpoint file '{info}' is damaged", problem,
                       "without --resume")
    assert_not_trained(out, err)


def test_a_trainer_json_that_is_not_text_is_named(good_checkpoint, capsys):
    info = good_checkpoint / "last" / "trainer.json"
    info.write_bytes(b"\xff\xfe\x00garbage")
    code, _, err = run_cli(capsys, "--epochs", "4", "--checkpoint-dir", str(good_checkpoint),
                           "--resume")
    assert_clear_error(code, err, str(info), "not text")


def test_damaged_init_weights_are_named(good_checkpoint, capsys):
    weights = good_checkpoint / "last" / "model.safetensors"
    damage_truncated(weights)
    code, out, err = run_cli(capsys, "--init-weights", str(weights))
    assert_clear_error(code, err, f"weights file '{weights}' is damaged", "nodegraph export")
    assert_not_trained(out, err)


# -- output paths that cannot be written ----------------------------------------------------

@pytest.mark.parametrize("flag", ["--metrics-out", "--probe-out"])
def test_an_output_file_under_a_regular_file_fails_before_training(tmp_path, capsys, flag):
    (tmp_path / "file.txt").write_text("a file, not a folder")
    target = tmp_path / "file.txt" / "out.json"
    code, out, err = run_cli(capsys, "--epochs", "3", flag, str(target))
    assert_clear_error(code, err, f"{flag} '{target}'", f"{tmp_path / 'file.txt'} is a file, "
                       "not a folder", "choose another path")
    assert_not_trained(out, err)
    assert leftovers(tmp_path) == [] and sorted(os.listdir(tmp_path)) == ["file.txt"]


def test_an_output_file_where_no_file_can_be_created_fails_before_training(capsys):
    target = "/proc/nodegraph-cannot-be-here.json"  # root is refused there too
    code, out, err = run_cli(capsys, "--metrics-out", target)
    assert_clear_error(code, err, f"--metrics-out '{target}'", "cannot write there")
    assert_not_trained(out, err)
    assert not os.path.exists(target)


def test_an_output_file_that_is_a_folder_fails_before_training(tmp_path, capsys):
    code, out, err = run_cli(capsys, "--metrics-out", str(tmp_path))
    assert_clear_error(code, err, f"--metrics-out '{tmp_path}'", "is a folder")
    assert_not_trained(out, err)


@pytest.mark.parametrize("where", ["file.txt/ck", "file.txt"])
def test_an_unwritable_checkpoint_folder_fails_before_training(tmp_path, capsys, where):
    (tmp_path / "file.txt").write_text("a file, not a folder")
    folder = tmp_path / where
    code, out, err = run_cli(capsys, "--checkpoint-dir", str(folder))
    assert_clear_error(code, err, f"checkpoint folder '{folder}'", "is a file, not a folder")
    assert_not_trained(out, err)
    assert sorted(os.listdir(tmp_path)) == ["file.txt"]


def test_an_export_to_an_unwritable_path_fails_before_training(tmp_path, capsys):
    (tmp_path / "file.txt").write_text("a file, not a folder")
    target = tmp_path / "file.txt" / "w.safetensors"
    code = main(["export", GRAPH, "--to", "weights", "--train", "-o", str(target)])
    out, err = capsys.readouterr()
    assert_clear_error(code, err, f"-o '{target}'", "is a file, not a folder")
    assert_not_trained(out, err)


def test_an_export_over_a_pipe_or_device_is_refused(tmp_path, capsys):
    # a pipe of our own stands in for a device: a rename over /dev/null would replace it
    # for the whole machine should this ever regress
    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)
    code = main(["export", GRAPH, "--to", "python", "-o", str(pipe)])
    assert_clear_error(code, capsys.readouterr().err, f"-o '{pipe}'", "is not a regular file")
    assert pipe.is_fifo()  # still the pipe, not replaced by a rename


def test_metrics_to_a_pipe_are_written_into_it(tmp_path, capsys):
    """A pipe or device (/dev/stdout) is written in place; a rename would replace it."""
    pipe, got = tmp_path / "pipe", []
    os.mkfifo(pipe)
    reader = threading.Thread(target=lambda: got.append(pipe.read_text()), daemon=True)
    reader.start()
    code, _, err = run_cli(capsys, "--epochs", "2", "--metrics-out", str(pipe), "--quiet")
    reader.join(timeout=60)  # only guards against a hang; a working write ends it at once
    assert code == 0, err
    assert pipe.is_fifo() and len(json.loads(got[0])["history"]) == 2


def test_a_check_leaves_no_folder_behind(tmp_path, capsys):
    ck = tmp_path / "new" / "ck"
    code, _, err = run_cli(capsys, "--checkpoint-dir", str(ck), "--resume")
    assert_clear_error(code, err, "no checkpoint to resume from")
    assert os.listdir(tmp_path) == []


# -- a full disk --------------------------------------------------------------------------

def disk_full(*args, **kwargs):
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def test_a_full_disk_at_the_metrics_leaves_no_file(tmp_path, capsys, monkeypatch):
    target = tmp_path / "m.json"
    target.write_text("the previous run's metrics")
    monkeypatch.setattr(outputs.os, "fsync", disk_full)  # where a full disk shows at the latest
    code, _, err = run_cli(capsys, "--epochs", "2", "--metrics-out", str(target), "--quiet")
    assert_clear_error(code, err, f"--metrics-out '{target}'", "the disk is full",
                       "free some space")
    assert target.read_text() == "the previous run's metrics"
    assert leftovers(tmp_path) == []


def test_a_full_disk_at_a_checkpoint_keeps_the_last_good_one(good_checkpoint, capsys,
                                                             monkeypatch):
    before = snapshot(good_checkpoint)

    def half_then_full(tensors, filename, *args, **kwargs):
        Path(filename).write_bytes(b"\0" * 10)  # what a full disk leaves: part of a file
        disk_full()

    monkeypatch.setattr(checkpoint, "save_file", half_then_full)
    code, out, err = run_cli(capsys, "--epochs", "4", "--checkpoint-dir", str(good_checkpoint),
                             "--resume")
    assert_clear_error(code, err, f"cannot write the checkpoint in '{good_checkpoint}'",
                       "the disk is full", "previous checkpoint", "--resume")
    assert "epoch 3/4" in out + err  # it failed at the first save after resuming
    assert snapshot(good_checkpoint) == before and leftovers(good_checkpoint) == []
    assert checkpoint.load(good_checkpoint)[3]["epoch"] == 2


def test_a_checkpoint_a_crash_left_mid_swap_survives_a_failed_save(good_checkpoint,
                                                                  monkeypatch):
    (good_checkpoint / "last").rename(good_checkpoint / ".last.old")  # killed mid-swap
    real_rename = Path.rename

    def rename(self, target):
        if self.name == ".last.tmp":
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        return real_rename(self, target)

    monkeypatch.setattr(Path, "rename", rename)
    *_, info = checkpoint.load(good_checkpoint)
    with pytest.raises(outputs.OutputError, match="previous checkpoint"):
        checkpoint.save(good_checkpoint, {}, {}, {}, {**info, "epoch": 3})
    assert checkpoint.load(good_checkpoint)[3]["epoch"] == 2
    assert leftovers(good_checkpoint) == []


def test_a_full_disk_while_probing_leaves_no_file(tmp_path, capsys, monkeypatch):
    target = tmp_path / "p.jsonl"

    class FullFile:  # the temp file a full disk stops taking bytes
        def __init__(self, real):
            self.real = real

        def write(self, text):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

        def __getattr__(self, name):
            return getattr(self.real, name)

    real_fdopen = outputs.os.fdopen
    monkeypatch.setattr(outputs.os, "fdopen", lambda *a, **k: FullFile(real_fdopen(*a, **k)))
    code, _, err = run_cli(capsys, "--epochs", "3", "--probe-out", str(target), "--quiet")
    assert_clear_error(code, err, f"--probe-out '{target}'", "the disk is full")
    assert os.listdir(tmp_path) == []


# -- a folder given as a graph ----------------------------------------------------------------

@pytest.mark.parametrize("command", ["run", "validate", "info"])
def test_a_folder_as_the_graph_path_is_named(capsys, command):
    assert main([command, "examples"]) == 1
    err = capsys.readouterr().err
    assert "examples: is a folder, not a graph file" in err and "examples/" in err
    assert "internal error" not in err and "Errno" not in err


def test_an_empty_folder_as_the_graph_path(tmp_path, capsys):
    assert main(["run", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert f"{tmp_path}: is a folder, not a graph file" in err and "internal error" not in err


# -- kill -9, then --resume -------------------------------------------------------------------

def test_sigkill_then_resume_gives_the_uninterrupted_history(tmp_path, capsys):
    epochs = "100"
    ck = tmp_path / "ck"
    proc = subprocess.Popen([sys.executable, "-m", "nodegraph", "run", GRAPH, "--epochs", epochs,
                             "--checkpoint-dir", str(ck), "--quiet"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 300  # generous: only a hung run reaches it
        while not (ck / "last" / "trainer.json").exists():
            assert proc.poll() is None, "the run ended before its first checkpoint"
            assert time.monotonic() < deadline, "no checkpoint appeared"
            time.sleep(0.01)
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait()
    killed_at = checkpoint.load(ck)[3]["epoch"]
    assert 1 <= killed_at < int(epochs), "the run was not interrupted"

    whole, resumed = tmp_path / "whole.json", tmp_path / "resumed.json"
    assert main(["run", GRAPH, "--epochs", epochs, "--metrics-out", str(whole), "--quiet"]) == 0
    assert main(["run", GRAPH, "--epochs", epochs, "--checkpoint-dir", str(ck), "--resume",
                 "--metrics-out", str(resumed)]) == 0
    assert f"resumed from the checkpoint of epoch {killed_at}" in capsys.readouterr().err

    def history(path):
        doc = json.loads(path.read_text())
        return [{k: v for k, v in h.items() if k != "seconds"} for h in doc["history"]]

    assert len(history(whole)) == int(epochs)
    assert history(resumed) == history(whole)
    assert leftovers(ck) == []
