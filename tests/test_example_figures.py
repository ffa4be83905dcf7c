"""The committed figures of examples/README.md and README.md match fresh runs.

`tools/example_figures.py --check` reruns the fast runs of `tools/example_runs.py` as the
examples' files are and compares the numbers it prints with the text between the READMEs'
figure markers; every marker must name a known figure, every known figure must have a
marker, and every slow run shown (trained for minutes, not rerun here) must carry a
record whose fingerprint still matches its file and the sources of its blocks, and whose
figures are the ones the text shows. The quick runs that take well under a second each
fit in `make test`; the others (a minute of training together, each example also trained
by its own quick test) and the longer fast runs are checked by the test marked slow (CI's
own step).
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


# The quick runs rerun in `make test`: each took under half a second of CPU in CI (the
# check prints each run's CPU time), all together a few seconds. The other quick runs take
# about a minute together, so they join the longer ones in the slow test.
IN_QUICK_TIER = frozenset({
    "line_fit", "cholesterol", "cholesterol_lbfgs", "poly_d1", "poly_d3", "poly_d5",
    "poly_d10", "poly_d15", "logistic_binary", "softmax_regression", "race_gd",
    "race_nesterov", "race_lbfgs", "race_gd_25", "race_lr_small", "race_lr_right",
    "gcn_karate_100", "gan_digits_size", "dcgan_digits_size", "ddpm_digits_size",
    "hopfield_2d", "hopfield_3d", "mlp_212", "backprop_before", "backprop_appendix",
    "conv_arithmetic", "edge_detection", "cnn_digits_size", "ufa_staircase",
    "ufa_tlu_bins_4", "ufa_tlu_bins_16", "ufa_tlu_bins_64", "ridge_path",
    "cnn_digits_allconv_size", "yolo_shapes_size", "rcnn_shapes_size", "detr_shapes_size"})


def test_the_cheapest_quick_examples_figures_match_a_fresh_run(capsys):
    tool = _tool()
    quick = _keys(tool, long=False)
    assert sorted(IN_QUICK_TIER - set(quick)) == []  # a renamed run is not silently dropped
    assert tool.main(["--check", "--only", *[k for k in quick if k in IN_QUICK_TIER]]) == 0, \
        capsys.readouterr().out


@pytest.mark.slow
def test_the_other_fast_examples_figures_match_a_fresh_run(capsys):
    tool = _tool()
    keys = [k for k in _keys(tool, long=False) if k not in IN_QUICK_TIER]
    assert tool.main(["--check", "--only", *keys, *_keys(tool, long=True)]) == 0, \
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


def test_each_figure_is_compared_within_a_tolerance_that_fits_its_kind(monkeypatch, tmp_path):
    tool = _tool()
    spread = tmp_path / "spread.json"
    spread.write_text(json.dumps({"deep_relu_he.val_accuracy": {"machine": 0.6},
                                  "linear_regions.grid_0": {"machine": 1.0}}), "utf-8")
    monkeypatch.setattr(tool, "SPREAD", spread)
    # a count is exact: a parameter count that moves is a change
    assert tool.differs("cnn_digits_size.params", "34,826", "34,827")
    assert not tool.differs("cnn_digits_size.params", "34,826", "34,826")
    # ... unless it is a trained net's and moved under the measured settings
    assert tool.tolerance("linear_regions.grid_0", "27") == 2.0
    assert not tool.differs("linear_regions.grid_0", "27", "28")
    assert tool.differs("linear_regions.grid_0", "27", "30")
    # an accuracy: twice the measured spread
    assert not tool.differs("deep_relu_he.val_accuracy", "94.7", "95.3")
    assert not tool.differs("deep_relu_he.val_accuracy", "94.7", "95.9")
    assert tool.differs("deep_relu_he.val_accuracy", "94.7", "96.0")
    # a number nothing moved: one unit of its last digit (a value on a rounding edge)
    assert not tool.differs("xor.train_loss", "0.0010", "0.0011")
    assert tool.differs("xor.train_loss", "0.0010", "0.0012")
    assert not tool.differs("xor.train_loss", "−1,000.5", "−1,000.5")
    # a figure's own stated tolerance widens it
    figure = tool.EXAMPLES["xor"].figures["train_loss"]
    monkeypatch.setitem(tool.EXAMPLES["xor"].figures, "train_loss",
                        figure._replace(tolerance=5e-4, why="test"))
    assert not tool.differs("xor.train_loss", "0.0010", "0.0014")


def test_a_picked_epoch_is_compared_by_the_values_it_picks(monkeypatch):
    """Issue 32's machine picked epoch 9 where the README says 4: the check compares the
    validation MSE at both epochs of the fresh run, within that number's tolerance."""
    tool = _tool()
    example = tool.EXAMPLES["race_lbfgs_100"]
    figure = example.figures["best_epoch"]

    class Run:  # what a trained run offers the readers: its history
        history = [{"val": {"mse": v}} for v in (0.9, 0.5, 0.4, 0.3591, 0.37, 0.36,
                                                  0.36, 0.362, 0.3588, 0.39)]

    assert figure.read(Run) == 9
    monkeypatch.setattr(tool, "PICKED", {})
    tool.PICKED["race_lbfgs_100.best_epoch"] = (figure.picks(Run, 4), figure.picks(Run, 9))
    assert not tool.differs("race_lbfgs_100.best_epoch", "4", "9")  # 0.3591 vs 0.3588
    tool.PICKED["race_lbfgs_100.best_epoch"] = (figure.picks(Run, 2), figure.picks(Run, 9))
    assert tool.differs("race_lbfgs_100.best_epoch", "2", "9")  # 0.5 vs 0.3588


def test_the_measured_spread_covers_every_quick_figure():
    """tools/figure_spread.py recorded each quick figure under each machine setting."""
    tool = _tool()
    spread = tool.read_spread()
    quick = [f"{k}.{n}" for k in _keys(tool, long=False) for n in tool.EXAMPLES[k].figures]
    assert [n for n in quick if n not in spread] == []
    assert all("no_simd" in spread[n]["values"] for n in quick)


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
