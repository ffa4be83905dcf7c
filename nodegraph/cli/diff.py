"""`nodegraph diff A.json B.json`: what changed between two graph files.

Lists the nodes, wires, params, training settings and groups added, removed and changed
from A to B (`nodegraph.model.diff` decides what a change is), as text or as JSON
(`--json`). `--exit-code` exits 1 when there are changes, like `git diff --exit-code`.
`nodegraph diff --textconv FILE` writes one graph as sorted lines for git's diff driver:

    # .gitattributes                 # once per clone
    *.json diff=nodegraph            git config diff.nodegraph.textconv "nodegraph diff --textconv"

A file that is not a graph file is written unchanged in that mode, so `git diff` on other
JSON files still works. Reads files only through the checked reader; imports no torch.
"""

from __future__ import annotations

import argparse
import json
import sys


def register(sub) -> None:
    p = sub.add_parser("diff", description="What changed between two graph files: nodes, "
                       "wires, params, training settings and groups added, removed and "
                       "changed (positions are not changes).")
    p.add_argument("a", metavar="A.json", help="the graph before")
    p.add_argument("b", metavar="B.json", nargs="?", help="the graph after")
    p.add_argument("--json", action="store_true", help="the changes as JSON")
    p.add_argument("--exit-code", action="store_true",
                   help="exit 1 when the graphs differ (0 when they do not)")
    p.add_argument("--textconv", action="store_true",
                   help="write the one graph A as sorted lines (a git textconv driver)")
    p.set_defaults(func=cmd_diff)


def cmd_diff(args: argparse.Namespace) -> int:
    from nodegraph.model import diff
    from nodegraph.model.errors import GraphFileError, NodegraphError
    from nodegraph.model.fileformat import read_document

    if args.textconv:
        if args.b is not None:
            raise NodegraphError("--textconv takes one file (git passes it)")
        try:
            print("\n".join(diff.lines(read_document(args.a))))
        except GraphFileError:  # not a graph file: git diffs its text as it is
            with open(args.a, "rb") as f:
                sys.stdout.flush()
                sys.stdout.buffer.write(f.read())
        return 0
    if args.b is None:
        raise NodegraphError("diff needs two graph files: nodegraph diff A.json B.json "
                             "(or --textconv FILE)")
    changes = diff.compare(read_document(args.a), read_document(args.b))
    if args.json:
        print(json.dumps({"a": args.a, "b": args.b, "summary": diff.summary(changes),
                          "changes": [c.to_json() for c in changes]}, indent=1,
                         ensure_ascii=False, default=str))
    else:
        print(diff.printable(f"{args.a} -> {args.b}: {diff.summary(changes)}"))
        for c in changes:
            print(c.text())
    return 1 if args.exit_code and changes else 0
