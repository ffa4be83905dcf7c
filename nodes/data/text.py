"""Text as subword tokens: a Hugging Face `tokenizers` tokenizer, trained in the graph or loaded.

`data.TokenizedText` reads a corpus (a text file, a folder of .txt files, or `text`), gets a
tokenizer — byte-level BPE (GPT-2's kind) trained, or WordPiece (BERT's) counted, on the corpus with
`vocab_size` tokens, or one saved as a `tokenizer.json` — and cuts the token ids into
contexts x (N, seq_len) with their next tokens y, as `data.TokenText` does with characters.
The dataset carries the tokenizer as `dataset.vocab`, the view of it procedures.Decode
encodes its prompt and spells tokens with.

Files are read and encoded in pieces of lines (the tokenizer's batch encoder, in Rust), so
the corpus is never held as one Python string beside its ids. Streamed (`storage` stream,
or contexts too many for memory), the ids are kept once (4 bytes a token) and each context
is cut when a DataLoader worker asks for it, so overlapping contexts cost nothing more.
Token counts are only known after tokenizing, so this block's meta tokenizes the corpus;
the tokenizer and ids are kept (for the same files, unchanged, and params) so the build
that follows does not tokenize again.
"""

from __future__ import annotations

import io
from collections import Counter, OrderedDict
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from nodegraph.kinds import gate
from nodegraph.kinds.datameta import sized
from nodegraph.kinds.dataset import Dataset, data_params, data_path, from_arrays
from nodegraph.kinds.declare import data
from nodegraph.kinds.streamed import STORAGE_PARAM, StreamedDataset
from nodegraph.model.errors import NodegraphError
from nodegraph.model.sanitize import clean
from nodegraph.model.spec import Params, Port, bool_param, choice_param, int_param, str_param
from nodes.data._streaming import held_bytes, in_memory, mark, split_rows, streamed, subsets
from nodes.data.sequences import BUNDLED_TEXT, token_windows

KINDS = ("bpe", "wordpiece", "file")
UNK = "[UNK]"
MAX_TOKENIZER = 100 * 2**20  # bytes of a tokenizer.json (a real one: a few MB, at most ~35)
LINES_PER_PIECE = 2048  # lines encoded per call: big enough for the Rust batch encoder
MAX_LINE = 1 << 20  # characters of a line read at once (a longer one comes in parts)
PIECE_CHARS = 8 << 20  # characters one piece of lines holds at most


def corpus_files(path: str) -> list[Path]:
    """The text files a `path` param names: one file, or the .txt files of a folder and its
    subfolders, each through the file gate (`nodegraph.kinds.gate`): a symlinked .txt that
    leads outside, or a FIFO, is refused by name."""
    where = data_path(path)
    if where.exists() and not where.is_dir():
        gate.check(where, "text file", shown=path)  # a FIFO or a device is refused
        return [where]
    if where.is_dir():
        found = gate.listing(where, "text file", lambda n: n.endswith(".txt"),
                             recursive=True, hidden=True)
        if not found:
            raise NodegraphError(f"text folder '{path}' ({where}) holds no .txt files")
        return found
    raise NodegraphError(f"text file '{path}' ({where}) does not exist")


def pieces(p: TokenizedTextParams) -> Iterator[list[str]]:
    """The corpus as lists of lines (newlines kept, so BPE sees the text as written). The
    files are found now, not when the first piece is asked for: the tokenizer's trainer
    reads the pieces on a thread of its own, outside the graph folder's context."""
    if not p.path:
        text = p.text or BUNDLED_TEXT
        return iter([[(line.lower() if p.lowercase else line)
                      for line in text.splitlines(True)]])
    return _file_pieces(corpus_files(p.path), p.lowercase)


def _file_pieces(files: list[Path], lowercase: bool) -> Iterator[list[str]]:
    for f in files:
        try:
            with gate.open_file(f, "text file") as raw, \
                    io.TextIOWrapper(raw, encoding="utf-8", errors="strict") as lines:
                piece: list[str] = []
                held = 0
                # a line longer than MAX_LINE comes in parts: a file of one endless line
                # never sits in memory whole, and a piece holds at most PIECE_CHARS
                for line in iter(lambda: lines.readline(MAX_LINE), ""):
                    piece.append(line.lower() if lowercase else line)
                    held += len(line)
                    if len(piece) == LINES_PER_PIECE or held >= PIECE_CHARS:
                        yield piece
                        piece, held = [], 0
                if piece:
                    yield piece
        except UnicodeDecodeError as e:
            raise NodegraphError(f"text file '{f}' is not UTF-8 text ({e.reason} at byte "
                                 f"{e.start})") from None
        except OSError as e:
            raise NodegraphError(f"cannot read text file '{f}': {e}") from e


