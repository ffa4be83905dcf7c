"""Cases `benchmarks/fuzz.py --surface ... --seed 7101` found (issue #33, round three), each
replayed from its seed: a truncated image in a folder held in memory (IndexError in
`Dataset`: the split was counted before the unreadable sample was skipped), a CSV line
the csv module cannot split, a damaged Parquet page in a table folder, a tokenizer.json
whose token id overflows int32, a corpus of no tokens, MNIST test and training images of
different sizes. Each must now read whole or be refused by a `NodegraphError` that names
a file of the sample (what the fuzzer counts as a refusal, not a crash).

Seed 9409 (2,000 cases a surface on 16 cores, then replayed here): an image folder whose
validation split had no readable image (IndexError in `tensors`), a CSV header that is not
UTF-8 (pyarrow's UnicodeDecodeError, no file named), a WebDataset class label past 64 bits
(torch's "Overflow when unpacking long long"). Replayed on 2 cores: a column of the wrong
type in a table folder ('.') refused without naming its file (table 897); a tokenizer case
whose second mutation re-made a FIFO the first had left (466: the fuzzer's `remove` opened
the FIFO and blocked, counted as a hang); a `.ngz` whose member list names zip version
17.8 (zipfile's NotImplementedError, ngz 378) and one whose graph.json has a seed of the
wrong type (refused without naming the `.ngz`, ngz 352).

Seed 7733 (jobs 1, replayed alone): a Parquet file with one byte set in a text column's
page (pyarrow's UnicodeDecodeError, no file named: table 615), and a corpus of odd bytes
too short for one context (refused without naming the corpus: tokenizer 325). Seed 8844:
a gzipped IDX header of 255 dimensions (numpy's "maximum supported dimension", no file
named: idx 376), and a WebDataset class label of 10**20 read into memory (OverflowError in
`astype`: the streamed path checked it, the in-memory one did not: webdataset 363).
"""

from __future__ import annotations

import pytest

from benchmarks import fuzz, fuzz_files

FOUND = [("images", 7101, 112, "read"), ("table", 7101, 36, "refused"),
         ("table", 7101, 255, "refused"), ("tokenizer", 7101, 101, "refused"),
         ("tokenizer", 7101, 164, "refused"), ("idx", 7101, 60, "refused"),
         ("images", 9409, 126, "refused"), ("table", 9409, 47, "refused"),
         ("webdataset", 9409, 121, "refused"), ("table", 9409, 897, "refused"),
         ("tokenizer", 9409, 466, "refused"), ("ngz", 9409, 378, "refused"),
         ("ngz", 9409, 352, "refused"), ("table", 7733, 615, "refused"),
         ("tokenizer", 7733, 325, "refused"), ("idx", 8844, 376, "refused"),
         ("webdataset", 8844, 363, "refused")]


@pytest.fixture(scope="module")
def samples(tmp_path_factory):
    return fuzz_files.make_samples(tmp_path_factory.mktemp("samples"),
                                   sorted({s for s, _, _, _ in FOUND} | {"hf", "cifar"}))


@pytest.mark.parametrize("surface, seed, case, outcome", FOUND,
                         ids=[f"{s}-{seed}-{c}" for s, seed, c, _ in FOUND])
def test_a_case_the_fuzzer_found_is_read_or_refused_by_name(samples, tmp_path, surface, seed,
                                                            case, outcome):
    got, detail = fuzz.run_file_case(samples, tmp_path, surface, seed, case)
    assert got == outcome, detail


def test_the_fuzzers_remove_unlinks_a_fifo_without_opening_it(tmp_path):
    """`rmtree` opens its top path: on a FIFO that blocked for ever (tokenizer 9409 466)."""
    import os
    import threading

    fifo = tmp_path / "zz-extra.txt"
    os.mkfifo(fifo)
    done = threading.Thread(target=fuzz_files.remove, args=(fifo,), daemon=True)
    done.start()
    done.join(timeout=60)
    if done.is_alive():  # blocked opening it: give it a writer, so the thread ends
        os.close(os.open(fifo, os.O_RDWR | os.O_NONBLOCK))
    assert not done.is_alive() and not os.path.lexists(fifo)


def test_a_json_mutation_with_nothing_to_act_on_does_not_kill_the_fuzzers_worker():
    """ngz seed 9409: a member an earlier mutation left `{}` made `drop_key` raise
    IndexError in the worker, which died and was counted an ngz crash."""
    import random

    for i in range(40):
        text, what = fuzz_files.json_member("{}", random.Random(i))
        assert isinstance(text, str) and what


