"""Imports that stay right at every input size (issue #26, item 1 and the transformers of
item 5): sizes read from the input stay expressions in the graph (`x.shape[2] // 2`,
`view(B, T, -1)`, `arange(T, device=x.device)`), so a module imported at one size gives the
module's numbers at others; where a size cannot be followed the import records the size
it is valid for and the graph refuses any other with a message, never a wrong number."""

from __future__ import annotations

import math

import pytest
import torch
import written_models as W
from torch import nn
from torch.nn import functional as F

from nodegraph.interop.fx_import import import_graph
from nodegraph.interop.fx_roundtrip import round_trip
from nodegraph.model.groups import flatten

ALL = ("validate", "python", "onnx", "train")


def ids(batch, length, vocab=40):
    return torch.randint(0, vocab, (batch, length))


# (id, class, example inputs, inputs of two other sizes)
CASES = [
    ("half_crop", W.HalfCrop, (torch.randn(2, 3, 16, 16),),
     [(torch.randn(2, 3, 32, 32),), (torch.randn(3, 3, 20, 12),)]),
    ("sequence_reshape", W.SequenceReshape, (torch.randn(2, 5, 8),),
     [(torch.randn(3, 9, 8),), (torch.randn(1, 2, 8),)]),
    ("manual_pool", W.Pooled, (torch.randn(2, 3, 10, 12),),
     [(torch.randn(2, 3, 17, 9),), (torch.randn(4, 3, 6, 6),)]),
    ("gpt", W.GPT, (ids(2, 10),), [(ids(2, 17),), (ids(3, 5),)]),
    ("bert_mask", W.Bert, (ids(2, 10), torch.ones(2, 10, dtype=torch.long)),
     [(ids(2, 13), (torch.arange(13) < 9).long().expand(2, 13)),
      (ids(3, 6), torch.ones(3, 6, dtype=torch.long))]),
    ("seq2seq_lstm_state", W.Seq2Seq, (ids(2, 7), ids(2, 6)),
     [(ids(2, 11), ids(2, 4)), (ids(4, 3), ids(4, 9))]),
]


@pytest.mark.parametrize("cls,inputs,others", [pytest.param(c, i, o, id=n)
                                               for n, c, i, o in CASES])
def test_imported_at_one_size_equals_the_module_at_two_others(cls, inputs, others, tmp_path):
    torch.manual_seed(0)
    result = round_trip(cls, inputs, tmp_path, others=others)
    assert not result.errors, result.errors
    assert result.shape_ok and result.trained
    assert result.compiled <= 1e-5 and result.python <= 1e-5 and result.onnx <= 1e-4
    assert result.resized is not None and result.resized <= 1e-5
    assert result.resized_onnx is not None and result.resized_onnx <= 1e-4  # ONNX follows
    assert not result.fixed_sizes


def test_gpt_positions_follow_the_graph_device_and_the_mask_is_a_stored_buffer(tmp_path):
    graph = flatten(import_graph(W.GPT, (ids(2, 10),), tmp_path / "gpt.json").graph).graph
    [arange] = [n for n in graph if n.params.get("function") == "torch:arange"]
    assert arange.params["kwargs"]["device"] == {"device": 0}  # the ids' device
    assert arange.params["args"][1] == {"size": [0, 1]}  # their length, not 10
    buffers = [n for n in graph if n.type == "opaque.Buffer"]
    assert buffers and all(n.params["shape"] == [1, 1, 64, 64] for n in buffers)
    text = (tmp_path / "gpt.json").read_text()
    assert len(text) < 200_000  # the 64x64 masks went to the weights, not the JSON


class Numel(nn.Module):
    """`x[0].numel()` follows dims 1 and 2; the graph has no expression for it."""

    def forward(self, x):
        return x.sum(dim=(1, 2)) / x[0].numel()


