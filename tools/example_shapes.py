"""Write (or check) the wire labels the editor shows for each shipped example at its first paint.

The editor labels a file's wires before its block library is in only from a memo of an
earlier clean check (`nodegraph/gui/document/shape_memo.py`). The examples ship theirs in
`nodegraph/gui/document/example_shapes.json`, keyed by the same content digest, so an
example opened for the first time is labelled at once; the real check follows and replaces
them. Each example is validated as the editor validates it; one that does not validate
clean gets no entry (the editor would remember none).

    python tools/example_shapes.py            # write the file
    python tools/example_shapes.py --check    # exit 1 when it is not what the examples give
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def entries(folder: Path = ROOT / "examples") -> dict[str, dict]:
    """{content key: {"labels": [[node, port, label], ...]}} for every example that
    validates clean, in file-name order."""
    import nodegraph
    from nodegraph.gui.document import shape_memo
    from nodegraph.gui.document.validator import validate_graph

    out: dict[str, dict] = {}
    for path in sorted(folder.glob("*.json")):
        graph = nodegraph.load(path)
        report = validate_graph(graph)
        if not report.ok:
            continue
        labels = shape_memo.labels_of(report, graph)
        out[shape_memo.content_key(graph)] = {"example": path.name,
                                              "labels": shape_memo.rows(labels)}
    return out


def text(found: dict[str, dict]) -> str:
    """One example a line, by content key."""
    lines = [f"{json.dumps(k)}: {json.dumps(v)}" for k, v in sorted(found.items())]
    return "{\n" + ",\n".join(lines) + "\n}\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="compare, do not write")
    args = parser.parse_args()
    from nodegraph.gui.document.shape_memo import SHIPPED

    wanted = text(entries())
    if args.check:
        current = SHIPPED.read_text(encoding="utf-8") if SHIPPED.exists() else ""
        if current != wanted:
            print(f"{SHIPPED} is out of date: run python tools/example_shapes.py",
                  file=sys.stderr)
            return 1
        return 0
    SHIPPED.write_text(wanted, encoding="utf-8")
    print(f"wrote {SHIPPED} ({len(json.loads(wanted))} examples)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
