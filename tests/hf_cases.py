"""Small random-config Hugging Face and diffusers models, as a new user would import them.

Shared by `tests/test_import_hf.py`; each case builds its model (no download) and gives
example inputs at two sizes. The configs are tiny: a test imports each in seconds.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")


@dataclass
class Case:
    name: str
    build: Callable[[], torch.nn.Module]
    inputs: Callable[[int, int], tuple]  # (batch, length or image size) -> example inputs
    sizes: tuple[tuple[int, int], tuple[int, int]] = ((2, 8), (3, 5))


def _ids(batch: int, length: int, vocab: int = 128) -> torch.Tensor:
    return torch.randint(2, vocab, (batch, length), generator=torch.Generator().manual_seed(
        batch * 100 + length))


def _mask(batch: int, length: int) -> torch.Tensor:
    mask = torch.ones(batch, length, dtype=torch.long)
    mask[0, length - 2:] = 0  # the first row padded at its end
    return mask


def _image(batch: int, size: int, channels: int = 3) -> torch.Tensor:
    return torch.randn(batch, channels, size, size,
                       generator=torch.Generator().manual_seed(batch * 100 + size))


def _transformers() -> Any:
    from nodegraph.model.packages import load_torchvision

    load_torchvision()  # transformers imports torchvision; beside a CPU torch it needs this
    import transformers

    return transformers


def gpt2() -> torch.nn.Module:
    t = _transformers()
    return t.GPT2LMHeadModel(t.GPT2Config(n_layer=2, n_embd=64, n_head=2, vocab_size=128,
                                          n_positions=64))


def bert() -> torch.nn.Module:
    t = _transformers()
    return t.BertForSequenceClassification(t.BertConfig(
        vocab_size=128, hidden_size=64, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=128, max_position_embeddings=64, num_labels=3))


def llama() -> torch.nn.Module:
    t = _transformers()
    return t.LlamaForCausalLM(t.LlamaConfig(
        vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64))


def vit() -> torch.nn.Module:
    t = _transformers()
    return t.ViTForImageClassification(t.ViTConfig(
        image_size=32, patch_size=8, hidden_size=64, num_hidden_layers=2,
        num_attention_heads=2, intermediate_size=128, num_labels=5))


def distilbert() -> torch.nn.Module:
    t = _transformers()
    return t.DistilBertForSequenceClassification(t.DistilBertConfig(
        vocab_size=128, dim=64, n_layers=2, n_heads=2, hidden_dim=128,
        max_position_embeddings=64))


def roberta() -> torch.nn.Module:
    t = _transformers()
    return t.RobertaForSequenceClassification(t.RobertaConfig(
        vocab_size=128, hidden_size=64, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=128, max_position_embeddings=64))


def mistral() -> torch.nn.Module:
    t = _transformers()
    return t.MistralForCausalLM(t.MistralConfig(
        vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64))


def clip_vision() -> torch.nn.Module:
    t = _transformers()
    return t.CLIPVisionModel(t.CLIPVisionConfig(
        image_size=32, patch_size=8, hidden_size=64, intermediate_size=128,
        num_hidden_layers=2, num_attention_heads=2))


def whisper_encoder() -> torch.nn.Module:
    t = _transformers()
    from transformers.models.whisper.modeling_whisper import WhisperEncoder

    return WhisperEncoder(t.WhisperConfig(
        d_model=64, encoder_layers=2, encoder_attention_heads=2, encoder_ffn_dim=128,
        num_mel_bins=16, max_source_positions=16, vocab_size=128))


def t5() -> torch.nn.Module:
    t = _transformers()
    return t.T5ForConditionalGeneration(t.T5Config(
        vocab_size=128, d_model=64, d_kv=32, d_ff=128, num_layers=2, num_heads=2,
        decoder_start_token_id=0))


def unet() -> torch.nn.Module:
    _transformers()
    from diffusers import UNet2DModel

    return UNet2DModel(sample_size=16, in_channels=3, out_channels=3,
                       block_out_channels=(32, 64), layers_per_block=1, norm_num_groups=8,
                       down_block_types=("DownBlock2D", "AttnDownBlock2D"),
                       up_block_types=("AttnUpBlock2D", "UpBlock2D"))


def autoencoder() -> torch.nn.Module:
    _transformers()
    from diffusers import AutoencoderKL

    return AutoencoderKL(block_out_channels=(32, 64), latent_channels=4, norm_num_groups=8,
                         down_block_types=("DownEncoderBlock2D",) * 2,
                         up_block_types=("UpDecoderBlock2D",) * 2, sample_size=16)


CASES = [
    Case("gpt2", gpt2, lambda b, n: (_ids(b, n),)),
    Case("bert", bert, lambda b, n: (_ids(b, n), _mask(b, n))),
    Case("llama", llama, lambda b, n: (_ids(b, n), _mask(b, n))),
    Case("vit", vit, lambda b, n: (_image(b, n),), ((2, 32), (3, 32))),
    Case("distilbert", distilbert, lambda b, n: (_ids(b, n), _mask(b, n))),
    Case("roberta", roberta, lambda b, n: (_ids(b, n), _mask(b, n))),
    Case("mistral", mistral, lambda b, n: (_ids(b, n), _mask(b, n))),
    Case("clip_vision", clip_vision, lambda b, n: (_image(b, n),), ((2, 32), (3, 32))),
    Case("whisper_encoder", whisper_encoder,
         lambda b, n: (torch.randn(b, 16, n, generator=torch.Generator().manual_seed(b)),),
         ((2, 32), (3, 32))),
    Case("t5", t5, lambda b, n: (_ids(b, n), _mask(b, n), _ids(b, n - 2))),
    Case("unet2d", unet, lambda b, n: (_image(b, n), torch.arange(b) * 10 + 1),
         ((2, 16), (3, 32))),
    Case("autoencoder_kl", autoencoder, lambda b, n: (_image(b, n),), ((2, 16), (3, 32))),
]
BY_NAME = {case.name: case for case in CASES}
