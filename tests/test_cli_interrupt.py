"""`nodegraph run` on Ctrl-C: --metrics-out written, a checkpoint written and named only when
it is on disk; `--metrics-out -` is stdout; `validate --json` always prints JSON."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from nodegraph.cli.main import main

ROOT = Path(__file__).resolve().parents[1]


def _run(args: list[str]) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, "-m", "nodegraph", *args], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_ctrl_c_writes_the_metrics_and_a_checkpoint_and_says_so(tmp_path):
    ck, metrics = tmp_path / "ck", tmp_path / "m.json"
    p = _run(["run", "examples/xor.json", "--epochs", "1000000", "--checkpoint-dir", str(ck),
              "--metrics-out", str(metrics), "--quiet"])
    deadline = time.monotonic() + 120
    while not (ck / "last").exists() and p.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)  # the first epoch's checkpoint: the loop is under way
    time.sleep(0.5)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=120)
    assert p.returncode == 130, err
    doc = json.loads(metrics.read_text())
    assert doc["cancelled"] is True and doc["final"] == {}
    written = json.loads((ck / "last" / "trainer.json").read_text())
    assert written["epoch"] == len(doc["history"]) == len(written["history"])
    assert f"the checkpoint of epoch {written['epoch']} is in {ck}" in err


def test_ctrl_c_before_any_checkpoint_claims_none(tmp_path):
    ck = tmp_path / "ck"
    # the CLI's main() in a child that says when it is about to call it: the interrupt then
    # lands while the command imports torch and validates, whatever the machine's load
    # (a fixed delay landed before main() at load 8, and inside torch's first import of
    # torch._dynamo on a quiet machine, which turns it into a RecursionError)
    code = ("import sys; from nodegraph.cli.main import main; print('ready', flush=True); "
            "sys.exit(main(sys.argv[1:]))")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    p = subprocess.Popen([sys.executable, "-c", code, "run", "examples/xor.json",
                          "--checkpoint-dir", str(ck), "--quiet"], cwd=ROOT, env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert p.stdout is not None and p.stdout.readline() == "ready\n"
    time.sleep(0.05)
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=120)
    assert p.returncode == 130, err
    assert "interrupted" in err and "Traceback" not in err
    assert "continue with --resume" not in err
    assert not (ck / "last").exists()


@pytest.mark.parametrize("delay", [0.3, 1.0])
def test_ctrl_c_while_the_command_starts_is_an_interrupt(tmp_path, delay):
    """Wherever in start-up (imports, validation, the first optimizer) Ctrl-C lands, the
    command says it was interrupted: never an error blamed on a node."""
    code = ("import sys; from nodegraph.cli.main import main; print('ready', flush=True); "
            "sys.exit(main(sys.argv[1:]))")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    p = subprocess.Popen([sys.executable, "-c", code, "validate", "examples/xor.json"],
                         cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    assert p.stdout is not None and p.stdout.readline() == "ready\n"
    time.sleep(delay)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=120)
    # finished before the signal came (a fast machine): valid, exit 0; else interrupted
    assert (p.returncode, "interrupted" in err) in ((0, False), (130, True)), (out, err)
    assert "Traceback" not in err and "internal error" not in err


def test_metrics_out_dash_is_stdout(capsys):
    assert main(["run", "examples/xor.json", "--epochs", "3", "--metrics-out", "-",
                 "--quiet"]) == 0
    out = capsys.readouterr().out
    doc = json.loads(out)  # stdout holds the JSON alone
    assert len(doc["history"]) == 3 and doc["cancelled"] is False
    assert not Path("-").exists()


def test_validate_json_prints_json_for_a_file_that_does_not_load(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    assert main(["validate", "--json", str(bad)]) != 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["ok"] is False and doc["loaded"] is False and "malformed JSON" in doc["error"]
    missing = tmp_path / "missing.json"
    assert main(["validate", "--json", str(missing)]) != 0
    assert json.loads(capsys.readouterr().out)["ok"] is False


def test_ctrl_c_that_an_import_turns_into_another_error_is_still_an_interrupt(
        monkeypatch, capsys):
    """torch's first import of torch._dynamo catches a KeyboardInterrupt and raises a
    RecursionError; validation then blames the optimizer. The CLI remembers the Ctrl-C."""

    def interrupted_import(args):
        try:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(5)  # the handler raises KeyboardInterrupt here
        except KeyboardInterrupt:
            raise RecursionError("maximum recursion depth exceeded") from None
        return 0

    monkeypatch.setattr("nodegraph.cli.validate.cmd_validate", interrupted_import)
    assert main(["validate", "examples/xor.json"]) == 130
    assert "interrupted" in capsys.readouterr().err
    # and without a Ctrl-C, the same error is an internal error, as before
    monkeypatch.setattr("nodegraph.cli.validate.cmd_validate",
                        lambda args: (_ for _ in ()).throw(RecursionError("deep")))
    assert main(["validate", "examples/xor.json"]) == 1
    assert "internal error: RecursionError" in capsys.readouterr().err
