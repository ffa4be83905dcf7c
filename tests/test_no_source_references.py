"""Shipped text says what a thing is, never where in someone's notes it came from.

Examples, their builders and READMEs, docs/, the start page and every block's doc and
param help were once full of pointers like "seed 004 eq 7 (L294-313)", "§3.2" or
"(notes 17.8)": meaningless to a reader without those notes. This test fails when such a
pointer appears again. Block docs are read from the registry, so a doc split across
string literals is checked as the reader sees it.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from nodegraph.model.spec import default_registry

ROOT = Path(__file__).resolve().parents[1]

# A seed number, a section sign, an equation number, a numbered part of "the notes", an
# exercise number (E12), a line reference (L294, L294-313), the digest or catalog of notes.
REFERENCE = re.compile(
    r"\bseeds? ?0\d{2}\b|§|\beq(?:uation)?s?\.? ?\(?\d|\bnotes'? \(?\d+(?:\.\d+)?\)?(?![-\w])"
    r"|\(E\d{1,2}\b|\bL\d{3,4}(?:\s?[-–]\s?L?\d+)?\b|\bthe digest\b|\bCATALOG\b",
    re.IGNORECASE)

SHIPPED = ("examples/*.json", "examples/*.md", "examples/*.py", "examples/builders/*.py",
           "README.md", "docs/**/*.md", "nodes/**/*.py", "nodes/**/*.json",
           "nodegraph/**/*.py")


def references(text: str) -> list[str]:
    return [m.group(0) for m in REFERENCE.finditer(text)]


def _files() -> list[Path]:
    return sorted({p for pattern in SHIPPED for p in ROOT.glob(pattern)})


@pytest.mark.parametrize("text, found", [
    ("Seed 004 eq 7 (L294-313)", ["Seed 004", "eq 7", "L294-313"]),
    ("as in §3.2 of the course", ["§"]),
    ("the notes' 17.7 layer; weight tying, notes 17.8", ["notes' 17.7", "notes 17.8"]),
    ("hopfield_digits (E13): equation (5)", ["(E13", "equation (5"]),
    ("the notes' 2-D attractors, seed 0, 1 and 2, L2 penalty, Linear 100", []),
])
def test_the_pattern_finds_pointers_and_leaves_plain_text(text, found):
    assert references(text) == found


def test_no_shipped_file_points_at_the_notes():
    found = [f"{path.relative_to(ROOT)}:{i}: {hit}"
             for path in _files()
             for i, line in enumerate(path.read_text(encoding="utf-8",
                                                     errors="replace").splitlines(), 1)
             for hit in references(line)]
    assert found == [], "\n".join(found)


def test_no_block_doc_points_at_the_notes():
    found = []
    for spec in default_registry():
        texts = [spec.doc, *(p.doc for p in spec.params),
                 *(port.doc for port in (*spec.inputs, *spec.outputs))]
        found += [f"{spec.id}: {hit}" for text in texts for hit in references(text)]
    assert found == [], "\n".join(found)
