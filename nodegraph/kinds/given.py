"""Datasets handed in from Python, in place of what data blocks would read.

`nodegraph.fit(g, x=X, y=Y)` builds a `Dataset` from the caller's arrays with the data
block's own params (splits, scaling, batch size: `nodegraph.interop.arrays`) and runs
validation and the compile inside `given({node: dataset})`: the block's meta and build
are not called for that node (`nodegraph.check.validate`), so the graph file is unchanged
and still runs from the CLI on its own data.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar

from nodegraph.kinds.dataset import Dataset

# whether a block with no data of its own (data.Arrays) builds a placeholder of its
# declared shapes: a saved model loads to predict without the arrays it was fitted on
_placeholders: ContextVar[bool] = ContextVar("nodegraph_data_placeholders", default=False)
_given: ContextVar[Mapping[str, Dataset] | None] = ContextVar("nodegraph_given_datasets",
                                                              default=None)


@contextmanager
def given(datasets: Mapping[str, Dataset]) -> Iterator[None]:
    """Within this block, data node id -> the dataset it holds instead of its own."""
    token = _given.set({**(_given.get() or {}), **datasets})
    try:
        yield
    finally:
        _given.reset(token)


def dataset_for(node: str) -> Dataset | None:
    """The dataset handed in for data node `node`, or None: the block reads its own."""
    return (_given.get() or {}).get(node)


@contextmanager
def placeholders() -> Iterator[None]:
    """Within this block, data.Arrays builds a placeholder (two samples of zeros) when no
    arrays are handed in: `load_model` of a model fitted on arrays."""
    token = _placeholders.set(True)
    try:
        yield
    finally:
        _placeholders.reset(token)


def placeholders_wanted() -> bool:
    return _placeholders.get()
