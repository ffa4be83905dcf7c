"""Graph files: one JSON format for the editor and for scripts, saved atomically.

The format (version 1) is described by `docs/graph.schema.json`, a JSON Schema the loader is
held to (tests/test_schema.py): nodes by id with their block type and params by name, edges
port to port, training settings, and a `ui` section the editor owns.
Unknown keys anywhere are kept and written back. Loading never crashes on a graph it can
partly read and never drops anything silently: unknown block types and params stay in the
graph (the validator reports them, the editor shows them), edges that point at missing
nodes or are malformed are listed in the load report. A file that cannot be read at all
(missing, malformed JSON, not a nodegraph file) raises GraphFileError with one line naming
the file and the position. Nothing is ever eval'd or unpickled.

A file anyone sends must end in a clear message, quickly and in bounded memory: files over
`MAX_BYTES` are refused before they are read, JSON nested deeper than `MAX_DEPTH` and the
NaN / Infinity literals Python's parser would let through and integers longer than
`MAX_INT_DIGITS` are refused naming the JSON path,
and a UTF-8 BOM is skipped.
"""

from __future__ import annotations

import copy
import json
import math
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from nodegraph.model import settings
from nodegraph.model.errors import GraphFileError, Problem
from nodegraph.model.file_kinds import describe
from nodegraph.model.graph import NODE_ID, Graph, Node, Tie
from nodegraph.model.groupdefs import GROUP_NAME, GroupDef
from nodegraph.model.groupdefs import MAX_NODES as MAX_EXPANDED
from nodegraph.model.outputs import atomic_write_text
from nodegraph.model.readonly import ReadOnlyDict
from nodegraph.model.safe_read import FileRefused, read_regular
from nodegraph.model.spec import NAME as PORT_NAME
from nodegraph.model.spec import Registry
from nodegraph.model.ui_section import checked_ui

FORMAT = "nodegraph"
VERSION = 1

# MIGRATIONS[n] turns a version-n document into a version-(n+1) one. Add an entry when
# the format changes; old files then load through the chain.
MIGRATIONS: dict[int, Callable[[dict], dict]] = {}

KNOWN_TOP = {"format", "version", "name", "groups", "nodes", "edges", "ties", "training", "ui",
             "imports"}  # imports: written from the nodes on save, never trusted on load
KNOWN_NODE = {"type", "params"}
MAX_BYTES = 10 * 2**20  # a graph holds blocks and wires; its data lives in files beside it
MAX_INT_DIGITS = 100  # int64 needs 19; a longer literal is refused by its JSON path
MAX_DEPTH = 64  # the format needs ~8 levels; deeper only overflows recursive code
MAX_NODES = MAX_EXPANDED  # as for groups: what validation takes on within a second or so
MAX_EDGES = 5 * MAX_NODES  # no block takes more than a handful of inputs


def load(path: str | os.PathLike, registry: Registry | None = None) -> Graph:
    """Read a graph file. What could not be placed in the graph is in `graph.load_problems`."""
    path = Path(path)
    graph = loads(_read_text(path), registry, source=str(path))
    graph.folder = path.parent.absolute()
    return graph


def read_document(path: str | os.PathLike) -> dict:
    """A graph file's document, checked (size, depth, numbers, counts) and migrated like
    `load`'s, but not built into a `Graph`: no registry and no torch (`nodegraph diff`)."""
    path = Path(path)
    return _parse(_read_text(path), str(path))[0]


def _read_text(path: Path) -> str:
    kind = describe(path)  # a model, weights, ONNX, a torch pickle: say what to call instead
    if kind is not None:
        raise GraphFileError(f"{path}: {kind}")
    try:
        if path.is_file() and path.stat().st_size > MAX_BYTES:
            raise GraphFileError(_too_big(str(path), path.stat().st_size))
        # a regular file only, read to MAX_BYTES and no further (a FIFO, /dev/zero, a file
        # that grows while read), then decoded as UTF-8 the way read_text would
        return read_regular(path, MAX_BYTES, "graph file").decode("utf-8")
    except FileRefused as e:
        raise GraphFileError(str(e)) from None
    except FileNotFoundError:
        raise GraphFileError(f"{path}: no such file") from None
    except IsADirectoryError:
        inside = sorted(p.name for p in path.glob("*.json"))
        raise GraphFileError(f"{path}: is a folder, not a graph file; give the path of a graph "
                             "file" + (f" in it, e.g. {path / inside[0]}" if inside else "")
                             ) from None
    except (OSError, UnicodeDecodeError) as e:
        raise GraphFileError(f"{path}: cannot read: {e}") from None


