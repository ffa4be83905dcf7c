"""Groups that ship with the library: subgraphs kept as graph files, offered as blocks.

Every file in `group_files/` is a nodegraph file whose `groups` section defines groups
(its nodes, if any, are ignored); each group becomes a block `group.NAME` of category
`groups`, so the palette, `nodegraph blocks` and validation see it like any block. A
group entry's `doc` is the block's doc. A graph uses one by type, with or without
`share`, and its file names the type only; `nodegraph.model.groups.import_group` copies the
definition into the graph to edit it (a graph's own group of that name wins).

Shipped bodies may use each other (the U-Net is built of `group.UNetBlock`s).
"""

from __future__ import annotations

import json
from pathlib import Path

import nodes
from nodegraph.model import fileformat
from nodegraph.model.groups import shipped_spec
from nodegraph.model.spec import BlockSpec, Registry

FOLDER = Path(__file__).with_name("group_files")


def _library() -> Registry:
    """The package's other blocks, to read the bodies and type the ports. While this
    module is being imported it has no BLOCKS yet, so walking the package skips it."""
    return Registry(nodes.all_blocks())


def load(folder: Path = FOLDER, registry: Registry | None = None) -> list[BlockSpec]:
    """The blocks of the groups defined in the files of `folder`, by file then name."""
    registry = registry if registry is not None else _library()
    specs = []
    for path in sorted(folder.glob("*.json")):
        graph = fileformat.load(path, registry)
        if graph.load_problems:
            raise ValueError(f"{path}: {graph.load_problems[0].message}")
        docs = json.loads(path.read_text(encoding="utf-8")).get("groups", {})
        specs += [shipped_spec(defn, docs[name].get("doc", ""), registry)
                  for name, defn in graph.groups.items()]
    return specs


BLOCKS = load()
