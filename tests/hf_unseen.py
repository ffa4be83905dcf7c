"""Hugging Face and diffusers models nobody in the project had tried (issue #34's hidden set).

Tried as a new user would: tiny random configs of the current releases, nothing
downloaded, a raw model (its `ModelOutput` whole) or the module people write around it
(one tensor picked). Shared by `tests/test_import_hf_unseen.py` and
`benchmarks/import_models.py --hf` (rows `new_*`).
"""

from __future__ import annotations

import torch
from hf_cases import Case, _ids, _image, _mask, _transformers
from torch import nn


def albert() -> nn.Module:
    t = _transformers()
    return t.AlbertForSequenceClassification(t.AlbertConfig(
        vocab_size=128, embedding_size=16, hidden_size=32, num_hidden_layers=2,
        num_attention_heads=2, intermediate_size=64, max_position_embeddings=32,
        num_labels=3))


def bart() -> nn.Module:
    t = _transformers()
    return t.BartForConditionalGeneration(t.BartConfig(
        vocab_size=128, d_model=32, encoder_layers=1, decoder_layers=1,
        encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=64,
        decoder_ffn_dim=64, max_position_embeddings=32, pad_token_id=1, bos_token_id=0,
        eos_token_id=2, decoder_start_token_id=2))


def gpt_neo() -> nn.Module:
    t = _transformers()
    return t.GPTNeoForCausalLM(t.GPTNeoConfig(
        vocab_size=128, hidden_size=32, num_layers=2, num_heads=2,
        attention_types=[[["global", "local"], 1]], window_size=4,
        max_position_embeddings=32))


def qwen2() -> nn.Module:
    t = _transformers()
    return t.Qwen2ForCausalLM(t.Qwen2Config(
        vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64))


def phi() -> nn.Module:
    t = _transformers()
    return t.PhiForCausalLM(t.PhiConfig(
        vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, max_position_embeddings=64))


def gemma() -> nn.Module:
    t = _transformers()
    return t.GemmaForCausalLM(t.GemmaConfig(
        vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=1, head_dim=8,
        max_position_embeddings=64))


def electra() -> nn.Module:
    t = _transformers()
    return t.ElectraForSequenceClassification(t.ElectraConfig(
        vocab_size=128, embedding_size=16, hidden_size=32, num_hidden_layers=2,
        num_attention_heads=2, intermediate_size=64, max_position_embeddings=32,
        num_labels=2))


def deberta_v2() -> nn.Module:
    t = _transformers()
    return t.DebertaV2ForSequenceClassification(t.DebertaV2Config(
        vocab_size=128, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=64, max_position_embeddings=32, num_labels=2))


def swin() -> nn.Module:
    t = _transformers()
    return t.SwinForImageClassification(t.SwinConfig(
        image_size=32, patch_size=4, embed_dim=16, depths=[1, 1], num_heads=[2, 2],
        window_size=4, num_labels=4))


def deit() -> nn.Module:
    t = _transformers()
    return t.DeiTForImageClassification(t.DeiTConfig(
        image_size=32, patch_size=8, hidden_size=32, num_hidden_layers=2,
        num_attention_heads=2, intermediate_size=64, num_labels=5))


def segformer() -> nn.Module:
    t = _transformers()
    return t.SegformerForSemanticSegmentation(t.SegformerConfig(
        num_encoder_blocks=2, depths=[1, 1], sr_ratios=[2, 1], hidden_sizes=[16, 32],
        num_attention_heads=[1, 2], decoder_hidden_size=32, num_labels=3,
        patch_sizes=[7, 3], strides=[4, 2], mlp_ratios=[2, 2]))


def wav2vec2() -> nn.Module:
    t = _transformers()
    return t.Wav2Vec2Model(t.Wav2Vec2Config(
        hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64,
        conv_dim=(16, 16), conv_stride=(5, 2), conv_kernel=(10, 3),
        num_conv_pos_embeddings=8, num_conv_pos_embedding_groups=2, vocab_size=32))


