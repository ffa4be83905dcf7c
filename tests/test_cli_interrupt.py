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
    p = _run(["run", "examples/xor.json", "--checkpoint-dir", str(ck), "--quiet"])
    # still importing: nothing trained, nothing written. Early on purpose: an interrupt
    # that lands inside torch's first import of torch._dynamo (the first optimizer built
    # by validation, ~0.3 s in on a quiet machine) is mangled by that import into a
    # RecursionError, reported as the optimizer's problem (exit 1) instead of "interrupted"
    time.sleep(0.1)
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=120)
    assert p.returncode == 130
    assert "continue with --resume" not in err
    assert not (ck / "last").exists()


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
