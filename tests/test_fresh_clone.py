"""Every example validates, and the file-format examples train, on a fresh clone: their
data ship as small samples in examples/data/ (`python examples/make_data.py --sample`), and
a data file a graph names but nobody made is named with the command that makes it."""

from __future__ import annotations

import hashlib
import importlib.util
import shutil
import subprocess
from pathlib import Path

import pytest

import nodegraph

ROOT = Path(__file__).resolve().parents[1]
FORMATS = ("cifar_cnn", "parquet_churn", "hf_signals", "webdataset_signals", "bpe_transformer")


@pytest.fixture(scope="module")
def clone(tmp_path_factory) -> Path:
    """A git clone of this checkout's committed tree: what a new user has."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    where = tmp_path_factory.mktemp("clone") / "nodegraph"
    subprocess.run(["git", "clone", "--quiet", "--no-hardlinks", str(ROOT), str(where)],
                   check=True, timeout=300)
    return where


def _make_data():
    spec = importlib.util.spec_from_file_location("make_data", ROOT / "examples" / "make_data.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_shipped_samples_are_what_make_data_writes_and_small(tmp_path):
    make_data = _make_data()
    for name in make_data.WRITERS:
        made = make_data.WRITERS[name](tmp_path, **make_data.SAMPLE[name])
        shipped = ROOT / "examples" / "data" / made.name
        assert _digest(made) == _digest(shipped), f"{shipped}: rerun make_data.py --sample"
    total = sum(f.stat().st_size for f in (ROOT / "examples" / "data").rglob("*")
                if f.is_file() and "full" not in f.relative_to(ROOT / "examples").parts)
    assert total < 2 * 2**20


def _digest(path: Path) -> dict[str, str]:
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    return {f.relative_to(path.parent).as_posix(): hashlib.sha256(f.read_bytes()).hexdigest()
            for f in files}


def test_a_missing_data_file_names_the_command_that_makes_it():
    g = nodegraph.load(ROOT / "examples" / "cifar_cnn.json")
    g.set_param("data", "path", "data/full/not-made-yet")
    (problem,) = [p for p in nodegraph.validate(g).problems if p.node == "data"]
    assert "does not exist" in problem.message
    assert problem.hint.startswith("python examples/make_data.py writes this example's data")


@pytest.mark.slow
def test_every_example_validates_on_a_fresh_clone(clone):
    failed = {}
    for path in sorted((clone / "examples").glob("*.json")):
        graph = nodegraph.load(path)
        if graph.extra.get("imports") or graph.load_problems:
            failed[path.name] = "imports code or has load problems"
            continue
        report = nodegraph.validate(graph)
        if not report.ok:
            failed[path.name] = [p.message for p in report.errors]
    assert failed == {}


@pytest.mark.slow
@pytest.mark.parametrize("name", FORMATS)
def test_the_file_format_examples_train_on_a_fresh_clone(clone, name):
    result = nodegraph.train(nodegraph.load(clone / "examples" / f"{name}.json"), epochs=1,
                             threads=1)
    assert len(result.history) == 1
    loss = result.history[0]["train"]["loss"]
    assert loss == loss and loss > 0  # a number, trained on the shipped sample
