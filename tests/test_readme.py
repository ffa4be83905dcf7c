"""The READMEs stay true: every example has a row, no pointer to documents a reader lacks,
and every shell and Python block of README.md and docs/ runs as written in a fresh clone
(the notebook's in a real Jupyter kernel), or is marked `<!-- not run: WHY -->`."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
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


# -- every shell and Python block of README.md and docs/ runs, or says why it cannot -------

DOCS = [Path("README.md"), *sorted(Path("docs").glob("*.md"))]
FENCE = re.compile(r"^(?P<indent> *)```(?P<lang>[\w-]*)[^\n]*\n(?P<code>.*?)^(?P=indent)```",
                   flags=re.MULTILINE | re.DOTALL)
NOT_RUN = re.compile(r"<!--\s*not run:\s*(?P<why>.+?)\s*-->\s*$")
LANGS = {"sh": "sh", "bash": "sh", "shell": "sh", "python": "python"}
NOTEBOOK = "### In a notebook"  # run in a real Jupyter kernel, below


@dataclasses.dataclass
class Block:
    doc: str
    line: int
    lang: str  # sh or python
    code: str
    why_not: str | None  # the marker's reason, or None: the block runs
    section: str


def blocks() -> list[Block]:
    """The shell and Python blocks of the documents, in order, with their markers."""
    out = []
    for path in DOCS:
        text = path.read_text(encoding="utf-8")
        for m in FENCE.finditer(text):
            lang = LANGS.get(m.group("lang"))
            if lang is None:
                continue
            before = [ln for ln in text[:m.start()].splitlines() if ln.strip()]
            marker = NOT_RUN.search(before[-1].strip()) if before else None
            headings = [ln for ln in before if ln.startswith("#")]
            indent = len(m.group("indent"))
            code = "\n".join(ln[indent:] for ln in m.group("code").splitlines()) + "\n"
            out.append(Block(path.as_posix(), text[:m.start()].count("\n") + 1, lang, code,
                             marker.group("why") if marker else None,
                             headings[-1] if headings else ""))
    return out


def test_every_block_that_does_not_run_says_why():
    found = blocks()
    assert len([b for b in found if b.why_not is None]) >= 5  # the parser finds blocks
    for b in found:
        assert b.why_not is None or len(b.why_not.split()) >= 3, f"{b.doc}:{b.line}"


@pytest.fixture(scope="module")
def clone(tmp_path_factory) -> Path:
    """A fresh clone of this checkout's committed tree, set up as `make setup` leaves it:
    `.venv/bin` is the environment the tests run in (its `activate`, `nodegraph`,
    `python`), stamped as installed, so `make setup` there has nothing to do.
    NODEGRAPH_README_SETUP=1 runs the real `make setup` instead (minutes, the network)."""
    if shutil.which("git") is None or not Path(".git").exists():
        pytest.skip("not a git checkout")
    where = tmp_path_factory.mktemp("readme") / "nodegraph"
    subprocess.run(["git", "clone", "--quiet", "--no-hardlinks", str(Path.cwd()), str(where)],
                   check=True, timeout=300)
    if os.environ.get("NODEGRAPH_README_SETUP") != "1":
        (where / ".venv").mkdir()
        (where / ".venv" / "bin").symlink_to(Path(sys.executable).parent)
        (where / ".venv" / ".installed").touch()  # newer than the clone's pyproject.toml
    return where


def _environment(clone: Path) -> dict[str, str]:
    """A shell as a new user's: no environment active (this venv's bin taken off PATH,
    so the README's `source .venv/bin/activate` is what brings it), the clone's code first."""
    venv_bin = str(Path(sys.executable).parent)
    path = [p for p in os.environ.get("PATH", "").split(os.pathsep) if p != venv_bin]
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONHOME")}
    env.update(PATH=os.pathsep.join(path), PYTHONPATH=str(clone), OMP_NUM_THREADS="1",
               QT_QPA_PLATFORM="offscreen", MPLBACKEND="Agg", GIT_CONFIG_NOSYSTEM="1",
               HOME=str(clone.parent))
    return env


@pytest.mark.slow
def test_the_shell_blocks_run_as_written_in_a_fresh_clone(clone):
    """Every unmarked shell block of each document, in order, in one shell (an activation
    carries on to the blocks after it), from the clone's root; then the git textconv recipe
    is used as a user would: `git diff` of a graph shows its nodes."""
    env = _environment(clone)
    for doc in DOCS:
        runs = [b for b in blocks() if b.doc == doc.as_posix() and b.lang == "sh"
                and b.why_not is None]
        if not runs:
            continue
        script = "set -e\n" + "".join(f"echo '### {b.doc}:{b.line}'\n{b.code}" for b in runs)
        done = subprocess.run(["bash", "-c", script], cwd=clone, env=env, capture_output=True,
                              text=True, timeout=550)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    graph = json.loads((clone / "examples" / "xor.json").read_text("utf-8"))
    graph["nodes"]["opt"]["params"]["lr"] = 0.5
    (clone / "examples" / "xor.json").write_text(json.dumps(graph), "utf-8")
    diff = subprocess.run(["bash", "-c", "source .venv/bin/activate && git diff "
                           "examples/xor.json"], cwd=clone, env=env, capture_output=True,
                          text=True, timeout=300)
    assert diff.returncode == 0, diff.stderr
    assert "node opt" in diff.stdout and "lr" in diff.stdout and '"nodes"' not in diff.stdout


@pytest.mark.slow
def test_the_python_blocks_run_as_written_in_a_fresh_clone(clone, monkeypatch, capsys):
    """Every unmarked Python block of each document (the notebook's runs in a kernel,
    below), in order, in one namespace per document, from the clone's root."""
    monkeypatch.chdir(clone)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    for doc in DOCS:
        scope: dict = {"__name__": "__readme__"}
        for b in blocks():
            if b.doc != doc.as_posix() or b.lang != "python" or b.why_not is not None:
                continue
            if b.section.startswith(NOTEBOOK):
                continue
            try:
                exec(compile(b.code, f"{b.doc}:{b.line}", "exec"), scope)  # noqa: S102
            except Exception as e:
                pytest.fail(f"{b.doc}:{b.line} ({b.section}) fails: {type(e).__name__}: {e}")
    out = capsys.readouterr().out
    assert "(N, 4)" in out and "1.0" in out  # From Python: the shape, then the accuracy


