"""Cases `benchmarks/fuzz.py --surface ... --seed 7101` found (issue #33, round three), each
replayed from its seed: a truncated image in a folder held in memory (IndexError in
`Dataset`: the split was counted before the unreadable sample was skipped), a CSV line
the csv module cannot split, a damaged Parquet page in a table folder, a tokenizer.json
whose token id overflows int32, a corpus of no tokens, MNIST test and training images of
different sizes. Each must now read whole or be refused by a `NodegraphError` that names
a file of the sample (what the fuzzer counts as a refusal, not a crash).
"""

from __future__ import annotations

import pytest

from benchmarks import fuzz, fuzz_files

FOUND = [("images", 112, "read"), ("table", 36, "refused"), ("table", 255, "refused"),
         ("tokenizer", 101, "refused"), ("tokenizer", 164, "refused"),
         ("idx", 60, "refused")]


@pytest.fixture(scope="module")
def samples(tmp_path_factory):
    return fuzz_files.make_samples(tmp_path_factory.mktemp("samples"),
                                   sorted({s for s, _, _ in FOUND}))


@pytest.mark.parametrize("surface, case, outcome", FOUND,
                         ids=[f"{s}-{c}" for s, c, _ in FOUND])
def test_a_case_the_fuzzer_found_is_read_or_refused_by_name(samples, tmp_path, surface,
                                                            case, outcome):
    got, detail = fuzz.run_file_case(samples, tmp_path, surface, 7101, case)
    assert got == outcome, detail
