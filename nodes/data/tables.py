"""Tables in Parquet, Arrow IPC (Feather) or CSV files, read with pyarrow one row group at a time.

`data.Parquet` names its columns: `inputs` form x (float32, one value per column), `targets`
form y (a class index, or float values). A text (or dictionary-encoded) input column is
categorical: its distinct values, sorted, are numbered, and x holds the number; a text
class target is numbered the same way. A path may be one file or a folder of them (a
partitioned table).

Validation reads the schema and the row count from the files' footers (Parquet and Arrow
keep both there; a CSV is counted), never a value. The table is read as a stream of parts
(`parts`): the row groups of a Parquet file, the files of the other formats (read through
in record batches), each with the row number it starts at, so a reader holds one part (or
batch) in memory at a time: the streamed
build (`storage` stream, or a table too large for memory) reads each split's rows so, in
DataLoader workers that take whole row groups each; the in-memory build joins the parts.
A stratified split needs the class column first, so it builds in memory. The categories
a categorical column holds are found by a pass over that column alone.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path, PurePosixPath
from typing import Any

import numpy as np
import torch

from nodegraph.kinds import gate, remote
from nodegraph.kinds.datameta import DataMeta, sized, with_classes
from nodegraph.kinds.dataset import DataParams, data_params, data_path, from_arrays
from nodegraph.kinds.declare import data
from nodegraph.kinds.loading import ShardSource
from nodegraph.kinds.rawinput import TableInput
from nodegraph.kinds.streamed import STORAGE_PARAM, SampleError
from nodegraph.model.errors import NodegraphError
from nodegraph.model.spec import Param, Port, bool_param, choice_param, str_param
from nodes.data._streaming import Rows, held_bytes, in_memory, mark, split_rows, streamed

SUFFIXES = {".parquet": "parquet", ".pq": "parquet", ".arrow": "ipc", ".feather": "ipc",
            ".ipc": "ipc", ".csv": "csv"}


MAX_CATEGORIES = 100_000  # distinct values a categorical column may hold


def _arrow():
    """pyarrow's dataset module, imported when a table is first read (it costs start-up)."""
    import pyarrow.dataset as ds

    return ds


def table_files(path: Path) -> list[Path]:
    """The files of a table: `path` itself, or every file under the folder as pyarrow's
    discovery finds them (names starting with "." or "_" left out), each through the file
    gate (`nodegraph.kinds.gate`): a symlink leading outside, or a FIFO, is refused."""
    if not path.is_dir():
        return [path]
    return gate.listing(path, "table file", recursive=True, skip=("_",))


def _format(files: list[Path], given: str, path: Path | str) -> str:
    if given != "auto":
        return {"arrow": "ipc"}.get(given, given)
    found = {SUFFIXES[q.suffix.lower()] for q in files if q.suffix.lower() in SUFFIXES}
    if len(found) != 1:
        what = "files of several formats" if found else "no .parquet, .arrow, .feather or .csv"
        raise NodegraphError(f"table '{path}' holds {what}; set `format`")
    return found.pop()


def _open_remote(url: str, fmt: str):
    """`open_table` for a table in object storage (`nodegraph.kinds.remote`): an object, or
    every object under a prefix, listed and checked there; pyarrow reads them through
    fsspec (timeouts, retries, errors naming the object)."""
    import pyarrow as pa

    folder = remote.is_folder(url, "table")
    files = (remote.listing(url, "table file", recursive=True, skip=("_",)) if folder
             else [remote.normal(url)])
    if not files:
        raise NodegraphError(f"table '{url}' holds no files")
    kind = _format([Path(PurePosixPath(f).name) for f in files], fmt, url)  # by suffix
    for f in files:
        remote.info(f, "table file")
    keys = [remote.key(f) for f in files]
    try:
        with remote.reading(url, "table"):
            return _arrow().dataset(  # gated: the objects remote.info checked above
                keys if folder else keys[0], format=kind,
                filesystem=remote.arrow_filesystem(url))
    except (pa.ArrowException, OSError, ValueError) as e:
        raise NodegraphError(f"cannot read table '{url}' as {kind}: {e}") from e


