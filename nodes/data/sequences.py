"""Sequence data: lag windows of a time series, a chaotic laser-like series, character text.

Three sources for recurrent and attention models, all offline:

- `data.LagWindows` cuts a 1-D series (a .npy or .csv file, or a built-in generator) into
  samples "the last `window` values -> the value `horizon` steps later". Splits are
  chronological by default, so a model is judged on the future of what it learnt from.
  Normalisation is fitted on the values the training windows cover and applied to the
  series, so inputs and targets share one scale.
- `data.ChaoticSeries` stands in for the Santa Fe laser data (an NH3 laser, well described
  by the Lorenz-Haken equations): the Lorenz system integrated with a fixed-step RK4 in
  numpy, observed as an intensity x² every few steps, then cut into lag windows.
- `data.TokenText` numbers the characters of a bundled text (or one given as a param) and
  yields context windows x (N, L) with their next characters y (N, L), for language models.
  The dataset carries its vocabulary (`dataset.vocab`, decode with `decode`).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
from numpy.lib.stride_tricks import sliding_window_view

from nodegraph.kinds import footprint
from nodegraph.kinds.datameta import DataMeta, sized, split_sizes, with_classes
from nodegraph.kinds.dataset import DataParams, Dataset, data_params, from_arrays, split_indices
from nodegraph.kinds.declare import data
from nodegraph.model.errors import NodegraphError
from nodegraph.model.spec import (
    Param,
    Params,
    Port,
    bool_param,
    choice_param,
    float_param,
    int_param,
    str_param,
)
from nodes.data import _files as files

# -- lag windows ----------------------------------------------------------------------------


def lag_windows(series: np.ndarray, window: int, horizon: int) -> tuple[np.ndarray, np.ndarray]:
    """x[i] = series[i : i + window], y[i] = series[i + window - 1 + horizon], as (n, window)
    and (n, 1); horizon 1 is the next value."""
    n = window_count(len(series), window, horizon)
    x = sliding_window_view(series, window)[:n]
    y = series[window - 1 + horizon:][:n, None]
    return x, y


def window_count(length: int, window: int, horizon: int) -> int:
    """How many lag windows a series of `length` values holds; refuses none."""
    n = length - window - horizon + 1
    if n < 1:
        raise NodegraphError(f"a series of {length} values holds no window of {window} "
                             f"plus a target {horizon} step(s) ahead; make the series longer "
                             "or the window shorter")
    return n


def need_windows(length: int, window: int) -> None:
    """Refuse, before cutting, windows that cannot fit: every window is a float32 row of
    `window` values (made, then copied into its split), beside a few copies of the series."""
    windows = max(length - window + 1, 0)
    nbytes = windows * (window + 1) * 12 + length * 64
    limit = footprint.limit_bytes()
    if limit is not None and length * (24 + 64) <= limit:  # window 1 would fit: blame it
        footprint.need(nbytes, "window", window, f"{windows:,} windows of {window:,} values")
    else:
        footprint.need(nbytes, "n", length, f"a series of {length:,} values")


def _scale(series: np.ndarray, covered: np.ndarray, how: str) -> np.ndarray:
    """`series` scaled with statistics of the `covered` values (the training windows')."""
    if how == "zscore":
        centre, spread = covered.mean(), covered.std()
    elif how == "minmax":
        centre, spread = covered.min(), covered.max() - covered.min()
    else:
        return series
    return (series - centre) / (spread if spread > 0 else 1.0)


def windows_dataset(series: np.ndarray, p: dict) -> Dataset:
    """The lag-window Dataset of `series` under the shared data params plus window, horizon
    and layout."""
    series = np.asarray(series, dtype=np.float64)
    need_windows(len(series), p["window"])
    x, y = lag_windows(series, p["window"], p["horizon"])
    idx = split_indices(len(x), p["val_fraction"], p["test_fraction"], p["split"],
                        p["split_seed"], None, p["folds"], p["fold"])
    train = idx["train"]
    # the series values the training windows read or predict: first input to last target
    covered = (series[train.min():train.max() + p["window"] + p["horizon"]] if len(train)
               else series)
    x, y = lag_windows(_scale(series, covered, p["normalize"]), p["window"], p["horizon"])
    x = x[:, :, None] if p["layout"] == "sequence" else x
    return from_arrays({"x": x.astype(np.float32), "y": y.astype(np.float32)},
                       {**p, "normalize": "none"}, given_splits=idx)


def windows_meta(length: int, p: dict) -> DataMeta:
    """What `windows_dataset` makes of a series of `length` values, from the length alone,
    refused as it refuses."""
    need_windows(length, p["window"])
    n = window_count(length, p["window"], p["horizon"])
    x = (p["window"], 1) if p["layout"] == "sequence" else (p["window"],)
    return DataMeta({"x": (x, torch.float32), "y": ((1,), torch.float32)},
                    split_sizes(n, p), p["batch_size"])


def read_series(path: str, column: str, header: bool) -> np.ndarray:
    """A 1-D series from a .npy file (1-D, or a column of a 2-D array) or a CSV column."""
    if Path(path).suffix.lower() == ".npy":
        a = files.read_npy(path, "series file")
        if a.ndim == 2:
            try:
                a = a[:, int(column)]
            except (ValueError, IndexError):
                raise NodegraphError(f"'{path}' holds a {a.shape} array; column must be an "
                                     f"index below {a.shape[1]}, got {column!r}") from None
        if a.ndim != 1 or a.dtype.kind not in "biuf":
            raise NodegraphError(f"'{path}' must hold a 1-D series of numbers (or a 2-D "
                                 f"array and a column), got {a.dtype} {a.shape}")
        return a.astype(np.float64)
    names, rows = files.read_csv(path, header, ",")
    i = files.column_index(names, column, path)
    return files.numeric_column(rows, i, names[i], path)


def series_length(path: str, column: str, header: bool) -> int | None:
    """The length of the series `read_series` gives, checked as it checks it: from an .npy
    file's header (None when the header does not read as a plain array: the build says
    why), or from a CSV column, read (its cells must be numbers)."""
    if Path(path).suffix.lower() != ".npy":
        return len(read_series(path, column, header))
    head = files.npy_header(path, "series file")
    if head is None or head[1].hasobject:
        return None
    shape, dtype = head
    if len(shape) == 2:
        try:
            i = int(column)
        except ValueError:
            i = None
        if i is None or not -shape[1] <= i < shape[1]:
            raise NodegraphError(f"'{path}' holds a {shape} array; column must be an "
                                 f"index below {shape[1]}, got {column!r}")
        shape = shape[:1]
    if len(shape) != 1 or dtype.kind not in "biuf":
        raise NodegraphError(f"'{path}' must hold a 1-D series of numbers (or a 2-D "
                             f"array and a column), got {dtype} {shape}")
    return shape[0]


# -- generated series ------------------------------------------------------------------------


def rk4(f: Callable[[np.ndarray], np.ndarray], state: np.ndarray, dt: float,
        steps: int) -> np.ndarray:
    """`steps` classical Runge-Kutta steps of ds/dt = f(s) from `state`; all states
    (steps + 1, dim), the start included."""
    out = np.empty((steps + 1, len(state)))
    out[0] = s = np.asarray(state, dtype=np.float64)
    for k in range(steps):
        k1 = f(s)
        k2 = f(s + 0.5 * dt * k1)
        k3 = f(s + 0.5 * dt * k2)
        k4 = f(s + dt * k3)
        s = s + dt / 6.0 * (k1 + 2 * k2 + 2 * k3 + k4)
        out[k + 1] = s
    return out


def lorenz(sigma: float = 10.0, rho: float = 28.0, beta: float = 8.0 / 3.0):
    """The Lorenz field (σ(y − x), x(ρ − z) − y, xy − βz)."""
    def f(s: np.ndarray) -> np.ndarray:
        x, y, z = s
        return np.array([sigma * (y - x), x * (rho - z) - y, x * y - beta * z])
    return f


MAX_RK4_STEPS = 100_000  # about 10 s of Python integration (the default n takes 11,000)
OBSERVABLES: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "x_squared": np.square, "abs_x": np.abs, "x": lambda v: v}


