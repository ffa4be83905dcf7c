"""The modules people write around Hugging Face and diffusers models, through the round trip.

Each wrapper of `hf_wrappers` (`self.m(ids).last_hidden_state`, a head on
`pooler_output`, BERT with its mask passed through, `UNet2DModel(...).sample`) is
imported as `nodegraph import` does (fx first, torch.export where fx cannot) and held to
itself as the raw models of `test_import_hf.py` are: validation, compiled graph, Python
export, ONNX, one training step and a second size.
"""

from __future__ import annotations

import os
import textwrap

import pytest
import torch
from hf_wrappers import BY_NAME
from test_import_hf import _check
from torch import nn

from nodegraph.interop.importing import import_graph
from nodegraph.interop.importing.roundtrip import round_trip
from nodegraph.model.errors import NodegraphError
from nodegraph.model.groups import flatten

os.environ["HF_HUB_OFFLINE"] = "1"
FAST = ("wrap_gpt2_hidden",)
PASSING = ["wrap_gpt2_hidden", "wrap_gpt2_logits", "wrap_bert_mask_cls",
           "wrap_bert_pooled_head", "wrap_distilbert_cls", "wrap_vit_pooled", "wrap_vit_cls",
           "wrap_llama_hidden", "wrap_t5_encoder_mean", "wrap_clip_pooled",
           "wrap_whisper_encoder", "wrap_unet_sample", "wrap_frozen_bert_mean",
           "wrap_roberta_tuple", "wrap_bert_last_layers", "wrap_gpt2_classify",
           "wrap_convnext_pooled", "wrap_clip_image_embeds", "wrap_bert_masked_two",
           "wrap_mistral_next_token"]


def _round_trip(name: str, folder):
    case = BY_NAME[name]
    torch.manual_seed(0)
    module = case.build().eval()
    (batch, size), (batch2, size2) = case.sizes
    return module, round_trip(module, case.inputs(batch, size), folder,
                              others=[case.inputs(batch2, size2)])


@pytest.mark.parametrize("name", [pytest.param(n, id=n, marks=[] if n in FAST else
                                               [pytest.mark.slow]) for n in PASSING])
def test_wrappers_round_trip(name, tmp_path):
    _, result = _round_trip(name, tmp_path)
    _check(result)


def test_gpt2_model_wrapper_leaves_the_cache_setting_as_it_was(tmp_path):
    """GPT2Model builds a generation cache when its config says so (empty tensors made in
    forward, which export lifted as constants of no module: "'GPT2Attention' object has no
    attribute 'lifted_tensor_0'"); the wrapper cannot turn it off, so the import does while
    it exports, and gives the config back as it was."""
    module, result = _round_trip("wrap_gpt2_hidden", tmp_path)
    _check(result)
    assert module.m.config.use_cache is True