def guard(path: str):
    """Errors of object storage as errors naming the table (nothing for a local one)."""
    return remote.reading(path, "table") if remote.is_url(path) else contextlib.nullcontext()


def where_of(path: str) -> str:
    """Where `path` is read from now: a URL as given, a local path from the graph's folder."""
    return remote.normal(path) if remote.is_url(path) else str(data_path(path))


def open_table(path: str, fmt: str = "auto"):
    """The pyarrow dataset of a file or folder, its schema read; an error naming the file
    that is missing or not a table of that format. pyarrow gets the list of files that
    passed the gate, never the folder to list itself."""
    if not path:
        raise NodegraphError("no table file given (path)")
    if remote.is_url(path):
        return _open_remote(path, fmt)
    where = data_path(path)
    if not where.exists():
        raise NodegraphError(f"table '{path}' ({where}) does not exist")
    files = table_files(where)
    kind = _format(files, fmt, where)
    checked, opener = gate.arrow_files(files, "table file")
    import pyarrow as pa

    try:
        return _arrow().dataset(  # gated: opener opens only the files as gate checked them
            checked if where.is_dir() else checked[0], format=kind, filesystem=opener)
    except (pa.ArrowException, OSError, ValueError) as e:
        raise NodegraphError(f"cannot read table '{path}' as {kind}: {e}") from e


@dataclass
class Columns:
    """What the params ask of a table: input and target columns, the categorical inputs."""

    inputs: list[str]
    targets: list[str]
    categorical: list[str]  # inputs that are text: numbered
    class_text: bool  # a class target that is text: numbered


def columns(table, p: ParquetParams, where: str) -> Columns:
    """The columns the params name, checked against the schema: present, numbers or text."""
    import pyarrow as pa

    schema = table.schema
    files = _files_of(table)  # `where` may be a folder ('.'): name its file(s) too
    try:
        names = list(schema.names)
    except UnicodeDecodeError as e:  # a CSV header of bytes that are not UTF-8
        raise NodegraphError(f"cannot read table '{where}'{_files_of(table)}: its column names "
                             f"are not UTF-8 text ({e})") from None
    missing = [c for c in [*p.inputs, *p.targets] if c not in names]
    if missing:
        raise NodegraphError(f"table '{where}'{files} has no column '{missing[0]}' (columns: "
                             f"{', '.join(names)})")
    if not p.targets:
        raise NodegraphError("name at least one target column")
    inputs = list(p.inputs) or [c for c in names if c not in p.targets]
    both = sorted(set(inputs) & set(p.targets))
    if both or not inputs:
        raise NodegraphError(f"columns {both} are both inputs and targets" if both else
                             "no columns are left for the inputs")
    if p.target_kind == "class" and len(p.targets) > 1:
        raise NodegraphError("class targets come from one column; name only one target")

    def text(name: str) -> bool:
        t = schema.field(name).type
        if pa.types.is_dictionary(t):
            t = t.value_type
        return pa.types.is_string(t) or pa.types.is_large_string(t)

    def number(name: str) -> bool:
        t = schema.field(name).type
        return pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t)

    for c in inputs + list(p.targets):
        if not (number(c) or text(c)):
            raise NodegraphError(f"table '{where}'{files}: column '{c}' holds "
                                 f"{schema.field(c).type}, not numbers or text")
    categorical = [c for c in inputs if text(c) or c in p.categorical]
    unknown = [c for c in p.categorical if c not in inputs]
    if unknown:
        raise NodegraphError(f"categorical column '{unknown[0]}' is not an input column")
    for c in p.targets if p.target_kind == "value" else ():
        if text(c):
            raise NodegraphError(f"table '{where}'{files}: target column '{c}' holds text; use "
                                 "target_kind 'class'")
    class_text = p.target_kind == "class" and text(p.targets[0])
    return Columns(inputs, list(p.targets), categorical, class_text)


def _group_rows(part) -> int:
    """Rows of one part, from the Parquet footer (the row group's metadata) or counted."""
    groups = getattr(part, "row_groups", None)
    if groups:
        return sum(g.num_rows for g in groups)
    return part.count_rows()


