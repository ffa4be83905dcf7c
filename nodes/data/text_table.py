"""A table's text column as token ids: text classification (or regression) on the user's own table.

`data.TextTable` reads a CSV, Parquet or Arrow table (a file, a folder of them, or an
``s3://`` path, as `data.Parquet` reads them), tokenizes its `text` column with a Hugging
Face `tokenizers` tokenizer and gives x, the ids cut or padded to `max_length`; `mask`,
1 where x holds a token and 0 where it holds padding (a transformer's attention_mask); y,
the `target` column as class indices (text labels numbered in sorted order, as
`data.Parquet` numbers them) or as values.

The tokenizer is the one the model was trained with — a ``tokenizer.json``, or the folder
`save_pretrained` wrote (a downloaded BERT's) — or one trained here on the training split's
texts (WordPiece, its vocabulary the most frequent characters and words; ``[CLS]`` first
and ``[SEP]`` last, as BERT's): a validation or test text never shapes the vocabulary.
Validation reads only the row count and the label column; the texts are tokenized when
the graph is built, in memory.
"""

from __future__ import annotations

from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import torch

from nodegraph.kinds.datameta import DataMeta, sized, with_classes
from nodegraph.kinds.dataset import data_params, data_path, from_arrays
from nodegraph.kinds.declare import data
from nodegraph.kinds.rawinput import TextInput
from nodegraph.model.errors import NodegraphError
from nodegraph.model.spec import Params, Port, choice_param, int_param, str_param
from nodes.data import text as subword
from nodes.data._streaming import held_bytes, in_memory, split_rows
from nodes.data.tables import (
    TARGET_KIND,
    Columns,
    _rows,
    categories,
    class_count,
    guard,
    open_table,
)

TOKENIZERS = ("wordpiece", "file")
SPECIALS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]")  # a trained tokenizer's first ids: [PAD] is 0
PAD_NAMES = ("[PAD]", "<pad>", "<|pad|>")  # how tokenizers people bring name padding


class TextTableParams(Params):
    path: str
    format: str
    text: str
    target: str
    target_kind: str
    tokenizer: str
    tokenizer_file: str
    vocab_size: int
    max_length: int
    batch_size: int
    shuffle: bool
    val_fraction: float
    test_fraction: float
    split: str
    split_seed: int
    folds: int
    fold: int
    dtype: str


def ports_of(p: TextTableParams) -> dict:
    y = ((), torch.int64) if p.target_kind == "class" else ((1,), torch.float32)
    return {"x": ((p.max_length,), torch.int64), "mask": ((p.max_length,), torch.int64),
            "y": y}


def _columns(table, p: TextTableParams) -> Columns:
    """The text and target columns, checked against the schema: present, text and a
    number or label."""
    import pyarrow as pa

    schema = table.schema
    names = list(schema.names)
    for role, name in (("text", p.text), ("target", p.target)):
        if not name:
            raise NodegraphError(f"name the table's {role} column ({role})")
        if name not in names:
            raise NodegraphError(f"table '{p.path}' has no column '{name}' (columns: "
                                 f"{', '.join(names)})")
    if p.text == p.target:
        raise NodegraphError(f"column '{p.text}' is both the text and the target")

    def kind(name: str):
        t = schema.field(name).type
        return t.value_type if pa.types.is_dictionary(t) else t

    if not (pa.types.is_string(kind(p.text)) or pa.types.is_large_string(kind(p.text))):
        raise NodegraphError(f"table '{p.path}': text column '{p.text}' holds "
                             f"{kind(p.text)}, not text")
    label_text = pa.types.is_string(kind(p.target)) or pa.types.is_large_string(kind(p.target))
    if label_text and p.target_kind != "class":
        raise NodegraphError(f"table '{p.path}': target column '{p.target}' holds text; use "
                             "target_kind 'class'")
    return Columns([p.text], [p.target], [], label_text)


