"""Every block of the library is declared once, through its kind's constructor.

The constructors of `nodegraph.kinds.declare` stamp what they make; a block made any other
way (a bare `BlockSpec`, `block()`, a copy patched afterwards) has no stamp, or one that
does not match its kind. The source of `nodes/` holds one `BLOCKS =` per module and none
of the retired second-place helpers.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import nodes
from nodegraph.kinds.declare import CONSTRUCTORS, KIND_OF, data, estimator, family, op
from nodegraph.kinds.dtypes import DTYPE_PARAM
from nodegraph.model.spec import block, default_registry

NODES = Path(nodes.__file__).parent


def test_every_registered_block_was_declared_by_its_kind_constructor():
    registry = default_registry()
    assert len(registry) > 200
    wrong = [(s.id, s.declared) for s in registry
             if s.declared not in KIND_OF or KIND_OF[s.declared] != s.kind]
    assert wrong == []
    made = {s.declared for s in registry}
    assert set(CONSTRUCTORS) - {"schedule"} <= made  # schedules come through `family`


def test_the_stamp_names_the_constructor_and_a_bare_block_has_none():
    build = lambda p, x: None  # noqa: E731
    assert op("t.A", "a", build).declared == "op"
    assert estimator("t.B", "b", build).kind == "op"
    assert estimator("t.B", "b", build).declared == "estimator"
    assert family("t", "metric")("C", "c", build).declared == "metric"
    assert block("t.D", "op", "d", build).declared == ""
    with pytest.raises(ValueError, match="only data blocks"):
        op("t.E", "e", build, recipe=lambda p: [])
    assert data("t.F", "f", lambda p: None, recipe=lambda p: ["x = 1"]).recipe is not None


def test_nodes_has_one_blocks_assignment_per_module_and_no_second_place_helpers():
    for path in NODES.rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        assert len(re.findall(r"^BLOCKS\s*=", text, re.M)) <= 1, path
        for helper in ("with_torch", "with_dtype", "from nodegraph.model.spec import block"):
            assert helper not in text, (path, helper)


def test_weighted_blocks_declare_their_dtype_param_in_place():
    registry = default_registry()
    assert DTYPE_PARAM in registry.get("layers.Linear").params
    assert DTYPE_PARAM in registry.get("activations.PReLU").params
    assert DTYPE_PARAM not in registry.get("activations.ReLU").params



def test_blocks_and_kinds_never_use_the_front_door():
    """`import nodegraph` resolves its names lazily, where import-linter cannot follow; a
    block reaches the runtime only through what it is given (ruff's TID251 bans the front
    door's names in nodes/ and nodegraph/kinds/, see their ruff.toml)."""
    kinds = NODES.parent / "nodegraph" / "kinds"
    for path in [*NODES.rglob("*.py"), *kinds.rglob("*.py")]:
        text = path.read_text(encoding="utf-8")
        assert not re.search(r"^\s*(import nodegraph\s*$|from nodegraph import )", text,
                             re.M), path


CITATION = re.compile(r"[Ss]eed 0\d\d|§ ?\d|\beq\.? ?\d")


def test_block_docs_and_user_docs_cite_no_notes_by_file_or_section():
    """What a user reads (block docs in the palette, inspector and docs/blocks.md, the
    READMEs whose rows caption the start page) explains itself instead of pointing at a
    file of course notes ("seed 004 eq 7")."""
    for spec in default_registry():
        texts = [spec.doc, *(p.doc for p in spec.params), *(p.doc for p in spec.inputs),
                 *(p.doc for p in spec.outputs)]
        assert not [t for t in texts if CITATION.search(t)], spec.id
    root = NODES.parent
    for doc in ("README.md", "examples/README.md", "docs/blocks.md"):
        found = CITATION.findall((root / doc).read_text(encoding="utf-8"))
        assert found == [], (doc, found[:5])


def test_params_read_through_their_declaration_are_typed_and_checked():
    from nodegraph.model.errors import ParamError
    from nodegraph.model.spec import Params, int_param

    width = int_param("width", 3, min=1)
    depth = int_param("depth", None, nullable=True)
    p = Params(width=5, depth=None)
    assert p.typed(width) == 5  # a Param[int] reads as an int for mypy too
    assert p.maybe(depth) is None
    with pytest.raises(ParamError, match="depth"):
        p.typed(depth)