def _rows(table, where: str) -> int:
    import pyarrow as pa

    try:
        return table.count_rows()
    except (pa.ArrowException, OSError) as e:
        raise NodegraphError(f"cannot read table '{where}'{_files_of(table)}: {e}") from e


def _files_of(table) -> str:
    """`` (file 'a.parquet')`` or `` (one of its files 'a.parquet', ...)``: which file a
    pyarrow error that names none came from (pyarrow's dataset knows only the list)."""
    found = list(getattr(table, "files", None) or [])
    shown = ", ".join(f"'{Path(f).name}'" for f in found[:3]) + (", ..." if found[3:] else "")
    return f" (file {shown})" if len(found) == 1 else f" (one of its files {shown})" if found \
        else ""


class ParquetParams(DataParams):
    path: str
    format: str
    inputs: list[str]
    targets: list[str]
    categorical: list[str]
    target_kind: str
    storage: str
    strict: bool


def table_meta(p: ParquetParams) -> DataMeta | None:
    """Shapes from the schema and row count from the footers; None for a stratified split
    (its sizes follow the class column's values)."""
    with guard(p.path):
        return _table_meta(p)


def _table_meta(p: ParquetParams) -> DataMeta | None:
    table = open_table(p.path, p.format)
    cols = columns(table, p, p.path)
    n = _rows(table, p.path)
    if n == 0:
        raise NodegraphError(f"table '{p.path}' holds no rows")
    meta = mark(sized(_ports(cols, p), n, p), p)
    said = suspects(table, cols, categories(table, cols, p.path), p)
    if meta is not None and said:
        meta = replace(meta, warnings=(*meta.warnings, *said))
    return with_classes(meta, y=class_count(table, cols, p.path)
                        if meta is not None and p.target_kind == "class" else None)


def _number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def suspects(table, cols: Columns, codes: dict[str, dict[Any, int]], p: ParquetParams
             ) -> list[str]:
    """What a text column's values say went wrong in the file (issue #37: nothing taken in
    silence): a value that is a column's name (a header row repeated inside the file, which
    becomes a category or class of its own), numbers mixed with text (a CSV column whose
    few bad cells turned it all into categories). Warnings, or with `p.strict` an error."""
    import pyarrow.compute as pc

    said = []
    names = set(table.schema.names)
    for c, values in codes.items():
        text = [v for v in values if isinstance(v, str)]
        header = sorted(v for v in text if v.strip() in names)
        if header:
            rows = sum(int(pc.sum(pc.is_in(b.column(0), value_set=_pa_array(header))).as_py()
                           or 0) for b in table.to_batches(columns=[c]))
            said.append(f"table '{p.path}': column '{c}' holds {', '.join(map(repr, header))}"
                        f" ({rows:,} row{'s' if rows != 1 else ''}), a column's name: a header "
                        "row repeated inside the file? It is read as a value of its own")
            continue
        numbers = sum(map(_number, text))
        if 0 < numbers < len(text):
            odd = [v for v in text if not _number(v)]
            said.append(f"table '{p.path}': column '{c}' mixes numbers and text ({numbers:,} "
                        f"distinct numbers, {len(odd):,} text value"
                        f"{'s' if len(odd) != 1 else ''}: {', '.join(map(repr, odd[:3]))}); "
                        "the whole column is read as categories")
    if said and p.strict:
        raise NodegraphError("; ".join(said) + " (strict = true: fix the file, or unset "
                             "strict to read it so)")
    return said


def _pa_array(values: list[str]):
    import pyarrow as pa

    return pa.array(values)


