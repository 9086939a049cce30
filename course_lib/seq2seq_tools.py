"""Machinery beside ``course_lib.seq2seq.Seq2SeqTransformer``: argument checks with clear
errors, weight initialisation, attention maps, loading the weights of ``nn.Transformer``,
and the decoding step function with its key-value cache (``CachedDecoderStep``).

The model class calls these; a reader of the model does not need them to follow the
computation. Functions take the model as their first argument.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from .attention import KVCache
from .checks import positive_int
from .masks import causal_mask, padding_mask
from .positional import sinusoidal_encoding
from .runtime import check_device


# ---------------------------------------------------------------------- checks
def check_sizes(vocab_size, d_model, num_heads, num_encoder_layers, num_decoder_layers, d_ff,
                dropout, pad_id, norm_first, max_len) -> None:
    """The constructor's arguments, each with an error that says what is allowed."""
    for name, value in (
        ("vocab_size", vocab_size),
        ("d_model", d_model),
        ("num_heads", num_heads),
        ("num_encoder_layers", num_encoder_layers),
        ("num_decoder_layers", num_decoder_layers),
        ("d_ff", d_ff),
        ("max_len", max_len),
    ):
        positive_int(name, value)
    if not isinstance(pad_id, int) or isinstance(pad_id, bool) or not 0 <= pad_id < vocab_size:
        raise ValueError(f"pad_id must be an int in [0, vocab_size={vocab_size}), got {pad_id!r}")
    if not isinstance(norm_first, bool):
        raise TypeError(
            f"norm_first must be True (Pre-Norm) or False (Post-Norm), got {norm_first!r}"
        )
    if not 0.0 <= dropout < 1.0:
        raise ValueError(f"dropout must be in [0, 1), got {dropout}")


