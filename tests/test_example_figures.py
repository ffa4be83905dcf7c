"""The committed figures of examples/README.md and README.md match fresh runs.

`tools/example_figures.py --check` reruns the fast runs of `tools/example_runs.py` as the
examples' files are and compares the numbers it prints with the text between the READMEs'
figure markers; every marker must name a known figure, every known figure must have a
marker, and every slow run shown (trained for minutes, not rerun here) must carry a
record whose fingerprint still matches its file and the sources of its blocks, and whose
figures are the ones the text shows. The quick runs fit
in `make test`; the longer fast runs are checked by the test marked slow (CI's own step).
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _tool():
    spec = importlib.util.spec_from_file_location("example_figures",
                                                  ROOT / "tools" / "example_figures.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def _keys(tool, long: bool) -> list[str]:
    return [k for k, ex in tool.EXAMPLES.items() if not ex.slow and ex.long == long]


def test_the_quick_examples_figures_match_a_fresh_run(capsys):
    tool = _tool()
    assert tool.main(["--check", "--only", *_keys(tool, long=False)]) == 0, \
        capsys.readouterr().out


@pytest.mark.slow
def test_the_longer_fast_examples_figures_match_a_fresh_run(capsys):
    tool = _tool()
    assert tool.main(["--check", "--only", *_keys(tool, long=True)]) == 0, \
        capsys.readouterr().out


def test_a_stale_or_unknown_figure_is_reported():
    tool = _tool()
    text = ("accuracy <!--fig:xor.train_accuracy-->0.5<!--/fig--> and "
            "<!--fig:xor.nonsense-->1<!--/fig-->")
    new, changed = tool.rewrite(text, {"xor.train_accuracy": "1.0"})
    assert changed == ["xor.train_accuracy: 0.5 -> 1.0"]
    assert "<!--fig:xor.train_accuracy-->1.0<!--/fig-->" in new
    wrong = tool.problems({"README.md": text})
    assert "unknown figure xor.nonsense" in wrong
    assert "figure line_fit.slope is not in README.md" in wrong


def test_a_tolerance_is_honoured_only_where_a_figure_states_one(monkeypatch):
    tool = _tool()
    figure = tool.EXAMPLES["xor"].figures["train_loss"]
    assert tool.differs("xor.train_loss", "0.0010", "0.0011")  # exact by default
    monkeypatch.setitem(tool.EXAMPLES["xor"].figures, "train_loss",
                        figure._replace(tolerance=2e-4, why="test"))
    assert not tool.differs("xor.train_loss", "0.0010", "0.0011")
    assert tool.differs("xor.train_loss", "0.0010", "0.0013")
    assert not tool.differs("xor.train_loss", "−1,000.5", "−1,000.5")


def test_a_slow_run_whose_blocks_changed_asks_to_be_regenerated(tmp_path, monkeypatch):
    tool = _tool()
    example = tool.EXAMPLES["yolo_shapes"]
    now = tool.fingerprint(example)
    # the file and the modules of its blocks, detection's among them
    assert "examples/yolo_shapes.json" in now
    assert any(name.startswith("nodes/") and "detection" in name for name in now)
    text = {"README.md": "<!--fig:yolo_shapes.test_map-->0.7<!--/fig-->"}
    record = tmp_path / "fingerprints.json"
    monkeypatch.setattr(tool, "FINGERPRINTS", record)
    assert tool.stale_slow(text) == [
        "yolo_shapes: no fingerprint recorded; regenerate with "
        "tools/example_figures.py --slow yolo_shapes"]
    made = {"yolo_shapes.test_map": "0.7"}
    record.write_text(json.dumps({"yolo_shapes": {"sources": now, "figures": made}}),
                      encoding="utf-8")
    assert tool.stale_slow(text) == []
    changed = dict(now)
    block = next(name for name in now if name.startswith("nodes/"))
    changed[block] = "0" * 16  # as if that block's source had been edited since
    record.write_text(json.dumps({"yolo_shapes": {"sources": changed, "figures": made}}),
                      encoding="utf-8")
    (message,) = tool.stale_slow(text)
    assert block in message
    assert message.endswith("regenerate with tools/example_figures.py --slow yolo_shapes")
    # a hand edit of a slow figure is caught too: the text must be what the run printed
    record.write_text(json.dumps({"yolo_shapes": {"sources": now, "figures": made}}),
                      encoding="utf-8")
    (message,) = tool.stale_slow({"README.md": "<!--fig:yolo_shapes.test_map-->0.8<!--/fig-->"})
    assert message.startswith("yolo_shapes.test_map: the text shows 0.8, its last run made 0.7")


def test_every_slow_figure_has_a_current_fingerprint():
    """What CI checks for the slow runs without running them (cheap: no training)."""
    tool = _tool()
    texts = {path.name: path.read_text(encoding="utf-8") for path in tool.DOCUMENTS}
    assert tool.stale_slow(texts) == []
