"""The editor's open-and-validate path on files that name code: nothing runs unless the
user trusts the file, the question names the modules, and the answer is kept per content."""

from __future__ import annotations

import sys

import pytest

from tests.test_hostile_code import (
    ESCAPES,
    FUNCTION_ESCAPES,
    MODULE_ESCAPES,
    assert_untouched,
    hostile_file,
)
from tests.test_hostile_code import folder as folder  # noqa: F401 (the fixture)


def opened(window, path):
    assert window.file_actions.open(str(path))
    assert window.validator.wait(60)
    return window.validator.report


@pytest.mark.parametrize("block,name,params",
                         [e for e in ESCAPES if e[1] in ("torch_os_system", "builtins_exec",
                                                         "methodcaller", "popen",
                                                         "nested_function_argument")],
                         ids=lambda v: v if isinstance(v, str) and ":" not in v else "")
def test_opening_a_hostile_file_runs_nothing_and_lists_the_node(window, prompts, folder,
                                                                 block, name, params):
    report = opened(window, hostile_file(folder, block, params))
    assert_untouched(folder)
    assert "trust" not in prompts.kinds()  # torch and the standard library are never asked
    assert "evil" in {p.node for p in report.errors if p.kind == "untrusted_code"}
    assert "evil" in {p.node for p in window.problems.problems}
    assert not window.start_training()
    assert_untouched(folder)


def test_the_users_module_runs_only_when_trusted_and_the_answer_is_kept(make_window, prompts,
                                                                        folder):
    path = hostile_file(folder, "opaque.Module", MODULE_ESCAPES["own_module"])
    first = make_window()
    report = opened(first, path)
    assert ("trust", str(path), ["canary_module (Touch)"]) in prompts.asked
    assert_untouched(folder)
    assert [(p.node, p.kind) for p in report.errors if p.node == "evil"] == \
        [("evil", "untrusted_code")]

    prompts.trust, prompts.asked = True, []
    second = make_window()
    opened(second, path)
    assert ("trust", str(path), ["canary_module (Touch)"]) in prompts.asked
    assert (folder / "IMPORTED").exists() and "canary_module" in sys.modules
    assert second.doc.graph.trusted == {"canary_module"}
    assert "untrusted_code" not in {p.kind for p in second.validator.report.problems}

    prompts.asked = []  # the same content again: not asked, still trusted
    third = make_window()
    opened(third, path)
    assert "trust" not in prompts.kinds() and third.doc.graph.trusted == {"canary_module"}

    prompts.asked = []  # the graph unchanged but its module edited: asked about again
    (folder / "canary_module.py").write_text((folder / "canary_module.py").read_text() + "\n")
    opened(make_window(), path)
    assert prompts.kinds().count("trust") == 1

    prompts.asked = []
    prompts.trust = False  # another content under the same name is asked about again
    path.write_text(path.read_text().replace('"name": "hostile"', '"name": "changed"'))
    fourth = make_window()
    opened(fourth, path)
    assert prompts.kinds().count("trust") == 1 and not fourth.doc.graph.trusted


def test_a_damaged_trust_record_only_means_asking_again(make_window, prompts, folder,
                                                        tmp_path):
    (tmp_path / "recovery").mkdir(exist_ok=True)
    (tmp_path / "recovery" / "trusted-files.json").write_text('{"files": [1, 2')
    path = hostile_file(folder, "opaque.Function", FUNCTION_ESCAPES["own_module_unflagged"])
    window = make_window()
    opened(window, path)
    assert prompts.kinds().count("trust") == 1
    assert_untouched(folder)
