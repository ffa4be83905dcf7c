"""The shipped U-Net (nodes/group_files/unet.json): a library block built of a group.

It is listed like any block, validates and infers its shapes in a graph, and is exactly
the hand-written PyTorch U-Net below: the same parameters (names, shapes, count) and, with
the same weights, the same outputs.
"""

from __future__ import annotations

import json
import math

import pytest
import torch
from torch import nn

import nodegraph
from nodegraph.cli.main import main
from nodegraph.model import fileformat
from nodegraph.model.graph import Graph
from nodegraph.model.groups import import_group
from nodegraph.runtime.procedure import ProcedureContext

C, EMBED, HIDDEN = 32, 32, 128  # channels, sinusoidal code size, time-MLP width


class TimeEmbedding(nn.Module):
    """[sin ω₀t, cos ω₀t, sin ω₁t, ...], ω_k = 10000^(−2k/d), then Linear–SiLU–Linear."""

    def __init__(self):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(EMBED, HIDDEN), nn.SiLU(), nn.Linear(HIDDEN, HIDDEN))

    def forward(self, t):
        omega = 10000.0 ** (-2.0 * torch.arange(EMBED // 2) / EMBED)
        angles = t.float()[:, None] * omega
        return self.mlp(torch.stack([angles.sin(), angles.cos()], -1).flatten(1))


class Block(nn.Module):
    """h = conv1(SiLU(IN(x))) + W·SiLU(emb); out = conv2(SiLU(IN(h))) + skip(x)."""

    def __init__(self, cin):
        super().__init__()
        self.norm1 = nn.InstanceNorm2d(cin, affine=True)
        self.conv1 = nn.Conv2d(cin, C, 3, padding=1)
        self.emb_proj = nn.Linear(HIDDEN, C)
        self.norm2 = nn.InstanceNorm2d(C, affine=True)
        self.conv2 = nn.Conv2d(C, C, 3, padding=1)
        self.skip = nn.Conv2d(cin, C, 1)

    def forward(self, x, emb):
        act = nn.functional.silu
        h = self.conv1(act(self.norm1(x))) + self.emb_proj(act(emb))[:, :, None, None]
        return self.conv2(act(self.norm2(h))) + self.skip(x)


class UNet(nn.Module):
    def __init__(self, in_channels=1):
        super().__init__()
        self.embed = TimeEmbedding()
        self.conv_in = nn.Conv2d(in_channels, C, 3, padding=1)
        self.down1, self.down2, self.mid = Block(C), Block(C), Block(C)
        self.downsample = nn.Conv2d(C, C, 3, stride=2, padding=1)
        self.up2, self.up1 = Block(2 * C), Block(2 * C)
        self.conv_out = nn.Conv2d(C, 1, 3, padding=1)

    def forward(self, x, t):
        emb = self.embed(t)
        d1 = self.down1(self.conv_in(x), emb)
        d2 = self.down2(self.downsample(d1), emb)
        u2 = self.up2(torch.cat([self.mid(d2, emb), d2], 1), emb)
        up = nn.functional.interpolate(u2, scale_factor=2.0, mode="nearest")
        u1 = self.up1(torch.cat([up, d1], 1), emb)
        return self.conv_out(nn.functional.silu(u1))


def unet_graph(size: int = 8) -> Graph:
    """Digits as images, noised, into one U-Net instance (no loss: a forward graph)."""
    g = Graph("unet")
    g.add("data.Digits", id="data", layout="image", size=size)
    g.add("samplers.DDPMNoise", id="noise", timesteps=50)
    g.add("group.UNet", id="unet")
    g.connect(("data", "x"), ("noise", "x0"))
    g.connect(("noise", "x_t"), ("unet", "x"))
    g.connect(("noise", "t"), ("unet", "t"))
    return g


def test_the_unet_is_a_block_of_the_library(capsys):
    registry = nodegraph.default_registry()
    spec = registry.get("group.UNet")
    assert spec.kind == "group" and spec.category == "groups"
    assert [p.name for p in spec.inputs] == ["x", "t"]
    assert [p.name for p in spec.outputs] == ["eps"]
    assert [p.name for p in spec.params] == ["share", "trainable"]
    assert "U-Net" in spec.summary
    assert main(["blocks", "--category", "groups"]) == 0
    listing = capsys.readouterr().out
    assert "group.UNet " in listing and "group.UNetBlock " in listing


@pytest.mark.parametrize("size", [8, 28])
def test_it_validates_and_infers_shapes_and_parameters(size):
    report = nodegraph.validate(unet_graph(size))
    assert report.ok, report.problems
    assert report.shape_text("unet", "eps") == f"(N, 1, {size}, {size})"
    assert report.param_counts["unet"] == sum(p.numel() for p in UNet().parameters())


def test_odd_sides_are_refused_on_the_instance():
    g = unet_graph()
    g.add("layers.Reshape", id="odd", shape=[1, 1, 64])
    g.disconnect(g.source_of("unet", "x"))
    g.connect(("noise", "x_t"), ("odd", "input"))
    g.connect(("odd", "output"), ("unet", "x"))
    problems = nodegraph.validate(g).problems
    assert problems and all(p.node == "unet" for p in problems)
    assert "inside, at 'skip1'" in problems[0].message


def reference_weights(module) -> dict[str, torch.Tensor]:
    """The graph's weights under the reference's names: `unet__down1__conv1.weight` is
    `down1.conv1.weight`."""
    return {k.removeprefix("unet__").replace("__", "."): v
            for k, v in module.block_state().items()}


def test_outputs_equal_the_torch_reference_with_the_same_weights():
    compiled = nodegraph.compile(unet_graph(), for_training=False, device="cpu")
    reference = UNet()
    reference.load_state_dict(reference_weights(compiled.module))  # strict: same names
    torch.manual_seed(1)
    x, t = torch.randn(5, 1, 8, 8), torch.tensor([0, 3, 17, 31, 49])
    ours = ProcedureContext(compiled).model("unet")(x=x, t=t)["eps"]  # the instance alone
    with torch.no_grad():
        assert torch.allclose(ours, reference(x, t), atol=1e-5)
    assert not math.isclose(ours.std().item(), 0.0)


def test_a_graph_names_the_shipped_group_without_copying_it():
    g = unet_graph()
    g.add("group.UNet", id="again", share="unet")
    text = fileformat.dumps(g)
    assert '"groups"' not in text
    loaded = fileformat.loads(text)
    assert loaded.load_problems == []
    report = nodegraph.validate(loaded)
    assert report.param_counts["unet"] > 0 and report.param_counts.get("again", 0) == 0


def test_importing_it_makes_an_editable_copy_of_the_graphs_own():
    g = unet_graph()
    import_group(g, "UNet")
    assert set(g.groups) == {"UNet", "UNetBlock"}  # the blocks inside come along
    g.groups["UNetBlock"].body.set_param("conv2", "out_channels", 16)
    g.groups["UNetBlock"].body.set_param("conv1", "out_channels", 16)
    g.groups["UNetBlock"].body.set_param("emb_proj", "out_features", 16)
    g.groups["UNetBlock"].body.set_param("skip", "out_channels", 16)
    g.groups["UNet"].body.set_param("conv_in", "out_channels", 16)
    g.groups["UNet"].body.set_param("downsample", "out_channels", 16)
    report = nodegraph.validate(fileformat.loads(fileformat.dumps(g)))
    assert report.ok, report.problems
    assert report.param_counts["unet"] < sum(p.numel() for p in UNet().parameters()) / 2
    shipped = nodegraph.default_registry().get("group.UNetBlock").build.definition
    assert shipped.body.node("conv2").params["out_channels"] == C  # the library's is intact


def test_a_broken_group_file_is_named_when_the_library_loads(tmp_path):
    from nodes import group as shipped_groups

    (tmp_path / "bad.json").write_text(json.dumps({
        "format": "nodegraph", "version": 1,
        "groups": {"Bad": {"doc": "Broken.", "nodes": {"x": {"type": "layers.Nope"}},
                           "edges": [], "inputs": {}, "outputs": {}}}}))
    with pytest.raises(ValueError, match=r"bad\.json: .*unknown block type 'layers\.Nope'"):
        shipped_groups.load(tmp_path, nodegraph.default_registry())
    (tmp_path / "bad.json").unlink()
    (tmp_path / "good.json").write_text((shipped_groups.FOLDER / "unet.json").read_text())
    specs = shipped_groups.load(tmp_path, nodegraph.default_registry())
    assert [s.id for s in specs] == ["group.UNetBlock", "group.UNet"]
    assert specs[1].doc == nodegraph.default_registry().get("group.UNet").doc
