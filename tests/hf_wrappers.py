"""Modules written around Hugging Face and diffusers models the way people write them.

A raw model returns a `ModelOutput`; a user's module picks one tensor of it
(`self.m(ids).last_hidden_state[:, 0]`, `.pooler_output` into a head, `.logits`, `.sample`)
and passes its own arguments through (`attention_mask=mask`). Shared by
`tests/test_import_hf_wrappers.py` and `benchmarks/import_models.py --hf` (rows `wrap_*`);
tiny random configs, nothing downloaded.
"""

from __future__ import annotations

import torch
from hf_cases import Case, _ids, _image, _mask, _transformers
from torch import nn


class GPT2Hidden(nn.Module):
    """GPT2Model's last hidden state (the wrapper of issue #34)."""

    def __init__(self) -> None:
        super().__init__()
        t = _transformers()
        self.m = t.GPT2Model(t.GPT2Config(n_layer=1, n_embd=32, n_head=2, vocab_size=128,
                                          n_positions=32))

    def forward(self, input_ids):
        return self.m(input_ids).last_hidden_state


class GPT2Logits(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        t = _transformers()
        self.m = t.GPT2LMHeadModel(t.GPT2Config(n_layer=2, n_embd=32, n_head=2,
                                                vocab_size=128, n_positions=32))

    def forward(self, input_ids):
        return self.m(input_ids).logits


class BertMaskCls(nn.Module):
    """BERT with the attention mask passed through; a head on the [CLS] token."""

    def __init__(self) -> None:
        super().__init__()
        t = _transformers()
        self.bert = t.BertModel(t.BertConfig(
            vocab_size=128, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
            intermediate_size=64, max_position_embeddings=32))
        self.head = nn.Linear(32, 3)

    def forward(self, input_ids, attention_mask):
        out = self.bert(input_ids=input_ids, attention_mask=attention_mask)
        return self.head(out.last_hidden_state[:, 0])


class BertPooledHead(nn.Module):
    """A classifier head on BERT's pooler output, dropout between."""

    def __init__(self) -> None:
        super().__init__()
        t = _transformers()
        self.encoder = t.BertModel(t.BertConfig(
            vocab_size=128, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
            intermediate_size=64, max_position_embeddings=32))
        self.drop = nn.Dropout(0.1)
        self.classifier = nn.Linear(32, 4)

    def forward(self, input_ids, attention_mask):
        pooled = self.encoder(input_ids, attention_mask=attention_mask).pooler_output
        return self.classifier(self.drop(pooled))


class DistilBertCls(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        t = _transformers()
        self.m = t.DistilBertModel(t.DistilBertConfig(
            vocab_size=128, dim=32, n_layers=2, n_heads=2, hidden_dim=64,
            max_position_embeddings=32))
        self.out = nn.Linear(32, 2)

    def forward(self, input_ids, attention_mask):
        hidden = self.m(input_ids=input_ids, attention_mask=attention_mask)[0]
        return self.out(hidden[:, 0, :])


class ViTPooled(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        t = _transformers()
        self.vit = t.ViTModel(t.ViTConfig(
            image_size=32, patch_size=8, hidden_size=32, num_hidden_layers=2,
            num_attention_heads=2, intermediate_size=64))
        self.fc = nn.Linear(32, 5)

    def forward(self, pixel_values):
        return self.fc(self.vit(pixel_values).pooler_output)


class ViTCls(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        t = _transformers()
        self.vit = t.ViTModel(t.ViTConfig(
            image_size=32, patch_size=8, hidden_size=32, num_hidden_layers=1,
            num_attention_heads=2, intermediate_size=64), add_pooling_layer=False)

    def forward(self, x):
        return self.vit(pixel_values=x).last_hidden_state[:, 0]


class LlamaHidden(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        t = _transformers()
        self.model = t.LlamaModel(t.LlamaConfig(
            vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64))

    def forward(self, input_ids, attention_mask):
        return self.model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state


class T5EncoderMean(nn.Module):
    """T5's encoder only, its states averaged over the unmasked tokens."""

    def __init__(self) -> None:
        super().__init__()
        t = _transformers()
        self.encoder = t.T5EncoderModel(t.T5Config(
            vocab_size=128, d_model=32, d_kv=16, d_ff=64, num_layers=2, num_heads=2))

    def forward(self, input_ids, attention_mask):
        states = self.encoder(input_ids=input_ids, attention_mask=attention_mask)
        mask = attention_mask.unsqueeze(-1).float()
        return (states.last_hidden_state * mask).sum(1) / mask.sum(1)


class CLIPVisionPooled(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        t = _transformers()
        self.vision = t.CLIPVisionModel(t.CLIPVisionConfig(
            image_size=32, patch_size=8, hidden_size=32, intermediate_size=64,
            num_hidden_layers=2, num_attention_heads=2))

    def forward(self, pixel_values):
        return self.vision(pixel_values=pixel_values).pooler_output


class WhisperEncoderStates(nn.Module):
    """The encoder of a whole WhisperModel, called through the model."""

    def __init__(self) -> None:
        super().__init__()
        t = _transformers()
        self.whisper = t.WhisperModel(t.WhisperConfig(
            d_model=32, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
            decoder_attention_heads=2, encoder_ffn_dim=64, decoder_ffn_dim=64,
            num_mel_bins=16, max_source_positions=16, max_target_positions=16,
            vocab_size=128, pad_token_id=0, bos_token_id=1, eos_token_id=2,
            decoder_start_token_id=1))

    def forward(self, input_features):
        return self.whisper.encoder(input_features).last_hidden_state


class UNetSample(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        _transformers()
        from diffusers import UNet2DModel

        self.unet = UNet2DModel(sample_size=16, in_channels=3, out_channels=3,
                                block_out_channels=(32, 64), layers_per_block=1,
                                norm_num_groups=8,
                                down_block_types=("DownBlock2D", "AttnDownBlock2D"),
                                up_block_types=("AttnUpBlock2D", "UpBlock2D"))

    def forward(self, sample, timestep):
        return self.unet(sample, timestep).sample


class FrozenBertMean(nn.Module):
    """A frozen backbone (run under no_grad), its states averaged, a trainable head."""

    def __init__(self) -> None:
        super().__init__()
        t = _transformers()
        self.backbone = t.BertModel(t.BertConfig(
            vocab_size=128, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
            intermediate_size=64, max_position_embeddings=32), add_pooling_layer=False)
        self.head = nn.Linear(32, 2)

    def forward(self, input_ids, attention_mask):
        with torch.no_grad():
            states = self.backbone(input_ids, attention_mask=attention_mask).last_hidden_state
        return self.head(states.mean(dim=1))


class RobertaTuple(nn.Module):
    """`return_dict=False`: the outputs as a tuple, the first taken."""

    def __init__(self) -> None:
        super().__init__()
        t = _transformers()
        self.roberta = t.RobertaModel(t.RobertaConfig(
            vocab_size=128, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
            intermediate_size=64, max_position_embeddings=40))

    def forward(self, input_ids, attention_mask):
        return self.roberta(input_ids, attention_mask, return_dict=False)[0]


class BertLastLayers(nn.Module):
    """The mean of the last two layers' hidden states (`output_hidden_states=True`)."""

    def __init__(self) -> None:
        super().__init__()
        t = _transformers()
        self.bert = t.BertModel(t.BertConfig(
            vocab_size=128, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
            intermediate_size=64, max_position_embeddings=32))

    def forward(self, input_ids, attention_mask):
        out = self.bert(input_ids, attention_mask=attention_mask, output_hidden_states=True)
        return torch.stack(out.hidden_states[-2:]).mean(0)


class GPT2Classify(nn.Module):
    """GPT2ForSequenceClassification: the logits of each row's last token before padding."""

    def __init__(self) -> None:
        super().__init__()
        t = _transformers()
        self.m = t.GPT2ForSequenceClassification(t.GPT2Config(
            n_layer=1, n_embd=32, n_head=2, vocab_size=128, n_positions=32, num_labels=3,
            pad_token_id=0))

    def forward(self, input_ids):
        return self.m(input_ids=input_ids).logits


class ConvNextPooled(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        t = _transformers()
        self.m = t.ConvNextModel(t.ConvNextConfig(
            num_channels=3, hidden_sizes=[16, 32], depths=[1, 1], num_stages=2))
        self.fc = nn.Linear(32, 4)

    def forward(self, pixel_values):
        return self.fc(self.m(pixel_values).pooler_output)


class CLIPImageEmbeds(nn.Module):
    """Normalised image embeddings of a whole CLIPModel (`get_image_features`)."""

    def __init__(self) -> None:
        super().__init__()
        t = _transformers()
        self.clip = t.CLIPModel(t.CLIPConfig(
            text_config={"vocab_size": 128, "hidden_size": 32, "intermediate_size": 64,
                         "num_hidden_layers": 1, "num_attention_heads": 2,
                         "max_position_embeddings": 16},
            vision_config={"image_size": 32, "patch_size": 8, "hidden_size": 32,
                           "intermediate_size": 64, "num_hidden_layers": 1,
                           "num_attention_heads": 2}, projection_dim=16))

    def forward(self, pixel_values):
        embeds = self.clip.get_image_features(pixel_values=pixel_values).pooler_output
        return nn.functional.normalize(embeds, dim=-1)


class BertMaskedTwo(nn.Module):
    """Two outputs (the logits and the last hidden states) from three inputs."""

    def __init__(self) -> None:
        super().__init__()
        t = _transformers()
        self.m = t.BertForMaskedLM(t.BertConfig(
            vocab_size=128, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
            intermediate_size=64, max_position_embeddings=32))

    def forward(self, input_ids, attention_mask, token_type_ids):
        out = self.m(input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids,
                     output_hidden_states=True)
        return out.logits, out.hidden_states[-1]


class MistralNextToken(nn.Module):
    """The next token's logits (the last position's)."""

    def __init__(self) -> None:
        super().__init__()
        t = _transformers()
        self.lm = t.MistralForCausalLM(t.MistralConfig(
            vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
            num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64))

    def forward(self, input_ids, attention_mask):
        return self.lm(input_ids=input_ids, attention_mask=attention_mask).logits[:, -1, :]


def _text(b: int, n: int) -> tuple:
    return _ids(b, n), _mask(b, n)


def _features(b: int, n: int) -> tuple:
    return (torch.randn(b, 16, n, generator=torch.Generator().manual_seed(b)),)


WRAPPERS = [
    Case("wrap_gpt2_hidden", GPT2Hidden, lambda b, n: (_ids(b, n),)),
    Case("wrap_gpt2_logits", GPT2Logits, lambda b, n: (_ids(b, n),)),
    Case("wrap_bert_mask_cls", BertMaskCls, _text),
    Case("wrap_bert_pooled_head", BertPooledHead, _text),
    Case("wrap_distilbert_cls", DistilBertCls, _text),
    Case("wrap_vit_pooled", ViTPooled, lambda b, n: (_image(b, n),), ((2, 32), (3, 32))),
    Case("wrap_vit_cls", ViTCls, lambda b, n: (_image(b, n),), ((2, 32), (3, 32))),
    Case("wrap_llama_hidden", LlamaHidden, _text),
    Case("wrap_t5_encoder_mean", T5EncoderMean, _text),
    Case("wrap_clip_pooled", CLIPVisionPooled, lambda b, n: (_image(b, n),),
         ((2, 32), (3, 32))),
    Case("wrap_whisper_encoder", WhisperEncoderStates, _features, ((2, 32), (3, 32))),
    Case("wrap_unet_sample", UNetSample,
         lambda b, n: (_image(b, n), torch.arange(b) * 10 + 1), ((2, 16), (3, 32))),
    Case("wrap_frozen_bert_mean", FrozenBertMean, _text),
    Case("wrap_roberta_tuple", RobertaTuple, _text),
    Case("wrap_bert_last_layers", BertLastLayers, _text),
    Case("wrap_gpt2_classify", GPT2Classify, lambda b, n: (_ids(b, n),)),
    Case("wrap_clip_image_embeds", CLIPImageEmbeds, lambda b, n: (_image(b, n),),
         ((2, 32), (3, 32))),
    Case("wrap_bert_masked_two", BertMaskedTwo,
         lambda b, n: (*_text(b, n), (torch.arange(n) >= n // 2).long().expand(b, n))),
    Case("wrap_mistral_next_token", MistralNextToken, _text),
    Case("wrap_convnext_pooled", ConvNextPooled, lambda b, n: (_image(b, n),),
         ((2, 32), (3, 48))),
]
BY_NAME = {case.name: case for case in WRAPPERS}