@pytest.mark.slow
def test_the_notebook_section_runs_in_a_real_kernel():
    """The README's notebook cell in an ipykernel kernel started by jupyter_client (the
    kernel `make setup` installs when it is there): its printed line, no error, the last
    expression's value; then `g` alone in a cell is drawn as SVG."""
    jupyter_client = pytest.importorskip("jupyter_client")
    pytest.importorskip("ipykernel")
    from jupyter_client.kernelspec import KernelSpecManager

    (cell,) = [b for b in blocks() if b.section.startswith(NOTEBOOK) and b.lang == "python"]
    name = "nodegraph" if "nodegraph" in KernelSpecManager().find_kernel_specs() else "python3"
    km = jupyter_client.KernelManager(kernel_name=name)
    path = os.pathsep.join(p for p in (str(Path.cwd()), os.environ.get("PYTHONPATH")) if p)
    km.start_kernel(cwd=str(Path.cwd()), env={**os.environ, "OMP_NUM_THREADS": "1",
                                              "PYTHONPATH": path})
    kc = km.client()
    try:
        kc.start_channels()
        kc.wait_for_ready(timeout=300)
        first = kc.execute_interactive(cell.code, timeout=400, output_hook=(seen := []).append)
        second = kc.execute_interactive("g", timeout=120, output_hook=(drawn := []).append)
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
    assert first["content"]["status"] == "ok", first["content"]
    printed = "".join(m["content"]["text"] for m in seen if m["msg_type"] == "stream"
                      and m["content"]["name"] == "stdout")
    assert printed.startswith("True (N, 4)")
    (result,) = [m for m in seen if m["msg_type"] == "execute_result"]
    assert result["content"]["data"]["text/plain"].startswith("tensor([[")
    assert second["content"]["status"] == "ok"
    (svg,) = [m for m in drawn if m["msg_type"] == "execute_result"]
    assert "<svg" in svg["content"]["data"]["image/svg+xml"]