def loads(text: str, registry: Registry | None = None, source: str = "<string>") -> Graph:
    """Parse a graph document from a string (see `load`)."""
    doc, duplicates = _parse(text, source)
    problems = [Problem(None, None, "duplicate_key", f"key '{k}' appears twice; the last one "
                        "was kept", severity="warning") for k in duplicates]
    name = doc.get("name", Path(source).stem)
    if not isinstance(name, str):
        problems.append(Problem(None, None, "bad_entry", "'name' must be text; the file's "
                                "name was used", severity="warning"))
        name = Path(source).stem
    graph = Graph(name, registry)
    _read_groups(graph, doc.get("groups", {}), problems)
    _read_nodes(graph, doc.get("nodes", {}), problems)
    _read_edges(graph, doc.get("edges", []), problems)
    _read_ties(graph, doc.get("ties", []), problems)
    training = doc.get("training", {})
    if isinstance(training, dict):
        graph.replace_training(training)  # kept as written: the validator reports it too
        graph.file_training = ReadOnlyDict(copy.deepcopy(training))  # copies, pickles
        problems += settings.resolve(training)[1]  # each setting with its type and bounds
    else:
        problems.append(Problem(None, None, "bad_entry", "'training' must be an object; "
                                "it was ignored"))
    ui, found = checked_ui(doc.get("ui", {}))
    graph.replace_ui(ui)
    problems += found
    graph.extra = {k: v for k, v in doc.items() if k not in KNOWN_TOP}
    graph.load_problems = problems
    return graph


def _parse(text: str, source: str) -> tuple[dict, list[str]]:
    """The checked, migrated document of `text`, and the keys that appeared twice."""
    if len(text) > MAX_BYTES:
        raise GraphFileError(_too_big(source, len(text)))
    text = text.removeprefix("\ufeff")  # a BOM some editors write: not part of the JSON
    duplicates: list[str] = []

    def pairs(items: list[tuple[str, Any]]) -> dict:
        seen: dict[str, Any] = {}
        for k, v in items:
            if k in seen:
                duplicates.append(k)
            seen[k] = v
        return seen

    try:
        doc = json.loads(text, object_pairs_hook=pairs, parse_int=_parse_int)
    except json.JSONDecodeError as e:
        raise GraphFileError(f"{source}:{e.lineno}:{e.colno}: malformed JSON: {e.msg}") from None
    except RecursionError:
        raise GraphFileError(f"{source}: JSON nested more than {MAX_DEPTH} levels deep; a graph "
                             "file needs far fewer (is it a graph file?)") from None
    _check_values(doc, source)
    doc = _check_and_migrate(doc, source)
    _check_counts(doc, source)
    return doc, duplicates


def _check_counts(doc: dict, source: str) -> None:
    """Refuse more nodes than validation takes on (as many as groups may expand to) or
    far more wires than they can have, before any is read: 80,000 nodes take seconds."""
    defined = doc.get("groups")
    bodies = [doc, *(defined.values() if isinstance(defined, dict) else ())]

    def count(key: str) -> int:
        return sum(len(b[key]) for b in bodies if isinstance(b, dict)
                   and isinstance(b.get(key), dict | list))

    nodes, edges = count("nodes"), count("edges")
    if nodes > MAX_NODES or edges > MAX_EDGES:
        what = f"{nodes:,} nodes" if nodes > MAX_NODES else f"{edges:,} wires"
        raise GraphFileError(f"{source}: {what} is more than a graph may hold ({MAX_NODES:,} "
                             f"nodes, {MAX_EDGES:,} wires); split it, or use groups for what "
                             "repeats")


def _too_big(source: str, size: int) -> str:
    return (f"{source}: {size / 2**20:.1f} MB is more than a graph file may hold "
            f"({MAX_BYTES // 2**20} MB); keep data in files beside the graph and name them "
            "in a data block's params")


def _check_values(doc: Any, source: str) -> None:
    """Refuse nesting deeper than MAX_DEPTH and non-finite numbers (NaN, Infinity, 1e999),
    naming the JSON path; walked without recursion, so the walk itself cannot overflow."""
    todo: list[tuple[Any, tuple]] = [(doc, ())] if isinstance(doc, dict | list) else []
    while todo:
        value, path = todo.pop()
        if len(path) >= MAX_DEPTH:
            raise GraphFileError(f"{source}: {_path(path)}: JSON nested more than {MAX_DEPTH} "
                                 "levels deep; a graph file needs far fewer")
        items = value.items() if isinstance(value, dict) else enumerate(value)
        for key, v in items:
            if isinstance(v, dict | list):
                todo.append((v, (*path, key)))
            elif isinstance(v, _LongInt):
                raise GraphFileError(f"{source}: {_path((*path, key))}: an integer of "
                                     f"{v.digits:,} digits is more than any setting takes "
                                     f"(at most {MAX_INT_DIGITS} digits); write a smaller "
                                     "number")
            elif isinstance(v, float) and not math.isfinite(v):
                raise GraphFileError(f"{source}: {_path((*path, key))}: {v} is not a number "
                                     "JSON allows (NaN, Infinity or too large); write a "
                                     "finite number")


