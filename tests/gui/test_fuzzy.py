"""Block search ranking: exact names first, then prefixes, then in-order letters."""

from __future__ import annotations

from nodegraph.gui.panels.fuzzy import rank


def test_search_ranks_what_the_user_means_first(registry):
    assert rank("mse", registry)[0].id == "losses.MSE"
    assert rank("lin", registry)[0].id == "layers.Linear"
    assert rank("bcel", registry)[0].id == "losses.BCEWithLogits"
    assert rank("adam", registry)[0].id == "optimizers.Adam"
    assert "data.XOR" in [s.id for s in rank("truth table", registry)]  # its keywords
    assert rank("zzzq", registry) == []