def class_count(table, cols: Columns, where: str) -> int | None:
    """How many classes the class column numbers, as `encode` numbers them: a text
    column's distinct values (a pass over that column alone), a column of whole numbers
    its largest + 1 (from the Parquet footers' statistics, else a pass over the column).
    None where a value is no class index (`encode` names it when the data is read)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    name = cols.targets[0]
    if cols.class_text:
        return len(categories(table, Columns([], [name], [], True), where)[name])
    top = _footer_max(table, name)
    if top is None:
        try:
            tops = [pc.max(b.column(0)).as_py() for b in table.to_batches(columns=[name])]
        except (pa.ArrowException, OSError) as e:
            raise NodegraphError(f"cannot read table '{where}'{_files_of(table)}: {e}") from e
        found = [t for t in tops if t is not None]
        top = max(found) if found else None
    if top is None or top != int(top) or top < 0:
        return None
    return int(top) + 1


def _footer_max(table, name: str):
    """The largest value of column `name` from every Parquet row group's statistics, or
    None when a part has none (another format, statistics not written)."""
    top = None
    try:
        for part in parts(table):
            groups = getattr(part, "row_groups", None)
            if not groups:
                return None
            for group in groups:
                stats = (group.statistics or {}).get(name)
                if not stats or stats.get("max") is None:
                    return None
                top = stats["max"] if top is None else max(top, stats["max"])
    except (OSError, ValueError, AttributeError):
        return None
    return top


def _ports(cols: Columns, p: ParquetParams) -> dict:
    y = ((), torch.int64) if p.target_kind == "class" else ((len(cols.targets),), torch.float32)
    return {"x": ((len(cols.inputs),), torch.float32), "y": y}


def parts(table) -> Iterator[Any]:
    """The table's fragments, cut into row groups where the format has them (Parquet)."""
    for fragment in table.get_fragments():
        split = getattr(fragment, "split_by_row_group", None)
        yield from (split() if split is not None else [fragment])


def categories(table, cols: Columns, where: str) -> dict[str, dict[Any, int]]:
    """The sorted distinct values of each categorical column (and of a text class target),
    numbered: a pass over those columns alone."""
    import pyarrow as pa
    import pyarrow.compute as pc

    files = _files_of(table)
    wanted = cols.categorical + (cols.targets[:1] if cols.class_text else [])
    seen: dict[str, set] = {c: set() for c in wanted}
    if wanted:
        try:
            for batch in table.to_batches(columns=wanted):
                for c in wanted:
                    seen[c].update(pc.unique(batch.column(c)).to_pylist())
                    if len(seen[c]) > MAX_CATEGORIES:
                        raise NodegraphError(
                            f"table '{where}'{files}: column '{c}' holds more than "
                            f"{MAX_CATEGORIES:,} distinct values; that is no category (an "
                            "id or free text): leave it out of the inputs")
        except (pa.ArrowException, OSError) as e:
            raise NodegraphError(f"cannot read table '{where}'{_files_of(table)}: {e}") from e
        except UnicodeDecodeError as e:  # a damaged page of a text column (fuzz table 615)
            raise NodegraphError(f"table '{where}'{files}: a text column holds bytes that "
                                 f"are not UTF-8 ({e.reason} at byte {e.start})") from e
    for c, values in seen.items():
        if None in values:
            raise NodegraphError(f"table '{where}'{files}: column '{c}' has missing values "
                                 "(null)")
    return {c: {v: i for i, v in enumerate(sorted(values))} for c, values in seen.items()}


def encode(batch, cols: Columns, codes: dict[str, dict[Any, int]], p: ParquetParams,
           where: str) -> dict[str, np.ndarray]:
    """x float32 (n, inputs) and y (class int64 (n,), or float32 (n, targets)) of a record
    batch or table; refuses missing values, naming the column."""
    def column(name: str) -> np.ndarray:
        col = batch.column(name)
        if col.null_count:
            raise NodegraphError(f"table '{where}': column '{name}' has missing values (null)")
        if name in codes:
            lookup = codes[name]
            try:
                values = col.to_pylist()
            except UnicodeDecodeError as e:  # (read again, in a part changed since)
                raise NodegraphError(f"table '{where}': column '{name}' holds bytes that are "
                                     f"not UTF-8 ({e.reason} at byte {e.start})") from e
            return np.array([lookup[v] for v in values], dtype=np.float64)
        return col.to_numpy(zero_copy_only=False).astype(np.float64)

    n = batch.num_rows
    x = (np.stack([column(c) for c in cols.inputs], axis=1) if cols.inputs
         else np.zeros((n, 0))).astype(np.float32)
    if p.target_kind == "class":
        y = column(cols.targets[0])
        if not np.all(np.isfinite(y) & (y == np.round(y))) or (y < 0).any():
            raise NodegraphError(f"table '{where}': class column '{cols.targets[0]}' must "
                                 "hold whole numbers >= 0 (or text labels)")
        return {"x": x, "y": y.astype(np.int64)}
    return {"x": x, "y": np.stack([column(c) for c in cols.targets], axis=1).astype(np.float32)}