def text_table_meta(p: TextTableParams) -> DataMeta | None:
    """Shapes, split sizes and the class count from the row count and the label column;
    no text is tokenized (None for a stratified split: its sizes follow the labels)."""
    with guard(p.path):
        table = open_table(p.path, p.format)
        cols = _columns(table, p)
        n = _rows(table, p.path)
        if n == 0:
            raise NodegraphError(f"table '{p.path}' holds no rows")
        meta = sized(ports_of(p), n, p)
        classes = class_count(table, cols, p.path) if p.target_kind == "class" else None
    return with_classes(meta, y=classes)


def _read(p: TextTableParams) -> tuple[list[str], np.ndarray, dict[Any, int]]:
    """The texts and targets (class indices, or float values) of the whole table."""
    import pyarrow as pa

    with guard(p.path):
        table = open_table(p.path, p.format)
        cols = _columns(table, p)
        n = _rows(table, p.path)
        if not in_memory({"storage": "auto"}, held_bytes(ports_of(p), n)):
            raise NodegraphError(
                f"table '{p.path}': {n:,} rows of {p.max_length} token ids do not fit in "
                "memory, and data.TextTable holds its ids in memory; use fewer rows or a "
                "shorter max_length")
        codes = categories(table, cols, p.path)
        try:
            columns = table.to_table(columns=[p.text, p.target])
        except (pa.ArrowException, OSError) as e:
            raise NodegraphError(f"cannot read table '{p.path}': {e}") from e
        except UnicodeDecodeError as e:
            raise NodegraphError(f"table '{p.path}': a text column holds bytes that are not "
                                 f"UTF-8 ({e.reason} at byte {e.start})") from None
    texts, target = columns.column(p.text), columns.column(p.target)
    for name, col in ((p.text, texts), (p.target, target)):
        if col.null_count:
            raise NodegraphError(f"table '{p.path}': column '{name}' has missing values "
                                 f"(null) in {col.null_count:,} rows")
    if cols.class_text:
        lookup = codes[p.target]
        y = np.array([lookup[v] for v in target.to_pylist()], dtype=np.int64)
    else:
        values = target.to_numpy(zero_copy_only=False).astype(np.float64)
        if p.target_kind == "class":
            if not np.all(np.isfinite(values) & (values == np.round(values))) \
                    or (values < 0).any():
                raise NodegraphError(f"table '{p.path}': class column '{p.target}' must hold "
                                     "whole numbers >= 0 (or text labels)")
            y = values.astype(np.int64)
        else:
            y = values.astype(np.float32)[:, None]
    return [str(t) for t in texts.to_pylist()], y, codes.get(p.target, {})


def _tokenizer_path(path: str) -> str:
    """A tokenizer.json, or the folder `save_pretrained` wrote it in."""
    folder = data_path(path) if path else None
    return str(Path(path) / "tokenizer.json") if folder is not None and folder.is_dir() \
        else path


def _trained(texts: list[str], vocab_size: int):
    """A WordPiece tokenizer counted from `texts` (the training split; lower-cased; its
    special tokens first, [PAD] = 0: `subword.counted_wordpiece`, the same in every
    process), each text framed as [CLS] ... [SEP]."""
    from tokenizers import processors

    tok = subword.counted_wordpiece(texts, vocab_size, SPECIALS, lowercase=True)
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", special_tokens=[("[CLS]", 2), ("[SEP]", 3)])
    return tok


def _pad_id(tok) -> int:
    """The id the tokenizer pads with: its own padding setting, else its [PAD] token."""
    if tok.padding is not None:
        return int(tok.padding["pad_id"])
    for name in PAD_NAMES:
        found = tok.token_to_id(name)
        if found is not None:
            return int(found)
    raise NodegraphError("the tokenizer has no padding token ([PAD] or <pad>) and no "
                         "padding set: texts shorter than max_length cannot be padded")


def cutting(tok, max_length: int):
    """`tok` made to cut at max_length and not to pad (`encode` pads); its pad id."""
    pad = _pad_id(tok)
    tok.no_padding()
    tok.enable_truncation(max_length)
    return tok, pad