def need_steps(n: int, every: int, transient: int) -> int:
    """The RK4 steps `n` samples one every `every` after `transient` take; refuses more
    than MAX_RK4_STEPS (the integration is a Python loop, ~0.1 ms a step)."""
    steps = transient + (n - 1) * every
    if steps > MAX_RK4_STEPS:
        blame = max((("n", n - 1), ("every", every), ("transient", transient)),
                    key=lambda kv: kv[1])[0]
        raise footprint.TooLarge(blame, f"asks for {steps:,} integration steps (transient + "
                                 f"(n - 1) x every), more than the {MAX_RK4_STEPS:,} this "
                                 "generator takes", "lower n, every or transient")
    return steps


def chaotic_series(n: int, dt: float, every: int, observable: str, transient: int,
                   seed: int) -> np.ndarray:
    """n samples of an observable of the Lorenz system's x, one every `every` RK4 steps of
    size dt, after `transient` steps that let the start settle onto the attractor. The seed
    perturbs the start (1, 1, 1)."""
    steps = need_steps(n, every, transient)
    start = np.ones(3) + np.random.default_rng(seed).normal(0.0, 1.0, 3)
    with np.errstate(over="ignore", invalid="ignore"):  # a too large dt is reported below
        states = rk4(lorenz(), start, dt, steps)
    x = states[transient::every, 0]
    if not np.all(np.isfinite(x)):
        raise NodegraphError(f"the integration diverged with dt = {dt}; use a smaller dt")
    return OBSERVABLES[observable](x)


