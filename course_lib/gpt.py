"""A small decoder-only Transformer (GPT) built from the course's blocks, with a KV cache.

    config = GPTConfig(vocab_size=5003, max_len=33, d_model=256, num_heads=4, num_layers=2)
    model = GPT(config)
    logits = model(tokens)                   # [B, L] -> [B, L, V], causal
    logits = model(tokens, last_only=True)   # [B, 1, V]: the head at the last position only
    step_fn = model.step_fn(last_only=True)  # for course_lib.decoding (no cache)
    step_fn = CachedStepFn(model)            # the same logits, reusing past keys and values
    hidden = model.features(tokens)          # [B, L, d_model]: what the head reads

The model: token embedding + learned positions -> ``num_layers`` Pre-Norm ``blocks.Block``
with a causal mask -> final LayerNorm -> a linear head onto the vocabulary, whose weight is
the token embedding's (tied) unless ``tie_weights=False``. Its submodules have the names of
chapter 7's on-page ``GPT``, so either loads the other's state dict.

``GPTConfig(..., causal=False)`` builds the same model without the causal mask: every
position sees every other, a bidirectional encoder for masked-language-model pretraining
(``course_lib.finetune``). It has no next-token loss, no step function and no KV cache.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from .attention import KVCache
from .blocks import Block

# Training and scoring a language model live in course_lib.lm; chapters 7, 10 and 11 (and
# distributed.train) call these by their old names here.
from .lm import (  # noqa: F401
    RowBatches,
    configure_optimizer,
    lm_batch_loss,
    sliding_nll,
    sliding_windows,
    token_nll,
)
from .masks import causal_mask
from .positional import SequenceTooLongError
from .runtime import check_device
from .schedules import warmup_cosine  # noqa: F401 (chapters 7, 10, 11: gpt.warmup_cosine)


@dataclass
class GPTConfig:
    vocab_size: int
    max_len: int = 33
    d_model: int = 256
    num_heads: int = 4
    num_layers: int = 2
    d_ff: int = 1024
    dropout: float = 0.1
    tie_weights: bool = True
    activation: str = "gelu"
    pad_id: int | None = 0
    causal: bool = True  # False: no causal mask, every position sees every other (an encoder)

    def __post_init__(self):
        if not isinstance(self.causal, bool):
            raise TypeError(f"causal must be True (a GPT) or False (an encoder), "
                            f"got {self.causal!r}")

    def to_dict(self) -> dict:
        """The fields as a dict. ``causal`` is left out when True, so a GPT's dict (in saved
        files and cards) is the one it was before the field existed; ``load`` restores it."""
        fields = asdict(self)
        if fields["causal"]:
            del fields["causal"]
        return fields

    def __repr__(self) -> str:  # as to_dict: causal=False is shown, the default is not
        args = ", ".join(f"{k}={v!r}" for k, v in self.to_dict().items())
        return f"GPTConfig({args})"


def init_weights(module: nn.Module) -> None:
    """GPT-2's scheme, for ``model.apply``: N(0, 0.02) weights, zero biases.

    LayerNorm keeps its 1 and 0. Chapter 7's ladder initialises every rung this way, so the
    rungs differ by their architecture only.
    """
    if isinstance(module, (nn.Linear, nn.Embedding)):
        nn.init.normal_(module.weight, mean=0.0, std=0.02)
    if isinstance(module, nn.Linear) and module.bias is not None:
        nn.init.zeros_(module.bias)


class GPT(nn.Module):
    """Decoder-only Transformer language model: tokens [B, L] -> next-token logits [B, L, V]."""

    def __init__(self, config: GPTConfig):
        super().__init__()
        if not isinstance(config, GPTConfig):
            raise TypeError(f"config must be a GPTConfig, got {type(config).__name__}")
        c = self.config = config
        self.token_embedding = nn.Embedding(c.vocab_size, c.d_model)
        self.position = nn.Embedding(c.max_len, c.d_model)  # learned: one vector per position
        self.dropout = nn.Dropout(c.dropout)
        self.blocks = nn.ModuleList(
            Block(c.d_model, c.num_heads, c.d_ff, dropout=c.dropout, activation=c.activation)
            for _ in range(c.num_layers)
        )
        self.final_norm = nn.LayerNorm(c.d_model)
        self.head = nn.Linear(c.d_model, c.vocab_size, bias=not c.tie_weights)
        mask = causal_mask(c.max_len) if c.causal else torch.ones(c.max_len, c.max_len,
                                                                  dtype=torch.bool)
        self.register_buffer("mask", mask, persistent=False)  # [max_len, max_len]
        self.apply(self._init_weights)
        if c.tie_weights:
            self.head.weight = self.token_embedding.weight  # one matrix, used twice

    @staticmethod
    def _init_weights(module):
        init_weights(module)

    def _check_ids(self, tokens):
        if not isinstance(tokens, torch.Tensor) or tokens.dim() != 2:
            got = tuple(tokens.shape) if isinstance(tokens, torch.Tensor) else type(tokens).__name__
            raise ValueError(f"tokens must be a LongTensor [B, L], got {got}")
        if tokens.is_floating_point():
            raise TypeError(f"tokens must hold integer ids, got dtype {tokens.dtype}")
        check_device(self, "GPT", tokens=tokens)
        if tokens.numel():
            low, high = int(tokens.min()), int(tokens.max())
            if low < 0 or high >= self.config.vocab_size:
                bad = low if low < 0 else high
                raise ValueError(
                    f"token id {bad} is outside the vocabulary of {self.config.vocab_size} "
                    f"tokens (ids 0..{self.config.vocab_size - 1}): encode text with the "
                    "vocabulary the model was built with")

    def _check_tokens(self, tokens):  # forward_cached's checks: the ids, and a causal model
        self._check_causal("the KV cache (forward_cached)")
        self._check_ids(tokens)

    def _check_causal(self, what: str):
        if not self.config.causal:
            raise ValueError(
                f"{what} needs a causal model, and this one was built with causal=False (an "
                "encoder): each position sees the later tokens, so a new token changes every "
                "earlier position and the next token is in its own input. Use forward() (or "
                "features()) on whole sequences, and course_lib.finetune.mlm_loss to train it.")

    def _check_length(self, length: int):
        if length > self.config.max_len:
            raise SequenceTooLongError(
                f"sequence length {length} exceeds max_len={self.config.max_len} of this GPT: "
                f"its learned positions stop at {self.config.max_len - 1}. Feed at most the "
                f"last max_len tokens (step_fn slides that window), or build a larger model."
            )

    def embed(self, tokens, offset: int = 0):
        """tokens [B, L] -> token + position vectors [B, L, d_model], positions from ``offset``."""
        self._check_length(offset + tokens.shape[1])
        pos = torch.arange(offset, offset + tokens.shape[1], device=tokens.device)  # [L]
        return self.dropout(self.token_embedding(tokens) + self.position(pos))  # [B, L, d]

    def forward(self, tokens, last_only: bool = False):
        """tokens [B, L] -> logits [B, L, V]; position i sees tokens 0..i only.

        ``last_only=True``: the final LayerNorm and the head run at the last position only,
        logits [B, 1, V], as generation needs (the blocks still run at every position).
        """
        x = self.run_blocks(tokens)  # [B, L, d]
        if last_only:
            x = x[:, -1:]  # [B, 1, d]
        return self.head(self.final_norm(x))  # [B, L, V] ([B, 1, V] if last_only)

    def features(self, tokens, keep=None):
        """tokens [B, L] -> the final hidden states [B, L, d_model], the vectors the head reads
        (after the final LayerNorm). A classifier pools them (``finetune.SequenceClassifier``).

        ``keep`` (bool [B, L], True = a real token) hides padding from every query, as a key.
        An encoder needs it; in a causal model with right padding it changes no real position.
        """
        return self.final_norm(self.run_blocks(tokens, keep))  # [B, L, d]

    def run_blocks(self, tokens, keep=None):
        """Embeddings, then every block: [B, L] -> [B, L, d_model], before the final LayerNorm."""
        self._check_ids(tokens)
        x = self.embed(tokens)  # [B, L, d]
        L = tokens.shape[1]
        mask = self.mask[:L, :L]  # [L, L]
        if keep is not None:
            mask = mask & _check_keep(keep, tokens)[:, None, None, :]  # [B, 1, L, L]
        for block in self.blocks:
            x, _ = block(x, mask=mask, need_weights=False)
        return x

    @torch.no_grad()
    def attention_maps(self, tokens) -> list[torch.Tensor]:
        """The attention weights of every block: a list of [B, h, L, L] (causal if the model is)."""
        self._check_ids(tokens)
        x = self.embed(tokens)
        mask = self.mask[: tokens.shape[1], : tokens.shape[1]]
        maps = []
        for block in self.blocks:
            x, w = block(x, mask=mask, need_weights=True)
            maps.append(w)
        return maps

    def loss(self, tokens):
        """Mean next-token cross-entropy of rows ``tokens`` [B, L+1] (x = [:, :-1], y = [:, 1:]).

        Targets equal to ``config.pad_id`` are ignored.
        """
        self._check_causal("the next-token loss")
        x, y = tokens[:, :-1], tokens[:, 1:]
        logits = self(x)
        ignore = -100 if self.config.pad_id is None else self.config.pad_id
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1),
                               ignore_index=ignore)

    def step_fn(self, last_only: bool = False):
        """A step function for ``course_lib.decoding`` without a cache.

        Each call runs the whole sequence again (only its last ``max_len`` tokens, a sliding
        window) and returns the logits at the last position, [N, V]. ``last_only=True``
        computes the head there only (``forward(..., last_only=True)``): the same logits up
        to float rounding, without a vocabulary projection of every earlier position.
        """
        self._check_causal("step_fn (generation)")

        def step(tokens):
            return self(tokens[:, -self.config.max_len:], last_only=last_only)[:, -1]

        return step

    # ------------------------------------------------------------------ KV cache
    def forward_cached(self, tokens, cache: list[KVCache] | None = None):
        """Run only the new ``tokens`` [B, L], after the positions whose keys and values
        ``cache`` holds.

        ``cache`` is None (nothing seen yet) or the list the previous call returned: one
        ``attention.KVCache`` per block, which the blocks extend with the new keys and values.
        Returns ``(logits [B, L, V], cache)``: the logits ``forward`` gives these positions on
        the whole sequence, computing only the new ones.
        """
        self._check_tokens(tokens)
        cache = [KVCache() for _ in self.blocks] if cache is None else cache
        past, L = len(cache[0]), tokens.shape[1]  # positions cached, positions new
        x = self.embed(tokens, offset=past)  # positions past .. past + L - 1
        mask = self.mask[past:past + L, :past + L]  # new position past + i sees 0 .. past + i
        for block, block_cache in zip(self.blocks, cache, strict=True):
            x, _ = block(x, mask=mask, need_weights=False, cache=block_cache)
        return self.head(self.final_norm(x)), cache  # [B, L, V]


class CachedStepFn:
    """A ``course_lib.decoding`` step function that keeps a KV cache between calls.

    Each call gets the whole sequence so far, [N, L]. When its first L - 1 tokens are the
    ones seen before, only the last token goes through the model (one position per step
    instead of L); otherwise (a new prompt, a changed batch) the cache is rebuilt from the
    whole sequence. Beam search calls ``reorder(index)`` so the cache follows the beams.
    ``bytes()`` is the memory the cache holds now.
    """

    def __init__(self, model: GPT):
        if not getattr(model.config, "causal", True):  # duck-typed: any model with forward_cached
            model._check_causal("CachedStepFn (the KV cache)")
        self.model = model
        self.cache, self.seen = None, None

    def reset(self):
        self.cache, self.seen = None, None

    @torch.no_grad()
    def __call__(self, tokens):
        L = tokens.shape[1]
        if L > self.model.config.max_len:
            raise ValueError(
                f"the KV cache cannot slide: sequence of {L} tokens is longer than max_len="
                f"{self.model.config.max_len}; build the model with a larger max_len"
            )
        reuse = (self.seen is not None and self.seen.shape[0] == tokens.shape[0]
                 and self.seen.shape[1] == L - 1 and torch.equal(self.seen, tokens[:, :-1]))
        if reuse:
            logits, self.cache = self.model.forward_cached(tokens[:, -1:], self.cache)
        else:
            logits, self.cache = self.model.forward_cached(tokens, None)
        self.seen = tokens
        return logits[:, -1]

    def reorder(self, index):
        """Keep the rows ``index`` [N] of the cache (beam search's surviving beams)."""
        if self.cache is not None:
            for block_cache in self.cache:
                block_cache.reorder(index)
            self.seen = self.seen[index]

    def bytes(self) -> int:
        return 0 if self.cache is None else sum(c.bytes() for c in self.cache)


def _check_keep(keep, tokens):
    if not isinstance(keep, torch.Tensor) or keep.dtype != torch.bool or \
            keep.shape != tokens.shape:
        got = (f"{keep.dtype} {tuple(keep.shape)}" if isinstance(keep, torch.Tensor)
               else type(keep).__name__)
        raise ValueError(f"keep must be a bool tensor shaped like tokens {tuple(tokens.shape)} "
                         f"(True = a real token), got {got}; e.g. keep = tokens != pad_id")
    return keep


def kv_cache_bytes(config: GPTConfig, batch: int, length: int, bytes_per_value: int = 4) -> int:
    """Memory of a full KV cache: 2 (K and V) x layers x batch x length x d_model values."""
    return 2 * config.num_layers * batch * length * config.d_model * bytes_per_value


def save(model: GPT, path, **extra) -> None:
    """Save ``{"config", "state_dict", **extra}``, loadable with ``weights_only=True``.

    The file is written under a temporary name and renamed into place, so a reader running
    at the same time (chapter 8 beside chapter 7 in the tests) sees the old file or the new
    one, never half of one.
    """
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    torch.save({"config": model.config.to_dict(), "state_dict": model.state_dict(), **extra}, tmp)
    os.replace(tmp, path)


def load(path, map_location="cpu") -> tuple[GPT, dict]:
    """Rebuild a saved GPT; returns ``(model, the whole saved dict)``."""
    saved = torch.load(path, map_location=map_location, weights_only=True)
    model = GPT(GPTConfig(**saved["config"]))
    model.load_state_dict(saved["state_dict"])
    return model.to(map_location).eval(), saved