def load_tokenizer(path: str):
    """A tokenizer saved with `Tokenizer.save` (a tokenizer.json), or an error naming the
    file when it is missing or does not parse."""
    from tokenizers import Tokenizer

    if not path:
        raise NodegraphError("tokenizer 'file' needs tokenizer_file (a tokenizer.json)")
    where = data_path(path)
    if not where.is_file():
        raise NodegraphError(f"tokenizer file '{path}' ({where}) does not exist")
    # a real one is a few MB: a huge file is refused unread; read through the gate
    raw = gate.read_bytes(where, "tokenizer file", MAX_TOKENIZER, shown=path)
    try:
        tok = Tokenizer.from_str(raw.decode("utf-8"))
    except Exception as e:  # tokenizers raises a bare Exception for JSON it cannot parse
        raise NodegraphError(f"tokenizer file '{path}' does not parse as a Hugging Face "
                             f"tokenizer.json: {e}") from None
    vocab, size = tok.get_vocab(with_added_tokens=True), tok.get_vocab_size()
    token, top = max(vocab.items(), key=lambda kv: kv[1], default=("", -1))
    if top >= size:  # ids are rows of an embedding of `size` rows (and int32 at most)
        raise NodegraphError(f"tokenizer file '{path}': token {clean(repr(token))[:80]} has "
                             f"id {top:,}, beyond its vocabulary of {size:,} tokens")
    return tok


