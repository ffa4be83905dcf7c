"""The READMEs stay true: every example has a row, no pointer to documents a reader lacks,
and the notebook snippet runs as printed."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path("README.md").read_text(encoding="utf-8")
EXAMPLES_README = Path("examples/README.md").read_text(encoding="utf-8")


def test_every_example_has_a_row_in_the_examples_table():
    rows = [line for line in EXAMPLES_README.splitlines() if line.startswith("| `")]
    named = {name for row in rows for name in re.findall(r"`([\w.]+\.json)`", row.split("|")[1])}
    files = {p.name for p in Path("examples").glob("*.json")}
    assert files - named == set()


@pytest.mark.parametrize("text", [README, EXAMPLES_README], ids=["README", "examples"])
def test_no_reference_to_documents_the_reader_does_not_have(text):
    pattern = (r"\bseeds? (\d{3}|NNN)\b|\bthe notes\b|\bnotes'|\bdigest\b|\bL\d{3}\b"
               r"|\bE\d{1,2}\b(?!-\w)|§")
    found = [m.group(0) for m in re.finditer(pattern, text, flags=re.IGNORECASE)]
    assert found == []


def test_the_notebook_snippet_runs_as_printed(capsys, monkeypatch):
    section = README.split("### In a notebook", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, flags=re.DOTALL).group(1)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    scope: dict = {}
    exec(compile(code, "README.md", "exec"), scope)  # noqa: S102 - our own README
    assert capsys.readouterr().out.startswith("True (N, 4)")
    torch = scope["torch"]
    probabilities = torch.sigmoid(scope["out"]["out", "output"])
    assert probabilities[0, 0] > 0.9 and probabilities[1, 0] < 0.1  # XOR(0, 1), XOR(1, 1)
    assert "<svg" in scope["g"]._repr_svg_()