def check_tokens(model, name: str, tokens) -> None:
    if not isinstance(tokens, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor of token ids, got {type(tokens).__name__}")
    if tokens.dim() != 2 or tokens.shape[1] == 0:
        raise ValueError(f"{name} must have shape [B, L] with L >= 1, got {tuple(tokens.shape)}")
    if tokens.is_floating_point() or tokens.dtype == torch.bool:
        raise TypeError(f"{name} must hold integer token ids, got dtype {tokens.dtype}")
    check_device(model, type(model).__name__, **{name: tokens})
    if tokens.numel() and (int(tokens.min()) < 0 or int(tokens.max()) >= model.vocab_size):
        raise ValueError(
            f"{name} holds ids outside [0, vocab_size={model.vocab_size}): "
            f"min {int(tokens.min())}, max {int(tokens.max())}"
        )


def check_decode_inputs(model, tgt, memory) -> None:
    check_tokens(model, "tgt", tgt)
    check_device(model, type(model).__name__, memory=memory)
    if memory.dim() != 3 or memory.shape[-1] != model.d_model:
        raise ValueError(
            f"memory must have shape [B, Ls, {model.d_model}], got {tuple(memory.shape)}"
        )
    if memory.shape[0] != tgt.shape[0]:
        raise ValueError(
            f"tgt has {tgt.shape[0]} rows but memory has {memory.shape[0]}: for beam search "
            f"repeat the memory once per beam (memory.repeat_interleave(beam_size, 0))"
        )


def check_pair(model, src, tgt) -> None:
    check_tokens(model, "src", src)
    check_tokens(model, "tgt", tgt)
    if src.shape[0] != tgt.shape[0]:
        raise ValueError(
            f"src and tgt must have the same batch size, got {src.shape[0]} and {tgt.shape[0]}"
        )


# ---------------------------------------------------------------------- set-up
@torch.no_grad()
def reset_parameters(model) -> None:
    """Xavier-uniform for every matrix in the stacks (as ``nn.Transformer`` does);
    N(0, 1/d_model) for the embedding, so that after the sqrt(d_model) scale the token
    vectors have unit-size entries, like the positions; the padding row is zero."""
    for layer in [*model.encoder_layers, *model.decoder_layers]:
        for p in layer.parameters():
            if p.dim() > 1:
                nn.init.xavier_uniform_(p)
    for table in {id(model.src_embed): model.src_embed,
                  id(model.tgt_embed): model.tgt_embed}.values():
        nn.init.normal_(table.weight, mean=0.0, std=model.d_model**-0.5)
        table.weight[model.pad_id].zero_()


# ---------------------------------------------------------------------- inference
@torch.no_grad()
def attention_maps(model, src: torch.Tensor, tgt: torch.Tensor) -> dict:
    """Every attention matrix for a batch: ``{"encoder": [...], "decoder_self": [...],
    "cross": [...]}``, one [B, h, Lq, Lk] tensor per layer."""
    memory, src_mask, enc_w = model.encode(src, need_weights=True)
    _, self_w, cross_w = model.decode(tgt, memory, src_mask, need_weights=True)
    return {"encoder": enc_w, "decoder_self": self_w, "cross": cross_w}


@torch.no_grad()
def make_step_fn(model, src: torch.Tensor, beam_size: int = 1, cache: bool = True):
    """Encode ``src`` once and return ``step(tokens [N, L]) -> next-token logits [N, V]``.

    This is the function ``course_lib.decoding`` expects. ``beam_size > 1`` repeats each
    sentence's memory ``beam_size`` times, batch-major (rows b*k .. b*k+k-1 belong to
    sentence b), so ``N = B * beam_size``. The model must be in eval mode.

    ``cache=True`` returns a ``CachedDecoderStep``: it keeps each decoder layer's keys and
    values, so a step runs only the newest token through the decoder, and computes the
    cross-attention keys and values of the source once. ``cache=False`` re-runs the
    whole prefix at every step (simpler, slower; the same logits).
    """
    positive_int("beam_size", beam_size)
    if model.training:
        raise RuntimeError("call model.eval() before decoding (dropout would be active)")
    memory, src_mask = model.encode(src)
    if beam_size > 1:
        memory = memory.repeat_interleave(beam_size, dim=0)  # [B*k, Ls, d]
        src_mask = src_mask.repeat_interleave(beam_size, dim=0)  # [B*k, 1, 1, Ls]
    if cache:
        return CachedDecoderStep(model, memory, src_mask, group=beam_size)

    @torch.no_grad()
    def step(tokens: torch.Tensor) -> torch.Tensor:
        _check_rows(tokens, memory.shape[0])
        hidden = model.decode(tokens, memory, src_mask)
        return model.generator(hidden[:, -1])  # only the last position: [N, V]

    return step


# ---------------------------------------------------------------------- PyTorch's version
@torch.no_grad()
def load_from_torch(model, transformer: nn.Transformer):
    """Copy the encoder and decoder stacks of a ``torch.nn.Transformer`` (batch_first, same
    sizes) into ``model``. Embeddings, positions and the output projection are not part
    of ``nn.Transformer`` and stay as they are.

    ``nn.Transformer`` always ends both stacks with a LayerNorm, Post-Norm included; the
    2017 paper's Post-Norm has none (its last sub-layer already ends in one). To compare
    a Post-Norm model, build it with ``final_norm=True``.
    """
    enc, dec = transformer.encoder.layers, transformer.decoder.layers
    if len(enc) != len(model.encoder_layers) or len(dec) != len(model.decoder_layers):
        raise ValueError(
            f"layer counts differ: torch has {len(enc)} encoder / {len(dec)} decoder layers, "
            f"this model {len(model.encoder_layers)} / {len(model.decoder_layers)}"
        )
    if transformer.d_model != model.d_model:
        raise ValueError(
            f"d_model differs: torch {transformer.d_model}, this model {model.d_model}"
        )
    if enc[0].norm_first != model.norm_first:
        raise ValueError(
            f"norm position differs: torch norm_first={enc[0].norm_first}, this model "
            f"norm_first={model.norm_first}"
        )
    for name, theirs, ours in (
        ("encoder", transformer.encoder.norm, model.encoder_norm),
        ("decoder", transformer.decoder.norm, model.decoder_norm),
    ):
        if isinstance(theirs, nn.LayerNorm) != isinstance(ours, nn.LayerNorm):
            raise ValueError(
                f"final {name} LayerNorm: torch has {type(theirs).__name__}, this model "
                f"{type(ours).__name__}; build this model with final_norm=True (nn.Transformer "
                f"always has one) or replace torch's with nn.Identity()"
            )
        if isinstance(ours, nn.LayerNorm):
            ours.load_state_dict(theirs.state_dict())

    def copy_ffn(block_ffn, layer):
        block_ffn.net[0].load_state_dict(layer.linear1.state_dict())
        block_ffn.net[3].load_state_dict(layer.linear2.state_dict())

    for ours, theirs in zip(model.encoder_layers, enc):  # the LayerNorms: the same names
        ours.attn.load_from_torch(theirs.self_attn)
        copy_ffn(ours.ffn, theirs)
        ours.norm1.load_state_dict(theirs.norm1.state_dict())
        ours.norm2.load_state_dict(theirs.norm2.state_dict())
    for ours, theirs in zip(model.decoder_layers, dec):
        ours.self_attn.load_from_torch(theirs.self_attn)
        ours.cross_attn.load_from_torch(theirs.multihead_attn)
        copy_ffn(ours.ffn, theirs)
        for norm in ("norm1", "norm2", "norm3"):
            getattr(ours, norm).load_state_dict(getattr(theirs, norm).state_dict())
    return model


def _check_rows(tokens, rows: int) -> None:
    if not isinstance(tokens, torch.Tensor) or tokens.dim() != 2 or tokens.shape[0] != rows:
        got = tuple(tokens.shape) if isinstance(tokens, torch.Tensor) else type(tokens).__name__
        raise ValueError(
            f"step expects tokens [N, L] with N = {rows} (batch x beam_size), got {got}"
        )


class CachedDecoderStep:
    """A ``course_lib.decoding`` step function for ``Seq2SeqTransformer`` with a key-value cache.

    Built by ``model.make_step_fn(src, beam_size)``. Each call gets the whole prefix [N, L].
    When its first L - 1 tokens are those of the previous call, only the last token goes
    through the decoder, attending to the cached keys and values of the earlier positions;
    otherwise the cache is rebuilt from the whole prefix. The cross-attention keys and values
    of the encoder output are computed once (``KVCache(fixed=True)``). ``reorder(index)``
    (called by ``beam_search`` after every step) makes the cache follow the surviving beams.
    The logits equal those of ``decode`` on the whole prefix (the unit tests check it);
    padding tokens in the prefix (rows that have finished) are masked as keys, as ``decode``
    does.
    """

    def __init__(self, model, memory: torch.Tensor, src_mask: torch.Tensor,
                 group: int = 1):
        self.model, self.memory, self.src_mask, self.group = model, memory, src_mask, group
        self.rows = memory.shape[0]
        self.memory_cache = [KVCache(fixed=True) for _ in model.decoder_layers]
        self.cache, self.seen = None, None

    @torch.no_grad()
    def __call__(self, tokens: torch.Tensor) -> torch.Tensor:
        _check_rows(tokens, self.rows)
        if self.model.training:
            raise RuntimeError("call model.eval() before decoding (dropout would be active)")
        L = tokens.shape[1]
        reuse = (self.seen is not None and self.seen.shape[1] == L - 1
                 and torch.equal(self.seen, tokens[:, :-1]))
        if not reuse:
            self.cache = [KVCache() for _ in self.model.decoder_layers]
        new = tokens[:, -1:] if reuse else tokens  # [N, n]: 1 new position, or all of them
        x = _embed_target(self.model, new, offset=L - new.shape[1])  # [N, n, d]
        keys_ok = padding_mask(tokens, self.model.pad_id)  # [N, 1, 1, L]
        mask = keys_ok if reuse else keys_ok & causal_mask(L, device=tokens.device)
        for layer, cache, memory_cache in zip(self.model.decoder_layers, self.cache,
                                              self.memory_cache, strict=True):
            x, _, _ = layer(x, self.memory, self_mask=mask, memory_mask=self.src_mask,
                            need_weights=False, cache=cache, memory_cache=memory_cache)
        self.seen = tokens
        return self.model.generator(self.model.decoder_norm(x[:, -1]))  # [N, V]

    def reorder(self, index: torch.Tensor) -> None:
        """Keep rows ``index`` [N] of the cache: beam search's surviving beams."""
        if self.cache is None:
            return
        for cache in self.cache:
            cache.reorder(index)
        self.seen = self.seen[index]
        same_input = torch.arange(self.rows, device=index.device) // self.group
        if not torch.equal(index // self.group, same_input):  # a row moved to another input
            for memory_cache in self.memory_cache:
                memory_cache.reorder(index)
            self.memory, self.src_mask = self.memory[index], self.src_mask[index]


def _embed_target(model, tokens: torch.Tensor, offset: int) -> torch.Tensor:
    """``model.embed`` of target tokens [N, n] at positions offset .. offset + n - 1 (eval)."""
    x = model.tgt_embed(tokens) * math.sqrt(model.d_model)
    end = offset + tokens.shape[1]
    pe = model.positions.pe
    if end > pe.shape[0]:  # longer than the stored table: compute the positions
        pe = sinusoidal_encoding(end, model.d_model).to(x.device)
    return x + pe[offset:end].to(x.dtype)
