"""ufa_staircase.json and ufa_tlu_bins_<N>.json: universal approximation with hand-set
weights (seed 000 §4.1.3, seed 002 §6.1). The staircase outputs f on S exactly with the
digest's offset 0.5 — and the notes' 10⁻⁹ offset gives the digest's wrong values; the TLU
bins' error falls as the number of bins grows."""

from __future__ import annotations

import pytest
import torch
from classic_support import assert_builder_writes_files, builder, example, run, variant

import nodegraph
from nodegraph.runtime.probes import trace_batch

F = [3.0, -1.0, 2.0, 0.5, 4.0]


def outputs(graph) -> tuple[torch.Tensor, torch.Tensor]:
    compiled = nodegraph.compile(graph, device="cpu")
    table = compiled.datasets["data"].tensors("train")
    records = trace_batch(compiled, {("data", k): v for k, v in table.items()})
    out = {r.node: r.outputs for r in records}["out"]["output"][:, 0]
    return table["x"][:, 0], out


def test_the_staircase_outputs_f_on_s_exactly():
    g = example("ufa_staircase")
    assert g.node("steps").params["out_features"] == 2 * len(F)
    x, out = outputs(g)
    assert x.tolist() == [1, 2, 3, 4, 5]
    assert out.double().numpy() == pytest.approx(F, abs=1e-6)
    assert run("ufa_staircase").final["train"]["loss"] == pytest.approx(0.0, abs=1e-10)


def test_the_notes_offset_puts_every_point_on_a_step_midpoint():
    biases = builder("ufa").staircase_biases(len(F), offset=1e-9)
    _, out = outputs(variant("ufa_staircase", steps__bias_init=biases))
    assert out.double().numpy() == pytest.approx([1.5, 1.0, 0.5, 1.25, 2.25], abs=1e-6)


def test_the_tlu_bins_error_falls_as_the_bins_grow():
    errors = [run(f"ufa_tlu_bins_{n}").final["train"]["loss"] for n in (4, 16, 64)]
    assert errors[0] > errors[1] > errors[2]
    # a midpoint step function's squared error shrinks as 1/N²: ×16 per ×4 bins
    for coarse, fine in zip(errors, errors[1:], strict=False):
        assert 10 < coarse / fine < 25
    assert errors[2] < 1e-3


def test_the_tlu_network_is_the_seeds_bump_construction():
    g = example("ufa_tlu_bins_4")
    w = g.node("out").params["weight"][0]
    assert len(w) == 8 and all(w[2 * j] == -w[2 * j + 1] for j in range(4))
    assert g.node("edges").params["bias_init"] == [-0.0, -0.25, -0.25, -0.5, -0.5, -0.75,
                                                   -0.75, -1.0]


def test_the_files_are_what_the_builder_writes():
    assert_builder_writes_files("ufa")