def sine_series(n: int, noise: float, seed: int) -> np.ndarray:
    """sin(2πt/25) + 0.5 sin(2πt/7) at t = 0..n-1, plus noise % of the clean signal's std."""
    t = np.arange(n)
    clean = np.sin(2 * np.pi * t / 25) + 0.5 * np.sin(2 * np.pi * t / 7)
    return clean + np.random.default_rng(seed).normal(0.0, noise / 100 * clean.std(), n)


def random_walk(n: int, noise: float, seed: int) -> np.ndarray:
    """Cumulative sum of standard normal steps: the best forecast is the last value."""
    return np.cumsum(np.random.default_rng(seed).normal(0.0, 1.0, n))


class LagWindowsParams(DataParams):
    path: str
    column: str
    header: bool
    series: str
    n: int
    noise: float
    seed: int
    window: int
    horizon: int
    layout: str


def _lag_windows(p: LagWindowsParams):
    if not p.path:  # a generated series: check its length before making it
        need_windows(p.n, p.window)
    if p.path:
        series = read_series(p.path, p.column, p.header)
    elif p.series == "lorenz":
        series = chaotic_series(p.n, 0.01, 5, "x_squared", 1000, p.seed)
    else:
        series = {"sine": sine_series, "random_walk": random_walk}[p.series](p.n, p.noise,
                                                                            p.seed)
    return windows_dataset(series, p)


def _lag_windows_meta(p: LagWindowsParams):
    """Shapes from the series' length: the file's (see `series_length`) or `n`; None where
    only reading the file tells."""
    if p.path:
        length = series_length(p.path, p.column, p.header)
        return None if length is None else windows_meta(length, p)
    need_windows(p.n, p.window)
    if p.series == "lorenz":
        need_steps(p.n, 5, 1000)
    return windows_meta(p.n, p)


class ChaoticSeriesParams(DataParams):
    n: int
    dt: float
    every: int
    observable: str
    transient: int
    seed: int
    window: int
    horizon: int
    layout: str


def _chaotic_meta(p: ChaoticSeriesParams):
    """Shapes from `n`. The one refusal not made here is a diverging integration, which
    only integrating shows; dt's range (<= 0.05, inside RK4's stability region for the
    Lorenz system) keeps it from happening."""
    need_steps(p.n, p.every, p.transient)
    return windows_meta(p.n, p)


def _chaotic(p: ChaoticSeriesParams):
    return windows_dataset(chaotic_series(p.n, p.dt, p.every, p.observable, p.transient,
                                          p.seed), p)


# -- character tokens ------------------------------------------------------------------------


def vocabulary(text: str) -> str:
    """The distinct characters of `text` in sorted order; token id = position."""
    return "".join(sorted(set(text)))


def encode(text: str, vocab: str) -> np.ndarray:
    lookup = {c: i for i, c in enumerate(vocab)}
    missing = sorted(set(text) - set(lookup))
    if missing:
        raise NodegraphError(f"characters {missing} are not in the vocabulary")
    return np.array([lookup[c] for c in text], dtype=np.int64)


def decode(ids, vocab: str) -> str:
    """The text of a sequence of token ids (a list, array or 1-D tensor)."""
    return "".join(vocab[int(i)] for i in ids)


