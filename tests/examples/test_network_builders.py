"""The network examples' builders still write the graphs kept in their files, so a file
is never edited by hand and a change to a builder shows up as a change to its file."""

from __future__ import annotations

import pytest
from classic_support import assert_builder_writes_files


@pytest.mark.parametrize("builder", ["tlu", "mlp_212", "backprop_appendix", "conv_arithmetic",
                                     "cnn_digits", "deep_sigmoid"])
def test_builder_writes_its_files(builder):
    assert_builder_writes_files(builder)
