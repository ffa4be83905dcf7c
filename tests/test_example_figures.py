"""The committed figures of examples/README.md match a fresh run of the fast examples.

`tools/example_figures.py --check` reruns each fast example as its file is (XOR, the line
fit, the detection examples' parameter counts) and compares the numbers it prints with the
text between the README's figure markers; every marker must name a known figure and every
known figure must have a marker. The slow examples (detection trainings, minutes each) are
regenerated with `--slow` when their blocks change.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _tool():
    spec = importlib.util.spec_from_file_location("example_figures",
                                                  ROOT / "tools" / "example_figures.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_the_fast_examples_figures_match_a_fresh_run(capsys):
    assert _tool().main(["--check"]) == 0, capsys.readouterr().out


def test_a_stale_or_unknown_figure_is_reported():
    tool = _tool()
    text = ("accuracy <!--fig:xor.train_accuracy-->0.5<!--/fig--> and "
            "<!--fig:xor.nonsense-->1<!--/fig-->")
    new, changed = tool.rewrite(text, {"xor.train_accuracy": "1.0"})
    assert changed == ["xor.train_accuracy: 0.5 -> 1.0"]
    assert "<!--fig:xor.train_accuracy-->1.0<!--/fig-->" in new
    wrong = tool.problems(text)
    assert "unknown figure xor.nonsense" in wrong
    assert "figure line_fit.slope is not in README.md" in wrong
