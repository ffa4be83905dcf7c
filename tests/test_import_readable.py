"""An import reads like the module (issue #26, item 4): the module hierarchy as nested
groups (a ResNet's stages collapsed, each block a group inside), functional ops named by
their module and operation (`layer1_0_add`), no no-op Identity nodes, and positions laid
out in bands so the file never opens as one long row."""

from __future__ import annotations

import importlib.util

import pytest
import torch
from torch import nn

import nodegraph
from nodegraph.interop.fx_import import import_graph
from nodegraph.model.groups import flatten

needs_torchvision = pytest.mark.skipif(importlib.util.find_spec("torchvision") is None,
                                       reason="torchvision is not installed")


@needs_torchvision
def test_a_resnet_opens_as_its_stages(tmp_path):
    torch.manual_seed(0)
    imported = import_graph("torchvision.models:resnet18", torch.randn(2, 3, 32, 32),
                            tmp_path / "r.json", {"num_classes": 10})
    graph = nodegraph.load(tmp_path / "r.json")
    top = {n.id: n.type for n in graph}
    assert {f"layer{i}": f"group.layer{i}" for i in range(1, 5)}.items() <= top.items()
    assert len(top) <= 12  # x, the stem, four stages, the head
    assert list(graph.groups["layer1"].body.nodes) == ["layer1_0", "layer1_1"]
    assert "layer1_0_add" in graph.groups["layer1_0"].body.nodes  # named by its scope
    assert nodegraph.validate(graph).ok
    assert imported.max_difference <= 1e-5
    # each level is laid out: every node has a position, and a wide level wraps
    assert set(graph.ui["positions"]) == set(graph.nodes)
    for defn in graph.groups.values():
        assert set(defn.ui["positions"]) == set(defn.body.nodes)


class WithIdentity(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.norm = nn.Identity()
        self.head = nn.Linear(4, 2)

    def forward(self, x):
        return self.head(self.norm(torch.relu(self.fc(x))))


def test_identity_modules_leave_no_node(tmp_path):
    imported = import_graph(WithIdentity, torch.randn(3, 4), tmp_path / "i.json")
    types = [n.type for n in flatten(imported.graph).graph]
    assert "layers.Identity" not in types and "norm" not in imported.graph.nodes
    assert imported.max_difference == 0.0


class Deep(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(4, 4) for _ in range(40)])

    def forward(self, x):
        for layer in self.layers:
            x = torch.tanh(layer(x)) + x
        return x


def test_a_deep_chain_is_laid_out_in_bands_not_one_row(tmp_path):
    graph = import_graph(Deep, torch.randn(2, 4), tmp_path / "d.json", groups=False).graph
    xs = [xy[0] for xy in graph.ui["positions"].values()]
    ys = [xy[1] for xy in graph.ui["positions"].values()]
    width, height = max(xs) - min(xs), max(ys) - min(ys)
    assert height > 0 and width / height < 6  # 120 nodes deep, yet near a screen's shape