def test_a_size_the_graph_cannot_follow_is_recorded_and_other_sizes_are_refused(tmp_path):
    imported = import_graph(Numel, (torch.randn(2, 3, 8),), tmp_path / "n.json")
    assert imported.fixed_sizes == {"x": {"1": 3, "2": 8}}
    assert "numel" in imported.notes[0] and "test_import_sizes.py" in imported.notes[0]
    assert imported.graph.extra["imported"]["fixed_sizes"] == {"x": {"1": 3, "2": 8}}
    result = round_trip(Numel, (torch.randn(2, 3, 8),), tmp_path / "rt",
                        ways=ALL[:3], others=[(torch.randn(5, 3, 8),)])  # batch follows
    assert result.resized <= 1e-6 and not result.errors
    result = round_trip(Numel, (torch.randn(2, 3, 8),), tmp_path / "rt2",
                        ways=ALL[:3], others=[(torch.randn(2, 3, 16),)])
    assert result.errors["resized"].startswith("refused:")
    assert "imported at size 8 in dim 2" in result.errors["resized"]


def test_validation_refuses_a_fixed_size(tmp_path):
    import numpy as np

    import nodegraph

    imported = import_graph(Numel, (torch.randn(2, 3, 8),), tmp_path / "n.json")
    np.savez(tmp_path / "n.inputs.npz", x=np.zeros((2, 3, 16), "float32"),
             output=np.zeros((2, 3), "float32"))
    report = nodegraph.validate(imported.graph)
    assert not report.ok
    assert any("imported at size 8 in dim 2" in p.message for p in report.problems)


class SplitLast(nn.Module):
    def forward(self, x):
        parts = torch.split(x, 2, dim=1)
        return parts[-1] * 2 + parts[0]


def test_a_negative_index_after_split(tmp_path):
    result = round_trip(SplitLast, (torch.randn(2, 6),), tmp_path, ways=ALL[:3],
                        others=[(torch.randn(3, 6),)])
    assert not result.errors, result.errors
    assert result.compiled == 0.0 and result.resized == 0.0




def test_lstm_state_passes_between_modules_with_tied_copies(tmp_path):
    """`_, (h, c) = encoder(x)` then `decoder(y, (h, c))`: h and c are read from one
    module (two blocks, their weights tied, so training moves them together) and the
    decoder takes them as a tuple (its call_args)."""
    import nodegraph

    imported = import_graph(W.Seq2Seq, (ids(2, 7), ids(2, 6)), tmp_path / "s.json")
    graph = flatten(nodegraph.load(tmp_path / "s.json")).graph
    encoders = [n for n in graph if n.params.get("path") == "encoder" or
                str(n.params.get("target", "")).endswith("LSTM") and n.params.get("index") == 1]
    assert sorted(n.params.get("pick") for n in encoders) == [[0], [1]]
    assert {t.src_param for t in graph.ties} >= {"module.weight_ih_l0", "module.weight_hh_l0"}
    [decoder] = [n for n in graph if n.params.get("call_args")]
    assert decoder.params["call_args"] == [{"input": 0}, {"tuple": [{"input": 1},
                                                                    {"input": 2}]}]
    assert imported.max_difference == 0.0


def test_the_command_says_which_sizes_an_import_is_valid_for(tmp_path, capsys):
    from nodegraph.cli.main import main

    assert main(["import", "test_import_sizes:Numel", "-o", str(tmp_path / "n.json"),
                 "--input-shape", "2,3,8"]) == 0
    out = capsys.readouterr().out
    assert "valid only for input 'x' with dim 1 = 3, dim 2 = 8" in out
    assert "numel" in out and "test_import_sizes.py" in out


class ShapeTuple(nn.Module):
    """`x.reshape(shape)` with the shape built as a tuple first (maxvit's window
    partition): not a Reshape block to (N,), but the call with that shape."""

    def forward(self, x):
        return x.reshape(x.shape[:2] + (-1, 2)).sum(3)


