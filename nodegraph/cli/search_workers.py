"""`sweep --search ... --jobs K`: K-1 more processes of the same command on the same study.

Each helper is `nodegraph sweep` with the same arguments plus `--worker`: it asks the
shared storage for trials until the budget is spent, writes only its log
(`OUT/worker-N.log`), and leaves the summary, the plot and `--write` to the process that
started it, which runs trials too and waits for its helpers before it reports.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def helper_argv(argv: list[str]) -> list[str]:
    """The command line of a helper: `argv` without --jobs (or --write), with --worker."""
    out: list[str] = []
    skip = False
    for item in argv:
        if skip:
            skip = False
        elif item in ("--jobs", "--write"):
            skip = True
        elif not item.startswith(("--jobs=", "--write=")):
            out.append(item)
    return [*out, "--worker"]


def start(argv: list[str], count: int, out: Path) -> list[tuple[subprocess.Popen, Path]]:
    """`count` helpers, each logging into `out/worker-N.log`."""
    out.mkdir(parents=True, exist_ok=True)
    helpers = []
    for n in range(1, count + 1):
        log = out / f"worker-{n}.log"
        with open(log, "w") as f:
            proc = subprocess.Popen([sys.executable, "-m", "nodegraph", *helper_argv(argv)],
                                    stdout=f, stderr=subprocess.STDOUT)
        helpers.append((proc, log))
    return helpers


def wait(helpers: list[tuple[subprocess.Popen, Path]]) -> list[str]:
    """Wait for every helper; the complaints of those that failed (their logs' last line)."""
    failed = []
    for proc, log in helpers:
        if proc.wait() != 0:
            lines = [ln for ln in log.read_text().splitlines() if ln.strip()]
            failed.append(f"{log.name}: {lines[-1] if lines else f'exit code {proc.returncode}'}")
    return failed


def stop(helpers: list[tuple[subprocess.Popen, Path]]) -> None:
    """End the helpers (after Ctrl-C or an error in the process that started them)."""
    for proc, _ in helpers:
        if proc.poll() is None:
            proc.terminate()
    for proc, _ in helpers:
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