def context_count(length: int, seq_len: int, stride: int) -> int:
    """How many contexts `token_windows` cuts from `length` tokens; refuses none, and more
    than memory holds."""
    windows = max(0, -(-(length - seq_len) // stride))
    # int64 contexts and targets, their index array, then the split copies
    footprint.need(windows * seq_len * 48, "stride" if stride < seq_len else "seq_len",
                   stride if stride < seq_len else seq_len,
                   f"{windows:,} contexts of {seq_len:,} tokens",
                   "raise 'stride' (overlapping contexts repeat the text) or lower 'seq_len'")
    if windows == 0:
        raise NodegraphError(f"the text has {length} characters, too few for one context "
                             f"of {seq_len} plus its next character")
    return windows


def token_windows(ids: np.ndarray, seq_len: int, stride: int) -> tuple[np.ndarray, np.ndarray]:
    """Contexts x[i] = ids[s : s + L] and targets y[i] = ids[s + 1 : s + L + 1] (each next
    token), for starts s = 0, stride, 2·stride, ..."""
    starts = np.arange(0, context_count(len(ids), seq_len, stride) * stride, stride)
    take = starts[:, None] + np.arange(seq_len)
    return ids[take], ids[take + 1]


def _text(p: TokenTextParams) -> str:
    text = p.text or BUNDLED_TEXT
    return text.lower() if p.lowercase else text


class TokenTextParams(Params):
    text: str
    lowercase: bool
    seq_len: int
    stride: int | None
    batch_size: int
    shuffle: bool
    val_fraction: float
    test_fraction: float
    split: str
    split_seed: int
    folds: int
    fold: int
    dtype: str


def _token_text_meta(p: TokenTextParams):
    """Shapes from the text's length (the text is a param, or bundled); a stratified split
    numbers the text for the class of each context's first target."""
    text, stride = _text(p), p.stride or p.seq_len
    n = context_count(len(text), p.seq_len, stride)
    labels = None
    if p.split == "stratified":
        labels = encode(text, vocabulary(text))[np.arange(n) * stride + 1]
    return with_classes(sized({k: ((p.seq_len,), torch.int64) for k in ("x", "y")}, n, p,
                              labels), y=len(vocabulary(text)))


def _token_text(p: TokenTextParams):
    text = _text(p)
    vocab = vocabulary(text)
    x, y = token_windows(encode(text, vocab), p.seq_len, p.stride or p.seq_len)
    dataset = from_arrays({"x": x, "y": y}, p, normalize_ports=())
    dataset.vocab = vocab  # for decoding generated ids; len(vocab) sizes Embedding and head
    return dataset


# -- declarations --------------------------------------------------------------------------

X_WINDOW = Port("x", doc="the last `window` values: (N, window), or (N, window, 1) with "
                "layout sequence")
Y_NEXT = Port("y", doc="the value `horizon` steps after the window (N, 1)")
SERIES_DATA = data_params(batch_size=32, val_fraction=0.2, split="chronological",
                          shuffle=True, normalize="zscore")


def window_params(window: int) -> list[Param]:
    return [int_param("window", window, "values per input window (the lag order)", min=1),
            int_param("horizon", 1, "how many steps after the window's last value the "
                      "target lies (1: the next value)", min=1),
            choice_param("layout", ("flat", "sequence"), "flat",
                         "flat: x is (N, window) for Linear layers; sequence: (N, window, 1) "
                         "for recurrent and attention blocks")]


SEED = int_param("seed", 0, "seed of the generator, fixed so runs compare", min=0)
NO_NORMALIZE = [q for q in data_params(batch_size=32, val_fraction=0.1,
                                       split="chronological") if q.name != "normalize"]

BLOCKS = [
    data("data.LagWindows",
         "A 1-D series cut into samples (last `window` values -> value `horizon` ahead).\n\n"
         "Time-series forecasting as supervised learning. The series comes from `path` "
         "(.npy, or a .csv column) or, with no path, from a generator: sine (two "
         "periods, plus noise), lorenz (ChaoticSeries' defaults) or random_walk (where "
         "the last value is the best forecast). Splits are chronological and "
         "normalisation uses the training windows' values only.",
         _lag_windows, meta=_lag_windows_meta, outputs=[X_WINDOW, Y_NEXT],
         params=[str_param("path", "", "a .npy file (1-D, or 2-D with `column`) or a "
                           ".csv file; empty uses the generator"),
                 str_param("column", "0", "the series' column: an index, or a CSV header "
                           "name"),
                 bool_param("header", True, "the CSV file's first row holds names"),
                 choice_param("series", ("sine", "lorenz", "random_walk"), "sine",
                              "the generator used when no path is given"),
                 int_param("n", 1000, "length of the generated series", min=2),
                 float_param("noise", 5.0, "noise of the sine generator, % of the clean "
                             "signal's std", min=0),
                 SEED, *window_params(10), *SERIES_DATA],
         keywords=("time series", "forecasting", "autoregressive", "sliding window", "lag")),
    data("data.ChaoticSeries",
         "A chaotic laser-like intensity series from the Lorenz system, as lag windows.\n\n"
         "A stand-in for the Santa Fe laser data (a far-infrared laser obeying the "
         "Lorenz-Haken equations): dx/dt = σ(y − x), dy/dt = x(ρ − z) − y, dz/dt = xy − "
         "βz with σ = 10, ρ = 28, β = 8/3, integrated by fixed-step RK4 and observed as "
         "x² (the intensity) every `every` steps. Short-term predictable, long-term not.",
         _chaotic, meta=_chaotic_meta, outputs=[X_WINDOW, Y_NEXT],
         params=[int_param("n", 2000, "samples of the series", min=2),
                 float_param("dt", 0.01, "RK4 step size (time units)", min=1e-5, max=0.05),
                 int_param("every", 5, "RK4 steps between two samples", min=1),
                 choice_param("observable", tuple(OBSERVABLES), "x_squared",
                              "what is recorded of x: x² (laser intensity), |x| or x"),
                 int_param("transient", 1000, "RK4 steps discarded at the start", min=0),
                 SEED, *window_params(16),
                 *data_params(batch_size=32, val_fraction=0.2, split="chronological",
                              normalize="minmax")],
         keywords=("lorenz", "santa fe", "laser", "chaos", "time series", "rk4")),
    data("data.TokenText",
         "Character-level language-model data: contexts and their next characters.\n\n"
         "Numbers the distinct characters of a bundled text (a few paragraphs written for "
         "this tool) or of `text`, in sorted order. x holds seq_len token ids (int64), y "
         "the same window shifted one character on: y[t] is the character after x[t]. "
         "Feed x to layers.Embedding (num_embeddings = the vocabulary size) and train "
         "with cross-entropy against y.",
         _token_text, meta=_token_text_meta,
         outputs=[Port("x", doc="context token ids (N, seq_len), int64"),
                  Port("y", doc="the next token at every position (N, seq_len), int64")],
         params=[str_param("text", "", "the text to learn; empty uses the bundled one"),
                 bool_param("lowercase", False, "lower-case the text first (a smaller "
                            "vocabulary)"),
                 int_param("seq_len", 32, "context length L", min=1),
                 int_param("stride", 4, "characters between the starts of two windows; "
                           "empty means seq_len (no overlap)", min=1, nullable=True),
                 *NO_NORMALIZE],
         keywords=("language model", "characters", "tokens", "text", "next token", "gpt")),
]


BUNDLED_TEXT = """\
The river begins as a thin line of water under the stones of a high meadow. Nobody sees it \
start. Snow melts, the ground drinks what it can, and what it cannot hold runs downhill in \
a hundred small threads that find each other by chance. By the time the threads reach the \
first village they are a stream, and the children of the village know it by name.

A stream does not plan its path. It follows the slope it is given, and where a rock stands \
in the way it goes around, and where the soil is soft it digs. Over many years these small \
choices add up to a valley. The valley looks designed, as if someone had drawn it with care, \
but it is only the record of water taking the easiest way down, one season after another.

Learning machines are built in a similar spirit. We do not tell them the answer. We give \
them a slope, a measure of how wrong they are, and let them move a little downhill at each \
step. The steps are small and blind. Each one sees only the ground right under it. Yet after \
thousands of steps the machine has carved out something that works, and we look at the \
result and wonder how it knew.

The old ferryman at the bend of the river has watched the water for forty years. He says \
the river is never the same twice, but it always rhymes. In spring it is loud and brown and \
in a hurry. In late summer it is slow and clear, and you can count the fish that hold still \
against the current. In winter it goes quiet under a skin of ice, and only the sound of it, \
low and steady, tells you it is still moving.

He reads the water the way other people read a page. A smooth patch means depth. A line of \
small waves means a rock just under the surface. Foam gathered in a corner means the current \
turns there. None of this was written down for him. He learnt it by watching, by guessing, \
by being wrong on a cold morning and remembering it for the rest of his life.

A sequence model learns in the same patient way. It reads one letter, then the next, and \
tries to say what comes after. At first its guesses are noise. It sees that a space often \
follows a word, that a capital letter often follows a full stop, that the letter q is \
nearly always followed by u. Later it learns whole words, then the shape of a sentence, and \
at last something like the rhythm of the text, the way a ferryman knows the rhythm of the \
river.

There is a limit to what can be predicted. The ferryman cannot say which leaf will pass \
under his boat at noon. He can say that the river will be higher after rain, that it will \
be slower in August, that the ice will come in December and leave in March. The near future \
is clear, the far future is only a pattern, and the details are left to chance.

Some systems are like this in a stronger sense. A small change at the start grows and grows \
until it decides everything. Weather is one of them, and the flicker of certain lasers is \
another. For such systems a model can learn the next step very well and still lose its way \
after a hundred steps, because every small error is carried forward and made larger.

At evening the wind drops and the river is calm. The ferryman ties up his boat, walks up the \
path to his house, and sits by the window with a cup of tea. The water goes on below him in \
the dark, finding its way around the same stones, carving the same valley a little deeper, \
saying nothing and forgetting nothing.
"""
