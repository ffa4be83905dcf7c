"""ONNX export picks the opset a graph needs (issue #34 gap (b)): timm's `volo_d1_224`
folds its attention back with `F.fold` (`aten::col2im`), which ONNX holds from opset 18
only; the default 17 failed as `unexportable`. Left out, the opset is now the first that
holds every op; given and too old, the error names the op and the opset to ask for."""

from __future__ import annotations

import onnx
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from nodegraph.interop.export import to_onnx
from nodegraph.interop.importing import import_graph
from nodegraph.interop.importing.roundtrip import round_trip
from nodegraph.model.errors import NodegraphError


class FoldedAttention(nn.Module):
    """volo's outlook attention in small: unfold, weigh the patches, fold back."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Conv2d(3, 3, 1)

    def forward(self, x):
        patches = F.unfold(self.proj(x), kernel_size=2, stride=2)
        return F.fold(patches.softmax(dim=1), output_size=(8, 8), kernel_size=2, stride=2)


def test_the_opset_is_the_first_that_holds_col2im(tmp_path):
    torch.manual_seed(0)
    x = torch.randn(2, 3, 8, 8)
    imported = import_graph(FoldedAttention(), (x,), tmp_path / "g.json")
    outputs = [f"{n}.{p}" for n, p in imported.outputs]
    exported = to_onnx(imported.graph, tmp_path / "f.onnx", outputs=outputs,
                       weights=imported.weights)
    assert exported.opset == 18
    assert onnx.load(str(exported.path)).opset_import[0].version == 18
    assert exported.max_difference is not None and exported.max_difference < 1e-5
    with pytest.raises(NodegraphError, match=r"aten::col2im needs ONNX opset 18; export "
                       r"with --opset 18"):
        to_onnx(imported.graph, tmp_path / "g.onnx", outputs=outputs, opset=17)


def test_a_graph_without_such_an_op_stays_at_the_default(tmp_path):
    x = torch.randn(2, 3, 8, 8)
    imported = import_graph(nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU()), (x,),
                            tmp_path / "g.json")
    exported = to_onnx(imported.graph, tmp_path / "f.onnx",
                       outputs=[f"{n}.{p}" for n, p in imported.outputs])
    assert exported.opset == 17 == onnx.load(str(exported.path)).opset_import[0].version


def test_the_round_trip_of_a_folding_module_passes_onnx(tmp_path):
    torch.manual_seed(0)
    result = round_trip(FoldedAttention(), (torch.randn(2, 3, 8, 8),), tmp_path,
                        others=[(torch.randn(3, 3, 8, 8),)])
    assert not result.errors, result.errors
    assert result.onnx is not None and result.onnx < 1e-4


@pytest.mark.slow
def test_timm_volo_round_trips_through_onnx(tmp_path):
    """The model the gap was found on (about 3 minutes on a loaded machine): its ONNX file
    is written at opset 18 and agrees with the module."""
    from nodegraph.model.packages import load_torchvision

    load_torchvision()
    pytest.importorskip("timm")
    torch.manual_seed(0)
    result = round_trip("timm:volo_d1_224", (torch.randn(2, 3, 224, 224),), tmp_path,
                        {"num_classes": 10}, others=[(torch.randn(3, 3, 224, 224),)])
    assert not result.errors, result.errors
    assert result.onnx is not None and result.onnx < 1e-4
    assert onnx.load(str(tmp_path / "model.onnx")).opset_import[0].version == 18