def test_a_reshape_to_a_shape_built_first(tmp_path):
    result = round_trip(ShapeTuple, (torch.randn(2, 3, 4, 5),), tmp_path, ways=ALL[:3],
                        others=[(torch.randn(3, 2, 8, 7),)])  # (N, C, -1, 2) at both
    assert not result.errors, result.errors
    assert result.compiled == 0.0 and result.resized == 0.0


class WindowPad(nn.Module):
    """davit's window padding: `(7 - W % 7) % 7` is 0 at the example's 14 and at the
    probe's doubled 28, but 1 at 20, so only its expression gives the module's windows."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)

    def forward(self, x):
        x = self.conv(x)
        pad_r = (7 - x.shape[3] % 7) % 7
        pad_b = (7 - x.shape[2] % 7) % 7
        return F.avg_pool2d(F.pad(x, (0, pad_r, 0, pad_b)), 7)  # one value per window


def test_size_arithmetic_stays_an_expression_where_the_probe_agrees(tmp_path):
    result = round_trip(WindowPad, (torch.randn(2, 3, 14, 14),), tmp_path, ways=ALL,
                        others=[(torch.randn(2, 3, 20, 13),), (torch.randn(3, 3, 21, 8),)])
    assert not result.errors, result.errors
    assert result.compiled == 0.0 and result.resized <= 1e-6 and not result.fixed_sizes
    assert result.resized_onnx is not None and result.resized_onnx <= 1e-4


class NormAct(nn.BatchNorm2d):
    """timm's BatchNormAct2d: its activation comes as an argument a graph file cannot
    hold (a module here, a partial in timm) and has no weights, so a module rebuilt from
    the attributes (with the default ReLU) loads the same weights and computes something
    else."""

    def __init__(self, num_features, act=None):
        super().__init__(num_features)
        self.act = act if act is not None else nn.ReLU()

    def forward(self, x):
        return self.act(super().forward(x))


class ConvNormAct(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        self.norm = NormAct(4, act=nn.GELU())

    def forward(self, x):
        return self.norm(self.conv(x))


def test_an_opaque_module_is_rebuilt_with_its_own_submodules(tmp_path):
    result = round_trip(ConvNormAct, (torch.randn(2, 3, 8, 8),), tmp_path, ways=ALL[:2],
                        leaves=("norm",))
    assert not result.errors, result.errors
    assert result.compiled == 0.0 and result.python == 0.0
    graph = flatten(import_graph(ConvNormAct, (torch.randn(2, 3, 8, 8),),
                                 tmp_path / "c.json", leaves=("norm",)).graph).graph
    [norm] = [n for n in graph if n.type == "opaque.Module"]
    assert norm.params.get("path") == "norm"  # taken from the root, not NormAct(4) (ReLU)


class PythonSizes(nn.Module):
    """mobilevit's patches: a size made a Python int (`int(math.ceil(H / 2))`) is a
    constant of any trace, so the ONNX file written with every size dynamic fails at
    other sizes; the graph (the module as a block) follows them."""

    def forward(self, x):
        b, c, h, w = x.shape
        half = int(math.ceil(h / 2))
        return x.reshape(b, c, half, 2, w).mean(3)


class Patched(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.patches = PythonSizes()

    def forward(self, x):
        return self.patches(self.conv(x))


def test_an_onnx_file_that_cannot_follow_sizes_names_the_sizes_it_takes(tmp_path):
    import onnx

    result = round_trip(Patched, (torch.randn(2, 3, 8, 6),), tmp_path, ways=ALL[:3],
                        others=[(torch.randn(3, 3, 12, 10),)], leaves=("patches",))
    assert not result.errors, result.errors
    assert result.onnx <= 1e-4 and result.resized == 0.0  # the graph follows
    assert result.resized_onnx is None  # the file refuses 12 x 10 by its input shape
    [entry] = onnx.load(str(tmp_path / "model.onnx")).graph.input
    dims = [d.dim_value or d.dim_param for d in entry.type.tensor_type.shape.dim]
    assert dims[1:] == [3, 8, 6] and isinstance(dims[0], str)  # the batch stays free