def train_tokenizer(p: TokenizedTextParams):
    """A byte-level BPE tokenizer trained on the corpus, or a WordPiece one counted from it
    (`counted_wordpiece`)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    if p.tokenizer == "wordpiece":
        return counted_wordpiece((line for piece in pieces(p) for line in piece),
                                 p.vocab_size, (UNK,), lowercase=False,
                                 min_frequency=p.min_frequency)
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=p.vocab_size, min_frequency=p.min_frequency,
                                  show_progress=False)
    tok.train_from_iterator((line for piece in pieces(p) for line in piece), trainer)
    return tok


def counted_wordpiece(texts: Iterable[str], vocab_size: int, specials: Sequence[str],
                      lowercase: bool, min_frequency: int = 1):
    """A WordPiece tokenizer (BERT's kind: split at spaces and punctuation) whose vocabulary
    is counted from `texts`: `specials` first, then the most frequent characters (each also
    as a "##" continuation), then the words seen at least `min_frequency` times, most
    frequent first, ties in alphabetical order; a word out of the vocabulary is spelled in
    its characters.

    Counted rather than trained with `tokenizers`' WordPiece trainer: that one breaks ties
    in no fixed order, so a second process (a resumed run, a loaded `.ngz`) numbered the
    tokens differently from the first and the model read other ids."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers

    normalizer = normalizers.BertNormalizer(lowercase=lowercase)
    split = pre_tokenizers.BertPreTokenizer()
    words = Counter(w for text in texts
                    for w, _ in split.pre_tokenize_str(normalizer.normalize_str(text)))
    letters: Counter[str] = Counter()
    for word, n in words.items():
        for c in word:
            letters[c] += n
    budget = vocab_size - len(specials)
    chars = [c for c, _ in sorted(letters.items(), key=lambda kv: (-kv[1], kv[0]))]
    chars = chars[:max(budget // 2, 1)] if 2 * len(chars) > budget else chars
    tokens = [*specials, *chars, *(f"##{c}" for c in chars)]
    known = set(tokens)
    tokens += [w for w, n in sorted(words.items(), key=lambda kv: (-kv[1], kv[0]))
               if n >= min_frequency and w not in known][:max(vocab_size - len(tokens), 0)]
    tok = Tokenizer(models.WordPiece({t: i for i, t in enumerate(tokens)}, unk_token=UNK))
    tok.normalizer, tok.pre_tokenizer, tok.decoder = normalizer, split, decoders.WordPiece()
    return tok


def tokenizer_of(p: TokenizedTextParams):
    return load_tokenizer(p.tokenizer_file) if p.tokenizer == "file" else train_tokenizer(p)


def token_ids(tok, p: TokenizedTextParams) -> np.ndarray:
    """The corpus's token ids, encoded piece by piece, as int32 (4 bytes a token)."""
    parts = [np.concatenate([np.asarray(e.ids, dtype=np.int32) for e in tok.encode_batch(piece)]
                            or [np.zeros(0, np.int32)])
             for piece in pieces(p)]
    ids = np.concatenate(parts) if parts else np.zeros(0, np.int32)
    if len(ids) == 0:
        where = f"corpus '{p.path}'" if p.path else "the corpus text"
        raise NodegraphError(f"{where} holds no tokens (no text the tokenizer reads)")
    return ids


def _stamp(path: str) -> tuple:
    """What identifies a file's contents for the cache: its resolved path, size, mtime."""
    if not path:
        return ()
    files = corpus_files(path) if Path(path).suffix != ".json" else [data_path(path)]
    return tuple((str(f), *_size_time(f)) for f in files)


def _size_time(f: Path) -> tuple[int, int]:
    try:
        st = f.stat()
    except OSError:
        return (-1, -1)  # missing: the tokenizer's loader says so
    return (st.st_size, st.st_mtime_ns)


# the last corpora tokenized, by what identifies them (`tokenized`): validation's meta and
# compile's build of one graph share the work; two are kept (a graph and its variant)
_TOKENIZED: OrderedDict[tuple, tuple[Any, np.ndarray]] = OrderedDict()


def tokenized(p: TokenizedTextParams) -> tuple[Any, np.ndarray]:
    """The tokenizer and the corpus's ids, made once for a corpus, tokenizer and params
    (validation's meta and compile's build share them; a file changed on disk is read
    again)."""
    key = (p.path and _stamp(p.path), p.text if not p.path else "", p.tokenizer,
           p.tokenizer == "file" and _stamp(p.tokenizer_file), p.vocab_size,
           p.min_frequency, p.lowercase)
    if key in _TOKENIZED:
        _TOKENIZED.move_to_end(key)
        return _TOKENIZED[key]
    tok = tokenizer_of(p)
    ids = token_ids(tok, p)
    if ids.max() >= tok.get_vocab_size():
        source = f"tokenizer file '{p.tokenizer_file}'" if p.tokenizer == "file" else "tokenizer"
        raise NodegraphError(f"the {source} gave ids beyond its vocabulary for corpus "
                             f"'{p.path or '(text)'}'")
    _TOKENIZED[key] = tok, ids
    while len(_TOKENIZED) > 2:
        _TOKENIZED.popitem(last=False)
    return tok, ids


def _contexts(ids: np.ndarray, p: TokenizedTextParams) -> tuple[int, int]:
    """(stride, number of contexts) of the ids; refuses a corpus too short for one."""
    if len(ids) <= p.seq_len:
        corpus = f"corpus '{p.path}'" if p.path else "the corpus"  # the file, named
        raise NodegraphError(f"{corpus} has {len(ids)} tokens, too few for one context "
                             f"of {p.seq_len} plus its next token")
    stride = p.stride or p.seq_len
    return stride, -(-(len(ids) - p.seq_len) // stride)


def ports_of(p: TokenizedTextParams) -> dict:
    return {k: ((p.seq_len,), torch.int64) for k in ("x", "y")}


class TokenizedTextParams(Params):
    path: str
    text: str
    tokenizer: str
    tokenizer_file: str
    vocab_size: int
    min_frequency: int
    lowercase: bool
    seq_len: int
    stride: int | None
    storage: str
    batch_size: int
    shuffle: bool
    val_fraction: float
    test_fraction: float
    split: str
    split_seed: int
    folds: int
    fold: int
    dtype: str


def tokenized_meta(p: TokenizedTextParams):
    """Shapes and split sizes from the corpus's token count: the corpus is tokenized here,
    once, and the ids kept for the build (only tokenizing tells how many there are)."""
    _, ids = tokenized(p)
    stride, count = _contexts(ids, p)
    labels = ids[np.arange(count) * stride + 1] if p.split == "stratified" else None
    return mark(sized(ports_of(p), count, p, labels), p)


def tokenized_text(p: TokenizedTextParams):
    tok, ids = tokenized(p)
    stride, count = _contexts(ids, p)
    dataset: Dataset | StreamedDataset
    if in_memory(p, held_bytes(ports_of(p), count)):
        x, y = token_windows(ids, p.seq_len, stride)
        dataset = from_arrays({"x": x, "y": y}, p, normalize_ports=())
    else:  # contexts cut per sample: overlapping windows are not copied
        windows = TokenWindows(ids, p.seq_len, stride, count)
        labels = ids[np.arange(count) * stride + 1] if p.split == "stratified" else None
        dataset = streamed(subsets(windows, split_rows(count, p, labels)), ports_of(p), p)
    dataset.vocab = Subwords(tok)  # what procedures.Decode spells generated ids with
    return dataset


class TokenWindows(torch.utils.data.Dataset):
    """Context i of a token sequence: x = ids[s : s + L], y = ids[s + 1 : s + L + 1] with
    s = i * stride, as `token_windows` cuts them all at once."""

    def __init__(self, ids: np.ndarray, seq_len: int, stride: int, count: int):
        self.ids, self.seq_len, self.stride, self.count = ids, seq_len, stride, count

    def __len__(self) -> int:
        return self.count

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        s = int(i) * self.stride
        window = torch.from_numpy(self.ids[s:s + self.seq_len + 1].astype(np.int64))
        return {"x": window[:-1], "y": window[1:]}


class Subwords:
    """A tokenizer seen as a vocabulary, as procedures.Decode reads one: `vocab[id]` is the
    text of one token, `encode(text)` the ids of a prompt."""

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer

    def __len__(self) -> int:
        return self.tokenizer.get_vocab_size()

    def __bool__(self) -> bool:
        return True

    def __getitem__(self, token: int) -> str:
        return self.tokenizer.decode([int(token)])

    def encode(self, text: str) -> list[int]:
        ids = self.tokenizer.encode(text).ids
        if not ids:
            raise NodegraphError("the prompt is empty; give at least one token to start from")
        return ids


NO_NORMALIZE = [q for q in data_params(batch_size=32, val_fraction=0.1, split="chronological")
                if q.name != "normalize"]

BLOCKS = [
    data("data.TokenizedText", "Language-model data in subword tokens (BPE or WordPiece).\n\n"
         "A Hugging Face `tokenizers` tokenizer — byte-level BPE or WordPiece trained on the "
         "corpus with `vocab_size` tokens, or one loaded from a tokenizer.json — numbers the "
         "text; x holds seq_len token ids (int64), y the same window one token on. Feed x "
         "to layers.Embedding with num_embeddings >= vocab_size and train with "
         "cross-entropy against y; procedures.Decode writes text with the same tokenizer. "
         "The corpus is a text file, a folder of .txt files, `text`, or the bundled text.",
         tokenized_text, meta=tokenized_meta,
         outputs=[Port("x", doc="context token ids (N, seq_len), int64"),
                  Port("y", doc="the next token at every position (N, seq_len), int64")],
         params=[str_param("path", "", "a UTF-8 text file or a folder of .txt files; empty "
                           "uses `text`, or the bundled text"),
                 str_param("text", "", "the text to learn when no path is given"),
                 choice_param("tokenizer", KINDS, "bpe",
                              "bpe: byte-level BPE trained on the corpus; wordpiece: "
                              "WordPiece counted from it (its most frequent characters "
                              "and words); file: load tokenizer_file"),
                 str_param("tokenizer_file", "", "a tokenizer.json (tokenizer 'file')"),
                 int_param("vocab_size", 512, "tokens the trained tokenizer may have (it "
                           "stops earlier when the corpus has no more pairs to merge)",
                           min=2, max=1_000_000),
                 int_param("min_frequency", 2, "merge only pairs seen this often", min=1),
                 bool_param("lowercase", False, "lower-case the text first"),
                 int_param("seq_len", 32, "context length L in tokens", min=1),
                 int_param("stride", None, "tokens between the starts of two contexts; "
                           "empty means seq_len (no overlap)", min=1, nullable=True),
                 STORAGE_PARAM, *NO_NORMALIZE],
         keywords=("language model", "tokenizer", "bpe", "wordpiece", "subword", "tokens",
                   "text", "huggingface", "gpt")),
]
