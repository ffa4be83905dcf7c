"""The editor's trust question names what a callable can do beyond computing, and a yes
grants it by its full name (issue #33, item 4); the CLI side is tests/test_trust_grants.py."""

from __future__ import annotations

from tests.test_hostile_code import folder as folder  # noqa: F401 (the fixture)
from tests.test_hostile_code import hostile_file
from tests.test_trust_grants import _load_file


def opened(window, path):
    assert window.file_actions.open(str(path))
    assert window.validator.wait(60)
    return window.validator.report


def test_the_question_names_what_numpy_load_can_do(make_window, prompts, folder):
    path = _load_file(folder)
    window = make_window()
    report = opened(window, path)
    shown = "numpy (load [reads files, unpickles (runs code stored in the file)])"
    assert ("trust", str(path), [shown]) in prompts.asked
    assert not (folder / "MARKER").exists() and not window.doc.graph.trusted
    assert "evil" in {p.node for p in report.errors}

    prompts.trust, prompts.asked = True, []  # a yes, having been told: granted by name
    second = make_window()
    opened(second, path)
    assert second.doc.graph.trusted == {"numpy", "numpy:load"}


def test_a_harmless_name_is_shown_plain(make_window, prompts, folder):
    path = hostile_file(folder, "opaque.Function", {"function": "numpy:mean", "args": []})
    opened(make_window(), path)
    assert ("trust", str(path), ["numpy (mean)"]) in prompts.asked