class TableReader:
    """The table a block's params name, read part by part: the columns checked, the
    categories counted once; `stream()` yields (first row, arrays) per part."""

    def __init__(self, p: ParquetParams):
        self.p = p
        self.where = where_of(p.path)  # as resolved from the graph's folder, now
        with guard(p.path):
            self.table = open_table(p.path, p.format)
            self.cols = columns(self.table, p, p.path)
            self.codes = categories(self.table, self.cols, p.path)
            if p.strict:  # a build without validation (a stratified split, code) refuses too
                suspects(self.table, self.cols, self.codes, p)

    def __getstate__(self) -> dict:  # a DataLoader worker reopens the files
        return {"p": self.p, "where": self.where, "cols": self.cols, "codes": self.codes}

    def __setstate__(self, state: dict) -> None:  # in a worker started apart (no graph folder)
        self.__dict__.update(state)  # the table is opened at its first use (`__getattr__`):
        # after the worker's start-up has given it the reading process's storage settings

    def __getattr__(self, name: str) -> Any:
        if name != "table" or "where" not in self.__dict__:
            raise AttributeError(name)
        self.table = open_table(self.where, self.p.format)
        return self.table

    def guard(self):
        return guard(self.where)

    def raw_inputs(self) -> dict[str, TableInput]:
        """Port x's raw form: the input columns and the codes of the categorical ones, so
        a prediction takes rows by column name (`nodegraph.kinds.rawinput`)."""
        return {"x": TableInput(tuple(self.cols.inputs),
                                {c: dict(self.codes[c]) for c in self.cols.categorical})}

    def part_list(self) -> list[Any]:
        return list(parts(self.table))

    def read(self, part) -> dict[str, np.ndarray]:
        import pyarrow as pa

        wanted = list(dict.fromkeys(self.cols.inputs + self.cols.targets))
        try:
            with self.guard():
                batch = part.to_table(columns=wanted, schema=self.table.schema)
        except (pa.ArrowException, OSError) as e:
            raise NodegraphError(f"cannot read table '{self.p.path}' ({part.path}): {e}") from e
        return encode(batch, self.cols, self.codes, self.p, self.p.path)

    def read_batches(self, part) -> Iterator[dict[str, np.ndarray]]:
        """A part in record batches (pyarrow's, up to some 100,000 rows): a CSV or Arrow file
        streamed through, not read whole."""
        import pyarrow as pa

        wanted = list(dict.fromkeys(self.cols.inputs + self.cols.targets))
        try:
            with self.guard():
                for batch in part.to_batches(columns=wanted, schema=self.table.schema):
                    yield encode(batch, self.cols, self.codes, self.p, self.p.path)
        except (pa.ArrowException, OSError) as e:
            raise NodegraphError(f"cannot read table '{self.p.path}' ({part.path}): {e}") from e

    def stream(self) -> Iterator[tuple[int, dict[str, np.ndarray]]]:
        start = 0
        for part in self.part_list():
            arrays = self.read(part)
            yield start, arrays
            start += len(arrays["x"])


class TableShards(ShardSource):
    """The rows of one split, read a row group (a file, for Arrow and CSV) at a time; the
    rows of a group come in a shuffled order when the epoch shuffles."""

    def __init__(self, reader: TableReader, groups: list[Any], rows: Rows):
        super().__init__(list(range(len(groups))), rows.counts)
        self.reader, self.groups, self.rows = reader, groups, rows

    def read(self, k: int) -> Iterator[dict]:
        pick = self.rows.pick(k)
        if len(pick) == 0:
            return
        seed, shuffle = self.epoch[0], self.epoch[1]
        rng = np.random.default_rng([seed, k])
        start = 0
        try:
            for arrays in self.reader.read_batches(self.groups[k]):
                end = start + len(arrays["x"])
                lo, hi = np.searchsorted(pick, [start, end])
                mine = pick[lo:hi] - start  # the split's rows in this batch
                start = end
                if shuffle:
                    mine = rng.permutation(mine)
                x, y = torch.from_numpy(arrays["x"][mine]), torch.from_numpy(arrays["y"][mine])
                for i in range(len(mine)):
                    yield {"x": x[i], "y": y[i]}
        except NodegraphError as e:
            raise SampleError(str(e)) from None