@pytest.mark.parametrize("dims", [(65536,) * 4, (0, 65536, 65536, 65536, 65536)],
                         ids=["product-wraps-to-0", "a-0-among-huge-sizes"])
@pytest.mark.parametrize("storage", ["auto", "stream"])
def test_an_idx_header_whose_sizes_overflow_is_refused_by_name(samples, tmp_path, dims,
                                                               storage):
    """idx seed 6021 case 365 (labels' header byte 3 = 12 dims, then appended bytes as the
    sizes): "cannot fit 'int' into an index-sized integer". The check that the file holds
    its header's values multiplied the sizes with np.prod, which wraps past 2**63: four
    sizes of 65,536 promised 0 values, and reading them asked for a 2**64-byte buffer. With
    a 0 among huge sizes no value is promised, and numpy refused the shape without naming
    the file. (The case's appended bytes came from os.urandom: not replayable by seed,
    now drawn from the case's seed; this is the file it made, written directly.)"""
    import struct

    case, _ = fuzz_files.prepare(samples, tmp_path, "idx", 0, 0, damage=False)
    case.params["storage"] = storage
    labels = case.folder / case.params["labels"]
    labels.write_bytes(bytes([0, 0, 8, len(dims)]) + b"".join(struct.pack(">I", d)
                                                             for d in dims))
    errors = fuzz_files.open_case(case, "idx")
    assert errors and all(fuzz_files.names_a_file(m, case) for _, m in errors), errors
    assert case.params["labels"] in errors[0][1]


def test_an_hf_case_whose_state_json_an_earlier_mutation_broke_is_still_made(samples,
                                                                             tmp_path):
    """hf seed 9917: a case's first mutation left state.json invalid JSON and its second
    parsed it to point a data file outside: JSONDecodeError in the fuzzer's own worker,
    which died and was counted an hf crash ("worker died")."""
    import random

    case, _ = fuzz_files.prepare(samples, tmp_path, "hf", 0, 0, damage=False)
    for state in case.files("state.json"):
        state.write_text('{"_data_files": [{"filename": "unterminated')
    made = 0
    for i in range(60):  # the draws that reach the state.json mutation, whatever they are
        done = fuzz_files._hf(case, random.Random(i))
        made += any("already damaged" in d for d in done)
    assert made


def test_an_idx_case_whose_gzip_an_earlier_mutation_broke_is_still_made(samples, tmp_path):
    """idx seed 4242: a case's first mutation damaged a gzipped IDX file and its second
    unpacked it to set a header field: zlib.error in the fuzzer's own worker, which died
    and was counted an idx crash ("worker died")."""
    import random

    case, _ = fuzz_files.prepare(samples, tmp_path, "idx", 0, 0, damage=False)
    case.params.update(images="t10k-images-idx3-ubyte.gz", labels="t10k-labels-idx1-ubyte.gz")
    made = 0
    for i in range(60):  # the draws that reach the header mutation of a gzip
        for name in ("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"):
            fuzz_files.remove(case.folder / name)  # (what the last draw made of it: a FIFO)
            (case.folder / name).write_bytes(b"\x1f\x8b\x08\x00" + b"\x00" * 6 + b"\xff" * 40)
        done = fuzz_files._idx_case(case, random.Random(i))
        made += any("already damaged" in d for d in done)
        if made:  # the draw that crashed the old worker: the later ones only repeat it
            break
    assert made


def test_a_cifar_case_that_adds_a_file_where_a_fifo_was_added_does_not_block(samples,
                                                                              tmp_path):
    """cifar seed 4242: a case's first draw added a FIFO beside the batches and its second
    wrote the same name: the write blocked for ever in the fuzzer's own worker (a cifar
    "hang"), and again in the report that made the case once more to describe it."""
    import os
    import random
    import threading

    case, _ = fuzz_files.prepare(samples, tmp_path, "cifar", 0, 0, damage=False)
    folder = case.folder / "cifar-10-batches-bin"

    def draws() -> None:
        for i in range(40):
            for name in ("data_batch_6.bin", "train.bin", "test.bin", "zz.bin"):
                fuzz_files.remove(folder / name)
                os.mkfifo(folder / name)
            fuzz_files._cifar(case, random.Random(i))

    done = threading.Thread(target=draws, daemon=True)
    done.start()
    done.join(timeout=120)
    stuck = done.is_alive()
    while done.is_alive():  # give every FIFO a reader and writer, so the thread ends
        for name in os.listdir(folder):
            try:
                os.close(os.open(folder / name, os.O_RDWR | os.O_NONBLOCK))
            except OSError:
                pass
        done.join(timeout=1)
    assert not stuck