def mobilevit() -> nn.Module:
    t = _transformers()
    return t.MobileViTForImageClassification(t.MobileViTConfig(
        image_size=32, hidden_sizes=[16, 24, 32], neck_hidden_sizes=[8, 8, 16, 16, 24, 32, 48],
        num_labels=3))


def unet_conditional() -> nn.Module:
    _transformers()
    from diffusers import UNet2DConditionModel

    return UNet2DConditionModel(
        sample_size=16, in_channels=4, out_channels=4, block_out_channels=(32, 64),
        layers_per_block=1, norm_num_groups=8, cross_attention_dim=16,
        attention_head_dim=8,
        down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
        up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"))


def vq_model() -> nn.Module:
    _transformers()
    from diffusers import VQModel

    return VQModel(block_out_channels=(32, 64), latent_channels=4, norm_num_groups=8,
                   down_block_types=("DownEncoderBlock2D",) * 2,
                   up_block_types=("UpDecoderBlock2D",) * 2, num_vq_embeddings=16,
                   sample_size=16)


class QwenLastToken(nn.Module):
    """A reward-model-style head on the last token's hidden state of a Qwen2 body."""

    def __init__(self) -> None:
        super().__init__()
        t = _transformers()
        self.body = t.Qwen2Model(t.Qwen2Config(
            vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
            num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64))
        self.score = nn.Linear(32, 1)

    def forward(self, input_ids, attention_mask):
        hidden = self.body(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        return self.score(hidden[:, -1]).squeeze(-1)


class SwinFeatures(nn.Module):
    """Swin's pooled features into a new head (a fine-tuning wrapper)."""

    def __init__(self) -> None:
        super().__init__()
        t = _transformers()
        self.backbone = t.SwinModel(t.SwinConfig(
            image_size=32, patch_size=4, embed_dim=16, depths=[1, 1], num_heads=[2, 2],
            window_size=4))
        self.head = nn.Sequential(nn.LayerNorm(32), nn.Linear(32, 6))

    def forward(self, pixel_values):
        return self.head(self.backbone(pixel_values).pooler_output)


class ElectraFrozenMean(nn.Module):
    """ELECTRA's discriminator states, frozen under no_grad, averaged over the mask."""

    def __init__(self) -> None:
        super().__init__()
        t = _transformers()
        self.encoder = t.ElectraModel(t.ElectraConfig(
            vocab_size=128, embedding_size=16, hidden_size=32, num_hidden_layers=1,
            num_attention_heads=2, intermediate_size=64, max_position_embeddings=32))
        self.head = nn.Linear(32, 2)

    def forward(self, input_ids, attention_mask):
        with torch.no_grad():
            states = self.encoder(input_ids, attention_mask=attention_mask).last_hidden_state
        mask = attention_mask.unsqueeze(-1).to(states.dtype)
        return self.head((states * mask).sum(1) / mask.sum(1))


class BartEncoderCls(nn.Module):
    """BART's encoder only (`get_encoder()`), its first token into a classifier."""

    def __init__(self) -> None:
        super().__init__()
        self.bart = bart()
        self.cls = nn.Linear(32, 3)

    def forward(self, input_ids, attention_mask):
        enc = self.bart.get_encoder()(input_ids=input_ids, attention_mask=attention_mask)
        return self.cls(enc.last_hidden_state[:, 0])


class Wav2Vec2Pooled(nn.Module):
    """An audio classifier: Wav2Vec2's states averaged over time."""

    def __init__(self) -> None:
        super().__init__()
        self.w2v = wav2vec2()
        self.out = nn.Linear(32, 4)

    def forward(self, input_values):
        return self.out(self.w2v(input_values).last_hidden_state.mean(dim=1))


class UNetCondNoise(nn.Module):
    """A denoiser call as a pipeline makes it: `.sample` of the conditional UNet."""

    def __init__(self) -> None:
        super().__init__()
        self.unet = unet_conditional()

    def forward(self, latents, timestep, text_states):
        return self.unet(latents, timestep, encoder_hidden_states=text_states).sample


def _text(b: int, n: int) -> tuple:
    return _ids(b, n), _mask(b, n)


def _audio(b: int, n: int) -> tuple:
    return (torch.randn(b, n, generator=torch.Generator().manual_seed(b * 7 + n)),)


def _denoise(b: int, n: int) -> tuple:
    g = torch.Generator().manual_seed(b * 11 + n)
    return (torch.randn(b, 4, n, n, generator=g), torch.arange(b) * 10 + 1,
            torch.randn(b, 5, 16, generator=g))


UNSEEN = [
    Case("new_albert", albert, _text),
    Case("new_bart", bart, lambda b, n: (*_text(b, n), _ids(b, n - 2))),
    Case("new_gpt_neo", gpt_neo, lambda b, n: (_ids(b, n),)),
    Case("new_qwen2", qwen2, _text),
    Case("new_phi", phi, _text),
    Case("new_gemma", gemma, _text),
    Case("new_electra", electra, _text),
    Case("new_deberta_v2", deberta_v2, _text),
    Case("new_swin", swin, lambda b, n: (_image(b, n),), ((2, 32), (3, 32))),
    Case("new_deit", deit, lambda b, n: (_image(b, n),), ((2, 32), (3, 32))),
    Case("new_segformer", segformer, lambda b, n: (_image(b, n),), ((2, 32), (3, 48))),
    Case("new_wav2vec2", wav2vec2, _audio, ((2, 400), (3, 560))),
    Case("new_mobilevit", mobilevit, lambda b, n: (_image(b, n),), ((2, 32), (3, 64))),
    Case("new_unet_conditional", unet_conditional, _denoise, ((2, 16), (3, 32))),
    Case("new_vq_model", vq_model, lambda b, n: (_image(b, n),), ((2, 16), (3, 32))),
    Case("new_wrap_qwen_last_token", QwenLastToken, _text),
    Case("new_wrap_swin_features", SwinFeatures, lambda b, n: (_image(b, n),),
         ((2, 32), (3, 32))),
    Case("new_wrap_electra_frozen_mean", ElectraFrozenMean, _text),
    Case("new_wrap_bart_encoder_cls", BartEncoderCls, _text),
    Case("new_wrap_wav2vec2_pooled", Wav2Vec2Pooled, _audio, ((2, 400), (3, 560))),
    Case("new_wrap_unet_cond_noise", UNetCondNoise, _denoise, ((2, 16), (3, 32))),
]


# a second round: more families of the Hub's most downloaded models


def opt() -> nn.Module:
    t = _transformers()
    return t.OPTForCausalLM(t.OPTConfig(
        vocab_size=128, hidden_size=32, num_hidden_layers=2, ffn_dim=64,
        num_attention_heads=2, max_position_embeddings=64, word_embed_proj_dim=32))


def bloom() -> nn.Module:
    t = _transformers()
    return t.BloomForCausalLM(t.BloomConfig(vocab_size=128, hidden_size=32, n_layer=2,
                                            n_head=2))


def gptj() -> nn.Module:
    t = _transformers()
    return t.GPTJForCausalLM(t.GPTJConfig(vocab_size=128, n_embd=32, n_layer=2, n_head=2,
                                          rotary_dim=8, n_positions=64))


def qwen3() -> nn.Module:
    t = _transformers()
    return t.Qwen3ForCausalLM(t.Qwen3Config(
        vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=8,
        max_position_embeddings=64))


def gemma2() -> nn.Module:
    t = _transformers()
    return t.Gemma2ForCausalLM(t.Gemma2Config(
        vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=8, sliding_window=4,
        max_position_embeddings=64))


def mpnet() -> nn.Module:
    t = _transformers()
    return t.MPNetModel(t.MPNetConfig(
        vocab_size=128, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=64, max_position_embeddings=64))


def dinov2() -> nn.Module:
    t = _transformers()
    return t.Dinov2Model(t.Dinov2Config(
        image_size=32, patch_size=8, hidden_size=32, num_hidden_layers=2,
        num_attention_heads=2, mlp_ratio=2))


def beit() -> nn.Module:
    t = _transformers()
    return t.BeitForImageClassification(t.BeitConfig(
        image_size=32, patch_size=8, hidden_size=32, num_hidden_layers=2,
        num_attention_heads=2, intermediate_size=64, num_labels=3,
        use_relative_position_bias=True))


def hubert() -> nn.Module:
    t = _transformers()
    return t.HubertModel(t.HubertConfig(
        hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64,
        conv_dim=(16, 16), conv_stride=(5, 2), conv_kernel=(10, 3),
        num_conv_pos_embeddings=8, num_conv_pos_embedding_groups=2, vocab_size=32))


def autoencoder_tiny() -> nn.Module:
    _transformers()
    from diffusers import AutoencoderTiny

    return AutoencoderTiny(encoder_block_out_channels=(16, 16), decoder_block_out_channels=(
        16, 16), num_encoder_blocks=(1, 1), num_decoder_blocks=(1, 1), latent_channels=4)


def dit() -> nn.Module:
    _transformers()
    from diffusers import DiTTransformer2DModel

    return DiTTransformer2DModel(num_attention_heads=2, attention_head_dim=8, in_channels=4,
                                 out_channels=4, num_layers=1, sample_size=8, patch_size=2,
                                 num_embeds_ada_norm=10, norm_num_groups=8)


class DiTNoise(nn.Module):
    """A class-conditional DiT's noise prediction, as its pipeline calls it."""

    def __init__(self) -> None:
        super().__init__()
        self.dit = dit()

    def forward(self, latents, timestep, labels):
        return self.dit(latents, timestep=timestep, class_labels=labels).sample


class OptLastToken(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lm = opt()

    def forward(self, input_ids, attention_mask):
        return self.lm(input_ids=input_ids, attention_mask=attention_mask).logits[:, -1]


class DinoCls(nn.Module):
    """A linear probe on DINOv2's class token (frozen features)."""

    def __init__(self) -> None:
        super().__init__()
        self.backbone = dinov2()
        self.probe = nn.Linear(32, 10)

    def forward(self, pixel_values):
        with torch.no_grad():
            cls = self.backbone(pixel_values).last_hidden_state[:, 0]
        return self.probe(cls)


def _dit(b: int, n: int) -> tuple:
    g = torch.Generator().manual_seed(b * 13 + n)
    return (torch.randn(b, 4, n, n, generator=g), torch.arange(b) * 10 + 1,
            torch.arange(b) % 10)


UNSEEN += [
    Case("new_opt", opt, _text),
    Case("new_bloom", bloom, lambda b, n: (_ids(b, n),)),  # its 2nd argument: the cache
    Case("new_gptj", gptj, lambda b, n: (_ids(b, n),)),
    Case("new_qwen3", qwen3, _text),
    Case("new_gemma2", gemma2, _text),
    Case("new_mpnet", mpnet, _text),
    Case("new_dinov2", dinov2, lambda b, n: (_image(b, n),), ((2, 32), (3, 32))),
    Case("new_beit", beit, lambda b, n: (_image(b, n),), ((2, 32), (3, 32))),
    Case("new_hubert", hubert, _audio, ((2, 400), (3, 560))),
    Case("new_autoencoder_tiny", autoencoder_tiny, lambda b, n: (_image(b, n),),
         ((2, 16), (3, 32))),
    Case("new_dit", dit, _dit, ((2, 8), (3, 8))),
    Case("new_wrap_dit_noise", DiTNoise, _dit, ((2, 8), (3, 8))),
    Case("new_wrap_opt_last_token", OptLastToken, _text),
    Case("new_wrap_dino_probe", DinoCls, lambda b, n: (_image(b, n),), ((2, 32), (3, 32))),
]
BY_NAME = {case.name: case for case in UNSEEN}
