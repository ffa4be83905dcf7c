"""The command line: every command, and every kind of bad input ending in a clear message
and a non-zero exit, never a traceback."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from nodegraph.cli.main import main


def run(*args, cwd=None):
    """The real console entry, in a subprocess, as a user runs it."""
    return subprocess.run([sys.executable, "-m", "nodegraph", *args], capture_output=True,
                          text=True, cwd=cwd, timeout=300)


def test_run_xor_reaches_full_accuracy_and_writes_metrics(tmp_path):
    out = tmp_path / "m.json"
    proc = run("run", "examples/xor.json", "--metrics-out", str(out), "--quiet")
    assert proc.returncode == 0, proc.stderr
    metrics = json.loads(out.read_text())
    assert metrics["final"]["train"]["accuracy"] == 1.0
    assert len(metrics["history"]) == 300
    first = metrics["history"][0]
    assert first["epoch"] == 1 and {"loss", "accuracy"} <= set(first["train"]) and "val" in first
    assert "accuracy 1" in proc.stdout


def test_set_overrides_params_and_training(tmp_path, capsys):
    out = tmp_path / "m.json"
    code = main(["run", "examples/line_fit.json", "--set", "opt.lr=0.2", "--set",
                 "training.epochs=2", "--set", "data.normalize=zscore", "--quiet",
                 "--metrics-out", str(out)])
    assert code == 0
    history = json.loads(out.read_text())["history"]
    assert len(history) == 2 and history[0]["lr"]["opt"] == 0.2


def test_set_reads_a_choice_that_looks_like_a_number_as_the_choice():
    """`--set training.precision=32` is the choice "32" (JSON would read the number 32,
    which no choice is: the run failed with "must be one of '32', …, got 32")."""
    from nodegraph.cli.common import parse_assignments, with_assignments
    from nodegraph.model.fileformat import load

    g = with_assignments(load("examples/xor.json"),
                         parse_assignments(["training.precision=32", "training.epochs=3"]))
    assert g.training["precision"] == "32" and g.training["epochs"] == 3


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def broken(tmp_path, mutate):
    doc = json.loads(open("examples/xor.json").read())
    mutate(doc)
    return write(tmp_path, "broken.json", json.dumps(doc))


def add_cycle(d):
    d["edges"].append({"from": ["act", "output"], "to": ["hidden", "input"]})
    d["edges"] = [e for e in d["edges"] if e["from"] != ["data", "x"]]


BROKEN = {
    "cycle": (add_cycle, ["[cycle]", "hidden", "act"]),
    "missing input": (lambda d: d["edges"].pop(4), ["[missing_input] loss.target"]),
    "shape mismatch": (lambda d: d["nodes"]["out"]["params"].update(in_features=8),
                       ["[shape_mismatch] out.input", "(N, 8)", "(N, 4)", "hint:"]),
    "unknown block": (lambda d: d["nodes"]["act"].update(type="activations.Swish"),
                      ["[unknown_block] act", "activations.Swish"]),
    "string for number": (lambda d: d["nodes"]["hidden"]["params"].update(out_features="4"),
                          ["[bad_param] hidden.out_features", "the text '4'"]),
    "unknown port": (lambda d: d["edges"].append({"from": ["data", "z"], "to": ["opt", "loss"]}),
                     ["[unknown_port] data.z"]),
}


@pytest.mark.parametrize("command", ["validate", "run"])
@pytest.mark.parametrize("case", list(BROKEN))
def test_broken_graphs_name_node_and_port_and_exit_1(tmp_path, capsys, case, command):
    mutate, expected = BROKEN[case]
    path = broken(tmp_path, mutate)
    code = main([command, path])
    err = capsys.readouterr().err
    assert code == 1
    for text in expected:
        assert text in err, err
    assert "Traceback" not in err


def test_truncated_file_is_one_line_with_position(tmp_path):
    path = write(tmp_path, "cut.json", open("examples/xor.json").read()[:200])
    proc = run("run", path)
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    assert proc.stderr.strip().count("\n") == 0 and "cut.json:" in proc.stderr
    assert "malformed JSON" in proc.stderr


@pytest.mark.parametrize("args, text", [
    (["run", "nowhere.json"], "nowhere.json: no such file"),
    (["run", "examples/xor.json", "--set", "opt.lr"], "write NODE.PARAM=VALUE"),
    (["run", "examples/xor.json", "--set", "ghost.lr=1"], "no node 'ghost'"),
    (["run", "examples/xor.json", "--set", "opt.lr=fast"], "'lr' must be a number"),
    (["run", "examples/xor.json", "--device", "cuda:9"], "cuda:9"),
    (["run", "examples/xor.json", "--resume"], "resuming needs a checkpoint directory"),
])
def test_bad_arguments(capsys, args, text):
    assert main(args) == 1
    err = capsys.readouterr().err
    assert text in err and "Traceback" not in err


def test_validate_ok_and_json(capsys):
    assert main(["validate", "examples/xor.json"]) == 0
    assert "ok (7 nodes, 8 wires, 17 parameters; trainable)" in capsys.readouterr().out
    assert main(["validate", "examples/xor.json", "--json"]) == 0
    described = json.loads(capsys.readouterr().out)
    assert described["problems"] == [] and described["ok"] and described["parameters"] == 17
    assert described["can"] == {"forward": True, "train": True, "why_not_train": None}


def test_blocks_lists_every_block_with_ports_and_params(capsys, registry):
    assert main(["blocks", "--json"]) == 0
    listed = {b["id"]: b for b in json.loads(capsys.readouterr().out)}
    assert set(listed) == {s.id for s in registry}
    linear = listed["layers.Linear"]
    assert linear["inputs"][0]["name"] == "input" and linear["outputs"][0]["type"] == "tensor"
    assert {"out_features", "bias"} <= {p["name"] for p in linear["params"]}
    assert all(b["doc"] for b in listed.values())
    assert main(["blocks", "--category", "losses"]) == 0
    assert "losses.MSE" in capsys.readouterr().out


def test_info_shows_shapes_and_parameter_counts(capsys):
    assert main(["info", "examples/xor.json"]) == 0
    out = capsys.readouterr().out
    assert "hidden" in out and "12 params" in out and "output (N, 4)" in out
    assert "trainable parameters: 17" in out


def test_checkpoint_and_resume_from_the_command_line(tmp_path, capsys):
    ck = str(tmp_path / "ck")
    assert main(["run", "examples/line_fit.json", "--epochs", "2", "--checkpoint-dir", ck,
                 "--quiet"]) == 0
    assert main(["run", "examples/line_fit.json", "--epochs", "3", "--checkpoint-dir", ck,
                 "--resume"]) == 0
    captured = capsys.readouterr()
    assert "resumed from the checkpoint of epoch 2" in captured.err
    assert "done after 3 epoch(s)" in captured.out


def test_internal_errors_are_reported_without_traceback(monkeypatch, capsys):
    import nodegraph.model.fileformat as ff

    monkeypatch.setattr(ff, "load", lambda *a, **k: 1 / 0)
    assert main(["info", "examples/xor.json"]) == 1
    err = capsys.readouterr().err
    assert "internal error: ZeroDivisionError" in err and "Traceback" not in err


def test_probe_out_records_frames(tmp_path, capsys):
    from nodegraph.runtime.probes import read_frames

    path = tmp_path / "frames.jsonl"
    assert main(["run", "examples/xor.json", "--epochs", "30", "--quiet", "--probe-out",
                 str(path)]) == 0
    frames = list(read_frames(path))
    assert frames and frames[0].order == ["hidden", "act", "out", "loss"]


def test_the_console_renderer_does_not_switch_on_the_probes():
    """The trainer probes when someone listens for probe frames; the progress display
    must not count as such a listener, or every headless run pays for probing."""
    from nodegraph.model.events import Emitter, EpochEnded
    from nodegraph.runtime.probes import ProbeFrame
    from nodegraph.runtime.render import ConsoleRenderer

    events = Emitter()
    ConsoleRenderer("g", quiet=True).attach(events)
    assert events.wants(EpochEnded) and not events.wants(ProbeFrame)


def test_edit_without_a_display_says_so_instead_of_aborting(monkeypatch, capsys):
    """Qt aborts the process when no display can be reached; the command explains instead."""
    if not sys.platform.startswith("linux"):
        pytest.skip("the check is for Linux, where Qt needs X11 or Wayland")
    for name in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM"):
        monkeypatch.delenv(name, raising=False)
    assert main(["edit", "examples/xor.json"]) == 1
    err = capsys.readouterr().err
    assert "needs a display" in err and "nodegraph run examples/xor.json" in err
