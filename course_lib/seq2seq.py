"""The encoder-decoder Transformer for translation, built from ``course_lib.blocks``.

    model = Seq2SeqTransformer(vocab_size=8000, d_model=256, num_heads=4,
                               num_encoder_layers=3, num_decoder_layers=3, d_ff=1024, pad_id=0)
    logits = model(src, tgt_in)                     # teacher forcing: [B, Lt, V]
    step = model.make_step_fn(src, beam_size=5)     # for course_lib.decoding

One shared (source + target) vocabulary, so one embedding table serves the source, the target
and, transposed, the output projection ("weight tying"). The pieces, in order:

- token embedding times sqrt(d_model), plus sinusoidal positions, then dropout;
- encoder: ``num_encoder_layers`` x ``blocks.Block`` (``PostNormBlock`` when
  ``norm_first=False``), self-attention under the source padding mask;
- decoder: ``num_decoder_layers`` x ``blocks.DecoderBlock`` (``PostNormDecoderBlock``):
  self-attention under padding AND causal masks, cross-attention to the encoder output
  under the source padding mask;
- Pre-Norm (``norm_first=True``) ends each stack with a LayerNorm, because its residual stream
  is never normalised otherwise; Post-Norm (the 2017 paper) needs none (``final_norm``);
- output projection: ``logits = h @ E^T`` with E the (target) embedding table.

Masks follow the course's convention: boolean, True = may attend. The class holds the
model (``encode``, ``decode``, ``forward``); argument checks, loading the weights of
``nn.Transformer`` and the cached decoding step live in ``course_lib.seq2seq_tools``.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from . import seq2seq_tools as tools
from .blocks import Block, DecoderBlock, PostNormBlock, PostNormDecoderBlock
from .masks import causal_mask, padding_mask
from .positional import SinusoidalPositionalEncoding
from .seq2seq_tools import CachedDecoderStep  # noqa: F401  (re-exported)
from .training import count_parameters  # noqa: F401  (re-exported for chapter 9)


class Seq2SeqTransformer(nn.Module):
    """Encoder-decoder Transformer with a shared vocabulary and tied embeddings.

    forward(src [B, Ls], tgt [B, Lt]) -> logits [B, Lt, vocab_size]

    ``tgt`` is the decoder input, ``<bos> y_1 ... y_T`` (the target ``y_1 ... y_T <eos>``
    shifted right by one); position t of the output scores the token that follows it.
    ``share_source_embedding=False`` gives the encoder its own table (the output projection
    stays tied to the target table).
    """

    def __init__(self, vocab_size: int, d_model: int = 256, num_heads: int = 4,
                 num_encoder_layers: int = 3, num_decoder_layers: int = 3, d_ff: int = 1024,
                 dropout: float = 0.1, pad_id: int = 0, norm_first: bool = True,
                 final_norm: bool | None = None, activation: str = "relu", max_len: int = 256,
                 share_source_embedding: bool = True):
        super().__init__()
        tools.check_sizes(vocab_size, d_model, num_heads, num_encoder_layers,
                          num_decoder_layers, d_ff, dropout, pad_id, norm_first, max_len)
        self.vocab_size, self.d_model, self.pad_id = vocab_size, d_model, pad_id
        self.norm_first = norm_first
        final_norm = norm_first if final_norm is None else final_norm
        block = dict(d_model=d_model, num_heads=num_heads, d_ff=d_ff, dropout=dropout,
                     activation=activation)
        encoder_block = Block if norm_first else PostNormBlock
        decoder_block = DecoderBlock if norm_first else PostNormDecoderBlock

        self.tgt_embed = nn.Embedding(vocab_size, d_model, padding_idx=pad_id)
        self.src_embed = (self.tgt_embed if share_source_embedding
                          else nn.Embedding(vocab_size, d_model, padding_idx=pad_id))
        self.positions = SinusoidalPositionalEncoding(d_model, max_len=max_len, dropout=dropout)
        self.encoder_layers = nn.ModuleList(
            encoder_block(**block) for _ in range(num_encoder_layers))
        self.decoder_layers = nn.ModuleList(
            decoder_block(**block) for _ in range(num_decoder_layers))
        self.encoder_norm = nn.LayerNorm(d_model) if final_norm else nn.Identity()
        self.decoder_norm = nn.LayerNorm(d_model) if final_norm else nn.Identity()
        self.generator = nn.Linear(d_model, vocab_size, bias=False)
        self.generator.weight = self.tgt_embed.weight  # weight tying: logits = h @ E^T
        tools.reset_parameters(self)

    def embed(self, tokens: torch.Tensor, table: nn.Embedding) -> torch.Tensor:
        """tokens [B, L] -> E[tokens] * sqrt(d_model) + PE, then dropout: [B, L, d_model]."""
        return self.positions(table(tokens) * math.sqrt(self.d_model))

    def source_mask(self, src: torch.Tensor) -> torch.Tensor:
        """bool [B, 1, 1, Ls]: every query may look at every real source token."""
        return padding_mask(src, self.pad_id)

    def target_mask(self, tgt: torch.Tensor) -> torch.Tensor:
        """bool [B, 1, Lt, Lt]: padding AND causal (position t sees real tokens 0..t)."""
        return padding_mask(tgt, self.pad_id) & causal_mask(tgt.shape[1], device=tgt.device)

    def encode(self, src: torch.Tensor, need_weights: bool = False):
        """src [B, Ls] -> (memory [B, Ls, d_model], src_mask [B, 1, 1, Ls]); with
        ``need_weights=True`` also the per-layer self-attention weights [B, h, Ls, Ls]."""
        tools.check_tokens(self, "src", src)
        src_mask = self.source_mask(src)  # [B, 1, 1, Ls]
        x = self.embed(src, self.src_embed)  # [B, Ls, d]
        weights = []
        for layer in self.encoder_layers:
            x, w = layer(x, mask=src_mask, need_weights=need_weights)
            weights.append(w)
        memory = self.encoder_norm(x)  # [B, Ls, d]
        return (memory, src_mask, weights) if need_weights else (memory, src_mask)

    def decode(self, tgt: torch.Tensor, memory: torch.Tensor, src_mask: torch.Tensor,
               need_weights: bool = False):
        """tgt [B, Lt], memory [B, Ls, d] -> hidden [B, Lt, d] (before the projection); with
        ``need_weights=True`` ``(hidden, self_weights, cross_weights)``, one [B, h, Lt, Lt] /
        [B, h, Lt, Ls] tensor per decoder layer in each list."""
        tools.check_decode_inputs(self, tgt, memory)
        tgt_mask = self.target_mask(tgt)  # [B, 1, Lt, Lt]
        x = self.embed(tgt, self.tgt_embed)  # [B, Lt, d]
        self_w, cross_w = [], []
        for layer in self.decoder_layers:
            x, ws, wc = layer(x, memory, self_mask=tgt_mask, memory_mask=src_mask,
                              need_weights=need_weights)
            self_w.append(ws)
            cross_w.append(wc)
        hidden = self.decoder_norm(x)
        return (hidden, self_w, cross_w) if need_weights else hidden

    def forward(self, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
        tools.check_pair(self, src, tgt)
        memory, src_mask = self.encode(src)
        return self.generator(self.decode(tgt, memory, src_mask))  # [B, Lt, V]

    # the rest is machinery beside the model, in course_lib.seq2seq_tools
    def reset_parameters(self) -> None:
        """Xavier for the stacks, N(0, 1/d_model) for the embedding (see seq2seq_tools)."""
        tools.reset_parameters(self)

    def attention_maps(self, src: torch.Tensor, tgt: torch.Tensor) -> dict:
        """``{"encoder": [...], "decoder_self": [...], "cross": [...]}``, [B, h, Lq, Lk] each."""
        return tools.attention_maps(self, src, tgt)

    def make_step_fn(self, src: torch.Tensor, beam_size: int = 1, cache: bool = True):
        """``step(tokens [N, L]) -> logits [N, V]`` for ``course_lib.decoding``."""
        return tools.make_step_fn(self, src, beam_size=beam_size, cache=cache)

    def load_from_torch(self, transformer: nn.Transformer) -> Seq2SeqTransformer:
        """Copy the stacks of a ``torch.nn.Transformer`` into this model."""
        return tools.load_from_torch(self, transformer)
