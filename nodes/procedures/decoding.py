"""Autoregressive decoding: text from a trained language model, one token at a time.

A language model maps token ids (N, L) to next-token scores (N, L, V); generating text is a
loop around it: encode a prompt, score the next token from the
last position, choose one, append it, repeat. `procedures.Decode` runs that loop with four
ways of choosing:

- greedy: the highest-scoring token every time (deterministic, tends to repeat itself);
- temperature: sample from softmax(logits / T) (T < 1 sharper, T > 1 flatter);
- top_k: sample from the k best tokens only, renormalised (never a very unlikely token);
- beam: keep the `beam_width` sequences of highest total log-probability and extend each by
  every token, so a token that looks worse now can win later; returns the best sequence.

The vocabulary comes from the graph's data block that carries one (data.TokenText's
`dataset.vocab`, the characters in token-id order; data.TokenizedText's, its tokenizer).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import torch

from nodegraph.kinds.declare import procedure
from nodegraph.kinds.procedure_context import Procedure, ProcedureContext
from nodegraph.model.errors import NodegraphError
from nodegraph.model.spec import (
    Params,
    choice_param,
    float_param,
    int_param,
    str_param,
)
from nodes.procedures.core import MODEL

METHODS = ("greedy", "temperature", "top_k", "beam")


def vocabulary_of(ctx: ProcedureContext) -> str:
    """The vocabulary of the first data block that has one (data.TokenText)."""
    for ds in ctx.compiled.datasets.values():
        vocab = getattr(ds, "vocab", None)
        if vocab:
            return vocab
    raise NodegraphError("decoding needs a data block with a vocabulary (data.TokenText) "
                         "to turn the prompt into tokens and tokens back into text")


def context_length(ctx: ProcedureContext) -> int:
    """The data's context length L: the longest window the model was trained on."""
    for ds in ctx.compiled.datasets.values():
        if getattr(ds, "vocab", None):
            return int(ds.meta()["x"].shape[1])  # either kind: a streamed split is not read
    return 0


def encode_prompt(prompt: str, vocab) -> list[int]:
    if not isinstance(vocab, str):  # subword tokens (data.TokenizedText): its tokenizer
        return vocab.encode(prompt)
    lookup = {c: i for i, c in enumerate(vocab)}
    missing = sorted(set(prompt) - set(lookup))
    if missing:
        raise NodegraphError(f"the prompt holds characters {missing} that are not in the "
                             "vocabulary; use characters of the training text")
    if not prompt:
        raise NodegraphError("the prompt is empty; give at least one character to start from")
    return [lookup[c] for c in prompt]


def next_log_probs(scores: Callable[[torch.Tensor], torch.Tensor], ids: torch.Tensor,
                   context: int) -> torch.Tensor:
    """log softmax of the next-token scores after each row of `ids` (B, T) -> (B, V), the
    model seeing at most the last `context` tokens."""
    window = ids[:, -context:] if context else ids
    return torch.log_softmax(scores(window)[:, -1].float(), -1)


def choose(log_probs: torch.Tensor, method: str, temperature: float, top_k: int,
           generator: torch.Generator) -> int:
    """One next token from a (V,) row of log-probabilities."""
    if method == "greedy":
        return int(log_probs.argmax())
    logits = log_probs / temperature
    if method == "top_k":
        k = min(top_k, len(logits))
        kth_best = logits.topk(k).values[-1]
        logits = logits.masked_fill(logits < kth_best, float("-inf"))
    probs = torch.softmax(logits, -1).cpu()
    return int(torch.multinomial(probs, 1, generator=generator))


def beam_search(scores, prompt: list[int], steps: int, width: int, context: int,
                device) -> tuple[list[int], list[float]]:
    """The sequence of highest total log-probability found keeping `width` candidates per
    step; returns its new tokens and the running total after each."""
    beams = torch.tensor([prompt], device=device)
    totals = torch.zeros(1, device=device)
    history: list[list[float]] = [[]]  # the running totals of each beam
    for _ in range(steps):
        log_probs = next_log_probs(scores, beams, context)
        candidates = (totals[:, None] + log_probs).flatten()
        best = candidates.topk(min(width, len(candidates))).indices
        rows, tokens = best // log_probs.shape[1], best % log_probs.shape[1]
        beams = torch.cat([beams[rows], tokens[:, None]], 1)
        totals = candidates[best]
        history = [history[r] + [float(t)] for r, t in zip(rows.tolist(), totals, strict=True)]
    return beams[0, len(prompt):].tolist(), history[0]


