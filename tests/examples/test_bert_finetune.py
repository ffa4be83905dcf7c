"""examples/bert_finetune.json: an imported BERT fine-tuned on a generated review table.

`examples/builders/bert_finetune.py` imports a random-config BertForSequenceClassification
(2 layers, hidden 64), replaces its 2-label head with a Linear to 3 classes, freezes the
embeddings and the first encoder layer (`trainable = false` on their group instances) and
trains on the tokenised reviews. Here: the file is what the builder says; the run needs no
transformers; the frozen weights leave training bit for bit as the import wrote them; and
the test accuracy is measured against the majority-class baseline of the same split.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

import nodegraph
from nodegraph.model.groups import SEP

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "bert_finetune.json"
WEIGHTS = EXAMPLE.with_suffix(".safetensors")
FROZEN = ("bert_embeddings" + SEP, f"bert_encoder_layer{SEP}bert_encoder_layer_0{SEP}")
# `nodegraph run` with transformers and diffusers unimportable: the graph needs torch only
HIDDEN = ("import sys; sys.modules['transformers'] = sys.modules['diffusers'] = None; "
          "from nodegraph.cli.main import main; sys.exit(main())")


def _baseline(data) -> float:
    """The test accuracy of always answering the training split's most common class."""
    train, test = data.tensors("train")["y"], data.tensors("test")["y"]
    majority = torch.bincount(train).argmax()
    return float((test == majority).float().mean())


def _run(tmp_path: Path, *extra: str) -> dict:
    out = tmp_path / "metrics.json"
    proc = subprocess.run([sys.executable, "-c", HIDDEN, "run", str(EXAMPLE), "--quiet",
                           "--metrics-out", str(out), *extra], cwd=tmp_path,
                          capture_output=True, text=True, timeout=1500,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin",
                               "HF_HUB_OFFLINE": "1"})
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(out.read_text())


def test_the_file_is_the_imported_bert_with_a_new_head_and_frozen_lower_groups():
    g = nodegraph.load(EXAMPLE)
    report = nodegraph.validate(g, for_training=True)
    assert report.ok, report.problems
    assert "classifier" not in g.nodes
    assert g.node("head").type == "layers.Linear" and g.node("head").params["out_features"] == 3
    assert g.source_of("head", "input").source == ("bert_pooler", "output")
    assert report.shape("head", "output") == (32, 3)
    assert report.shape("reviews", "x") == (32, 12) and report.outputs[("reviews", "x")].dtype \
        == torch.int64
    assert g.node("bert_embeddings").params["trainable"] is False
    encoder = g.groups["bert_encoder_layer"].body
    assert encoder.node("bert_encoder_layer_0").params["trainable"] is False
    assert "trainable" not in encoder.node("bert_encoder_layer_1").params
    assert report.param_counts["bert_embeddings"] == 0
    layer_1 = f"bert_encoder_layer{SEP}bert_encoder_layer_1{SEP}"  # the encoder's trained half
    assert report.param_counts["bert_encoder_layer"] == sum(
        v.numel() for k, v in load_file(str(WEIGHTS)).items() if k.startswith(layer_1))
    assert EXAMPLE.stat().st_size + WEIGHTS.stat().st_size < 2_000_000


def test_quick_frozen_weights_stay_as_imported_and_it_beats_the_majority_baseline(
        monkeypatch):
    """8 epochs (of the file's 30), with transformers unimportable: the graph needs torch."""
    for name in ("transformers", "diffusers"):
        monkeypatch.setitem(sys.modules, name, None)  # `import transformers` would now fail
    g = nodegraph.load(EXAMPLE)
    imported = load_file(str(WEIGHTS))
    frozen = {k: v for k, v in imported.items() if k.startswith(FROZEN)}
    trained = {k: v for k, v in imported.items()
               if k.startswith(f"bert_encoder_layer{SEP}bert_encoder_layer_1{SEP}")}
    assert len(frozen) > 10 and len(trained) > 10 and not any(k.startswith("head.")
                                                               for k in imported)
    start = nodegraph.compile(g, device="cpu").module.block_state()
    assert all(torch.equal(start[k], v) for k, v in imported.items())  # the import's weights
    head = {k: v.clone() for k, v in start.items() if k.startswith("head.")}
    with pytest.warns(UserWarning, match="fresh weights: head"):  # the new head: fresh
        result = nodegraph.train(g, epochs=8, device="cpu")
    after = result.module.block_state()
    assert all(torch.equal(after[k], v) for k, v in frozen.items())
    assert all(not torch.equal(after[k], v) for k, v in trained.items())
    assert all(not torch.equal(after[k], v) for k, v in head.items())
    baseline = _baseline(result.compiled.datasets["reviews"])
    accuracy = result.final["test"]["accuracy"]
    print(f"test accuracy {accuracy:.4f} after 8 epochs, majority baseline {baseline:.4f}")
    assert baseline < 0.45  # 40 / 25 / 35 %: no class is most of the table
    assert accuracy > baseline + 0.25


@pytest.mark.slow
def test_full_run_learns_the_reviews(tmp_path):
    """`nodegraph run` as the examples table says, in a process where transformers cannot
    be imported."""
    baseline = _baseline(nodegraph.compile(nodegraph.load(EXAMPLE), device="cpu")
                         .datasets["reviews"])
    metrics = _run(tmp_path)
    accuracy = metrics["final"]["test"]["accuracy"]
    print(f"test accuracy {accuracy:.4f} after 30 epochs, majority baseline {baseline:.4f}")
    assert accuracy >= 0.8 and accuracy > baseline + 0.35


@pytest.mark.slow
def test_the_builder_writes_the_same_files(tmp_path):
    """Regenerating (transformers needed here only) gives the committed files, byte for byte
    but for the editor positions."""
    if importlib.util.find_spec("transformers") is None:
        pytest.skip("transformers is not installed (the `hf` extra)")
    script = ROOT / "examples" / "builders" / "bert_finetune.py"
    proc = subprocess.run([sys.executable, str(script), str(tmp_path)], capture_output=True,
                          text=True, timeout=1500, cwd=script.parent,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin",
                               "HF_HUB_OFFLINE": "1"})
    assert proc.returncode == 0, proc.stderr[-4000:]
    for name in ("bert_finetune.safetensors", "data/reviews.csv",
                 "data/reviews_tokenizer.json"):
        assert (tmp_path / name).read_bytes() == (ROOT / "examples" / name).read_bytes(), name
    made, kept = (json.loads((folder / "bert_finetune.json").read_text("utf-8"))
                  for folder in (tmp_path, ROOT / "examples"))
    assert _without_ui(made) == _without_ui(kept)  # positions follow the auto-layout's spacing


def _without_ui(value):
    """A graph file's JSON without its `ui` sections (the graph's and each group's)."""
    if isinstance(value, dict):
        return {k: _without_ui(v) for k, v in value.items() if k != "ui"}
    return [_without_ui(v) for v in value] if isinstance(value, list) else value