def _streamed_table(p: ParquetParams, reader: TableReader, groups: list[Any], sizes: list[int]):
    """The table streamed: each split's rows as `split_rows` draws them, read by group."""
    rows = split_rows(sum(sizes), p)
    sources = {s: TableShards(reader, groups, Rows(r, sizes)) for s, r in rows.items()
               if len(r)}
    ports = _ports(reader.cols, p)
    train = sources["train"]
    train.epoch = (0, False, None, 0, 1)
    fit = (sample for k in range(len(groups)) for sample in train.read(k))
    dataset = streamed(sources, ports, p, fit)
    dataset.categories = reader.codes
    dataset.raw_inputs = reader.raw_inputs()  # type: ignore[attr-defined]
    return dataset


def table_dataset(p: ParquetParams):
    """The table split and scaled by the data params: in memory (the row groups joined) or
    streamed (a row group at a time), as `storage` and the size say."""
    reader = TableReader(p)
    if p.storage != "memory" and p.split != "stratified":
        groups = reader.part_list()
        sizes = [_group_rows(g) for g in groups]
        if not in_memory(p, held_bytes(_ports(reader.cols, p), sum(sizes))):
            return _streamed_table(p, reader, groups, sizes)
    got = [arrays for _, arrays in reader.stream()]
    if not got or sum(len(a["x"]) for a in got) == 0:
        raise NodegraphError(f"table '{p.path}' holds no rows")
    arrays = {k: np.concatenate([a[k] for a in got]) for k in ("x", "y")}
    dataset = from_arrays(arrays, p)
    dataset.categories = reader.codes  # the numbering of text values, for predictions
    dataset.raw_inputs = reader.raw_inputs()  # type: ignore[attr-defined]  # rows by name
    return dataset


TARGET_KIND = choice_param("target_kind", ("value", "class"), "value",
                           "value: y is float (regression); class: y holds class indices")

BLOCKS = [
    data("data.Parquet",
         "A table from Parquet, Arrow (Feather) or CSV files, read with pyarrow.\n\n"
         "Columns are chosen by name: `inputs` form x (every column that is not a target "
         "when empty), `targets` form y. Text columns are categorical: their distinct "
         "values are numbered in sorted order (as are text class labels). `path` is a file "
         "or a folder of files (a partitioned table). Validation reads the schema and row "
         "count from the files' footers; the rows are read one row group at a time.",
         table_dataset, meta=table_meta,
         outputs=[Port("x", doc="the input columns (N, inputs), float32"),
                  Port("y", doc="class indices (N,) int64, or the target columns (N, "
                       "targets) float32")],
         params=[str_param("path", doc="a .parquet, .arrow/.feather or .csv file, or a "
                           "folder of them"),
                 choice_param("format", ("auto", "parquet", "arrow", "csv"), "auto",
                              "the files' format; auto goes by the file names' suffix"),
                 Param("inputs", "strs", [], "columns that form x; empty: every column "
                       "that is not a target"),
                 Param("targets", "strs", doc="columns that form y"),
                 Param("categorical", "strs", [], "number columns to treat as categories "
                       "too (text columns always are)"),
                 TARGET_KIND, STORAGE_PARAM,
                 bool_param("strict", False, "refuse a text column holding a column's name "
                            "(a repeated header row) or numbers mixed with text (else a "
                            "warning at validation)"), *data_params(val_fraction=0.2)],
         keywords=("parquet", "arrow", "feather", "csv", "table", "tabular", "columns",
                   "pyarrow", "file")),
]