class _LongInt:
    """An integer literal too long to convert (Python refuses > 4,300 digits, and converting
    one costs time quadratic in its length): kept as its length, refused by `_check_values`
    with its JSON path."""

    def __init__(self, digits: int):
        self.digits = digits


def _parse_int(text: str) -> int | _LongInt:
    digits = len(text.lstrip("-"))
    return _LongInt(digits) if digits > MAX_INT_DIGITS else int(text)


def _path(path: tuple) -> str:
    """A JSON path as the messages show it: nodes/hidden/params/out_features."""
    return "/".join(str(p) for p in path) or "(the document)"


def _check_and_migrate(doc: Any, source: str) -> dict:
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise GraphFileError(f"{source}: not a nodegraph file (expected an object with "
                             f'"format": "{FORMAT}")')
    version = doc.get("version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise GraphFileError(f"{source}: 'version' must be a positive integer, got {version!r}")
    if version > VERSION:
        raise GraphFileError(f"{source}: file version {version} is newer than this nodegraph "
                             f"reads ({VERSION}); upgrade nodegraph to open it")
    while version < VERSION:
        doc = MIGRATIONS[version](doc)
        version += 1
        doc["version"] = version
    if not isinstance(doc.get("nodes", {}), dict):
        raise GraphFileError(f"{source}: 'nodes' must be an object mapping ids to blocks")
    if not isinstance(doc.get("edges", []), list):
        raise GraphFileError(f"{source}: 'edges' must be a list")
    return doc


def _read_nodes(graph: Graph, nodes: dict, problems: list[Problem]) -> None:
    registry = graph.registry
    for node_id, entry in nodes.items():
        if not NODE_ID.match(node_id):
            problems.append(Problem(node_id, None, "bad_entry", f"'{node_id}' is not a valid "
                                    "node id (letters, digits and _); the node was skipped"))
            continue
        if not isinstance(entry, dict) or not isinstance(entry.get("type"), str):
            problems.append(Problem(node_id, None, "bad_entry", "a node needs an object with "
                                    "a 'type' string; the node was skipped"))
            continue
        params = entry.get("params", {})
        if not isinstance(params, dict):
            problems.append(Problem(node_id, None, "bad_entry", "'params' must be an object; "
                                    "the params were ignored"))
            params = {}
        block_type = entry["type"]
        if block_type in registry and registry.canonical(block_type) != block_type:
            new = registry.canonical(block_type)
            problems.append(Problem(node_id, None, "renamed_block", f"block type '{block_type}'"
                                    f" is now '{new}'", severity="warning"))
            block_type = new
        elif block_type not in registry:
            problems.append(Problem(node_id, None, "unknown_block",
                                    f"unknown block type '{block_type}'",
                                    "install the package that provides it, or replace the node"))
        else:
            spec = registry.get(block_type)
            for name in params:
                if spec.param(name) is None:
                    problems.append(Problem(node_id, name, "unknown_param",
                                            f"{block_type} has no param '{name}'"))
        extra = {k: v for k, v in entry.items() if k not in KNOWN_NODE}
        graph.add_node(Node(node_id, block_type, params, extra), strict=False)


def _read_edges(graph: Graph, edges: list, problems: list[Problem]) -> None:
    for i, entry in enumerate(edges):
        ends = _edge_ends(entry)
        if ends is None:
            problems.append(Problem(None, None, "bad_entry", f"edge #{i + 1} must look like "
                                    '{"from": [node, port], "to": [node, port]}; it was '
                                    f"skipped: {json.dumps(entry)[:80]}"))
            continue
        (src, src_port), (dst, dst_port) = ends
        missing = [n for n in (src, dst) if n not in graph.nodes]
        if missing:
            problems.append(Problem(dst if dst in graph.nodes else src, None, "dangling_edge",
                                    f"edge {src}.{src_port} -> {dst}.{dst_port} refers to "
                                    f"missing node(s) {', '.join(missing)}; it was skipped"))
            continue
        try:
            graph.connect((src, src_port), (dst, dst_port), strict=False)
        except Exception as e:  # a duplicate wire
            problems.append(Problem(dst, dst_port, "bad_entry", f"{e}; it was skipped"))


def _read_groups(graph: Graph, groups: Any, problems: list[Problem]) -> None:
    """Group definitions: a body of nodes and edges, and the ports that reach into it.

    What does not fit is reported with its JSON path and left out: a group whose name is not
    an identifier (its instances are then unknown blocks), a body part of the wrong JSON
    type, a port whose name is not lower_snake or that names a missing inner node.
    """
    if not isinstance(groups, dict):
        problems.append(Problem(None, None, "bad_entry", "'groups' must be an object mapping "
                                "group names to definitions; it was ignored"))
        return
    for name in groups:  # declare all first: bodies may use each other
        if not GROUP_NAME.match(name):
            problems.append(Problem(None, None, "bad_entry", f"groups/{name}: '{name}' is not "
                                    "a valid group name (a letter, then letters, digits and _)"
                                    "; the group was skipped"))
            continue
        graph.define_group(GroupDef(name, Graph(name, graph.base_registry)))
    for name, entry in groups.items():
        defn = graph.groups.get(name)
        if defn is None:
            continue
        where = f"groups/{name}"
        if not isinstance(entry, dict):
            problems.append(Problem(None, None, "bad_entry", f"{where} must be an object with "
                                    "nodes, edges, inputs and outputs"))
            continue
        part = {key: entry.get(key, kind()) for key, kind in
                (("nodes", dict), ("edges", list), ("ties", list), ("inputs", dict),
                 ("outputs", dict))}
        for key, value in part.items():
            kind = dict if key in ("nodes", "inputs", "outputs") else list
            if not isinstance(value, kind):
                problems.append(Problem(None, None, "bad_entry", f"{where}/{key} must be "
                                        f"{'an object' if kind is dict else 'a list'}; it was "
                                        "ignored"))
                part[key] = kind()
        inner: list[Problem] = []
        _read_nodes(defn.body, part["nodes"], inner)
        _read_edges(defn.body, part["edges"], inner)
        _read_ties(defn.body, part["ties"], inner)  # applied in every instance
        problems += [Problem(p.node and f"{name}:{p.node}", p.port, p.kind,
                             f"in group '{name}': {p.message}", p.hint, p.severity)
                     for p in inner]
        for port, targets in part["inputs"].items():
            refs = [targets] if _is_pair(targets) else targets
            if not _port_name(port, f"{where}/inputs", problems):
                continue
            if not isinstance(refs, list) or not all(_is_ref(r, defn.body) for r in refs):
                problems.append(Problem(None, None, "bad_entry", f"{where}/inputs/{port} must "
                                        "list [inner node, input] pairs of the group's nodes; "
                                        "the input was skipped"))
                continue
            defn.inputs[port] = list(dict.fromkeys(tuple(r) for r in refs))
        for port, ref in part["outputs"].items():
            if not _port_name(port, f"{where}/outputs", problems):
                continue
            if _is_ref(ref, defn.body):
                defn.outputs[port] = tuple(ref)
            else:
                problems.append(Problem(None, None, "bad_entry", f"{where}/outputs/{port} must "
                                        "be an [inner node, output] pair of the group's nodes; "
                                        "the output was skipped"))
        ui, found = checked_ui(entry.get("ui", {}), f"{where}/ui")
        defn.body.update_ui(ui)
        problems += found


def _port_name(port: str, where: str, problems: list[Problem]) -> bool:
    if PORT_NAME.match(port):
        return True
    problems.append(Problem(None, None, "bad_entry", f"{where}/{port}: '{port}' is not a valid "
                            "port name (lower case letters, digits and _); it was skipped"))
    return False


def _is_pair(value: Any) -> bool:
    return (isinstance(value, list) and len(value) == 2
            and all(isinstance(s, str) for s in value))


def _is_ref(ref: Any, body: Graph) -> bool:
    return _is_pair(ref) and ref[0] in body.nodes


def _read_ties(graph: Graph, ties: Any, problems: list[Problem]) -> None:
    if not isinstance(ties, list):
        problems.append(Problem(None, None, "bad_entry", "'ties' must be a list; it was "
                                "ignored"))
        return
    for i, entry in enumerate(ties):
        ends = _edge_ends(entry)
        if ends is None:
            problems.append(Problem(None, None, "bad_entry", "a tie must look like "
                                    '{"from": [node, param], "to": [node, param]}; '
                                    f"ties/{i} was skipped"))
            continue
        (src, src_param), (dst, dst_param) = ends
        graph.add_tie(Tie(src, src_param, dst, dst_param), strict=False)


def _edge_ends(entry: Any) -> tuple[tuple[str, str], tuple[str, str]] | None:
    if not isinstance(entry, dict):
        return None
    src: Any = entry.get("from")
    dst: Any = entry.get("to")
    if all(isinstance(x, list) and len(x) == 2 and all(isinstance(s, str) for s in x)
           for x in (src, dst)):
        return (src[0], src[1]), (dst[0], dst[1])
    return None


def to_document(graph: Graph) -> dict:
    """The graph as a JSON-ready dict (version 1)."""
    doc: dict[str, Any] = {"format": FORMAT, "version": VERSION, "name": graph.name}
    if graph.groups:
        doc["groups"] = {name: group_entry(d) for name, d in graph.groups.items()}
    doc.update(body(graph))
    # imported here: the allowlist needs torch, and reading a file (`nodegraph diff`) must not
    from nodegraph.model import allowlist

    modules = allowlist.modules_needed(graph)
    if modules:  # the file says, at its top, which code of the user's it runs (if trusted)
        doc["imports"] = modules
    doc["training"] = dict(graph.training)
    doc["ui"] = dict(graph.ui)
    doc.update(graph.extra)
    return doc


def group_entry(defn: GroupDef) -> dict[str, Any]:
    """One group definition as the file's `groups` section holds it (and a clip does)."""
    return {**body(defn.body), "inputs": {p: [list(t) for t in ts]
                                           for p, ts in defn.inputs.items()},
            "outputs": {p: list(r) for p, r in defn.outputs.items()},
            **({"ui": dict(defn.ui)} if defn.ui else {})}


def read_groups(entries: dict, registry: Registry) -> dict[str, GroupDef]:
    """Group definitions from `groups`-section entries, read (and checked) as a file's are;
    what does not fit is left out, as the loader leaves it out."""
    holder = Graph("groups", registry)
    _read_groups(holder, entries, [])
    return dict(holder.groups)


def body(graph: Graph) -> dict[str, Any]:
    """Nodes, edges and ties: what the top level and a group's body both hold."""
    body = {"nodes": {n.id: {"type": n.type, "params": dict(n.params), **n.extra}
                     for n in graph.nodes.values()},
            "edges": [{"from": [e.src, e.src_port], "to": [e.dst, e.dst_port]}
                      for e in graph.edges]}
    if graph.ties:
        body["ties"] = [{"from": [t.src, t.src_param], "to": [t.dst, t.dst_param]}
                        for t in graph.ties]
    return body


def dumps(graph: Graph) -> str:
    """The file text: one line per node, per edge and per short list, so diffs read well."""
    doc = to_document(graph)
    lines = {"nodes": lambda v: _pretty(v, 1, inline_depth=1),
             "edges": lambda v: _pretty(v, 1, inline_depth=1),
             "ties": lambda v: _pretty(v, 1, inline_depth=1),
             "groups": lambda v: _pretty(v, 1, inline_depth=3)}
    parts = [f"  {_one(k)}: {lines.get(k, lambda v: _pretty(v, 1))(v)}" for k, v in doc.items()]
    return "{\n" + ",\n".join(parts) + "\n}\n"


def _one(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, allow_nan=False)


def _pretty(value: Any, level: int, inline_depth: int | None = None) -> str:
    """JSON with containers opened one level per line until `inline_depth` (or until the
    container holds only scalars), then written on one line."""
    scalar_only = isinstance(value, dict | list) and not any(
        isinstance(v, dict | list) for v in (value.values() if isinstance(value, dict) else value))
    if not isinstance(value, dict | list) or not value or inline_depth == 0 or (
            inline_depth is None and scalar_only and len(_one(value)) < 80):
        return _one(value)
    deeper = None if inline_depth is None else inline_depth - 1
    pad, inner = "  " * level, "  " * (level + 1)
    if isinstance(value, dict):
        items = [f"{inner}{_one(k)}: {_pretty(v, level + 1, deeper)}" for k, v in value.items()]
        return "{\n" + ",\n".join(items) + f"\n{pad}}}"
    items = [f"{inner}{_pretty(v, level + 1, deeper)}" for v in value]
    return "[\n" + ",\n".join(items) + f"\n{pad}]"


def save(graph: Graph, path: str | os.PathLike) -> None:
    """Write the graph atomically: a temp file beside the target, then a rename."""
    atomic_write_text(Path(path), dumps(graph))
