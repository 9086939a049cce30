"""Chapter 7's ladder: a language model built up one piece at a time, from a bigram to a GPT.

    model = ladder.build("heads", vocab_size=4096, window=64, d_model=64)
    logits = model(tokens)                      # [B, L] -> [B, L, V], causal

Each rung adds one idea to the rung before it (``RUNGS`` in order):

    bigram     embed the current token, score the next one (no context at all)
    one head   + positions and one head of causal self-attention
    heads      the same attention split into several heads
    FFN        + a feed-forward network after the attention
    residual   + residual connections around attention and feed-forward
    LayerNorm  + LayerNorm before each of them and at the end: a Pre-Norm block
    blocks     + three more blocks (the head still its own matrix)
    tied head  + the head shares the token embedding's matrix: ``course_lib.gpt.GPT``

Every rung starts from GPT-2's initialisation (``gpt.init_weights``), so the rungs differ in
design only. The pieces are written to be read: chapter 7 shows their source.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from . import gpt

RUNGS = ("bigram", "one head", "heads", "FFN", "residual", "LayerNorm", "blocks",
         "tied head")


class CausalSelfAttention(nn.Module):
    """num_heads heads of masked self-attention: position t sees positions 0..t only."""

    def __init__(self, d, num_heads, max_len):
        super().__init__()
        self.h, self.d_k = num_heads, d // num_heads
        self.q_proj, self.k_proj, self.v_proj = nn.Linear(d, d), nn.Linear(d, d), nn.Linear(d, d)
        self.out_proj = nn.Linear(d, d)
        allowed = torch.ones(max_len, max_len, dtype=torch.bool).tril()  # [L, L] may attend
        self.register_buffer("allowed", allowed, persistent=False)

    def forward(self, x):                                             # x: [B, L, d]
        B, L, d = x.shape
        def heads(t):                                                 # [B, L, d] -> [B, h, L, d_k]
            return t.view(B, L, self.h, self.d_k).transpose(1, 2)
        q, k, v = heads(self.q_proj(x)), heads(self.k_proj(x)), heads(self.v_proj(x))
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_k)        # [B, h, L, L]
        scores = scores.masked_fill(~self.allowed[:L, :L], float("-inf"))  # no peeking ahead
        weights = scores.softmax(dim=-1)                              # each row sums to 1
        out = (weights @ v).transpose(1, 2).reshape(B, L, d)          # heads side by side
        return self.out_proj(out)                                     # [B, L, d]


class FeedForward(nn.Module):
    """Per position: Linear(d, d_ff) -> GELU -> (dropout) -> Linear(d_ff, d)."""

    def __init__(self, d, d_ff, dropout=0.0):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(d, d_ff), nn.GELU(), nn.Dropout(dropout),
                                 nn.Linear(d_ff, d))

    def forward(self, x):                                    # [B, L, d] -> [B, L, d]
        return self.net(x)


class Block(nn.Module):
    """Attention, then feed-forward, each added back to x; with ``norm``, a Pre-Norm block."""

    def __init__(self, d, num_heads, d_ff, max_len, norm=True):
        super().__init__()
        self.norm1 = nn.LayerNorm(d) if norm else nn.Identity()
        self.attn = CausalSelfAttention(d, num_heads, max_len)
        self.norm2 = nn.LayerNorm(d) if norm else nn.Identity()
        self.ffn = FeedForward(d, d_ff)

    def forward(self, x):                                    # x: [B, L, d]
        x = x + self.attn(self.norm1(x))                     # tokens look at each other
        x = x + self.ffn(self.norm2(x))                      # each token on its own
        return x


class LadderLM(nn.Module):
    """Embed each token (and its position), run ``body``, score the next token."""

    def __init__(self, body, vocab_size, d, max_len, positions=True, final_norm=False):
        super().__init__()
        self.token_embedding = nn.Embedding(vocab_size, d)
        self.position = nn.Embedding(max_len, d) if positions else None
        self.body = body
        self.norm = nn.LayerNorm(d) if final_norm else nn.Identity()
        self.head = nn.Linear(d, vocab_size)
        self.apply(gpt.init_weights)  # N(0, 0.02), as the GPT: rungs differ in design only

    def forward(self, idx):                                   # idx: [B, L] token ids
        x = self.token_embedding(idx)                         # [B, L, d]
        if self.position is not None:
            x = x + self.position(torch.arange(idx.shape[1], device=idx.device))
        return self.head(self.norm(self.body(x)))             # [B, L, V] logits


def gpt_config(vocab_size: int, window: int, d_model: int, num_heads: int = 4,
               num_layers: int = 4, tie_weights: bool = True) -> gpt.GPTConfig:
    """The configuration of the ladder's top rungs (d_ff = 4 d_model, no dropout)."""
    return gpt.GPTConfig(vocab_size=vocab_size, max_len=window, d_model=d_model,
                         num_heads=num_heads, num_layers=num_layers, d_ff=4 * d_model,
                         dropout=0.0, tie_weights=tie_weights, pad_id=None)


def build(rung: str, vocab_size: int, window: int, d_model: int, num_heads: int = 4,
          num_layers: int = 4) -> nn.Module:
    """A freshly initialised model of one rung (a name of ``RUNGS``)."""
    if rung not in RUNGS:
        raise ValueError(f"unknown rung {rung!r}: choose one of {', '.join(RUNGS)}")
    if d_model % num_heads:
        raise ValueError(f"d_model ({d_model}) must be divisible by num_heads ({num_heads})")
    d, h, d_ff, W = d_model, num_heads, 4 * d_model, window
    if rung in ("blocks", "tied head"):
        return gpt.GPT(gpt_config(vocab_size, W, d, h, num_layers,
                                  tie_weights=rung == "tied head"))
    bodies = {
        "bigram": nn.Identity(),
        "one head": CausalSelfAttention(d, 1, W),
        "heads": CausalSelfAttention(d, h, W),
        "FFN": nn.Sequential(CausalSelfAttention(d, h, W), FeedForward(d, d_ff)),
        "residual": Block(d, h, d_ff, W, norm=False),
        "LayerNorm": Block(d, h, d_ff, W, norm=True),
    }
    return LadderLM(bodies[rung], vocab_size, d, W, positions=rung != "bigram",
                    final_norm=rung == "LayerNorm")
