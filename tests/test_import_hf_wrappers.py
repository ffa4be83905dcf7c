"""The modules people write around Hugging Face and diffusers models, through the round trip.

Each wrapper of `hf_wrappers` (`self.m(ids).last_hidden_state`, a head on
`pooler_output`, BERT with its mask passed through, `UNet2DModel(...).sample`) is
imported as `nodegraph import` does (fx first, torch.export where fx cannot) and held to
itself as the raw models of `test_import_hf.py` are: validation, compiled graph, Python
export, ONNX, one training step and a second size.
"""

from __future__ import annotations

import os

import pytest
import torch
from hf_wrappers import BY_NAME
from test_import_hf import _check
from torch import nn

from nodegraph.interop.importing.roundtrip import round_trip

os.environ["HF_HUB_OFFLINE"] = "1"
FAST = ("wrap_gpt2_hidden",)
PASSING = ["wrap_gpt2_hidden", "wrap_gpt2_logits", "wrap_bert_mask_cls",
           "wrap_bert_pooled_head", "wrap_distilbert_cls", "wrap_vit_pooled", "wrap_vit_cls",
           "wrap_llama_hidden", "wrap_t5_encoder_mean", "wrap_clip_pooled",
           "wrap_whisper_encoder", "wrap_unet_sample"]


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
    from nodegraph.interop.importing import import_graph
    from nodegraph.model.groups import flatten

    torch.manual_seed(0)
    module = MadeInForward().eval()
    x = torch.randn(2, 4)
    imported = import_graph(module, (x,), tmp_path / "g.json", tracer="export")
    constants = [n for n in flatten(imported.graph).graph if n.type == "layers.Constant"]
    assert [c.params["value"] for c in constants] == [[1.0, 2.0, 3.0, 4.0]]
    result = round_trip(module, (x,), tmp_path / "rt", others=[(torch.randn(5, 4),)],
                        tracer="export")
    _check(result)
