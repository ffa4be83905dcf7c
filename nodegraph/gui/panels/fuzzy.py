"""Fuzzy matching of block specs against what the user types, for the palette and popup.

A query matches when its characters appear in order in the block id ("lin" finds
`layers.Linear`, "bcel" finds `losses.BCEWithLogits`). The exact name wins, then names it
begins; matches score higher when they are contiguous, start a word, or hit the block's
name rather than its family; a query that
does not match the id may still match a keyword or the summary as a whole word.
"""

from __future__ import annotations

from collections.abc import Iterable

from nodegraph.model.spec import BlockSpec


def subsequence_score(query: str, text: str) -> float | None:
    """How well `query` matches `text` as an in-order subsequence; None when it does not."""
    q, t = query.lower(), text.lower()
    if not q:
        return 0.0
    score, pos, prev = 0.0, 0, -2
    for ch in q:
        i = t.find(ch, pos)
        if i < 0:
            return None
        score += 1.0
        if i == prev + 1:
            score += 2.0  # contiguous run
        if i == 0 or not t[i - 1].isalnum() or (text[i].isupper() and text[i - 1].islower()):
            score += 3.0  # start of a word or CamelCase hump
        prev, pos = i, i + 1
    return score - 0.05 * len(t)


def block_score(query: str, spec: BlockSpec) -> float | None:
    """A spec's match score for `query` (higher is better), None when it does not match."""
    query = query.strip()
    if not query:
        return 0.0
    name = spec.id.split(".", 1)[1]
    compact = query.replace(" ", "").lower()
    if name.lower() == compact or spec.id.lower() == compact:
        return 1000.0  # the exact name: "mse" is losses.MSE, whatever else it spells
    best = None
    for text, bonus in ((name, 4.0), (spec.id, 0.0)):
        s = subsequence_score(query.replace(" ", ""), text)
        if s is not None:
            best = max(best if best is not None else s + bonus, s + bonus)
    if best is not None:
        return best + (20.0 if name.lower().startswith(compact) else 0.0)
    words = " ".join([*spec.keywords, spec.summary, spec.category]).lower()
    if all(w in words for w in query.lower().split()):
        return 0.5
    return None


def rank(query: str, specs: Iterable[BlockSpec]) -> list[BlockSpec]:
    """The specs matching `query`, best first (ties by id)."""
    scored = [(s, spec) for spec in specs if (s := block_score(query, spec)) is not None]
    scored.sort(key=lambda pair: (-pair[0], pair[1].id))
    return [spec for _, spec in scored]