def encode(tok, pad: int, texts: list[str], max_length: int) -> tuple[np.ndarray, np.ndarray]:
    """(ids, mask), each (len(texts), max_length) int64: every text's ids, special tokens
    included, cut to max_length (`cutting`) and padded after with `pad`."""
    ids = np.full((len(texts), max_length), pad, dtype=np.int64)
    mask = np.zeros((len(texts), max_length), dtype=np.int64)
    for row, enc in enumerate(tok.encode_batch(texts)):
        ids[row, :len(enc.ids)] = enc.ids
        mask[row, :len(enc.ids)] = 1
    return ids, mask


def text_table(p: TextTableParams):
    texts, y, codes = _read(p)
    rows = split_rows(len(texts), p, y if p.split == "stratified" else None)
    if p.tokenizer == "file":
        tok = subword.load_tokenizer(_tokenizer_path(p.tokenizer_file))
    else:
        tok = _trained([texts[i] for i in rows["train"]], p.vocab_size)
    tok, pad = cutting(tok, p.max_length)
    ids, mask = encode(tok, pad, texts, p.max_length)
    dataset = from_arrays({"x": ids, "mask": mask, "y": y}, p, normalize_ports=(),
                          given_splits=rows)
    dataset.vocab = subword.Subwords(tok)  # spells ids back (procedures.Decode, a preview)
    texts_to = partial(encode, tok, pad, max_length=p.max_length)  # predict(["a new review"])
    dataset.raw_inputs = {  # type: ignore[attr-defined]
        "x": TextInput(texts_to, "ids"), "mask": TextInput(texts_to, "mask")}
    if codes:
        dataset.categories = {p.target: codes}
    return dataset


NO_NORMALIZE = [q for q in data_params(batch_size=32, val_fraction=0.2)
                if q.name != "normalize"]

BLOCKS = [
    data("data.TextTable", "A table's text column as token ids: text classification data.\n\n"
         "Reads a CSV, Parquet or Arrow table (a file, a folder, or s3://...), tokenizes "
         "the `text` column and gives x, its token ids cut or padded to max_length; mask, "
         "1 on tokens and 0 on padding (a transformer's attention_mask); y, the `target` "
         "column (class indices, text labels numbered in sorted order, or values). The "
         "tokenizer is a tokenizer.json or a save_pretrained folder (the model's own), or "
         "a WordPiece of the training split's most frequent words. Feed x to "
         "layers.Embedding (num_embeddings >= the vocabulary) or to an imported model's "
         "input_ids.",
         text_table, meta=text_table_meta,
         outputs=[Port("x", doc="token ids (N, max_length), int64"),
                  Port("mask", doc="1 where x holds a token, 0 on padding (N, max_length), "
                       "int64"),
                  Port("y", doc="class indices (N,) int64, or the target (N, 1) float32")],
         params=[str_param("path", doc="a .csv, .parquet or .arrow/.feather file, a folder "
                           "of them, or an s3:// path"),
                 choice_param("format", ("auto", "parquet", "arrow", "csv"), "auto",
                              "the files' format; auto goes by the file names' suffix"),
                 str_param("text", "text", "the column of texts"),
                 str_param("target", "label", "the column of labels (or values)"),
                 replace(TARGET_KIND, default="class"),
                 choice_param("tokenizer", TOKENIZERS, "wordpiece",
                              "wordpiece: the training split's most frequent characters "
                              "and words; file: tokenizer_file"),
                 str_param("tokenizer_file", "", "a tokenizer.json, or the folder a "
                           "Hugging Face tokenizer was saved in (tokenizer 'file')"),
                 int_param("vocab_size", 8000, "tokens a trained tokenizer may have",
                           min=len(SPECIALS) + 1, max=1_000_000),
                 int_param("max_length", 128, "token ids per text, special tokens "
                           "included: longer texts are cut, shorter ones padded", min=1,
                           max=1_000_000),
                 *NO_NORMALIZE],
         keywords=("text classification", "sentiment", "tokenizer", "token ids", "csv",
                   "parquet", "table", "bert", "huggingface", "reviews", "nlp")),
]