class MadeInForward(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(4, 4)

    def forward(self, x):
        scale = torch.tensor([1.0, 2.0, 3.0, 4.0])  # a tensor forward makes: lifted
        return self.proj(x) * scale


def test_a_tensor_made_in_forward_is_a_constant_of_the_exported_graph(tmp_path):
    torch.manual_seed(0)
    module = MadeInForward().eval()
    x = torch.randn(2, 4)
    imported = import_graph(module, (x,), tmp_path / "g.json", tracer="export")
    constants = [n for n in flatten(imported.graph).graph if n.type == "layers.Constant"]
    assert [c.params["value"] for c in constants] == [[1.0, 2.0, 3.0, 4.0]]
    result = round_trip(module, (x,), tmp_path / "rt", others=[(torch.randn(5, 4),)],
                        tracer="export")
    _check(result)


class FrozenFirst(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.backbone = nn.Linear(4, 4)
        self.head = nn.Linear(4, 2)

    def forward(self, x):
        with torch.no_grad():  # a frozen backbone
            h = self.backbone(x).relu()
        return self.head(h)


def test_a_no_grad_region_stays_frozen_in_the_graph(tmp_path):
    """export wraps the region in `wrap_with_set_grad_enabled` (was: 'a GraphModule
    argument cannot be written to a graph file'); its output passes a StopGradient, so
    one step trains the head and leaves the backbone, as the module does."""
    from nodegraph.interop.export.weights import load_weights
    from nodegraph.runtime.compile import compile_graph

    torch.manual_seed(0)
    module = FrozenFirst().eval()
    x = torch.randn(3, 4)
    imported = import_graph(module, (x,), tmp_path / "g.json", tracer="export")
    types = [n.type for n in flatten(imported.graph).graph]
    assert types.count("layers.StopGradient") == 1 and types.count("layers.Linear") == 2
    compiled = compile_graph(imported.graph, device="cpu", for_training=False)
    load_weights(compiled, imported.weights)
    got = compiled.module.run(compiled.module.full_plan, {(imported.placeholders[0], "x"): x})
    got[imported.outputs[0]].sum().backward()
    grads = {tuple(p.shape): p.grad for p in compiled.module.parameters()}
    assert grads[(4, 4)] is None and grads[(2, 4)] is not None
    module(x).sum().backward()  # the module: the same two gradients
    assert module.backbone.weight.grad is None
    assert torch.allclose(grads[(2, 4)], module.head.weight.grad, atol=1e-6)
    _check(round_trip(FrozenFirst().eval(), (x,), tmp_path / "rt",
                      others=[(torch.randn(5, 4),)], tracer="export"))


class ChannelsFirstNorm(nn.LayerNorm):
    """A LayerNorm with a forward of its own (transformers' ConvNextLayerNorm)."""

    def forward(self, x):
        return super().forward(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)


class ConvThenNorm(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.norm = ChannelsFirstNorm(8)

    def forward(self, x):
        return self.norm(self.conv(x))


def test_a_subclassed_layer_with_its_own_forward_is_not_taken_for_the_layer(tmp_path):
    """The norm op inside `ChannelsFirstNorm.forward` is a layer norm of the permuted
    tensor; called as the module again it was permuted twice ('Given normalized_shape=[16],
    expected input with shape [*, 16]')."""
    torch.manual_seed(0)
    _check(round_trip(ConvThenNorm().eval(), (torch.randn(2, 3, 6, 6),), tmp_path,
                      others=[(torch.randn(3, 3, 10, 8),)], tracer="export"))


@pytest.mark.parametrize("source, line", [
    ("import torch\nWIDTH = int('four')\n", "m.py:2 (`WIDTH = int('four')`)"),
    ("import torch\ndef f(:\n    pass\n", "m.py:2"),
    ("""
     from torch import nn

     class Net(nn.Module):
         def __init__(self):
             super().__init__()
             self.a = nn.Linear(4, 4)
             assert self.a.out_features == 5, "wrong width"
     """, "m.py:8 (`assert self.a.out_features == 5"),
], ids=["import", "syntax", "constructor"])
def test_a_user_module_failing_to_import_or_build_names_its_line(source, line, tmp_path):
    """Was 'internal error: AssertionError ... please report it' on the command line."""
    (tmp_path / "m.py").write_text(textwrap.dedent(source))
    with pytest.raises(NodegraphError) as error:
        import_graph(f"{tmp_path / 'm.py'}:Net", (torch.randn(2, 4),), tmp_path / "g.json")
    text = str(error.value)
    assert line in text and "neither tracer" not in text, text


class Normalised(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(4, 3)

    def forward(self, x):
        return nn.functional.normalize(self.proj(x), dim=-1)


def test_f_normalize_exports_as_a_norm(tmp_path):
    """export writes F.normalize's norm as aten.linalg_vector_norm (was: 'no torch
    function or Tensor method of that name')."""
    torch.manual_seed(0)
    _check(round_trip(Normalised().eval(), (torch.randn(2, 4),), tmp_path,
                      others=[(torch.randn(5, 4),)], tracer="export"))


class Embed(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.word = nn.Embedding(16, 8)
        self.norm = nn.LayerNorm(8)

    def forward(self, ids):
        return self.norm(self.word(ids))


class Body(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = Embed()
        self.proj = nn.Linear(8, 8)

    def forward(self, ids):
        return self.proj(self.embed(ids)).relu()


class TiedDeep(nn.Module):
    """An LM head tied to an embedding two groups down (BERT's masked-LM decoder)."""

    def __init__(self) -> None:
        super().__init__()
        self.body = Body()
        self.head = nn.Linear(8, 16, bias=False)
        self.head.weight = self.body.embed.word.weight

    def forward(self, ids):
        return self.head(self.body(ids)).log_softmax(-1)


@pytest.mark.parametrize("tracer", ["fx", "export"])
def test_a_tie_into_nested_groups_names_the_node_where_it_is(tracer, tmp_path):
    """The tie was rewritten for the first group only ('a tie names node
    body_embed__body_embed_word, which does not exist')."""
    from nodegraph.check.validate import validate

    torch.manual_seed(0)
    ids = torch.randint(0, 16, (2, 5))
    imported = import_graph(TiedDeep().eval(), (ids,), tmp_path / "g.json", tracer=tracer)
    assert validate(imported.graph).ok
    assert len(imported.graph.ties) == 1
    tie = imported.graph.ties[0]
    flat = flatten(imported.graph).graph
    assert {flat.nodes[tie.src].type, flat.nodes[tie.dst].type} == {"layers.Embedding",
                                                                    "layers.Linear"}
    _check(round_trip(TiedDeep().eval(), (ids,), tmp_path / "rt",
                      others=[(torch.randint(0, 16, (3, 7)),)], tracer=tracer))