class DecodeParams(Params):
    model: str
    method: str
    prompt: str
    max_new_tokens: int
    temperature: float
    top_k: int
    beam_width: int
    context: int | None


class Decode(Procedure):
    """Generate `max_new_tokens` tokens after the prompt; one frame per token."""

    def __init__(self, p: DecodeParams):
        self.p = p

    def scorer(self, ctx: ProcedureContext) -> Callable[[torch.Tensor], torch.Tensor]:
        """The model as a function token ids (B, T) -> scores (B, T, V)."""
        model = ctx.model()  # the bound model (`model`)
        port_out = "output" if "output" in model.outputs else model.outputs[0]
        return lambda ids: model(**{model.inputs[0]: ids})[port_out]

    def run(self, ctx: ProcedureContext) -> Iterator[dict[str, Any]]:
        p = self.p
        vocab = vocabulary_of(ctx)
        prompt = encode_prompt(p.prompt, vocab)
        context = p.context or context_length(ctx)
        scores = self.scorer(ctx)
        if p.method == "beam":
            tokens, totals = beam_search(scores, prompt, p.max_new_tokens, p.beam_width,
                                         context, ctx.device)
        else:
            yield from self.sample(ctx, scores, prompt, vocab, context)
            return
        text = p.prompt
        for t, (token, total) in enumerate(zip(tokens, totals, strict=True)):
            text += vocab[token]
            yield {"t": t + 1, "token": token, "char": vocab[token], "text": text,
                   "logprob": total}

    def sample(self, ctx, scores, prompt: list[int], vocab: str,
               context: int) -> Iterator[dict[str, Any]]:
        p = self.p
        ids = torch.tensor([prompt], device=ctx.device)
        text, total = p.prompt, 0.0
        for t in range(p.max_new_tokens):
            log_probs = next_log_probs(scores, ids, context)[0]
            token = choose(log_probs, p.method, p.temperature, p.top_k, ctx.generator)
            total += float(log_probs[token])
            ids = torch.cat([ids, ids.new_tensor([[token]])], 1)
            text += vocab[token]
            yield {"t": t + 1, "token": token, "char": vocab[token], "text": text,
                   "logprob": total}


BLOCKS = [
    procedure("procedures.Decode",
              "Generate text from a language model token by token (greedy, sampling, top-k, "
              "beam).\n\n"
              "`model` names the node or group instance mapping token ids (N, L) to next-token "
              "scores (N, L, V); the vocabulary comes from data.TokenText. Starting from "
              "`prompt`, each step scores the next token from the last position and picks one "
              "by `method`; each frame holds the token, the text so far and the total "
              "log-probability. Beam search keeps `beam_width` candidates and yields the best.",
              Decode,
              params=[MODEL,
                      choice_param("method", METHODS, "greedy",
                                   "greedy: the best token; temperature: sample from "
                                   "softmax(logits / T); top_k: sample among the k best; beam: "
                                   "the most probable sequence among beam_width candidates"),
                      str_param("prompt", "The ", "the text to continue (characters of the "
                                "vocabulary)"),
                      int_param("max_new_tokens", 100, "how many tokens to generate", min=1),
                      float_param("temperature", 1.0, "divides the scores before sampling "
                                  "(temperature and top_k)", min=1e-3),
                      int_param("top_k", 5, "how many of the best tokens top_k samples from",
                                min=1),
                      int_param("beam_width", 4, "candidate sequences kept by beam search",
                                min=1),
                      int_param("context", None, "the most recent tokens the model sees; empty "
                                "means the data's context length", min=1, nullable=True)],
              binds="model",
              keywords=("generate", "sampling", "language model", "beam search", "top-k",
                        "temperature", "greedy", "text")),
]
